package core

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// NativeTrimResult is a conversation with what must not be sent removed
// (native.trim's result). Every input index is either kept or listed in Dropped.
type NativeTrimResult struct {
	Messages []json.RawMessage `json:"messages"`
	// Dropped lists the input indices left out, with why: replaced (swapped for an
	// on-demand compaction block), other_issuer (a compaction item of another
	// route), disabled (an Anthropic block of a mechanism the session turned off),
	// before_compaction (summarized by the newest compaction item).
	Dropped []NativeDropped `json:"dropped"`
	// DroppedMessages are the dropped items as they were, in input order, for the
	// host to archive: nothing is lost.
	DroppedMessages []json.RawMessage `json:"dropped_messages"`
	// Rewritten lists the input indices kept but changed: an Anthropic message whose
	// blocks before the newest compaction block were dropped (before_compaction), or
	// whose compaction block of another issuer became a text block (other_issuer).
	Rewritten []NativeDropped `json:"rewritten"`
	Changed   bool            `json:"changed"`
}

// NativeDropped is one input index and why it was dropped or rewritten; a
// rewritten message carries its Original, for the host to archive.
type NativeDropped struct {
	Index    int             `json:"index"`
	Reason   string          `json:"reason"`
	Original json.RawMessage `json:"original,omitempty"`
}

// nativeTrim is one trim in progress: the items, each with its input index (-1 for
// the block that replaced a prefix).
type nativeTrim struct {
	res   NativeTrimResult
	items []string
	index []int
}

func (t *nativeTrim) drop(k int, reason string) {
	if t.index[k] >= 0 {
		t.res.Dropped = append(t.res.Dropped, NativeDropped{Index: t.index[k], Reason: reason})
		t.res.DroppedMessages = append(t.res.DroppedMessages, json.RawMessage(t.items[k]))
	}
	t.items = append(t.items[:k], t.items[k+1:]...)
	t.index = append(t.index[:k], t.index[k+1:]...)
}

func (t *nativeTrim) rewrite(k int, raw, reason string) {
	if t.index[k] >= 0 {
		t.res.Rewritten = append(t.res.Rewritten, NativeDropped{Index: t.index[k], Reason: reason, Original: json.RawMessage(t.items[k])})
	}
	t.items[k] = raw
}

// isCompaction reports whether a Responses item or an Anthropic block is a
// provider's compaction.
func isCompaction(v gjson.Result) bool {
	t := fieldOf(v, "type")
	return t.Type == gjson.String && t.Str == "compaction"
}

// anthropicCompactionAt returns the index of the last compaction block of an
// Anthropic message that carries a summary, or -1. A block whose content is null
// records a compaction that failed, which the API treats as a no-op: it is no
// boundary, and what precedes it is still the conversation.
func anthropicCompactionAt(msg gjson.Result) int {
	at, i := -1, 0
	fieldOf(msg, "content").ForEach(func(_, b gjson.Result) bool {
		if isCompaction(b) && (nonEmptyString(fieldOf(b, "content")) || nonEmptyString(fieldOf(b, "encrypted_content"))) {
			at = i
		}
		i++
		return true
	})
	return at
}

func nonEmptyString(v gjson.Result) bool { return v.Type == gjson.String && v.Str != "" }

// hasCompactionBlock reports whether an Anthropic message holds a compaction
// block, failed or not.
func hasCompactionBlock(msg gjson.Result) bool {
	found := false
	fieldOf(msg, "content").ForEach(func(_, b gjson.Result) bool {
		found = isCompaction(b)
		return !found
	})
	return found
}

// trimNative removes from a conversation what must not be sent: with replace, the
// first replaceCount items become replacement (an on-demand compaction's block);
// compaction items recorded from another issuer than route (or of a mechanism the
// session turned off) go; with dropBefore, what precedes the newest compaction
// item goes too, as the provider documents (Responses keeps system and developer
// messages; Anthropic keeps the newest block first).
func trimNative(msgs gjson.Result, format Format, s NativeSession, route string, dropBefore bool, replaceCount int, replacement string) NativeTrimResult {
	t := &nativeTrim{res: NativeTrimResult{Dropped: []NativeDropped{}, DroppedMessages: []json.RawMessage{}, Rewritten: []NativeDropped{}}}
	i := 0
	msgs.ForEach(func(_, m gjson.Result) bool {
		t.items, t.index = append(t.items, m.Raw), append(t.index, i)
		i++
		return true
	})
	if replacement != "" {
		for k := 0; k < replaceCount; k++ {
			t.drop(0, "replaced")
		}
		t.items = append([]string{replacement}, t.items...)
		t.index = append([]int{-1}, t.index...)
	}
	foreign := func(item gjson.Result) bool {
		issuer, ok := s.Issuers[nativeItemKey(item)]
		return ok && route != "" && issuer != route
	}
	switch format {
	case FormatResponses:
		t.trimResponses(foreign, dropBefore)
	case FormatAnthropic:
		t.trimAnthropic(func(b gjson.Result) string {
			switch {
			case foreign(b):
				return "other_issuer"
			case s.disabled(disabledAnthropic):
				return "disabled" // sent without the beta, the block would be refused
			}
			return ""
		}, dropBefore)
	}
	t.res.Messages = make([]json.RawMessage, len(t.items))
	for k := range t.items {
		t.res.Messages[k] = json.RawMessage(t.items[k])
	}
	t.res.Changed = replacement != "" || len(t.res.Dropped) > 0 || len(t.res.Rewritten) > 0
	return t.res
}

