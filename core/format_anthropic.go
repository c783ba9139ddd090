package core

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// messagesFormat is Anthropic Messages (FormatAnthropic): an assistant turn's
// tool_use blocks are answered by tool_result blocks of the one user turn after it,
// and the system prompt is the request's top-level "system".
type messagesFormat struct{ chatReader }

func (messagesFormat) name() Format { return FormatAnthropic }

// read reads the messages and marks a provider compaction's boundary (markTurns).
func (f messagesFormat) read(v gjson.Result, tc tokenCounter, known *jsonraw.ArrayParts) ([]message, error) {
	msgs, err := f.chatReader.read(v, tc, known)
	if err == nil {
		f.markTurns(msgs)
	}
	return msgs, err
}

// markTurns makes everything through the newest message holding a compaction
// block (Anthropic's server-side summary, native.go) one unit of the head: the API
// reads the conversation from that block on, so the local compressor never
// summarizes or splits it.
func (messagesFormat) markTurns(msgs []message) {
	newest := -1
	for i := range msgs {
		if strings.Contains(msgs[i].raw, `"compaction"`) && anthropicCompactionAt(gjson.Parse(msgs[i].raw)) >= 0 {
			newest = i
		}
	}
	for i := 0; i <= newest; i++ {
		msgs[i].continuesTurn = true
	}
}
func (messagesFormat) topLevelSystem() bool { return true }

// joinsPrevious: results join their call's group; calls are in the assistant turn.
func (messagesFormat) joinsPrevious(m *message) bool { return m.kind() == kindResult }

func (messagesFormat) resultsCloseGroup() bool { return true }

// checkMessages: the format has only user and assistant turns.
func (messagesFormat) checkMessages(msgs []message) error {
	for i := range msgs {
		if role := msgs[i].role; role != "user" && role != "assistant" {
			return errorf(CodeInvalidMessages, pointer("/messages", i, "role"), "the Anthropic layout has only user and assistant messages (got %q); the system prompt goes in system", role)
		}
	}
	return nil
}

// prunable: a user turn with tool_result blocks longer than pruneMinChars characters
// (together), not yet pruned.
func (messagesFormat) prunable(m *message) (int, bool) {
	if len(m.results) == 0 {
		return 0, false
	}
	chars := 0
	forEachLongResult(m, func(_, _ string, n int) { chars += n })
	return chars, chars > 0
}

// pruned gives each long tool_result block's content a placeholder.
func (messagesFormat) pruned(m *message, calls callIndex, _ int) string {
	var content strings.Builder
	done := 0 // m.contentRaw[:done] is written
	forEachLongResult(m, func(c, id string, n int) {
		off := jsonraw.OffsetOf(m.contentRaw, c)
		content.WriteString(m.contentRaw[done:off])
		content.WriteString(setString(placeholder(calls, id, n)))
		done = off + len(c)
	})
	content.WriteString(m.contentRaw[done:])
	return splice(m.raw, m.contentRaw, content.String())
}

// forEachLongResult calls fn with each tool_result block of an Anthropic message
// whose content is longer than pruneMinChars characters and not yet pruned, with
// that content's raw JSON (in the block, in m.contentRaw).
func forEachLongResult(m *message, fn func(content, id string, chars int)) {
	jsonraw.ForEachElement(m.contentRaw, func(block string) bool {
		if block[0] != '{' || jsonraw.DecodeString(jsonraw.FindField(block, "type")) != "tool_result" {
			return true
		}
		c := jsonraw.FindField(block, "content")
		var n int
		switch {
		case len(c) <= pruneMinChars+2 || strings.HasPrefix(c, `"`+PrunedPrefix):
			return true
		case c[0] == '"':
			n = jsonraw.CountChars(c)
		default:
			n = utf8.RuneCountInString(contentText(gjson.Parse(c)))
		}
		if n > pruneMinChars {
			fn(c, jsonraw.DecodeString(jsonraw.FindField(block, "tool_use_id")), n)
		}
		return true
	})
}

// fixResults takes the orphan tool_result blocks out of the user turn and puts stub
// blocks for the missing ones first; the turn is removed when no block is left.
func (messagesFormat) fixResults(raw string, missing, orphans []string) (string, bool) {
	fixed := withResultBlocks(raw, missing, orphans)
	return fixed, fieldIn(fixed, "content").Get("#").Int() > 0
}

