package core

import (
	"fmt"
	"sort"
	"testing"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// traceRequests builds compact.begin envelopes for every shared trace at a window.
func traceRequests(b *testing.B, window int, extra string) ([][]byte, int64) {
	traces := loadTraces(b)
	names := make([]string, 0, len(traces))
	for n := range traces {
		names = append(names, n)
	}
	sort.Strings(names)
	var reqs [][]byte
	var total int64
	for _, n := range names {
		req := []byte(fmt.Sprintf(`{"op":"compact.begin","force":true%s,"config":{"model":{"context_length":%d}},"messages":%s}`, extra, window, traces[n]))
		reqs = append(reqs, req)
		total += int64(len(req))
	}
	return reqs, total
}

// BenchmarkCompactTraces compacts every shared trace (input bytes to output bytes)
// at a 32K window: in one call with the builtin summarizer, and as the host
// protocol's begin + finish (the summarizer failing, so finish builds the same
// extractive summary). MB/s is over the request bytes of all traces.
func BenchmarkCompactTraces(b *testing.B) {
	b.Run("builtin", func(b *testing.B) {
		reqs, total := traceRequests(b, 32_000, `,"summarizer":"builtin"`)
		b.SetBytes(total)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for _, r := range reqs {
				Call(r)
			}
		}
	})
	b.Run("begin+finish", func(b *testing.B) {
		reqs, total := traceRequests(b, 32_000, "")
		finishes := make([][]byte, len(reqs))
		for k, r := range reqs {
			state := gjson.GetBytes(Call(r), "result.state").Str
			f := append([]byte(`{"op":"compact.finish","error":"benchmark","state":"`+state+`",`), r[len(`{"op":"compact.begin",`):]...)
			finishes[k] = f
		}
		b.SetBytes(total)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for k, r := range reqs {
				Call(r)
				Call(finishes[k])
			}
		}
	})
}

// BenchmarkCompactPhases splits the builtin compaction of every shared trace into
// its phases, so a profile of one runtime (the wasm module has no profiler) can be
// compared with another's: go test -bench CompactPhases -exec 'wazero run -mount /:/'
// with GOOS=wasip1 GOARCH=wasm runs the same code inside the module's runtime.
func BenchmarkCompactPhases(b *testing.B) {
	reqs, total := traceRequests(b, 32_000, `,"summarizer":"builtin"`)
	parsed := make([]*compactRequest, len(reqs))
	plans := make([]plan, len(reqs))
	for k, r := range reqs {
		var err error
		if parsed[k], err = parseCompactRequest(gjson.ParseBytes(r)); err != nil {
			b.Fatal(err)
		}
		plans[k] = parsed[k].plan()
	}
	phase := func(name string, fn func(k int)) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				for k := range reqs {
					fn(k)
				}
			}
		})
	}
	phase("validate", func(k int) { checkJSON(reqs[k], nil) })
	phase("parse", func(k int) { parseCompactRequest(gjson.Parse(jsonraw.ViewString(reqs[k]))) })
	phase("plan", func(k int) { parsed[k].plan() })
	phase("summary", func(k int) { extractiveSummary(parsed[k].msgs, plans[k], "benchmark") })
	phase("finish", func(k int) { parsed[k].finish(plans[k], "a summary", "").appendTo(nil, false) })
	phase("summary request", func(k int) {
		sr := buildSummaryRequest(parsed[k].msgs, plans[k], parsed[k].cfg.Compression)
		appendPending(nil, "ccs1.0.0.0", &sr)
	})
	phase("all", func(k int) { Call(reqs[k]) })
	hostReqs, _ := traceRequests(b, 32_000, `,"output":"refs"`)
	phase("begin (host)", func(k int) { Call(hostReqs[k]); dropPending() })
}
