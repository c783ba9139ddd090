package core

import (
	"strings"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

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
	// Repaired are the input indices of Anthropic messages whose tool_result blocks
	// were fixed (orphan blocks taken out or stub blocks added).
	Repaired []int `json:"repaired"`
}

// sanitizeToolPairs makes tool pairs well formed, as providers require: every tool
// result directly follows (within its group) the assistant message that made the
// call, once; a result without such a call is removed; a call without a result gets
// a stub result at the end of its group. Calls with an empty id are left to
// validate to report.
//
// In the Anthropic layout the results of an assistant message's tool_use blocks are
// tool_result blocks of the one user message after it: orphan blocks are taken out
// of that message (removed with it when nothing else is left) and stub blocks put
// first in it, or in a new user message when the next message is not a user turn.
// The messages changed that way are returned as repaired.
func sanitizeToolPairs(in []outMsg) (out, removed, repaired []outMsg, res SanitizeResult) {
	out = make([]outMsg, 0, len(in)+4)
	res = SanitizeResult{Removed: []int{}, Stubbed: []string{}, Repaired: []int{}}
	var pending []string // ids of the open group's calls still without a result
	blocks := false      // the open group is Anthropic's (tool_use blocks)
	stubs := func() []string {
		var ids []string
		for _, id := range pending {
			if id != "" {
				ids = append(ids, id)
				res.Stubbed = append(res.Stubbed, id)
			}
		}
		pending = pending[:0]
		return ids
	}
	closeGroup := func(next *outMsg) {
		ids := stubs()
		switch {
		case len(ids) == 0:
		case !blocks:
			for _, id := range ids {
				raw, _ := marshal(map[string]string{"role": "tool", "tool_call_id": id, "content": stubResultText})
				out = append(out, newMsg(-1, string(raw)))
			}
		case next != nil && next.view.role == "user":
			*next = newMsg(next.src, withResultBlocks(next.raw, ids, nil))
			repaired = append(repaired, *next)
		default:
			out = append(out, newMsg(-1, withResultBlocks(`{"role":"user","content":[]}`, ids, nil)))
		}
	}
	for _, m := range in {
		if m.view.role == "tool" { // OpenAI: one result per tool row
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
		if len(m.view.results) > 0 { // Anthropic: the results of the open group
			var orphans []string
			for _, id := range m.view.results {
				if k := indexOf(pending, id); k >= 0 && id != "" {
					pending = append(pending[:k], pending[k+1:]...)
				} else {
					orphans = append(orphans, id)
				}
			}
			missing := stubs()
			switch {
			case len(orphans) == 0 && len(missing) == 0:
				out = append(out, m)
			default:
				raw := withResultBlocks(m.raw, missing, orphans)
				if fieldIn(raw, "content").Get("#").Int() == 0 {
					removed = append(removed, m)
					res.Removed = append(res.Removed, m.src)
					continue
				}
				fixed := newMsg(m.src, raw)
				repaired = append(repaired, fixed)
				out = append(out, fixed)
			}
			continue
		}
		closeGroup(&m)
		out = append(out, m)
		if m.view.role == "assistant" {
			blocks = m.view.blocks
			for _, c := range m.view.calls {
				pending = append(pending, c.id)
			}
		}
	}
	closeGroup(nil)
	return out, removed, repaired, res
}

// withResultBlocks returns the Anthropic message raw with stub tool_result blocks
// for the ids in stub put first, and the tool_result blocks answering the ids in
// drop taken out. A string content becomes a text block after the stubs.
func withResultBlocks(raw string, stub, drop []string) string {
	var blocks []string
	for _, id := range stub {
		b, _ := marshal(map[string]any{"type": "tool_result", "tool_use_id": id, "content": stubResultText, "is_error": true})
		blocks = append(blocks, string(b))
	}
	c := fieldIn(raw, "content")
	switch {
	case c.Type == gjson.String && c.Str != "":
		b, _ := marshal(map[string]string{"type": "text", "text": c.Str})
		blocks = append(blocks, string(b))
	case c.IsArray():
		jsonraw.ForEachElement(c.Raw, func(block string) bool {
			if block[0] == '{' && jsonraw.DecodeString(jsonraw.FindField(block, "type")) == "tool_result" &&
				contains(drop, jsonraw.DecodeString(jsonraw.FindField(block, "tool_use_id"))) {
				return true
			}
			blocks = append(blocks, block)
			return true
		})
	}
	out, err := sjson.SetRaw(raw, "content", "["+strings.Join(blocks, ",")+"]")
	if err != nil {
		return raw
	}
	return out
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func opSanitize(req opRequest) ([]byte, error) {
	msgs, err := parseMessages(req.Field("messages"), roughCounter, req.arrays["messages"])
	if err != nil {
		return nil, err
	}
	refs, err := outputParam(req.params)
	if err != nil {
		return nil, err
	}
	in := make([]outMsg, len(msgs))
	for i := range msgs {
		in[i] = keptMsg(msgs, i)
	}
	out, removed, repaired, res := sanitizeToolPairs(in)
	o := &compactOutcome{out: out}
	for _, m := range removed {
		o.archived = append(o.archived, archivedMsg{index: m.src, reason: ArchivedOrphanRemoved, raw: msgs[m.src].raw})
	}
	for _, m := range repaired {
		if m.src >= 0 {
			res.Repaired = append(res.Repaired, m.src)
			o.archived = append(o.archived, archivedMsg{index: m.src, reason: ArchivedRepaired, raw: msgs[m.src].raw})
		}
	}
	sortArchived(o.archived)
	return writeWithFields(o, refs, res)
}
