package core

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// responsesFormat is OpenAI Responses input items (FormatResponses), as the types of
// openai-node 7.5.0 (src/resources/responses/responses.ts, ResponseInputItem) state
// them, and the camelCase variant the OpenAI Agents SDK for JS stores
// (@openai/agents-core 0.17.0, src/types/protocol.ts).
//
// Each item is one view:
//
//   - a message ({"type":"message", role, content, phase?} or the EasyInputMessage
//     {role, content} without a type): its role, content as the view's content.
//   - a call (function_call, custom_tool_call, computer_call, local_shell_call,
//     shell_call, apply_patch_call, program, mcp_approval_request): role
//     "assistant" with one call, whose id is call_id (callId in the Agents SDK; an
//     mcp_approval_request's own id).
//   - a result (function_call_output, custom_tool_call_output, computer_call_output,
//     local_shell_call_output, shell_call_output, apply_patch_call_output,
//     program_output, mcp_approval_response; the Agents SDK's function_call_result
//     and computer_call_result): role "tool" answering its call_id (a
//     local_shell_call_output's id, an mcp_approval_response's
//     approval_request_id), its output as the view's content.
//   - anything else (reasoning, compaction, web_search_call, file_search_call,
//     mcp_call, mcp_list_tools, image_generation_call, code_interpreter_call,
//     tool_search_call/_output, additional_tools, item_reference, the Agents SDK's
//     hosted_tool_call and unknown, and any type not known) is opaque: no role,
//     kept byte for byte; no phase rewrites it.
//
// Turns and groups (markTurns): an assistant turn is its consecutive items
// (messages of role assistant, calls, opaque items); all but the first continue the
// turn, and a turn is never split (a reasoning item stays with the call or message
// it precedes, parallel calls stay together). Results join the group before them.
// Everything up to the newest compaction item is one unit the head always keeps:
// the server has summarized it already. A compaction_trigger item is read as a
// result that answers no call, so sanitizing removes it (from every compacted or
// sanitized output; a list returned unchanged keeps it).
//
// The request's "system" is the Responses instructions (a string); a leading system
// or developer message works as in chat.
type responsesFormat struct {
	// calls records, per call id, the item type and shape of the calls read, so that
	// stub results take the call's own shape (snake or camel case, the tool's name).
	calls map[string]responsesCall
	// instructions is true once a top-level system prompt (instructions) was checked:
	// the compaction note then goes there, not into a system message.
	instructions bool
}

// responsesCall is what a stub result needs to know of its call.
type responsesCall struct {
	typ   string
	camel bool
	name  string
}

// responsesCallTypes maps each call item type to the type of its result item.
var responsesCallTypes = map[string]string{
	"function_call":        "function_call_output",
	"custom_tool_call":     "custom_tool_call_output",
	"computer_call":        "computer_call_output",
	"local_shell_call":     "local_shell_call_output",
	"shell_call":           "shell_call_output",
	"apply_patch_call":     "apply_patch_call_output",
	"program":              "program_output",
	"mcp_approval_request": "mcp_approval_response",
}

// responsesResultTypes are the result item types (the Agents SDK's names included).
var responsesResultTypes = map[string]bool{
	"function_call_output": true, "custom_tool_call_output": true, "computer_call_output": true,
	"local_shell_call_output": true, "shell_call_output": true, "apply_patch_call_output": true,
	"program_output": true, "mcp_approval_response": true,
	"function_call_result": true, "computer_call_result": true,
}

var responsesRoles = []string{"user", "assistant", "system", "developer"}

func newResponsesFormat() *responsesFormat {
	return &responsesFormat{calls: map[string]responsesCall{}}
}

func (*responsesFormat) name() Format         { return FormatResponses }
func (*responsesFormat) topLevelSystem() bool { return true }

