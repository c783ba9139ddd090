// Package tokens measures token counting natively and inside the wasm module, side
// by side in one run: a full count of a conversation (no cached message), and the
// incremental count after one message was appended (every earlier count cached).
// Timings are printed, never asserted (a loaded machine must not fail a correct
// build); ./build.sh bench runs them:
//
//	go test ./bench/tokens -run '^$' -bench SpeedTable -benchtime 1x  # the table and ratios
//	go test ./bench/tokens -run '^$' -bench 'Native|Wasm' -benchtime 5x
//
// The tests here check only what does not depend on time: wasm and native totals
// agree, and an incremental count is served from the cache.
//
// The module is built from this checkout into a temporary directory (the committed
// wasm/ctxcompact.wasm may lag the source); set CTXCOMPACT_WASM to use another file.
// The conversation is a shared Claude Code trace when ../shared/traces exists beside
// the repository, else a generated one of similar shape (with CI set, a missing
// ../shared/traces fails instead: internal/testtraces).
package tokens

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

const encoding = "o200k_base"

// counter is one place that runs tokens.count: natively or in a wasm instance.
type counter interface {
	call(t testing.TB, envelope []byte) []byte
}

type native struct{}

func (native) call(_ testing.TB, env []byte) []byte { return core.Call(env) }

// instance is one wasm module instance, called through the ABI of wasm/abi.json.
type instance struct {
	mod                         api.Module
	alloc, call_, resLen, free_ api.Function
}

var (
	wasmOnce sync.Once
	wasmInst *instance
	wasmErr  error
)

func wasmInstance(t testing.TB) *instance {
	wasmOnce.Do(func() { wasmInst, wasmErr = newInstance() })
	if wasmErr != nil {
		t.Fatal(wasmErr)
	}
	return wasmInst
}

func newInstance() (*instance, error) {
	path := os.Getenv("CTXCOMPACT_WASM")
	if path == "" {
		dir, err := os.MkdirTemp("", "ctxc-bench")
		if err != nil {
			return nil, err
		}
		path = filepath.Join(dir, "ctxcompact.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false",
			"-ldflags=-s -w -buildid=", "-o", path, "./wasm/guest")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the module: %v\n%s", err, out)
		}
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	compiled, err := rt.CompileModule(ctx, bin)
	if err != nil {
		return nil, err
	}
	mod, err := rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, err
	}
	if _, err := mod.ExportedFunction("_initialize").Call(ctx); err != nil {
		return nil, err
	}
	return &instance{mod: mod, alloc: mod.ExportedFunction("ctxc_alloc"), call_: mod.ExportedFunction("ctxc_call"),
		resLen: mod.ExportedFunction("ctxc_result_len"), free_: mod.ExportedFunction("ctxc_free")}, nil
}

func (w *instance) call(t testing.TB, env []byte) []byte {
	ctx := context.Background()
	r, err := w.alloc.Call(ctx, uint64(len(env)))
	if err != nil || r[0] == 0 {
		t.Fatalf("ctxc_alloc(%d): %v", len(env), err)
	}
	p := uint32(r[0])
	w.mod.Memory().Write(p, env)
	r, err = w.call_.Call(ctx, uint64(p), uint64(len(env)))
	if err != nil {
		t.Fatalf("ctxc_call: %v", err)
	}
	n, _ := w.resLen.Call(ctx)
	out, _ := w.mod.Memory().Read(uint32(r[0]), uint32(n[0]))
	out = append([]byte(nil), out...)
	_, _ = w.free_.Call(ctx, uint64(p))
	return out
}

// appended is the message appended for an incremental count: one of median size
// in the conversation (a typical turn).
func appended(msgs []string) string {
	sorted := append([]string(nil), msgs...)
	sort.SliceStable(sorted, func(i, j int) bool { return len(sorted[i]) < len(sorted[j]) })
	return sorted[len(sorted)/2]
}

// conversation returns the benchmark's messages (raw JSON objects) and where they
// come from: a shared trace, or (CI not set and the traces missing) generated ones.
func conversation(t testing.TB) ([]string, string) {
	const trace = "claude-code-spotter-4d5611e5-precompact.json"
	if _, ok := testtraces.Available(t); ok {
		b, err := os.ReadFile(testtraces.File(t, trace))
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for _, m := range gjson.GetBytes(b, "messages").Array() {
			msgs = append(msgs, m.Raw)
		}
		return msgs, trace
	}
	return generated(130), "generated (no shared traces)"
}

