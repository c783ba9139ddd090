package core

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClosestName(t *testing.T) {
	valid := []string{"messages", "config", "prompt_tokens", "force"}
	for name, want := range map[string]string{
		"promptTokens":  "prompt_tokens",
		"PROMPT-TOKENS": "prompt_tokens",
		"forse":         "force",
		"mesages":       "messages",
		"cfg":           "", // nothing close: the error lists them all
		"verbose":       "",
	} {
		require.Equal(t, want, closestName(name, valid), name)
	}
}

// TestUnknownParamsAreRefused: a field an op does not take is invalid_request at its
// path, naming the closest one, for every op; the envelope's "op" is not a param.
func TestUnknownParamsAreRefused(t *testing.T) {
	var e struct {
		Error Error `json:"error"`
	}
	require.NoError(t, json.Unmarshal(Call([]byte(`{"op":"should_compress","config":{},"promptTokens":5}`)), &e))
	require.Equal(t, CodeInvalidRequest, e.Error.Code)
	require.Equal(t, "/promptTokens", e.Error.Path)
	require.Contains(t, e.Error.Message, `should_compress has no parameter "promptTokens"; did you mean "prompt_tokens"?`)
	for _, op := range Ops() {
		if ops[op].params == nil {
			continue
		}
		e.Error = Error{}
		require.NoError(t, json.Unmarshal(Dispatch(op, []byte(`{"op":"x","a~b/c":1}`)), &e), op)
		require.Equal(t, CodeInvalidRequest, e.Error.Code, op)
		require.Equal(t, "/a~0b~1c", e.Error.Path, op)
	}
}

// TestOpParamsAreDocumented: every param an op takes is named where docs/ states
// the op's params (its row of the table in OPS.md, or its "`op {params}`" line in
// OPS.md or CACHING.md), so the refusal of an unknown field never refuses what the
// docs offer, and the docs offer nothing refused.
func TestOpParamsAreDocumented(t *testing.T) {
	var docs string
	for _, f := range []string{"../docs/OPS.md", "../docs/CACHING.md"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		docs += string(b)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\| (.*?) \\|")
	line := regexp.MustCompile("`([a-z_.]+) \\{([^}]*)\\}`")
	word := regexp.MustCompile(`[a-z_]+`)
	stated := map[string]map[string]bool{}
	add := func(op, text string) {
		if stated[op] == nil {
			stated[op] = map[string]bool{}
		}
		for _, w := range word.FindAllString(text, -1) {
			stated[op][w] = true
		}
	}
	for _, m := range row.FindAllStringSubmatch(docs, -1) {
		add(m[1], m[2])
	}
	for _, m := range line.FindAllStringSubmatch(docs, -1) {
		add(m[1], m[2])
	}
	for _, op := range Ops() {
		spec := ops[op].params
		if spec == nil {
			continue
		}
		require.Contains(t, stated, op, "docs/OPS.md states no params of %s", op)
		for _, p := range spec {
			require.True(t, stated[op][p], "docs do not name %s's param %q", op, p)
		}
	}
}
