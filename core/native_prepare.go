package core

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// NativePrepared is a request body made ready for its route (native.prepare): the
// policy's fields applied, and what must not be sent trimmed from its list.
type NativePrepared struct {
	Body json.RawMessage `json:"body"`
	// Betas are the anthropic-beta header values to add to the host's own.
	Betas []string `json:"betas"`
	// CompactionBody is, when the decision asks for an Anthropic on-demand
	// compaction now, the body of that request: the conversation with
	// compaction {type: summarize} and without context_management (the API does
	// not take both). Null otherwise.
	CompactionBody json.RawMessage `json:"compaction_body"`
	Decision       NativeDecision  `json:"decision"`
	// Trimmed is what was left out of the body's input (Responses) or messages
	// (Anthropic), for the host to archive; its indices are the list's.
	Trimmed NativeTrimmed `json:"trimmed"`
}

// NativeTrimmed is what a prepare trimmed: NativeTrimResult without the messages,
// which are in the body.
type NativeTrimmed struct {
	List            string            `json:"list"`
	Dropped         []NativeDropped   `json:"dropped"`
	DroppedMessages []json.RawMessage `json:"dropped_messages"`
	Rewritten       []NativeDropped   `json:"rewritten"`
	// Archive is what of this trim the host has not been handed before (the
	// session's archived keys say what it has): each dropped message, and each
	// rewritten message's original, once, with its index in the list and why.
	// A lossless engine archives it to its recall store.
	Archive []NativeArchived `json:"archive"`
	// ArchivedAs is the recall range a lossless context engine archived Archive
	// under; the op itself never sets it.
	ArchivedAs string `json:"archived_as,omitempty"`
}

// NativeArchived is one message to archive: its index in the list, why it left
// what is sent, and the message as it was.
type NativeArchived struct {
	Index   int             `json:"index"`
	Reason  string          `json:"reason"`
	Message json.RawMessage `json:"message"`
}

// compactEditType is the context-management edit of Anthropic's server-side
// compaction; the host's other edits (clear_tool_uses, clear_thinking) are its own.
const compactEditType = "compact_20260112"

// nativePrepare applies NativePolicy's decision to a request body: the OpenAI
// field set or removed (an array context_management, OpenAI's shape, is removed
// from every other route too), Anthropic's compaction edit merged into the host's edits
// (replacing one already there, or removed when not to be sent), and the body's
// input or messages trimmed of other issuers' compaction items and of what
// precedes the newest one.
func nativePrepare(cfg Config, route NativeRoute, s NativeSession, body gjson.Result, tokens int, manual bool) (NativePrepared, error) {
	d := NativePolicy(cfg, route, s, tokens, manual)
	p := NativePrepared{Betas: d.Betas, Decision: d,
		Trimmed: NativeTrimmed{Dropped: []NativeDropped{}, DroppedMessages: []json.RawMessage{}, Rewritten: []NativeDropped{},
			Archive: []NativeArchived{}}}
	raw := body.Raw
	var err error
	// The policy's keys are plain top-level names (context_management): usable as
	// sjson paths as they are.
	for _, k := range d.Remove {
		if raw, err = sjson.Delete(raw, k); err != nil {
			return p, errorf(CodeInternal, "/body", "removing %s: %v", k, err)
		}
	}
	if cm := fieldOf(gjson.Parse(raw), "context_management"); cm.IsArray() && d.Route != RouteOpenAI && d.Route != RouteCodex {
		// OpenAI's shape of the field, on a route that never takes it (some stall on
		// it): a body prepared for an OpenAI route and reused after a route change.
		raw, _ = sjson.Delete(raw, "context_management")
	}
	if d.Route == RouteAnthropic {
		if cfg.Compression.Native.AnthropicNative != AnthropicNativeOff { // off: the host's edits, untouched
			raw = mergeCompactEdit(raw, d.Body["context_management"])
		}
	} else {
		for k, v := range d.Body {
			b, _ := marshal(v)
			if raw, err = sjson.SetRaw(raw, k, string(b)); err != nil {
				return p, errorf(CodeInternal, "/body", "setting %s: %v", k, err)
			}
		}
	}
	list := "messages"
	if in := fieldOf(gjson.Parse(raw), "input"); in.IsArray() {
		list = "input"
	}
	if msgs := fieldOf(gjson.Parse(raw), list); msgs.IsArray() {
		format := nativeFormatOf(msgs)
		switch {
		case list == "input":
			format = FormatResponses
		case d.Route == RouteAnthropic:
			format = FormatAnthropic
		}
		if _, err := checkItems(msgs, "/body/"+list); err != nil {
			return p, err
		}
		t := trimNative(msgs, format, d.Session, d.Route, true, 0, "")
		if t.Changed {
			parts := make([]string, len(t.Messages))
			for i, m := range t.Messages {
				parts[i] = string(m)
			}
			raw, _ = sjson.SetRaw(raw, list, "["+strings.Join(parts, ",")+"]")
		}
		p.Trimmed = NativeTrimmed{List: list, Dropped: t.Dropped, DroppedMessages: t.DroppedMessages, Rewritten: t.Rewritten,
			Archive: toArchive(&p.Decision.Session, msgs, t)}
	}
	p.Body = json.RawMessage(raw)
	if d.CompactNow && d.Mechanism == MechanismAnthropicOnDemand {
		cb, _ := sjson.Delete(raw, "context_management")
		req, _ := marshal(d.CompactionRequest["compaction"])
		cb, _ = sjson.SetRaw(cb, "compaction", string(req))
		p.CompactionBody = json.RawMessage(cb)
	}
	return p, nil
}

