package core

import (
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func BenchmarkZZShortFinish(b *testing.B) {
	reqs, total := traceRequests(b, 32_000, `,"ticket":"t","output":"refs"`)
	b.SetBytes(total)
	var tb, tf time.Duration
	for b.Loop() {
		for _, r := range reqs {
			t0 := time.Now()
			out := Call(r)
			t1 := time.Now()
			tb += t1.Sub(t0)
			st := gjson.GetBytes(out, "result.state").Str
			if st == "" {
				continue
			}
			t1 = time.Now()
			Call([]byte(`{"op":"compact.finish","force":true,"ticket":"t","output":"refs","config":{"model":{"context_length":32000}},"state":"` + st + `","summary":"Goal: x"}`))
			tf += time.Since(t1)
		}
	}
	b.ReportMetric(float64(tb.Microseconds())/float64(b.N)/1000, "begin-ms")
	b.ReportMetric(float64(tf.Microseconds())/float64(b.N)/1000, "finish-ms")
}