// stubResults: stub tool_result blocks go first in the next user turn, or in a new
// user turn when the next message is not one.
func (messagesFormat) stubResults(ids []string, next *outMsg) (added []string, into string) {
	if next != nil && next.view.role == "user" {
		return nil, withResultBlocks(next.raw, ids, nil)
	}
	return []string{withResultBlocks(`{"role":"user","content":[]}`, ids, nil)}, ""
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

// cacheMarks: cache_control markers on content parts (docs/DESIGN.md §9).
func (messagesFormat) cacheMarks() cacheMarks { return blockMarks{} }

func (messagesFormat) summaryMessage(role, text string) string { return roleTextMessage(role, text) }
func (messagesFormat) mergeSummary(raw, text, role string) string {
	return mergeSummary(raw, text, role)
}

// takesMergedSummary reports whether the summary may be merged into m: not into an
// assistant turn with thinking or redacted_thinking blocks. With extended thinking,
// an assistant turn that a tool_result continues must come back as it was written,
// starting with its (signed) thinking block, or the API refuses the request
// (platform.claude.com, Extended thinking: "Preserving thinking blocks"); the
// summary is then its own user message after the head's user message, which the
// API joins into one user turn (Messages API: consecutive turns of one role are
// combined).
func (messagesFormat) takesMergedSummary(m *message) bool {
	if m.role != "assistant" || len(m.contentRaw) == 0 || m.contentRaw[0] != '[' {
		return true
	}
	thinking := false
	jsonraw.ForEachElement(m.contentRaw, func(part string) bool {
		switch jsonraw.DecodeString(jsonraw.FindField(part, "type")) {
		case "thinking", "redacted_thinking":
			thinking = true
		}
		return !thinking
	})
	return !thinking
}

// withSystemNote: the format has no system messages (checkMessages); its system
// prompt is the top-level one (systemWithNote).
func (messagesFormat) withSystemNote(*message) (string, bool) { return "", false }

// systemWithNote returns the top-level system prompt (a string or a list of blocks)
// with SystemNote appended, or false when the note is already there.
func (messagesFormat) systemWithNote(sys gjson.Result) (string, bool) {
	if strings.Contains(contentText(sys), strings.TrimSpace(SystemNote)) {
		return "", false
	}
	if sys.Type == gjson.String {
		b, _ := marshal(sys.Str + SystemNote)
		return string(b), true
	}
	block, _ := marshal(map[string]string{"type": "text", "text": strings.TrimPrefix(SystemNote, "\n\n")})
	items := strings.TrimSpace(sys.Raw[1 : len(sys.Raw)-1])
	if items != "" {
		items += ","
	}
	return "[" + items + string(block) + "]", true
}

// validateResults lints a user turn with tool_result blocks: each answers a
// tool_use of the assistant turn before it, and the turn closes the group.
func (messagesFormat) validateResults(v *validation, m *message, _ gjson.Result, path string) bool {
	if m.role != "user" && m.role != "assistant" {
		v.add(ProblemInvalidMessage, path+"/role", "the Anthropic layout has only user and assistant messages (got "+strconv.Quote(m.role)+"); the system prompt goes in system")
		return true
	}
	if len(m.results) == 0 {
		return false
	}
	for _, id := range m.results {
		if !v.answer(id) {
			v.add(ProblemOrphanToolResult, path+"/content", "tool_result "+strconv.Quote(id)+" does not answer a tool_use of the assistant message before it")
		}
	}
	v.closeGroup()
	return true
}

// callPath: tool_use blocks are in the content.
func (messagesFormat) callPath(_ *message, path string, _ int) string { return path + "/content" }

// validateCall: a name, and an input that is an object.
func (messagesFormat) validateCall(v *validation, c *toolCall, cp string) {
	switch {
	case c.name == "":
		v.add(ProblemMissingToolName, cp, "a tool_use block needs a name")
	case !c.args.IsObject():
		v.add(ProblemInvalidToolArguments, cp, "a tool_use block's input must be an object")
	}
}