// responsesItem is what one Responses item's fields say, as read.
type responsesItem struct {
	typ, role               string
	typRaw, roleRaw         string
	hasType, hasRole, hasID bool
	id, callID, approvalID  string
	camel                   bool // the id is under "callId" (the Agents SDK)
	name, nameRaw           string
	args                    string // the raw arguments, input, action(s), operation or code
	content, output         string // the raw content; the raw output (or result)
}

func readResponsesItem(raw string) (it responsesItem) {
	jsonraw.ForEachField(raw, func(k, v string) bool {
		switch k {
		case "type":
			it.hasType, it.typRaw = true, v
			if v[0] == '"' {
				it.typ = jsonraw.DecodeString(v)
			}
		case "role":
			it.hasRole, it.roleRaw = true, v
			if v[0] == '"' {
				it.role = jsonraw.DecodeString(v)
			}
		case "id":
			it.hasID = true
			if v[0] == '"' {
				it.id = jsonraw.DecodeString(v)
			}
		case "call_id", "callId":
			if v[0] == '"' {
				it.callID = jsonraw.DecodeString(v)
			}
			it.camel = k == "callId"
		case "approval_request_id":
			if v[0] == '"' {
				it.approvalID = jsonraw.DecodeString(v)
			}
		case "name":
			it.nameRaw = v
			if v[0] == '"' {
				it.name = jsonraw.DecodeString(v)
			}
		case "arguments", "input", "code":
			if it.args == "" {
				it.args = v
			}
		case "action", "actions", "operation":
			if it.args == "" {
				it.args = v
			}
		case "content":
			it.content = v
		case "output", "result":
			if it.output == "" {
				it.output = v
			}
		}
		return true
	})
	return it
}

// readOne reads one item into its view (without the turn marks, which need the
// items around it: see markTurns).
func (f *responsesFormat) readOne(raw, path string) (message, error) {
	raw = strings.TrimSpace(raw)
	m := message{raw: raw}
	if raw == "" || raw[0] != '{' {
		return m, errorf(CodeInvalidMessages, path, "an input item must be a JSON object")
	}
	it := readResponsesItem(raw)
	if it.hasType && it.typRaw[0] != '"' {
		return m, errorf(CodeInvalidMessages, path+"/type", "type must be a string")
	}
	switch {
	case it.typ == "message" || !it.hasType && it.hasRole:
		if !it.hasRole {
			return m, errorf(CodeInvalidMessages, path+"/role", "a message item needs a role (one of %s)", strings.Join(responsesRoles, ", "))
		}
		if it.roleRaw[0] != '"' || !contains(responsesRoles, it.role) {
			return m, errorf(CodeInvalidMessages, path+"/role", "unknown role %s; allowed: %s", it.roleRaw, strings.Join(responsesRoles, ", "))
		}
		if c := it.content; c != "" && c[0] != '"' && c[0] != '[' {
			return m, errorf(CodeInvalidMessages, path+"/content", "content must be a string or an array of content parts")
		}
		m.role, m.contentRaw = it.role, it.content
	case !it.hasType && it.hasID:
		m.opaque = true // an item_reference without its optional type
	case !it.hasType:
		return m, errorf(CodeInvalidMessages, path, "an input item needs a type (or a role, for a message)")
	case responsesCallTypes[it.typ] != "":
		id := it.callID
		if it.typ == "mcp_approval_request" {
			id = it.id
		}
		c := toolCall{id: id, name: it.name, nameRaw: it.nameRaw, args: rawValue(it.args), raw: raw}
		if it.args == "" {
			c.args = gjson.Result{}
		}
		m.role, m.calls = "assistant", []toolCall{c}
		if f != nil && f.calls != nil && id != "" {
			if _, seen := f.calls[id]; !seen {
				f.calls[id] = responsesCall{typ: it.typ, camel: it.camel, name: it.name}
			}
		}
	case responsesResultTypes[it.typ]:
		m.role, m.contentRaw = "tool", it.output
		switch it.typ {
		case "local_shell_call_output":
			m.resultFor = it.id // its id is the call's call_id
		case "mcp_approval_response":
			m.resultFor = it.approvalID
		default:
			m.resultFor = it.callID
		}
	case it.typ == "compaction_trigger":
		// Read as a result of no call: sanitizing removes it (it is never kept).
		m.role = "tool"
	default:
		m.opaque = true
		if it.typ == "reasoning" && len(it.content) > 0 && it.content[0] == '[' {
			m.contentRaw = it.content // the Agents SDK's reasoning text parts
		}
	}
	return m, nil
}

