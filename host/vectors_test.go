package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/ctxcompact/ctxcompact/core"
)

// TestVectors runs every testdata vector through the wasm module, as
// testdata/README.md says: send {"op": file.op, ...case.request}; a want.result must
// equal the parsed result exactly; a want.error is compared on code and path only.
func TestVectors(t *testing.T) {
	e := sharedEngine(t)
	vectors := loadVectors(t)
	if len(vectors) == 0 {
		t.Skip("no testdata/*.json vectors yet")
	}
	for _, v := range vectors {
		t.Run(v.id, func(t *testing.T) {
			resp, err := e.Call(context.Background(), v.envelope)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if err := checkWant(resp, v.c); err != nil {
				t.Error(err)
			}
		})
	}
}

// checkWant compares a response envelope with a case's want.
func checkWant(resp []byte, c vectorCase) error {
	var got struct {
		Result json.RawMessage `json:"result"`
		Error  *core.Error     `json:"error"`
	}
	if err := json.Unmarshal(resp, &got); err != nil {
		return fmt.Errorf("response is not JSON: %v: %s", err, clip(resp))
	}
	switch {
	case c.Want.Error != nil:
		if got.Error == nil {
			return fmt.Errorf("want error %s at %q, got result %s", c.Want.Error.Code, c.Want.Error.Path, clip(got.Result))
		}
		if string(got.Error.Code) != c.Want.Error.Code || got.Error.Path != c.Want.Error.Path {
			return fmt.Errorf("want error %s at %q, got %s at %q (%s)",
				c.Want.Error.Code, c.Want.Error.Path, got.Error.Code, got.Error.Path, got.Error.Message)
		}
	case c.Want.Result != nil:
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

// TestDifferential checks that the module answers with exactly core.Call's bytes:
// for every vector, for malformed requests, and for forced builtin compactions of
// every shared trace in 32K and 64K windows.
func TestDifferential(t *testing.T) {
	e := sharedEngine(t)
	t.Run("vectors", func(t *testing.T) {
		for _, v := range loadVectors(t) {
			same(t, e, v.id, v.envelope)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		for name, env := range malformedRequests() {
			same(t, e, name, env)
		}
	})
	t.Run("traces", func(t *testing.T) {
		if !hasOp("compact.begin") {
			t.Skip("core has no compact.begin op yet; this runs as soon as it lands")
		}
		for _, tr := range loadTraces(t) {
			for _, cl := range []int{32000, 64000} {
				same(t, e, fmt.Sprintf("%s@%d", tr.name, cl), compactBegin(tr.messages, cl))
			}
		}
	})
}

// same fails the test unless the engine's response to env is core.Call's.
func same(t *testing.T, e *Engine, name string, env []byte) {
	t.Helper()
	got, err := e.Call(context.Background(), env)
	if err != nil {
		t.Errorf("%s: Call: %v", name, err)
		return
	}
	if want := core.Call(env); !bytes.Equal(got, want) {
		t.Errorf("%s: wasm and native responses differ (if the core changed, rebuild the module: ./build.sh wasm)\nwasm   %s\nnative %s", name, clip(got), clip(want))
	}
}

// malformedRequests are requests the core must answer with an error envelope.
func malformedRequests() map[string][]byte {
	deep := bytes.Repeat([]byte("["), 100_000)
	return map[string][]byte{
		"empty":          {},
		"whitespace":     []byte("  \n"),
		"not-json":       []byte("{op: info}"),
		"truncated":      []byte(`{"op":"info"`),
		"array":          []byte(`[{"op":"info"}]`),
		"string":         []byte(`"info"`),
		"null":           []byte(`null`),
		"no-op":          []byte(`{}`),
		"op-number":      []byte(`{"op":7}`),
		"unknown-op":     []byte(`{"op":"no.such.op"}`),
		"invalid-utf8":   []byte("{\"op\":\"\xff\xfe\"}"),
		"nul-bytes":      bytes.Repeat([]byte{0}, 4096),
		"deep-nesting":   deep,
		"garbage-1mb":    bytes.Repeat([]byte("ctxcompact!"), 100_000),
		"big-unknown-op": append(append([]byte(`{"op":"x","pad":"`), bytes.Repeat([]byte("a"), 8<<20)...), `"}`...),
	}
}

// clip shortens a response for a failure message.
func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return string(b)
}
