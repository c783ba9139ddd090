package core

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// chatFormat is OpenAI chat completions (FormatOpenAI): an assistant message's
// tool_calls are answered by the role "tool" rows after it, one per call, each
// naming its call by tool_call_id.
type chatFormat struct{ chatReader }

// chatReader reads the chat formats' shared envelope, {role, content, ...}: both
// OpenAI chat and Anthropic Messages (messages.go).
type chatReader struct{}

func (chatReader) read(v gjson.Result, tc tokenCounter, known *jsonraw.ArrayParts) ([]message, error) {
	return parseMessages(v, tc, known)
}

func (chatReader) readOne(raw, path string) (message, error) {
	return parseMessage(gjson.Parse(raw), path)
}

// checkSystem: a string or a list of content blocks (Anthropic's top-level system).
func (chatReader) checkSystem(sys gjson.Result, tc tokenCounter) (int, error) {
	if sys.Type != gjson.String && !sys.IsArray() {
		return 0, errorf(CodeInvalidRequest, "/system", "system must be a string or an array of content blocks")
	}
	return tc.content(sys) + messageOverheadTokens, nil
}

func (chatReader) countItem(tc tokenCounter, raw string) int { return tc.message(gjson.Parse(raw)) }

func (chatFormat) name() Format                  { return FormatOpenAI }
func (chatFormat) topLevelSystem() bool          { return false }
func (chatFormat) checkMessages([]message) error { return nil }

// joinsPrevious: results join their call's group; calls are in the assistant turn.
func (chatFormat) joinsPrevious(m *message) bool { return m.kind() == kindResult }

func (chatFormat) resultsCloseGroup() bool { return false }

// prunable: a tool row whose content is longer than pruneMinChars characters and not
// already a placeholder. A raw string of at most pruneMinChars bytes is too short
// whatever it holds, so most short outputs are decided without counting.
func (chatFormat) prunable(m *message) (int, bool) {
	raw := m.contentRaw
	if !m.isToolResult() || len(raw) <= pruneMinChars+2 || strings.HasPrefix(raw, `"`+PrunedPrefix) {
		return 0, false
	}
	var chars int
	if raw[0] == '"' {
		chars = m.contentChars()
	} else {
		text := m.text()
		if strings.HasPrefix(text, PrunedPrefix) {
			return 0, false
		}
		chars = utf8.RuneCountInString(text)
	}
	return chars, chars > pruneMinChars
}

// pruned splices the placeholder in where the content was read.
func (chatFormat) pruned(m *message, calls callIndex, chars int) string {
	return splice(m.raw, m.contentRaw, setString(placeholder(calls, m.resultFor, chars)))
}

// fixResults: a tool row answers one call, so an orphan row is removed whole.
func (chatFormat) fixResults(raw string, _, orphans []string) (string, bool) {
	return raw, len(orphans) == 0
}

// stubResults: one tool row per missing result, at the end of the group.
func (chatFormat) stubResults(ids []string, _ *outMsg) (added []string, into string) {
	for _, id := range ids {
		raw, _ := marshal(map[string]string{"role": "tool", "tool_call_id": id, "content": stubResultText})
		added = append(added, string(raw))
	}
	return added, ""
}

// cacheMarks: cache_control markers on content parts (docs/DESIGN.md §9).
func (chatFormat) cacheMarks() cacheMarks { return blockMarks{} }

func (chatFormat) summaryMessage(role, text string) string    { return roleTextMessage(role, text) }
func (chatFormat) mergeSummary(raw, text, role string) string { return mergeSummary(raw, text, role) }
func (chatFormat) withSystemNote(m *message) (string, bool)   { return withSystemNote(m) }

// systemWithNote: the chat format's system prompt is a message (withSystemNote).
func (chatFormat) systemWithNote(gjson.Result) (string, bool) { return "", false }

// validateResults lints a tool row: it names the call it answers, a pending one.
func (chatFormat) validateResults(v *validation, m *message, mv gjson.Result, path string) bool {
	if !m.isToolResult() {
		return false
	}
	if !fieldOf(mv, "tool_call_id").Exists() || m.resultFor == "" {
		v.add(ProblemMissingToolCallID, path+"/tool_call_id", "a tool message needs the tool_call_id of the call it answers")
		return true
	}
	if !v.answer(m.resultFor) {
		v.add(ProblemOrphanToolResult, path, "tool result "+strconv.Quote(m.resultFor)+" does not answer a pending call of the assistant message before it")
	}
	return true
}

func (chatFormat) callPath(_ *message, path string, k int) string {
	return pointer(path+"/tool_calls", k)
}

// validateCall: a function name, and arguments that are a string holding JSON.
func (chatFormat) validateCall(v *validation, c *toolCall, cp string) {
	if c.name == "" {
		v.add(ProblemMissingToolName, cp+"/function/name", "a tool call needs a function name")
	}
	if c.args.Type != gjson.String || !gjson.Valid(c.argsText()) {
		v.add(ProblemInvalidToolArguments, cp+"/function/arguments", "function.arguments must be a string holding JSON")
	}
}

// roleTextMessage is the message {"role": role, "content": text}, the shape both chat
// formats give a summary.
func roleTextMessage(role, text string) string {
	raw, _ := marshal(map[string]string{"role": role, "content": text})
	return string(raw)
}
