package host

import (
	"bytes"
	"context"
	"testing"

	"github.com/ctxcompact/ctxcompact/core"
)

// FuzzDifferential sends arbitrary bytes through the module and natively: the
// module must answer (never trap) with core.Call's bytes. Seeds: the malformed
// requests and every vector. Run: go test -fuzz FuzzDifferential ./host
func FuzzDifferential(f *testing.F) {
	for _, env := range malformedRequests() {
		if len(env) < 1<<16 {
			f.Add(env)
		}
	}
	for _, v := range loadVectors(f) {
		f.Add(v.Envelope)
	}
	e := sharedEngine(f)
	f.Fuzz(func(t *testing.T, env []byte) {
		got, err := e.Call(context.Background(), env)
		if err != nil {
			t.Fatalf("Call(%q): %v", clip(env), err)
		}
		if want := core.Call(env); !bytes.Equal(got, want) {
			t.Fatalf("Call(%q): wasm %s, native %s", clip(env), clip(got), clip(want))
		}
	})
}
