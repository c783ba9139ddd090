// Package vectors reads the shared test vectors in testdata/ and checks responses
// against them, following the runner algorithm of testdata/README.md. The Go
// runners (core natively, host through wazero) share it; node:test and pytest
// implement the same algorithm.
package vectors

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
)

// Want is a case's expectation: exactly one of a whole result or an error's code
// and path (message text is not part of the contract).
type Want struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *WantError      `json:"error,omitempty"`
}

// WantError is the expected error code and JSON-pointer path.
type WantError struct {
	Code string `json:"code"`
	Path string `json:"path"`
}

// Case is one case of a vector file.
type Case struct {
	Name    string          `json:"name"`
	Request json.RawMessage `json:"request,omitempty"`
	// RequestJSON, in place of Request, is the request object's JSON text, sent as
	// it is written: for what a parsed request cannot hold (duplicate keys).
	RequestJSON string `json:"request_json,omitempty"`
	Want        Want   `json:"want"`
}

// File is one vector file: every case runs Op.
type File struct {
	Comment string `json:"_comment"`
	Op      string `json:"op"`
	Cases   []Case `json:"cases"`
	// Name is the file name without ".json".
	Name string `json:"-"`
}

// Vector is one case ready to send: its id <op>/<file>/<name> and its envelope.
type Vector struct {
	ID       string
	Op       string
	Case     Case
	Envelope []byte
}

// ReadFile reads one vector file.
func ReadFile(path string) (File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return File{}, err
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	f.Name = strings.TrimSuffix(filepath.Base(path), ".json")
	return f, nil
}

// ReadDir reads every *.json vector file in dir, in name order.
func ReadDir(dir string) ([]File, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no vector files in %s", dir)
	}
	sort.Strings(paths)
	files := make([]File, 0, len(paths))
	for _, p := range paths {
		f, err := ReadFile(p)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// Vectors returns the file's cases with their ids and envelopes.
func (f File) Vectors() ([]Vector, error) {
	out := make([]Vector, 0, len(f.Cases))
	for _, c := range f.Cases {
		env, err := Envelope(f.Op, c.Request)
		if c.RequestJSON != "" {
			env, err = EnvelopeJSON(f.Op, c.RequestJSON)
		}
		if err != nil {
			return nil, fmt.Errorf("%s/%s/%s: %w", f.Op, f.Name, c.Name, err)
		}
		out = append(out, Vector{ID: f.Op + "/" + f.Name + "/" + c.Name, Op: f.Op, Case: c, Envelope: env})
	}
	return out, nil
}

// Envelope is {"op": op, ...request}, without HTML escaping so strings reach the
// core as the vector wrote them.
func Envelope(op string, request json.RawMessage) ([]byte, error) {
	req := map[string]json.RawMessage{}
	if len(request) > 0 {
		if err := json.Unmarshal(request, &req); err != nil {
			return nil, fmt.Errorf("request must be a JSON object: %w", err)
		}
	}
	opJSON, _ := json.Marshal(op)
	req["op"] = opJSON
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}

// EnvelopeJSON is {"op": op, ...request} for a request given as JSON text (a
// non-empty object): the op is written before the request's own members, which
// are sent byte for byte.
func EnvelopeJSON(op string, request string) ([]byte, error) {
	body, ok := strings.CutPrefix(strings.TrimSpace(request), "{")
	if !ok || !json.Valid([]byte(request)) || strings.TrimSpace(body) == "}" {
		return nil, fmt.Errorf("request_json must be a non-empty JSON object")
	}
	opJSON, _ := json.Marshal(op)
	return []byte(`{"op":` + string(opJSON) + `,` + body), nil
}

// Check compares a response envelope with a case's want: the parsed result must
// equal want.result; an error must have want.error's code and path.
func Check(resp []byte, c Case) error {
	var got struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Path    string `json:"path"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp, &got); err != nil {
		return fmt.Errorf("response is not JSON: %v: %s", err, clip(resp))
	}
	switch {
	case c.Want.Error != nil:
		if got.Error == nil {
			return fmt.Errorf("want error %s at %q, got result %s", c.Want.Error.Code, c.Want.Error.Path, clip(got.Result))
		}
		if got.Error.Code != c.Want.Error.Code || got.Error.Path != c.Want.Error.Path {
			return fmt.Errorf("want error %s at %q, got %s at %q (%s)",
				c.Want.Error.Code, c.Want.Error.Path, got.Error.Code, got.Error.Path, got.Error.Message)
		}
	case len(c.Want.Result) > 0:
		if got.Error != nil {
			return fmt.Errorf("want a result, got error %s at %q: %s", got.Error.Code, got.Error.Path, got.Error.Message)
		}
		var want, have any
		if err := json.Unmarshal(c.Want.Result, &want); err != nil {
			return fmt.Errorf("want.result: %v", err)
		}
		if err := json.Unmarshal(got.Result, &have); err != nil {
			return fmt.Errorf("result: %v", err)
		}
		if !reflect.DeepEqual(want, have) {
			return fmt.Errorf("result differs\nwant %s\ngot  %s", clip(c.Want.Result), clip(got.Result))
		}
	default:
		return fmt.Errorf("the case has neither want.result nor want.error")
	}
	return nil
}

func clip(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}