// generated is a coding session of n tool calls with Go source as tool output.
func generated(n int) []string {
	var msgs []string
	for i := 0; i < n; i++ {
		body := strings.Repeat(fmt.Sprintf("func f%d(x int) int { return x*%d + 1 } // 函数 %d\n", i, i, i), 60)
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"Read","arguments":"{\"file_path\": \"/src/f%d.go\"}"}}]}`, i, i),
			fmt.Sprintf(`{"role":"tool","tool_call_id":"c%d","content":%q}`, i, body))
	}
	return msgs
}

// tag makes every message unique to run k by adding a field the count ignores, so
// nothing is served from the cache of an earlier run.
func tag(msgs []string, k int) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = fmt.Sprintf(`{"bench_run":%d,%s`, k, m[1:])
	}
	return out
}

func envelope(msgs []string) []byte {
	return []byte(`{"op":"tokens.count","encoding":"` + encoding + `","report_cache_hits":true,"messages":[` + strings.Join(msgs, ",") + `]}`)
}

// count runs tokens.count and checks the cache hits.
func count(t testing.TB, c counter, msgs []string, wantHits int) int {
	out := c.call(t, envelope(msgs))
	r := gjson.ParseBytes(out)
	if !r.Get("result").Exists() {
		t.Fatalf("tokens.count failed: %.300s", out)
	}
	if h := int(r.Get("result.cache_hits").Int()); wantHits >= 0 && h != wantHits {
		t.Fatalf("cache hits %d, want %d", h, wantHits)
	}
	return int(r.Get("result.total").Int())
}

var runs = 0

// measure returns the median time of a full count (no message cached) over full
// runs, and of an incremental count over incr turns of a growing conversation: each
// turn appends one new message of median size and counts the whole list again, as
// an agent does after every response. It also returns the first full total.
func measure(t testing.TB, c counter, base []string, full, incr int) (time.Duration, time.Duration, int) {
	var fulls, incrs []time.Duration
	total := 0
	for i := 0; i < full; i++ {
		runs++
		msgs := tag(base, runs)
		start := time.Now()
		n := count(t, c, msgs, 0)
		fulls = append(fulls, time.Since(start))
		if i == 0 {
			total = n
		}
	}
	runs++
	msgs := tag(base, runs)
	count(t, c, msgs, 0)
	for i := 0; i < incr; i++ {
		runs++
		msgs = append(msgs, tag([]string{appended(base)}, runs)...)
		start := time.Now()
		count(t, c, msgs, len(msgs)-1)
		incrs = append(incrs, time.Since(start))
	}
	return median(fulls), median(incrs), total
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// readFloor is the median time of an op that only reads the request (validation
// and parsing of the envelope, as every op does) over the same messages: the floor
// under any count of that conversation.
func readFloor(t testing.TB, c counter, msgs []string) time.Duration {
	env := []byte(`{"op":"info","messages":[` + strings.Join(msgs, ",") + `]}`)
	var ds []time.Duration
	for i := 0; i < 9; i++ {
		start := time.Now()
		if out := c.call(t, env); !gjson.GetBytes(out, "result").Exists() {
			t.Fatalf("info failed: %.300s", out)
		}
		ds = append(ds, time.Since(start))
	}
	return median(ds)
}

// TestIncrementalCountHitsTheCache checks what the count cache promises, without
// timing it: after one message is appended, every earlier message is a cache hit,
// natively and in the module, and both count the same totals.
func TestIncrementalCountHitsTheCache(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the wasm module; skipped with -short")
	}
	base := generated(20)
	for _, c := range []struct {
		name string
		c    counter
	}{{"native", native{}}, {"wasm", wasmInstance(t)}} {
		runs++
		msgs := tag(base, runs)
		full := count(t, c.c, msgs, 0)
		runs++
		msgs = append(msgs, tag([]string{appended(base)}, runs)...)
		incr := count(t, c.c, msgs, len(msgs)-1)
		runs++
		recount := count(t, native{}, tag(append(append([]string(nil), base...), appended(base)), runs), -1)
		if incr != recount || incr <= full {
			t.Errorf("%s: incremental total %d, full native recount %d (before the append: %d)", c.name, incr, recount, full)
		}
	}
}

// BenchmarkSpeedTable prints native and wasm speeds side by side, with what the
// count cache is for: counting a conversation that grew by one message costs about
// one message on top of reading the request. The targets (printed, not checked: a
// loaded machine must not fail a correct build) are an incremental count at least
// 10x faster than a full recount inside the module, and within 5x of the floor of
// merely reading the same request (an info op over the messages); 1.6-3x have been
// measured. (The goal was 50x over a full recount; since the hand-written
// splitter made full counts ~5x faster, reading the 455 KB request is what an
// incremental count costs, and that ratio is ~25x: see docs/TOKENS.md.)
//
// Run it once: -benchtime 1x (each iteration measures the whole table again).
func BenchmarkSpeedTable(b *testing.B) {
	base, source := conversation(b)
	bytes := len(envelope(base))
	// Warm up: build the vocabulary map in both runtimes.
	count(b, native{}, []string{`{"role":"user","content":"warm up"}`}, -1)
	w := wasmInstance(b)
	count(b, w, []string{`{"role":"user","content":"warm up"}`}, -1)

	for b.Loop() {
		nf, ni, nt := measure(b, native{}, base, 3, 21)
		wf, wi, wt := measure(b, w, base, 3, 21)
		if nt != wt {
			b.Errorf("native totals %v differ from wasm totals %v", nt, wt)
		}
		floor := readFloor(b, w, append(tag(base, runs), appended(base)))
		mbs := func(d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e6 }
		fmt.Printf("conversation: %s, %d messages, %d bytes, %d %s tokens; each turn appends %d bytes\n", source, len(base), bytes, nt, encoding, len(appended(base)))
		fmt.Printf("medians: full count of 3 runs; +1 msg of 21 turns, each appending one message and counting all\n")
		fmt.Printf("%-8s %14s %10s %16s %8s\n", "runtime", "full count", "MB/s", "+1 msg (cached)", "ratio")
		fmt.Printf("%-8s %14v %10.2f %16v %7.0fx\n", "native", nf.Round(time.Microsecond), mbs(nf), ni.Round(time.Microsecond), float64(nf)/float64(ni))
		fmt.Printf("%-8s %14v %10.2f %16v %7.0fx\n", "wasm", wf.Round(time.Microsecond), mbs(wf), wi.Round(time.Microsecond), float64(wf)/float64(wi))
		fmt.Printf("wasm/native: full %.1fx slower, incremental %.1fx slower\n", float64(wf)/float64(nf), float64(wi)/float64(ni))
		fmt.Printf("wasm: full recount / incremental count = %.1fx (target >= 10x)\n", float64(wf)/float64(wi))
		fmt.Printf("wasm: reading the request alone (info op over the same messages): %v; incremental count / read = %.1fx (target <= 5x)\n",
			floor.Round(time.Microsecond), float64(wi)/float64(floor))
		b.ReportMetric(float64(wf)/float64(wi), "wasm-full/incr")
		b.ReportMetric(float64(wi)/float64(floor), "wasm-incr/read")
	}
}

func benchCount(b *testing.B, c counter, incremental bool) {
	base, _ := conversation(b)
	count(b, c, []string{`{"role":"user","content":"warm up"}`}, -1)
	b.SetBytes(int64(len(envelope(base))))
	if incremental {
		runs++
		msgs := tag(base, runs)
		count(b, c, msgs, 0)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			runs++
			count(b, c, append(msgs, tag([]string{appended(base)}, runs)...), len(msgs))
		}
		return
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runs++
		count(b, c, tag(base, runs), 0)
	}
}

func BenchmarkNativeFull(b *testing.B)        { benchCount(b, native{}, false) }
func BenchmarkNativeIncremental(b *testing.B) { benchCount(b, native{}, true) }
func BenchmarkWasmFull(b *testing.B)          { benchCount(b, wasmInstance(b), false) }
func BenchmarkWasmIncremental(b *testing.B)   { benchCount(b, wasmInstance(b), true) }
