package core

import "github.com/tidwall/gjson"

// A range compaction (docs/STEERING.md "See and undo"): the range param names
// the messages [from, to) to summarize, and the compaction summarizes exactly
// those: the head is everything before them and the tail everything after,
// nothing pruned, whatever the threshold and the tail budget would choose. The
// range must not split a tool group. Pinned messages in it are kept, as in any
// compaction.

// readRange reads the range param ({"from", "to"}, input indexes).
func (r *compactRequest) readRange(v gjson.Result) error {
	if !v.Exists() || v.Type == gjson.Null {
		return nil
	}
	from, to := v.Get("from"), v.Get("to")
	n := len(r.msgs)
	isIndex := func(x gjson.Result) bool { return x.Type == gjson.Number && x.Num == float64(int(x.Num)) }
	switch {
	case !v.IsObject() || !isIndex(from) || !isIndex(to):
		return errorf(CodeInvalidRequest, "/range", "range must be {\"from\": i, \"to\": j}, the input indexes of the first message to summarize and of the one after the last")
	case from.Int() < 0 || to.Int() > int64(n) || from.Int() >= to.Int():
		return errorf(CodeInvalidRequest, "/range", "range [%d, %d) is not a span of the %d messages", from.Int(), to.Int(), n)
	}
	i, j := int(from.Int()), int(to.Int())
	if r.format.joinsPrevious(&r.msgs[i]) {
		return errorf(CodeInvalidRequest, "/range/from", "range starts inside a tool group: message %d belongs with the one before it", i)
	}
	if j < n && r.format.joinsPrevious(&r.msgs[j]) {
		return errorf(CodeInvalidRequest, "/range/to", "range ends inside a tool group: message %d belongs with the one before it", j)
	}
	r.span = &IndexRange{From: i, To: j}
	r.force = true // a range is a compaction asked for, whatever the trigger says
	return nil
}

// rangePlan is the plan of a range compaction.
func (r *compactRequest) rangePlan() plan {
	p := plan{headEnd: r.span.From, tailStart: r.span.To, budgetStart: r.span.To, activeRequest: -1, thr: r.thr,
		calls: indexCalls(r.msgs), focus: r.focus}
	middle, total := 0, r.systemTokens
	for i := range r.msgs {
		total += r.msgs[i].tokens
		if i >= p.headEnd && i < p.tailStart && !r.msgs[i].pinned {
			middle += r.msgs[i].tokens
		}
	}
	p.summaryTarget = summaryTargetTokens(middle, r.thr.MaxSummaryTokens)
	p.estimate = total - middle + p.summaryTarget
	p.roomMargin = anchorBudget(r.thr, r.cfg.Compression)
	return p
}
