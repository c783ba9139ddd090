package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/ctxcompact/ctxcompact/internal/vectors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

// repoRoot is the module root, seen from this package's directory.
const repoRoot = ".."

var (
	cacheDir string // one compilation cache for every engine of this test binary
	shared   struct {
		once sync.Once
		eng  *Engine
		err  error
	}
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeAppServerEnv) == "1" { // this binary re-executed as a fake peer (appserver_test.go)
		os.Exit(fakeAppServer(os.Stdin, os.Stdout))
	}
	dir, err := os.MkdirTemp("", "ctxcompact-host-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cacheDir = dir
	code := m.Run()
	if shared.eng != nil {
		_ = shared.eng.Close(context.Background())
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// sharedEngine is one Engine for the tests that do not need their own options:
// compiling is the slow part, more so under the race detector.
func sharedEngine(t testing.TB) *Engine {
	t.Helper()
	shared.once.Do(func() {
		shared.eng, shared.err = New(context.Background(), WithCompilationCache(cacheDir), WithPoolSize(4))
	})
	if shared.err != nil {
		t.Fatalf("New: %v", shared.err)
	}
	return shared.eng
}

// newEngine is an Engine with its own options, closed at the end of the test. It
// shares the compilation cache, so it does not recompile.
func newEngine(t testing.TB, opts ...Option) *Engine {
	t.Helper()
	e, err := New(context.Background(), append([]Option{WithCompilationCache(cacheDir)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// hasOp reports whether the core (and so a module built from it) has op.
func hasOp(op string) bool { return slices.Contains(core.Ops(), op) }

// loadVectors reads every testdata/*.json vector (see testdata/README.md), in
// file name order.
func loadVectors(t testing.TB) []vectors.Vector {
	t.Helper()
	files, err := vectors.ReadDir(filepath.Join(repoRoot, "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	var out []vectors.Vector
	for _, f := range files {
		vs, err := f.Vectors()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, vs...)
	}
	return out
}

// trace is one shared trace's messages.
type trace struct {
	name     string
	messages json.RawMessage
}

// loadTraces reads ../shared/traces/*.json (the rule for when it is missing:
// internal/testtraces).
func loadTraces(t testing.TB) []trace {
	t.Helper()
	files := testtraces.Glob(t, "*.json")
	out := make([]trace, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tf struct {
			Messages json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(b, &tf); err != nil || len(tf.Messages) == 0 {
			t.Fatalf("%s: no messages: %v", f, err)
		}
		out = append(out, trace{name: filepath.Base(f), messages: tf.Messages})
	}
	return out
}

// compactBegin is the envelope of a forced builtin compaction of messages in a
// window of contextLength tokens.
func compactBegin(messages json.RawMessage, contextLength int) []byte {
	env, err := envelope("compact.begin", map[string]any{
		"messages":   messages,
		"config":     map[string]any{"model": map[string]any{"context_length": contextLength}},
		"summarizer": "builtin",
		"force":      true,
	})
	if err != nil {
		panic(err)
	}
	return env
}

// instCall runs envelope on inst and returns a copy of its response.
func instCall(ctx context.Context, inst *instance, envelope []byte) ([]byte, error) {
	view, err := inst.call(ctx, []reqPart{{lit: envelope}}, len(envelope))
	return bytes.Clone(view), err
}
