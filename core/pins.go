package core

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Pins (docs/STEERING.md "Pins"): a compaction's pins param names messages (by
// input index, or by a tool call id) that the compaction keeps verbatim: never
// summarized, never pruned, in their order. A pin takes the message's whole tool
// group (a call and its results stay together). Pinned messages inside the
// summarized span follow the summary, before the tail. A context engine keeps
// its session's pins by the messages' identity (their JSON bytes), so a pin
// holds across compactions whatever the message's index becomes.

// maxPinShare is the share of the threshold pinned messages may take: past it, a
// compaction could not get under the threshold, and it fails instead.
const maxPinShare = 0.5

// readPins marks the messages the pins param names as pinned.
func (r *compactRequest) readPins(v gjson.Result) error {
	if !v.Exists() || v.Type == gjson.Null {
		return nil
	}
	if !v.IsArray() {
		return errorf(CodeInvalidRequest, "/pins", "pins must be an array of message indexes and tool call ids")
	}
	var err error
	v.ForEach(func(k, p gjson.Result) bool {
		path := "/pins/" + strconv.Itoa(int(k.Int()))
		i := -1
		switch {
		case p.Type == gjson.Number && p.Num == float64(int(p.Num)) && p.Num >= 0 && int(p.Num) < len(r.msgs):
			i = int(p.Num)
		case p.Type == gjson.Number:
			err = errorf(CodeInvalidRequest, path, "pin %s is not a message index: the conversation has %d messages", p.Raw, len(r.msgs))
		case p.Type == gjson.String && p.Str != "":
			if i = r.callIndex(p.Str); i < 0 {
				err = errorf(CodeInvalidRequest, path, "no message makes a tool call with id %q", p.Str)
			}
		default:
			err = errorf(CodeInvalidRequest, path, "a pin is a message index or a tool call id, got %s", p.Raw)
		}
		if err != nil {
			return false
		}
		r.pinGroup(i)
		return true
	})
	if err != nil {
		return err
	}
	return r.checkPinned()
}

// pinByIdentity marks the messages whose identity (messageIdentity) is in ids.
func (r *compactRequest) pinByIdentity(ids map[string]bool) {
	if len(ids) == 0 {
		return
	}
	for i := range r.msgs {
		if ids[messageIdentity(r.msgs[i].raw)] {
			r.pinGroup(i)
		}
	}
}

// messageIdentity is what a context engine keeps of a pinned message.
func messageIdentity(raw string) string {
	return "fnv64:" + strconv.FormatUint(uint64(fnv64a(fnvOffset64).string(raw)), 16)
}

// callIndex is the index of the message making the tool call id, or -1.
func (r *compactRequest) callIndex(id string) int {
	for i := range r.msgs {
		for _, c := range r.msgs[i].calls {
			if c.id == id {
				return i
			}
		}
	}
	return -1
}

// pinGroup pins message i and the rest of its tool group.
func (r *compactRequest) pinGroup(i int) {
	start, end := i, i+1
	for start > 0 && r.format.joinsPrevious(&r.msgs[start]) {
		start--
	}
	for end < len(r.msgs) && r.format.joinsPrevious(&r.msgs[end]) {
		end++
	}
	for k := start; k < end; k++ {
		r.msgs[k].pinned = true
	}
	r.hasPins = true
}

// checkPinned fails a compaction whose pinned messages alone take more than
// maxPinShare of the threshold.
func (r *compactRequest) checkPinned() error {
	n := 0
	for i := range r.msgs {
		if r.msgs[i].pinned {
			n += r.msgs[i].tokens
		}
	}
	if limit := int(maxPinShare * float64(r.thr.ThresholdTokens)); n > limit {
		return errorf(CodeInvalidRequest, "/pins", "the pinned messages take %d tokens, more than half the threshold (%d of %d): a compaction could not get under it; unpin some", n, limit, r.thr.ThresholdTokens)
	}
	return nil
}

// pinnedIndexes are the input indexes of the pinned messages.
func (r *compactRequest) pinnedIndexes() []int {
	var out []int
	for i := range r.msgs {
		if r.msgs[i].pinned {
			out = append(out, i)
		}
	}
	return out
}

// Pin names a message to keep verbatim (the pins param): its index in the
// input, or, when ToolCallID is set, the message making that tool call.
type Pin struct {
	Index      int
	ToolCallID string
}

// PinIndex pins the message at input index i.
func PinIndex(i int) Pin { return Pin{Index: i} }

// PinCall pins the message making the tool call id, with its results.
func PinCall(id string) Pin { return Pin{ToolCallID: id} }

// MarshalJSON writes the pin as the pins param takes it: a number or a string.
func (p Pin) MarshalJSON() ([]byte, error) {
	if p.ToolCallID != "" {
		return marshal(p.ToolCallID)
	}
	return []byte(strconv.Itoa(p.Index)), nil
}