func (f *responsesFormat) read(v gjson.Result, tc tokenCounter, _ *jsonraw.ArrayParts) ([]message, error) {
	if err := checkList(v, "Responses input items"); err != nil {
		return nil, err
	}
	var msgs []message
	var err error
	jsonraw.ForEachElement(v.Raw, func(item string) bool {
		var m message
		m, err = f.readOne(item, pointer("/messages", len(msgs)))
		if err != nil {
			return false
		}
		m.raw = item
		m.tokens = f.count(tc, &m)
		msgs = append(msgs, m)
		return true
	})
	if err != nil {
		return nil, err
	}
	markResponsesTurns(msgs)
	for i := range msgs {
		if m := &msgs[i]; i > 0 && m.continuesTurn && m.kind() == kindCall && msgs[i-1].role == "assistant" {
			// One envelope per turn, as the chat rule counts an assistant message
			// with its tool calls: a further call of a turn costs its call alone.
			m.tokens = max(0, m.tokens-tc.scaled(f.envelope(tc)))
		}
	}
	return msgs, nil
}

// envelope is what one message's envelope costs: the chat rule's per-message
// overhead (exact: 3 and the role "assistant").
func (*responsesFormat) envelope(tc tokenCounter) int {
	if tc.exact == nil {
		return messageOverheadTokens
	}
	return exactMessageTokens + tc.exact.count("assistant")
}

// markTurns marks the items that continue a turn (see responsesFormat).
func (*responsesFormat) markTurns(msgs []message) { markResponsesTurns(msgs) }

func markResponsesTurns(msgs []message) {
	compaction := -1
	for i := range msgs {
		if msgs[i].opaque && responsesType(msgs[i].raw) == "compaction" {
			compaction = i
		}
	}
	for i := range msgs {
		m := &msgs[i]
		switch {
		case i <= compaction:
			m.continuesTurn = true // summarized by the server already: one unit, kept
		case i > 0 && i-1 != compaction && responsesAssistantSide(m) && responsesAssistantSide(&msgs[i-1]):
			m.continuesTurn = true
		default:
			m.continuesTurn = false
		}
	}
}

// responsesAssistantSide reports whether m is an item of an assistant turn: an
// assistant message, a call or an opaque (server-side) item.
func responsesAssistantSide(m *message) bool {
	return m.opaque || m.role == "assistant"
}

// responsesType is the type of the item raw ("" when it has none).
func responsesType(raw string) string {
	return jsonraw.DecodeString(jsonraw.FindField(raw, "type"))
}