func (t *nativeTrim) trimResponses(foreign func(gjson.Result) bool, dropBefore bool) {
	for k := 0; k < len(t.items); k++ {
		if v := gjson.Parse(t.items[k]); isCompaction(v) && foreign(v) {
			t.drop(k, "other_issuer")
			k--
		}
	}
	if !dropBefore {
		return
	}
	newest := -1
	for k := range t.items {
		if isCompaction(gjson.Parse(t.items[k])) {
			newest = k
		}
	}
	for k := 0; k < newest; k++ {
		role := fieldOf(gjson.Parse(t.items[k]), "role").Str
		if role == "system" || role == "developer" {
			continue // instructions, not conversation the compaction carries
		}
		t.drop(k, "before_compaction")
		k--
		newest--
	}
}

func (t *nativeTrim) trimAnthropic(unsendable func(gjson.Result) string, dropBefore bool) {
	for k := 0; k < len(t.items); k++ {
		m := gjson.Parse(t.items[k])
		content := fieldOf(m, "content")
		if !content.IsArray() {
			continue
		}
		blocks, why := []string{}, ""
		content.ForEach(func(_, b gjson.Result) bool {
			reason := ""
			if isCompaction(b) {
				reason = unsendable(b)
			}
			if reason == "" {
				blocks = append(blocks, b.Raw)
				return true
			}
			why = reason
			if c := fieldOf(b, "content"); c.Type == gjson.String && c.Str != "" {
				// Its summary is readable: kept as text, not lost with the block.
				text, _ := sjson.Set(`{"type":"text"}`, "text", compactionTextPrefix+c.Str)
				blocks = append(blocks, text)
			}
			return true
		})
		switch {
		case why == "":
		case len(blocks) == 0:
			t.drop(k, why)
			k--
		default:
			raw, _ := sjson.SetRaw(t.items[k], "content", "["+strings.Join(blocks, ",")+"]")
			t.rewrite(k, raw, why)
		}
	}
	if !dropBefore {
		return
	}
	newest := -1
	for k := range t.items {
		if anthropicCompactionAt(gjson.Parse(t.items[k])) >= 0 {
			newest = k
		}
	}
	if newest < 0 {
		return
	}
	for ; newest > 0; newest-- {
		t.drop(0, "before_compaction")
	}
	m := gjson.Parse(t.items[0])
	if at := anthropicCompactionAt(m); at > 0 {
		blocks, i := []string{}, 0
		fieldOf(m, "content").ForEach(func(_, b gjson.Result) bool {
			if i >= at {
				blocks = append(blocks, b.Raw)
			}
			i++
			return true
		})
		raw, _ := sjson.SetRaw(t.items[0], "content", "["+strings.Join(blocks, ",")+"]")
		t.rewrite(0, raw, "before_compaction")
	}
}

// compactionTextPrefix leads the text an unsendable Anthropic compaction block's
// summary is kept as.
const compactionTextPrefix = "[Summary of the earlier conversation, from a provider compaction]\n"

func opNativeTrim(req opRequest) ([]byte, error) {
	_, route, s, err := nativeParams(req)
	if err != nil {
		return nil, err
	}
	msgs := req.Field("messages")
	if !msgs.IsArray() {
		return nil, errorf(CodeInvalidMessages, "/messages", "messages must be an array")
	}
	i, err := checkItems(msgs, "/messages")
	if err != nil {
		return nil, err
	}
	format, err := readFormatParam(req.Field("format"))
	if err != nil {
		return nil, err
	}
	if format == "" {
		format = nativeFormatOf(msgs)
	}
	dropBefore := true
	if v := req.Field("drop_before_newest"); v.Exists() && v.Type != gjson.Null {
		if !v.IsBool() {
			return nil, errorf(CodeInvalidRequest, "/drop_before_newest", "drop_before_newest must be true or false")
		}
		dropBefore = v.Bool()
	}
	count, replacement := 0, ""
	if v := req.Field("replace"); v.Exists() && v.Type != gjson.Null {
		c, m := fieldOf(v, "count"), fieldOf(v, "message")
		switch {
		case !v.IsObject():
			return nil, errorf(CodeInvalidRequest, "/replace", "replace must be {\"count\": n, \"message\": {...}}")
		case c.Type != gjson.Number || c.Num < 0 || c.Num != float64(int(c.Num)) || int(c.Num) > i:
			return nil, errorf(CodeInvalidRequest, "/replace/count", "replace count must be an integer from 0 to the number of messages (%d), got %s", i, c.Raw)
		case !m.IsObject():
			return nil, errorf(CodeInvalidRequest, "/replace/message", "replace message must be the message object the provider returned")
		}
		count, replacement = int(c.Num), m.Raw
	}
	key := "" // no route given: no item is another issuer's
	if v := req.Field("route"); v.Exists() && v.Type != gjson.Null {
		key = route.Key()
	}
	return marshal(trimNative(msgs, format, s, key, dropBefore, count, replacement))
}

// checkItems checks that every item of the list at path is an object, and
// returns how many there are.
func checkItems(list gjson.Result, path string) (n int, err error) {
	list.ForEach(func(_, m gjson.Result) bool {
		if !m.IsObject() {
			err = errorf(CodeInvalidMessages, pointer(path, n), "every item must be an object")
			return false
		}
		n++
		return true
	})
	return n, err
}

// nativeFormatOf tells the format of a conversation by its native items: a
// top-level compaction item is Responses, a compaction block Anthropic; anything
// else is OpenAI chat, which has none.
func nativeFormatOf(msgs gjson.Result) Format {
	f := FormatOpenAI
	msgs.ForEach(func(_, m gjson.Result) bool {
		switch {
		case isCompaction(m) || fieldOf(m, "type").Exists() && !fieldOf(m, "role").Exists():
			f = FormatResponses
			return false
		case hasCompactionBlock(m):
			f = FormatAnthropic
			return false
		}
		return true
	})
	return f
}
