package core

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

// newMsg is a new or changed message raw, read as an item of format f: a changed one
// at its input index src, which a format that pairs by position reads (Gemini).
func newMsg(f messageFormat, src int, raw string) outMsg {
	path := ""
	if src >= 0 {
		path = pointer("/messages", src)
	}
	m, _ := f.readOne(raw, path)
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
// validate to report. f writes the repairs in its own shape.
//
// Where one result item answers a whole group (f.resultsCloseGroup: Anthropic's
// tool_result blocks of the one user message after the call), orphan results are
// taken out of that item (removed with it when nothing else is left) and stubs put
// first in it, or in a new item when the next message is not a result turn. The
// items changed that way are returned as repaired.
func sanitizeToolPairs(f messageFormat, in []outMsg) (out, removed, repaired []outMsg, res SanitizeResult) {
	out = make([]outMsg, 0, len(in)+4)
	res = SanitizeResult{Removed: []int{}, Stubbed: []string{}, Repaired: []int{}}
	var pending []string // ids of the open group's calls still without a result
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
	dropper, _ := f.(callDropper)
	closeGroup := func(next *outMsg) {
		ids := stubs()
		if dropper != nil {
			ids = dropUnanswered(dropper, ids, &out, &removed, &res)
		}
		if len(ids) == 0 {
			return
		}
		added, into := f.stubResults(ids, next)
		for _, raw := range added {
			out = append(out, newMsg(f, -1, raw))
		}
		if into != "" {
			*next = newMsg(f, next.src, into)
			repaired = append(repaired, *next)
		}
	}
	for _, m := range in {
		if m.view.isToolResult() {
			var orphans, missing []string
			for _, id := range m.view.answers() {
				if k := indexOf(pending, id); k >= 0 && id != "" {
					pending = append(pending[:k], pending[k+1:]...)
				} else {
					orphans = append(orphans, id)
				}
			}
			if f.resultsCloseGroup() {
				missing = stubs()
			}
			if len(orphans) == 0 && len(missing) == 0 {
				out = append(out, m)
				continue
			}
			raw, keep := f.fixResults(m.raw, missing, orphans)
			if !keep {
				removed = append(removed, m)
				res.Removed = append(res.Removed, m.src)
				continue
			}
			fixed := newMsg(f, m.src, raw)
			repaired = append(repaired, fixed)
			out = append(out, fixed)
			continue
		}
		if !f.joinsPrevious(&m.view) { // a further call of the turn keeps the group open
			closeGroup(&m)
		}
		out = append(out, m)
		if m.view.role == "assistant" {
			for _, c := range m.view.calls {
				pending = append(pending, c.id)
			}
		}
	}
	closeGroup(nil)
	return out, removed, repaired, res
}

// callDropper is implemented by a format some of whose calls cannot get an honest
// stub result (a Responses computer_call needs a screenshot): such a call left
// without a result is removed instead, with the items before it that cannot stand
// without it (dropsWith: a reasoning item).
type callDropper interface {
	dropsUnanswered(id string) bool
	dropsWith(m *message) bool
}

// dropUnanswered removes from out the call items of the ids d drops (each such item
// makes one call), recording them as removed, and returns the ids left to stub.
func dropUnanswered(d callDropper, ids []string, out, removed *[]outMsg, res *SanitizeResult) []string {
	keep := ids[:0]
	for _, id := range ids {
		if !d.dropsUnanswered(id) {
			keep = append(keep, id)
			continue
		}
		for k := len(res.Stubbed) - 1; k >= 0; k-- { // stubs() listed it: it is not stubbed
			if res.Stubbed[k] == id {
				res.Stubbed = append(res.Stubbed[:k], res.Stubbed[k+1:]...)
				break
			}
		}
		for k := len(*out) - 1; k >= 0; k-- {
			o := (*out)[k]
			if len(o.view.calls) != 1 || o.view.calls[0].id != id {
				continue
			}
			from := k
			for from > 0 && d.dropsWith(&(*out)[from-1].view) {
				from--
			}
			for _, r := range (*out)[from : k+1] {
				*removed = append(*removed, r)
				res.Removed = append(res.Removed, r.src)
			}
			*out = append((*out)[:from], (*out)[k+1:]...)
			break
		}
	}
	return keep
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
	f, msgs, err := readList(req.Field("format"), req.Field("messages"), false, roughCounter, req.arrays["messages"])
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
	out, removed, repaired, res := sanitizeToolPairs(f, in)
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