// count estimates one item's tokens. Rough: the chat rule of its view (a call's
// arguments, a result's output, a message's content). Exact: a message or result
// as a chat message (3 + role + content), a call as an assistant message with one
// tool call, an opaque item by its JSON (a reasoning item by its text parts only: its
// encrypted_content is not text the model reads back).
func (f *responsesFormat) count(tc tokenCounter, m *message) int {
	if m.opaque {
		switch responsesType(m.raw) {
		case "reasoning": // no envelope: earlier turns' reasoning is not sent back as a message
			n := 0
			if summary := jsonraw.FindField(m.raw, "summary"); len(summary) > 0 && summary[0] == '[' {
				jsonraw.ForEachElement(summary, func(p string) bool {
					if t := jsonraw.FindField(p, "text"); t != "" {
						n += tc.value(tc.wrap(t))
					}
					return true
				})
			}
			if m.contentRaw != "" {
				n += tc.content(tc.wrap(m.contentRaw))
			}
			return tc.scaled(n)
		}
		return tc.scaled(messageOverheadTokens + tc.value(tc.wrap(m.raw)))
	}
	obj := 0 // an output object: a screenshot, the Agents SDK's {type: "text", text}
	if c := m.contentRaw; len(c) > 0 && c[0] == '{' {
		if jsonraw.DecodeString(jsonraw.FindField(c, "type")) == "computer_screenshot" {
			obj = openAIPartImageTokens(jsonraw.FindField(c, "image_url"), jsonraw.FindField(c, "detail"))
		} else {
			obj = tc.part(tc.wrap(c))
		}
	}
	if tc.exact == nil {
		return tc.scaled(tc.roughView(m) + obj)
	}
	e := tc.exact
	n := exactMessageTokens + e.count(m.role)
	if m.contentRaw != "" {
		n += tc.content(gjson.Parse(m.contentRaw))
	}
	for k := range m.calls {
		c := &m.calls[k]
		n += exactToolCallTokens + e.count(c.name) + e.value(gjson.Parse(c.args.Raw)) // args holds raw bytes only
	}
	return tc.scaled(n + obj)
}

func (f *responsesFormat) countItem(tc tokenCounter, raw string) int {
	m, _ := f.readOne(raw, "")
	m.raw = raw
	return f.count(tc, &m)
}

// checkSystem: the instructions are a string.
func (f *responsesFormat) checkSystem(sys gjson.Result, tc tokenCounter) (int, error) {
	if sys.Type != gjson.String {
		return 0, errorf(CodeInvalidRequest, "/system", "system (the Responses instructions) must be a string")
	}
	f.instructions = true
	return tc.content(sys) + messageOverheadTokens, nil
}

func (*responsesFormat) checkMessages([]message) error { return nil }

// joinsPrevious: a result joins its call's group, and an item that continues a turn
// its turn (a turn is never split).
func (*responsesFormat) joinsPrevious(m *message) bool {
	return m.continuesTurn || m.role == "tool"
}

func (*responsesFormat) resultsCloseGroup() bool { return false }

// allowsConsecutiveRoles: the Responses API takes items of one role in a row, so
// the summary is its own item, never merged into a tail item (a call item cannot
// take it).
func (*responsesFormat) allowsConsecutiveRoles() bool { return true }

// prunable: a result whose output (a string, or the text of a list of parts) is
// longer than pruneMinChars characters and not yet a placeholder (the Agents SDK's
// {type: "text", text} output too). Outputs that are not text (a
// computer_call_output's screenshot, a shell_call_output's list of stdout/stderr
// objects) are never pruned.
func (*responsesFormat) prunable(m *message) (int, bool) {
	raw := m.contentRaw
	if m.role != "tool" || len(raw) <= pruneMinChars+2 || strings.HasPrefix(raw, `"`+PrunedPrefix) {
		return 0, false
	}
	switch raw[0] {
	case '"':
		n := m.contentChars()
		return n, n > pruneMinChars
	case '{': // the Agents SDK's {type: "text", text}
		if jsonraw.DecodeString(jsonraw.FindField(raw, "type")) != "text" {
			return 0, false
		}
		text := jsonraw.DecodeString(jsonraw.FindField(raw, "text"))
		if strings.HasPrefix(text, PrunedPrefix) {
			return 0, false
		}
		n := utf8.RuneCountInString(text)
		return n, n > pruneMinChars
	case '[':
		if t := responsesType(m.raw); t == "shell_call_output" {
			return 0, false
		}
		text := m.text()
		if strings.HasPrefix(text, PrunedPrefix) {
			return 0, false
		}
		n := utf8.RuneCountInString(text)
		return n, n > pruneMinChars
	}
	return 0, false
}

// pruned replaces the output (a string, a list of parts or a text object) with the
// placeholder string.
func (*responsesFormat) pruned(m *message, calls callIndex, chars int) string {
	return splice(m.raw, m.contentRaw, setString(placeholder(calls, m.resultFor, chars)))
}