// toArchive returns what of trim t the host has not been handed for archiving,
// and records it in the session: what precedes the newest compaction item goes
// under that item's key (a host resending its history drops it again every turn),
// anything else under its own key.
func toArchive(s *NativeSession, input gjson.Result, t NativeTrimResult) []NativeArchived {
	compactionKey := func(v gjson.Result) string {
		if isCompaction(v) {
			return nativeItemKey(v)
		} else if at := anthropicCompactionAt(v); at >= 0 {
			return nativeItemKey(fieldOf(v, "content").Array()[at])
		}
		return ""
	}
	newest := ""
	for _, m := range t.Messages {
		if k := compactionKey(gjson.ParseBytes(m)); k != "" {
			newest = k
		}
	}
	handed := map[string]bool{}
	for _, k := range s.Archived {
		handed[k] = true
	}
	// What precedes a compaction item already handed over was archived with it.
	covered := 0
	for i, m := range input.Array() {
		if k := compactionKey(m); k != "" && handed[k] {
			covered = i
		}
	}
	out, added := []NativeArchived{}, []string{}
	take := func(index int, reason string, msg json.RawMessage) {
		key := newest
		if reason != "before_compaction" || key == "" {
			key = nativeItemKey(gjson.ParseBytes(msg))
		}
		if handed[key] || index < covered {
			return
		}
		out = append(out, NativeArchived{Index: index, Reason: reason, Message: msg})
		if !slices.Contains(added, key) {
			added = append(added, key)
		}
	}
	for i, d := range t.Dropped {
		take(d.Index, d.Reason, t.DroppedMessages[i])
	}
	for _, r := range t.Rewritten {
		take(r.Index, r.Reason, r.Original)
	}
	s.Archived = append(s.Archived, added...)
	slices.SortFunc(out, func(a, b NativeArchived) int { return a.Index - b.Index })
	return out
}

// mergeCompactEdit returns body with Anthropic's compaction edit in
// context_management.edits replaced by want (a {"edits": [edit]} object), or
// removed when want is nil; the host's other edits stay, and a context_management
// left with no edits and nothing else goes.
func mergeCompactEdit(body string, want any) string {
	cm := fieldOf(gjson.Parse(body), "context_management")
	edits := []string{}
	if cm.IsObject() {
		fieldOf(cm, "edits").ForEach(func(_, e gjson.Result) bool {
			if fieldOf(e, "type").Str != compactEditType {
				edits = append(edits, e.Raw)
			}
			return true
		})
	} else if cm.Exists() && want == nil {
		return body // not Anthropic's shape: the host's, left alone
	}
	if w, ok := want.(map[string]any); ok {
		for _, e := range w["edits"].([]any) {
			b, _ := marshal(e)
			edits = append(edits, string(b))
		}
	}
	if !cm.Exists() && len(edits) == 0 {
		return body
	}
	obj := cm.Raw
	if !cm.IsObject() {
		obj = "{}"
	}
	obj, _ = sjson.SetRaw(obj, "edits", "["+strings.Join(edits, ",")+"]")
	if len(edits) == 0 && len(gjson.Parse(obj).Map()) == 1 {
		out, _ := sjson.Delete(body, "context_management")
		return out
	}
	out, _ := sjson.SetRaw(body, "context_management", obj)
	return out
}

func opNativePrepare(req opRequest) ([]byte, error) {
	cfg, route, s, err := nativeParams(req)
	if err != nil {
		return nil, err
	}
	tokens, manual, err := nativeAsk(req)
	if err != nil {
		return nil, err
	}
	body := req.Field("body")
	if !body.IsObject() {
		return nil, errorf(CodeInvalidRequest, "/body", "body must be the request body object the host is about to send")
	}
	p, err := nativePrepare(cfg, route, s, body, tokens, manual)
	if err != nil {
		return nil, err
	}
	return marshal(p)
}
