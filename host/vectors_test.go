package host

import (
	"bytes"
	"context"
	"fmt"
	"github.com/ctxcompact/ctxcompact/internal/vectors"
	"testing"

	"github.com/ctxcompact/ctxcompact/core"
)

// TestVectors runs every testdata vector through the wasm module, as
// testdata/README.md says: send {"op": file.op, ...case.request}; a want.result must
// equal the parsed result exactly; a want.error is compared on code and path only.
func TestVectors(t *testing.T) {
	e := sharedEngine(t)
	all := loadVectors(t)
	if len(all) == 0 {
		t.Fatal("no testdata/*.json vectors")
	}
	for _, v := range all {
		t.Run(v.ID, func(t *testing.T) {
			resp, err := e.Call(context.Background(), v.Envelope)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if err := vectors.Check(resp, v.Case); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestDifferential checks that the module answers with exactly core.Call's bytes:
// for every vector, for malformed requests, and for forced builtin compactions of
// every shared trace in 32K and 64K windows.
func TestDifferential(t *testing.T) {
	e := sharedEngine(t)
	t.Run("vectors", func(t *testing.T) {
		for _, v := range loadVectors(t) {
			same(t, e, v.ID, v.Envelope)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		for name, env := range malformedRequests() {
			same(t, e, name, env)
		}
	})
	t.Run("traces", func(t *testing.T) {
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