// fixResults: one result item answers one call, so an orphan is removed whole.
func (*responsesFormat) fixResults(raw string, _, orphans []string) (string, bool) {
	return raw, len(orphans) == 0
}

// responsesStubbable reports whether a call of type typ can get an honest stub
// result: a computer_call's output must be a screenshot and an
// mcp_approval_request's response an approval decision, neither of which a stub
// can be; such calls are removed instead (dropsUnanswered).
func responsesStubbable(typ string) bool {
	return typ != "computer_call" && typ != "mcp_approval_request"
}

// dropsUnanswered reports whether the call id, left without a result, is removed
// rather than stubbed.
func (f *responsesFormat) dropsUnanswered(id string) bool {
	c, ok := f.calls[id]
	return ok && !responsesStubbable(c.typ)
}

// dropsWith reports whether m, the item before a removed call, goes with it: a
// reasoning item the API rejects without the item it precedes.
func (*responsesFormat) dropsWith(m *message) bool {
	return m.opaque && responsesType(m.raw) == "reasoning"
}

// stubResults: one result item per missing result, at the end of the group, in the
// call's own type and case.
func (f *responsesFormat) stubResults(ids []string, _ *outMsg) (added []string, into string) {
	for _, id := range ids {
		c := f.calls[id]
		var raw string
		switch {
		case c.camel && (c.typ == "function_call" || c.typ == ""):
			b, _ := marshal(map[string]any{"type": "function_call_result", "name": c.name, "callId": id, "status": "completed", "output": stubResultText})
			raw = string(b)
		case c.camel:
			raw = responsesStub(c.typ, "callId", id)
		default:
			raw = responsesStub(c.typ, "call_id", id)
		}
		added = append(added, raw)
	}
	return added, ""
}

// responsesStub writes the stub result of a call of type typ (function_call when
// unknown) whose id is under key.
func responsesStub(typ, key, id string) string {
	var v map[string]any
	switch typ {
	case "local_shell_call":
		v = map[string]any{"type": "local_shell_call_output", "id": id, "output": stubResultText}
	case "shell_call":
		v = map[string]any{"type": "shell_call_output", key: id, "output": []any{map[string]any{"stdout": "", "stderr": stubResultText, "outcome": map[string]any{"type": "exit", "exit_code": 1}}}}
	case "apply_patch_call":
		v = map[string]any{"type": "apply_patch_call_output", key: id, "status": "failed", "output": stubResultText}
	case "program":
		v = map[string]any{"type": "program_output", key: id, "status": "incomplete", "result": stubResultText}
	case "custom_tool_call":
		v = map[string]any{"type": "custom_tool_call_output", key: id, "output": stubResultText}
	default:
		v = map[string]any{"type": "function_call_output", key: id, "output": stubResultText}
	}
	b, _ := marshal(v)
	return string(b)
}

// summaryMessage: a message item with a string content.
func (*responsesFormat) summaryMessage(role, text string) string {
	b, _ := marshal(map[string]string{"type": "message", "role": role, "content": text})
	return string(b)
}

// mergeSummary puts the summary before a message item's content (a text part of the
// role's kind first in a list). Never called while allowsConsecutiveRoles holds.
func (*responsesFormat) mergeSummary(raw, text, role string) string {
	partType := "input_text"
	if role == "assistant" {
		partType = "output_text"
	}
	return mergeSummaryPart(raw, text, role, partType)
}

// withSystemNote: a leading system or developer message takes the note (an
// input_text part when its content is a list), unless the instructions hold the
// system prompt.
func (f *responsesFormat) withSystemNote(m *message) (string, bool) {
	if f.instructions || m.opaque {
		return "", false
	}
	if strings.Contains(m.text(), strings.TrimSpace(SystemNote)) {
		return "", false
	}
	if c := m.content(); c.IsArray() {
		out, err := sjson.Set(m.raw, "content.-1", map[string]string{"type": "input_text", "text": strings.TrimPrefix(SystemNote, "\n\n")})
		return out, err == nil
	}
	return withSystemNote(m)
}

