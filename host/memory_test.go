package host

import (
	"context"
	"testing"
)

// TestMemoryFlat runs 1,000 forced compactions of a trace on one instance and checks
// that its linear memory stays flat after a warm-up: the guest frees each response
// and yields, so the Go GC in the module reclaims the garbage. Flat allows one step
// of the GC's heap goal (at most 1 MiB); without the yield the same run grows by
// tens of MiB per hundred calls.
func TestMemoryFlat(t *testing.T) {
	requireOps(t, "compact.begin")
	if testing.Short() {
		t.Skip("1,000 compactions; skipped in -short mode")
	}
	ctx := context.Background()
	e := newEngine(t, WithPoolSize(1))
	env := compactBegin(traceNamed(t, smallTrace), 32000)
	inst := e.idle[0]
	start := inst.memoryBytes()
	const warmup, calls = 200, 1000
	var warm uint32
	for i := range warmup + calls {
		if i == warmup {
			warm = inst.memoryBytes()
		}
		if _, err := e.Call(ctx, env); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(e.idle) != 1 || e.idle[0] != inst {
			t.Fatalf("call %d moved to another instance", i)
		}
	}
	end := inst.memoryBytes()
	t.Logf("instance memory: %d KiB at start, %d KiB after %d warm-up compactions, %d KiB after %d more",
		start>>10, warm>>10, warmup, end>>10, calls)
	const slack = 1 << 20
	if end > warm+slack {
		t.Errorf("memory grew from %d to %d KiB over %d compactions after warm-up (allowed: %d KiB)",
			warm>>10, end>>10, calls, slack>>10)
	}
}
