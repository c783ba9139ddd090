package host

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctxcompact/ctxcompact/core"
)

// trapNext makes the next call on e trap: it takes an instance from the pool,
// closes its module (every later call into it fails in wazero, as a trap does)
// and returns it as healthy. The pool hands out the instance returned last, so
// the next call gets this one.
func trapNext(t testing.TB, e *Engine) {
	t.Helper()
	ctx := context.Background()
	inst, err := e.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.mod.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e.release(ctx, inst, true)
}

// requireTrap checks the one rule for a call whose instance trapped: it fails with
// the core's internal code (path ""), its message starts with "ctxcompact:" and
// says so, and it still wraps ErrTrapped.
func requireTrap(t *testing.T, what string, err error) {
	t.Helper()
	var ce *core.Error
	switch {
	case !errors.Is(err, ErrTrapped):
		t.Fatalf("%s: %v, want ErrTrapped", what, err)
	case !errors.Is(err, &core.Error{Code: core.CodeInternal}):
		t.Fatalf("%s: %v does not match core.CodeInternal", what, err)
	case errors.Is(err, &core.Error{Code: core.CodeInvalidState}):
		t.Fatalf("%s: %v matches a code other than internal", what, err)
	case !errors.As(err, &ce) || ce.Code != core.CodeInternal || ce.Path != "":
		t.Fatalf("%s: errors.As gives %#v, want code internal, path \"\"", what, ce)
	case !strings.HasPrefix(ce.Message, "ctxcompact: ") || !strings.Contains(ce.Message, "trapped") ||
		!strings.Contains(ce.Message, "replaced"):
		t.Fatalf("%s: message %q does not say the instance trapped and was replaced", what, ce.Message)
	}
}

// TestTrapIsInternal: a trapped call fails with internal, the instance is dropped
// and the next call runs on a fresh one.
func TestTrapIsInternal(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, WithPoolSize(1))
	trapNext(t, e)
	before := e.idle[0]
	_, err := e.Info(ctx)
	requireTrap(t, "Info on a trapping instance", err)
	if len(e.idle) != 0 {
		t.Fatal("the trapped instance went back to the pool")
	}
	if _, err := e.Info(ctx); err != nil {
		t.Fatalf("Info after a trap: %v", err)
	}
	if len(e.idle) != 1 || e.idle[0] == before {
		t.Fatal("the call after a trap did not run on a fresh instance")
	}
}

// TestTrapNotRetried: the instance traps on compact.finish; Compact fails with
// internal instead of retrying on a fresh instance (which would succeed), the
// summarizer ran once, and the next compaction succeeds.
func TestTrapNotRetried(t *testing.T) {
	requireOps(t, "compact.begin", "compact.finish")
	ctx := context.Background()
	e := newEngine(t, WithPoolSize(1))
	msgs := traceNamed(t, smallTrace)
	cfg := []byte(`{"model":{"context_length":32000}}`)
	var calls atomic.Int32
	summarize := func(context.Context, core.SummaryRequest) (string, error) {
		if calls.Add(1) == 1 {
			trapNext(t, e) // compact.finish lands on the instance that began it
		}
		return "## Goal\nRebook.", nil
	}
	_, err := e.Compact(ctx, msgs, cfg, summarize, CompactOptions{Force: true})
	requireTrap(t, "Compact whose finish trapped", err)
	if n := calls.Load(); n != 1 {
		t.Fatalf("the summarizer ran %d times, want 1", n)
	}
	res, err := e.Compact(ctx, msgs, cfg, summarize, CompactOptions{Force: true})
	if err != nil || !res.Done || res.Report.FallbackUsed {
		t.Fatalf("the compaction after a trap: %v %+v", err, res.Report)
	}
	// A trap in compact.begin fails the call before the summarizer runs.
	trapNext(t, e)
	_, err = e.Compact(ctx, msgs, cfg, summarize, CompactOptions{Force: true})
	requireTrap(t, "Compact whose begin trapped", err)
	if n := calls.Load(); n != 2 {
		t.Fatalf("the summarizer ran %d times in all, want 2", n)
	}
}