// systemWithNote: the instructions string with the note appended.
func (*responsesFormat) systemWithNote(sys gjson.Result) (string, bool) {
	if sys.Type != gjson.String || strings.Contains(sys.Str, strings.TrimSpace(SystemNote)) {
		return "", false
	}
	b, _ := marshal(sys.Str + SystemNote)
	return string(b), true
}

// cacheMarks: prompt_cache_breakpoint on input content parts (responsesMarks).
func (f *responsesFormat) cacheMarks() cacheMarks { return responsesMarks{f} }

// validateResults lints a result item: it names a pending call of its group.
func (*responsesFormat) validateResults(v *validation, m *message, mv gjson.Result, path string) bool {
	if m.role != "tool" {
		return false
	}
	typ := fieldOf(mv, "type").Str
	key := "/call_id"
	switch typ {
	case "compaction_trigger":
		return true // an instruction to the server; compaction never keeps it
	case "local_shell_call_output":
		key = "/id"
	case "mcp_approval_response":
		key = "/approval_request_id"
	case "function_call_result", "computer_call_result":
		key = "/callId"
	default:
		if fieldOf(mv, "callId").Exists() {
			key = "/callId"
		}
	}
	if m.resultFor == "" {
		v.add(ProblemMissingToolCallID, path+key, "a "+typ+" item needs the id of the call it answers")
		return true
	}
	if !v.answer(m.resultFor) {
		v.add(ProblemOrphanToolResult, path, typ+" "+strconv.Quote(m.resultFor)+" does not answer a pending call of the turn before it")
	}
	return true
}

// callIDKeyOf: a call's id is its call_id (callId in the Agents SDK), an
// mcp_approval_request's its id.
func (*responsesFormat) callIDKeyOf(c *toolCall) string {
	switch {
	case responsesType(c.raw) == "mcp_approval_request":
		return "id"
	case jsonraw.FindField(c.raw, "callId") != "":
		return "callId"
	}
	return "call_id"
}

// callPath: each call is its own item.
func (*responsesFormat) callPath(_ *message, path string, _ int) string { return path }

// validateCall: a function_call needs a name and arguments that are a string
// holding JSON; a custom_tool_call a name and a string input; an
// mcp_approval_request a name.
func (*responsesFormat) validateCall(v *validation, c *toolCall, cp string) {
	switch responsesType(c.raw) {
	case "function_call":
		if c.name == "" {
			v.add(ProblemMissingToolName, cp+"/name", "a function_call needs a name")
		}
		if c.args.Type != gjson.String || !gjson.Valid(c.argsText()) {
			v.add(ProblemInvalidToolArguments, cp+"/arguments", "a function_call's arguments must be a string holding JSON")
		}
	case "custom_tool_call":
		if c.name == "" {
			v.add(ProblemMissingToolName, cp+"/name", "a custom_tool_call needs a name")
		}
		if c.args.Type != gjson.String {
			v.add(ProblemInvalidToolArguments, cp+"/input", "a custom_tool_call's input must be a string")
		}
	case "mcp_approval_request":
		if c.name == "" {
			v.add(ProblemMissingToolName, cp+"/name", "an mcp_approval_request needs a name")
		}
	}
}

// responsesMarks places prompt-cache breakpoints the Responses way (gpt-5.6 and
// later; openai-node 7.5.0): "prompt_cache_breakpoint": {"mode": "explicit"} on an
// input_text, input_image or input_file part, of a message's content or of a
// function_call_output's (custom_tool_call_output's, the Agents SDK's
// function_call_result's) output. A string content or output becomes one input_text
// part carrying it. Assistant messages (output_text parts), calls, other outputs and
// opaque items carry none, nor do the instructions (a string parameter). The marker
// has no TTL of its own (the request's prompt_cache_options.ttl applies), so the ttl
// option does not change it; with prompt_cache_options.mode "implicit" (the default)
// the server writes the latest three explicit breakpoints, with "explicit" four.
type responsesMarks struct{ f *responsesFormat }

