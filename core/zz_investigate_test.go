package core

import (
	"testing"

	"github.com/tidwall/gjson"
)

func BenchmarkParseParts(b *testing.B) {
	reqs, total := traceRequests(b, 32_000, `,"summarizer":"builtin"`)
	var msgsRaw []string
	var parsed [][]message
	for _, r := range reqs {
		m := paramsOf(gjson.Parse(string(r))).Get("messages")
		msgsRaw = append(msgsRaw, m.Raw)
		ms, _ := parseMessages(m, roughCounter)
		parsed = append(parsed, ms)
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
	phase("params", func(k int) { paramsOf(gjson.Parse(bytesString(reqs[k]))) })
	phase("skipall", func(k int) { skipValue(msgsRaw[k], 0) })
	phase("walk", func(k int) {
		forEachElement(msgsRaw[k], func(raw string) bool { walkObject(raw, 0, func(k, v string) bool { return true }); return true })
	})
	phase("rough", func(k int) {
		for _, m := range parsed[k] {
			roughCounter.roughParts(m.contentRaw, m.calls)
		}
	})
	phase("messages", func(k int) { parseMessages(rawValue(msgsRaw[k]), roughCounter) })
}

func BenchmarkSummaryParts(b *testing.B) {
	reqs, total := traceRequests(b, 32_000, `,"summarizer":"builtin"`)
	var rs []*compactRequest
	var ps []plan
	for _, r := range reqs {
		q, _ := parseCompactRequest(gjson.Parse(string(r)))
		rs = append(rs, q)
		ps = append(ps, q.plan())
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
	phase("callpaths", func(k int) {
		n := 0
		for i := ps[k].tailStart - 1; i >= ps[k].headEnd && n < 80; i-- {
			for _, c := range rs[k].msgs[i].calls {
				callPaths(c)
				n++
			}
		}
	})
	phase("describe", func(k int) {
		n := 0
		for i := ps[k].tailStart - 1; i >= ps[k].headEnd && n < 25; i-- {
			for _, c := range rs[k].msgs[i].calls {
				describeCall(c)
				n++
			}
		}
	})
	phase("errors", func(k int) {
		n := 0
		for i := ps[k].tailStart - 1; i >= ps[k].headEnd && n < 24; i-- {
			if rs[k].msgs[i].isToolResult() {
				errorLines(&rs[k].msgs[i])
				n++
			}
		}
	})
	phase("texts", func(k int) {
		for i := ps[k].headEnd; i < ps[k].tailStart; i++ {
			m := &rs[k].msgs[i]
			if m.role == "assistant" || m.isRealUser() {
				m.text()
			}
		}
	})
	phase("index", func(k int) { indexCalls(rs[k].msgs) })
	phase("prev", func(k int) { previousSummary(rs[k].msgs, ps[k].headEnd, ps[k].tailStart) })
}
