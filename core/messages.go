package core

import (
	"strings"

	"github.com/tidwall/gjson"
)

// SummaryPrefix starts every summary message the compressor writes (DESIGN §8).
// It is how a later compaction finds the previous summary in the messages (§8.6).
const SummaryPrefix = "[CONTEXT COMPACTION]"

// message is the core's view of one chat message. raw is the exact input JSON;
// nothing is re-serialized unless a phase changes the message.
type message struct {
	raw     string
	role    string
	content gjson.Result
	// calls are the tool calls an assistant message makes (OpenAI tool_calls).
	calls []toolCall
	// resultFor is the tool_call_id a tool row answers ("" if absent).
	resultFor string
	tokens    int
}

type toolCall struct {
	id, name string
	args     gjson.Result
}

// isToolResult reports whether m carries a tool result, so that it belongs to the
// group of the assistant message that made the call.
func (m *message) isToolResult() bool { return m.role == "tool" }

// isSystem reports whether m is a system-level instruction.
func (m *message) isSystem() bool { return m.role == "system" || m.role == "developer" }

// isSummary reports whether m is a summary written by an earlier compaction.
func (m *message) isSummary() bool {
	return strings.HasPrefix(strings.TrimLeft(firstText(m.content), " \n"), SummaryPrefix)
}

// isRealUser reports whether m is a request typed by the user: role user and not a
// compaction summary.
func (m *message) isRealUser() bool { return m.role == "user" && !m.isSummary() }

// firstText returns the text of a string content or of its first text part.
func firstText(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.Str
	}
	if content.IsArray() {
		var s string
		content.ForEach(func(_, p gjson.Result) bool {
			if p.Get("type").Str == "text" {
				s = p.Get("text").Str
				return false
			}
			return true
		})
		return s
	}
	return ""
}

// contentText returns all text of a content value, parts joined by newlines.
func contentText(content gjson.Result) string {
	switch {
	case content.Type == gjson.String:
		return content.Str
	case content.IsArray():
		var b strings.Builder
		content.ForEach(func(_, p gjson.Result) bool {
			var t string
			switch p.Get("type").Str {
			case "text", "input_text", "output_text":
				t = p.Get("text").Str
			case "image_url", "image", "input_image":
				t = "[image]"
			case "tool_result":
				t = contentText(p.Get("content"))
			}
			if t != "" {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(t)
			}
			return true
		})
		return b.String()
	}
	return ""
}

var knownRoles = []string{"system", "developer", "user", "assistant", "tool"}

// parseMessages reads the "messages" array of a request into views, estimating each
// message's tokens once with tc. Structural problems (not an array, a message that
// is not an object, an unknown role, a content of the wrong type, malformed
// tool_calls) are invalid_messages errors with a JSON-pointer path; broken tool
// pairing is not an error here: compaction repairs it and validate reports it.
func parseMessages(v gjson.Result, tc tokenCounter) ([]message, error) {
	if !v.Exists() {
		return nil, errorf(CodeInvalidMessages, "/messages", "messages is required: an array of chat messages")
	}
	if !v.IsArray() {
		return nil, errorf(CodeInvalidMessages, "/messages", "messages must be an array of chat messages")
	}
	msgs := make([]message, 0, 64)
	var err error
	v.ForEach(func(_, mv gjson.Result) bool {
		i := len(msgs)
		var m message
		m, err = parseMessage(mv, pointer("/messages", i))
		if err != nil {
			return false
		}
		m.tokens = tc.message(mv)
		msgs = append(msgs, m)
		return true
	})
	return msgs, err
}

func parseMessage(mv gjson.Result, path string) (message, error) {
	m := message{raw: mv.Raw}
	if !mv.IsObject() {
		return m, errorf(CodeInvalidMessages, path, "a message must be a JSON object")
	}
	var err error
	var calls gjson.Result
	mv.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "role":
			if v.Type != gjson.String {
				err = errorf(CodeInvalidMessages, path+"/role", "role must be a string")
			}
			m.role = v.Str
		case "content":
			if v.Type != gjson.String && v.Type != gjson.Null && !v.IsArray() {
				err = errorf(CodeInvalidMessages, path+"/content", "content must be a string, null or an array of parts")
			}
			m.content = v
		case "tool_calls":
			calls = v
		case "tool_call_id":
			if v.Type == gjson.String {
				m.resultFor = v.Str
			}
		}
		return err == nil
	})
	if err != nil {
		return m, err
	}
	if m.role == "" {
		return m, errorf(CodeInvalidMessages, path+"/role", "role is required (one of %s)", strings.Join(knownRoles, ", "))
	}
	if !contains(knownRoles, m.role) {
		return m, errorf(CodeInvalidMessages, path+"/role", "unknown role %q; allowed: %s", m.role, strings.Join(knownRoles, ", "))
	}
	if calls.Exists() && calls.Type != gjson.Null {
		if !calls.IsArray() {
			return m, errorf(CodeInvalidMessages, path+"/tool_calls", "tool_calls must be an array")
		}
		calls.ForEach(func(_, c gjson.Result) bool {
			cp := pointer(path+"/tool_calls", len(m.calls))
			if !c.IsObject() {
				err = errorf(CodeInvalidMessages, cp, "a tool call must be an object")
				return false
			}
			fn := c.Get("function")
			m.calls = append(m.calls, toolCall{id: c.Get("id").Str, name: fn.Get("name").Str, args: fn.Get("arguments")})
			return true
		})
	}
	return m, err
}
