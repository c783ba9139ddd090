package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxcompact/ctxcompact/core"
)

// Run all of these side by side with ./build.sh bench-wasm.

// BenchmarkCompactRatio compacts every shared trace (compact.begin, builtin
// summarizer, force, 32K window) natively and through the module, interleaved so
// both see the same machine load, and reports the wasm/native time ratio.
func BenchmarkCompactRatio(b *testing.B) {
	requireOpsB(b, "compact.begin")
	ctx := context.Background()
	traces := loadTraces(b)
	envs := make([][]byte, len(traces))
	for i, tr := range traces {
		envs[i] = compactBegin(tr.messages, 32000)
	}
	e := newEngine(b, WithPoolSize(1))
	for _, env := range envs { // warm both: token caches, instance heap
		core.Call(env)
		if _, err := e.Call(ctx, env); err != nil {
			b.Fatal(err)
		}
	}
	native := make([]time.Duration, len(envs))
	wasm := make([]time.Duration, len(envs))
	passes := 0
	for b.Loop() {
		for i, env := range envs {
			t0 := time.Now()
			core.Call(env)
			t1 := time.Now()
			if _, err := e.Call(ctx, env); err != nil {
				b.Fatal(err)
			}
			native[i] += t1.Sub(t0)
			wasm[i] += time.Since(t1)
		}
		passes++
	}
	// One table, printed once (b.Loop runs this function once); b.Log would be
	// truncated after ten lines.
	var tn, tw time.Duration
	fmt.Printf("%-52s %10s %10s %6s\n", "trace (compact.begin, builtin, force, 32K)", "native ms", "wasm ms", "ratio")
	for i := range envs {
		tn, tw = tn+native[i], tw+wasm[i]
		fmt.Printf("%-52s %10.2f %10.2f %6.2f\n", traces[i].name,
			ms(native[i])/float64(passes), ms(wasm[i])/float64(passes), float64(wasm[i])/float64(native[i]))
	}
	fmt.Printf("%-52s %10.2f %10.2f %6.2f\n", "all traces", ms(tn)/float64(passes), ms(tw)/float64(passes), float64(tw)/float64(tn))
	b.ReportMetric(ms(tn)/float64(passes), "native-ms/pass")
	b.ReportMetric(ms(tw)/float64(passes), "wasm-ms/pass")
	b.ReportMetric(float64(tw)/float64(tn), "wasm/native")
}

// BenchmarkColdStart is New (compile, check, one instance) then Close, without a
// compilation cache and with a warm one.
func BenchmarkColdStart(b *testing.B) {
	ctx := context.Background()
	b.Run("no-cache", func(b *testing.B) {
		for b.Loop() {
			e, err := New(ctx)
			if err != nil {
				b.Fatal(err)
			}
			_ = e.Close(ctx)
		}
	})
	b.Run("warm-cache", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "cache")
		e, err := New(ctx, WithCompilationCache(dir)) // fills the cache
		if err != nil {
			b.Fatal(err)
		}
		_ = e.Close(ctx)
		for b.Loop() {
			e, err := New(ctx, WithCompilationCache(dir))
			if err != nil {
				b.Fatal(err)
			}
			_ = e.Close(ctx)
		}
		b.ReportMetric(dirMB(b, dir), "cache-MB")
	})
}

// BenchmarkInstantiate makes and closes one instance (_initialize and the ABI
// version check included), as the pool does on demand.
func BenchmarkInstantiate(b *testing.B) {
	ctx := context.Background()
	e := newEngine(b)
	for b.Loop() {
		inst, err := e.newInstance(ctx)
		if err != nil {
			b.Fatal(err)
		}
		_ = inst.close(ctx)
	}
}

// BenchmarkCallOverhead is the info op, the cheapest, natively and through the
// module (one Call: copy in, ctxc_call, ctxc_result_len, copy out), and one bare
// export call (ctxc_result_len, which only yields), the floor of any crossing.
func BenchmarkCallOverhead(b *testing.B) {
	ctx := context.Background()
	env := []byte(`{"op":"info"}`)
	b.Run("native", func(b *testing.B) {
		for b.Loop() {
			core.Call(env)
		}
	})
	b.Run("wasm", func(b *testing.B) {
		e := newEngine(b, WithPoolSize(1))
		for b.Loop() {
			if _, err := e.Call(ctx, env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("export-call", func(b *testing.B) {
		inst := newEngine(b, WithPoolSize(1)).idle[0]
		for b.Loop() {
			if _, err := inst.invoke(ctx, inst.resultLen, "ctxc_result_len"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMemoryPerInstance runs 1,000 forced compactions, cycling over the shared
// traces, on one instance, and reports its linear memory before, after the first
// pass over the traces, and at the end.
func BenchmarkMemoryPerInstance(b *testing.B) {
	requireOpsB(b, "compact.begin")
	ctx := context.Background()
	traces := loadTraces(b)
	for b.Loop() {
		e := newEngine(b, WithPoolSize(1))
		inst := e.idle[0]
		start := inst.memoryBytes()
		var afterPass uint32
		for i := range 1000 {
			if i == len(traces) {
				afterPass = inst.memoryBytes()
			}
			if _, err := e.Call(ctx, compactBegin(traces[i%len(traces)].messages, 32000)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(mib(start), "MiB-start")
		b.ReportMetric(mib(afterPass), "MiB-after-1-pass")
		b.ReportMetric(mib(inst.memoryBytes()), "MiB-after-1000")
	}
}

func requireOpsB(b *testing.B, ops ...string) {
	for _, op := range ops {
		if !hasOp(op) {
			b.Fatalf("the core has no %s op", op)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(n uint32) float64 { return float64(n) / (1 << 20) }

func dirMB(b *testing.B, dir string) float64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return float64(n) / 1e6
}
