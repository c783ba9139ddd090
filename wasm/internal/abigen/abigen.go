// Package abigen keeps the "ops" and "error_codes" of wasm/abi.json equal to the
// core's. The rest of the file is written by hand and left as it is.
package abigen

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/ctxcompact/ctxcompact/core"
)

// Path is abi.json relative to the module root.
const Path = "wasm/abi.json"

// Command regenerates the file; failure messages name it.
const Command = "go run ./wasm/internal/genabi"

// Render returns src with its "ops" and "error_codes" arrays replaced by the core's
// (core.Ops() and core.ErrorCodes), each on one line. It fails when src lacks either
// key or the result is not valid JSON.
func Render(src []byte) ([]byte, error) {
	out, err := replaceArray(src, "ops", core.Ops())
	if err != nil {
		return nil, err
	}
	codes := make([]string, len(core.ErrorCodes))
	for i, c := range core.ErrorCodes {
		codes[i] = string(c)
	}
	if out, err = replaceArray(out, "error_codes", codes); err != nil {
		return nil, err
	}
	if !json.Valid(out) {
		return nil, fmt.Errorf("ctxcompact: %s is not valid JSON after updating it", Path)
	}
	return out, nil
}

func replaceArray(src []byte, key string, values []string) ([]byte, error) {
	re := regexp.MustCompile(`(?m)^(\s*"` + regexp.QuoteMeta(key) + `":\s*)\[[^\]]*\]`)
	loc := re.FindSubmatchIndex(src)
	if loc == nil {
		return nil, fmt.Errorf("ctxcompact: %s has no %q array", Path, key)
	}
	arr, err := json.Marshal(nonNil(values))
	if err != nil {
		return nil, err
	}
	arr = spaced(arr)
	return slices.Concat(src[:loc[3]], arr, src[loc[1]:]), nil
}

// spaced turns ["a","b"] into ["a", "b"], the file's style. Names contain no commas.
func spaced(arr []byte) []byte {
	out := make([]byte, 0, len(arr)+len(arr)/8)
	for _, b := range arr {
		out = append(out, b)
		if b == ',' {
			out = append(out, ' ')
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