const responsesBreakpoint = `{"mode":"explicit"}`

// responsesMarkKey is the item key whose value carries markers ("" for none).
func responsesMarkKey(mv gjson.Result) string {
	switch t := fieldOf(mv, "type").Str; {
	case t == "message" || t == "" && fieldOf(mv, "role").Exists():
		if fieldOf(mv, "role").Str == "assistant" {
			return ""
		}
		return "content"
	case t == "function_call_output" || t == "custom_tool_call_output" || t == "function_call_result":
		return "output"
	}
	return ""
}

func (r responsesMarks) item(mv gjson.Result, path string) (message, gjson.Result, error) {
	m, err := r.f.readOne(mv.Raw, path)
	if key := responsesMarkKey(mv); key != "" {
		return m, fieldOf(mv, key), err
	}
	return m, gjson.Result{}, err
}

func (responsesMarks) carrier(_ string, content gjson.Result, _ string) carrier {
	return responsesCarrier(content)
}

func (responsesMarks) contentCarrier(gjson.Result, string) carrier { return carrier{} }

func responsesCarrier(content gjson.Result) carrier {
	return lastPartCarrier(content, carryString, func(p gjson.Result) bool {
		switch fieldOf(p, "type").Str {
		case "input_text":
			return fieldOf(p, "text").Str != ""
		case "input_image", "input_file":
			return true
		}
		return false
	})
}

func hasBreakpoint(raw string) bool { return strings.Contains(raw, `"prompt_cache_breakpoint"`) }

func (responsesMarks) strip(m gjson.Result) string {
	key := responsesMarkKey(m)
	if !hasBreakpoint(m.Raw) || key == "" {
		return m.Raw
	}
	return rebuildObject(m, func(k string, v gjson.Result) (string, bool) {
		if k == key {
			return stripBreakpoints(v), true
		}
		return v.Raw, true
	}, "")
}

// stripBreakpoints removes the breakpoints of a list of parts.
func stripBreakpoints(c gjson.Result) string {
	if !hasBreakpoint(c.Raw) || !c.IsArray() {
		return c.Raw
	}
	parts := make([]string, 0, 4)
	c.ForEach(func(_, p gjson.Result) bool {
		if p.IsObject() && hasBreakpoint(p.Raw) {
			parts = append(parts, rebuildObject(p, func(k string, v gjson.Result) (string, bool) {
				return v.Raw, k != "prompt_cache_breakpoint"
			}, ""))
		} else {
			parts = append(parts, p.Raw)
		}
		return true
	})
	return "[" + strings.Join(parts, ",") + "]"
}

func (responsesMarks) stripContent(content gjson.Result) string { return content.Raw }

func (responsesMarks) mark(m gjson.Result, c carrier, _ string) string {
	key := responsesMarkKey(m)
	if key == "" || c.kind == carryNone {
		return m.Raw
	}
	return rebuildObject(m, func(k string, v gjson.Result) (string, bool) {
		if k != key {
			return v.Raw, true
		}
		switch c.kind {
		case carryString:
			return `[{"type":"input_text","text":` + v.Raw + `,"prompt_cache_breakpoint":` + responsesBreakpoint + `}]`, true
		case carryPart:
			parts := make([]string, 0, 4)
			v.ForEach(func(_, p gjson.Result) bool {
				if len(parts) == c.part {
					parts = append(parts, rebuildObject(p, nil, `"prompt_cache_breakpoint":`+responsesBreakpoint))
				} else {
					parts = append(parts, p.Raw)
				}
				return true
			})
			return "[" + strings.Join(parts, ",") + "]", true
		}
		return v.Raw, true
	}, "")
}

func (responsesMarks) markContent(content gjson.Result, _ carrier, _ string) string {
	return content.Raw
}
