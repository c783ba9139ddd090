package core

import "github.com/tidwall/gjson"

// stubResultText is the content of a result added for a call whose result is gone.
const stubResultText = "[No result was recorded for this tool call: it was lost before compaction. Call the tool again if you need its output.]"

// outMsg is one message of a result: an input message returned unchanged (src >= 0
// and raw == the input's JSON), or a new or changed one (changed true; src is the
// input it replaces, or -1).
type outMsg struct {
	src     int
	changed bool
	raw     string
	view    message
}

func keptMsg(msgs []message, i int) outMsg {
	return outMsg{src: i, raw: msgs[i].raw, view: msgs[i]}
}

func newMsg(src int, raw string) outMsg {
	m, _ := parseMessage(gjson.Parse(raw), "")
	m.raw = raw
	return outMsg{src: src, changed: true, raw: raw, view: m}
}

// SanitizeResult reports the repairs SanitizeToolPairs made.
type SanitizeResult struct {
	// Removed are the input indices of tool results dropped because no call
	// answered by them directly precedes them.
	Removed []int `json:"removed"`
	// Stubbed are the tool_call ids that got a stub result.
	Stubbed []string `json:"stubbed"`
}

// sanitizeToolPairs makes tool pairs well formed, as providers require: every tool
// result directly follows (within its group) the assistant message that made the
// call, once; a result without such a call is removed; a call without a result gets
// a stub result at the end of its group. Calls with an empty id are left to
// validate to report.
func sanitizeToolPairs(in []outMsg) ([]outMsg, []outMsg, SanitizeResult) {
	out := make([]outMsg, 0, len(in)+4)
	var removed []outMsg
	res := SanitizeResult{Removed: []int{}, Stubbed: []string{}}
	var pending []string // ids of the open group's calls still without a result
	closeGroup := func() {
		for _, id := range pending {
			if id == "" {
				continue
			}
			raw, _ := marshal(map[string]string{"role": "tool", "tool_call_id": id, "content": stubResultText})
			out = append(out, newMsg(-1, string(raw)))
			res.Stubbed = append(res.Stubbed, id)
		}
		pending = pending[:0]
	}
	for _, m := range in {
		if m.view.isToolResult() {
			k := indexOf(pending, m.view.resultFor)
			if k < 0 || m.view.resultFor == "" {
				removed = append(removed, m)
				res.Removed = append(res.Removed, m.src)
				continue
			}
			pending = append(pending[:k], pending[k+1:]...)
			out = append(out, m)
			continue
		}
		closeGroup()
		out = append(out, m)
		if m.view.role == "assistant" {
			for _, c := range m.view.calls {
				pending = append(pending, c.id)
			}
		}
	}
	closeGroup()
	return out, removed, res
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func opSanitize(req gjson.Result) ([]byte, error) {
	msgs, err := parseMessages(req.Get("messages"), roughCounter)
	if err != nil {
		return nil, err
	}
	refs, err := outputParam(paramsOf(req))
	if err != nil {
		return nil, err
	}
	in := make([]outMsg, len(msgs))
	for i := range msgs {
		in[i] = keptMsg(msgs, i)
	}
	out, removed, res := sanitizeToolPairs(in)
	o := &compactOutcome{out: out}
	for _, m := range removed {
		o.archived = append(o.archived, archivedMsg{index: m.src, reason: ArchivedOrphanRemoved, raw: m.raw})
	}
	return writeWithFields(o, refs, res)
}
