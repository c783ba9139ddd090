package core

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// aisdkFormat is the Vercel AI SDK's ModelMessage (FormatAISDK), as its own types
// declare it (vercel/ai packages/provider-utils/src/types, read at the tags ai@5.0.0
// (provider-utils 3.0.0), ai@6.0.0 (4.0.0) and ai@7.0.0 (5.0.0), and ai@4.3.0's
// packages/ai/core/prompt for the v4 shape):
//
//	{role: "system", content: string, providerOptions?}
//	{role: "user", content: string | [text | image | file], providerOptions?}
//	{role: "assistant", content: string | [text | file | reasoning | reasoning-file (v7) |
//	    custom (v7) | tool-call | tool-result | tool-approval-request (v6+)], providerOptions?}
//	{role: "tool", content: [tool-result | tool-approval-response (v6+)], providerOptions?}
//
//	tool-call        {toolCallId, toolName, input (v5+; v4: args), providerExecuted?}
//	tool-result      {toolCallId, toolName, output: {type: text | json | error-text |
//	                  error-json | content | execution-denied (v6+), value | reason}}
//	                 (v4: result, isError)
//	tool-approval-request  {approvalId, toolCallId}      in an assistant message
//	tool-approval-response {approvalId, approved, reason?} in a tool message
//
// A tool group is an assistant message's client tool calls (tool-call parts not
// providerExecuted) and the role "tool" messages after it; the SDK joins consecutive
// tool messages into one, so one message may hold several results, and results may
// come in several messages. A provider-executed call is answered inside its own
// assistant message (a tool-result part there), so it is content, not a call.
//
// What answers a client call, as the SDK's convertToLanguageModelPrompt checks it
// (MissingToolResultsError): a tool-result part with its toolCallId, or a
// tool-approval-response to a tool-approval-request for it (the SDK then runs the
// approved tool, or writes the denial, before the next model call). A call approved
// and then executed has both: the response answers it only when no tool-result in
// the list does, so neither is an orphan. Which call a response approves is said by
// the request part in an earlier assistant message; the format keeps what the list's
// messages say (aisdkState) so that one item read alone (a pruned or repaired
// message, read again) answers the same calls as it did in the list.
//
// The system prompt is a role "system" message (the SDK's own "system" option is
// the caller's to pass on): there is no top-level system here.
type aisdkFormat struct{ st *aisdkState }

// aisdkState is what the items of one list say about each other.
type aisdkState struct {
	// approvals maps approvalId to the toolCallId of tool-approval-request parts.
	approvals map[string]string
	// calls maps the toolCallId of client tool-call parts to their toolName (stubs
	// need the name: the SDK's schema requires it).
	calls map[string]string
	// resulted holds the toolCallIds answered by a tool-result part of a tool message.
	resulted map[string]bool
	// byResult and byApproval are the calls of the open group answered so far, for
	// validate.
	byResult, byApproval map[string]bool
}

func newAISDKFormat() aisdkFormat {
	return aisdkFormat{st: &aisdkState{approvals: map[string]string{}, calls: map[string]string{}, resulted: map[string]bool{}}}
}

func (aisdkFormat) name() Format         { return FormatAISDK }
func (aisdkFormat) topLevelSystem() bool { return false }

// aisdkRoles are the roles a ModelMessage has.
var aisdkRoles = []string{"system", "user", "assistant", "tool"}

// aisdkPart is what the format reads of one content part (the last of duplicate
// keys counts, as JSON.parse reads them). Values are raw JSON; "" when absent.
type aisdkPart struct {
	raw                                      string
	typ                                      string
	text, toolCallID, toolName, input, args  string
	output, result, approvalID, providerExec string
	idSet                                    bool
}

func readAISDKPart(raw string) (p aisdkPart) {
	p.raw = raw
	if raw == "" || raw[0] != '{' {
		return p
	}
	jsonraw.ForEachField(raw, func(k, v string) bool {
		switch k {
		case "type":
			p.typ = jsonraw.DecodeString(v)
		case "text":
			p.text = v
		case "toolCallId":
			p.toolCallID, p.idSet = v, true
		case "toolName":
			p.toolName = v
		case "input":
			p.input = v
		case "args":
			p.args = v
		case "output":
			p.output = v
		case "result":
			p.result = v
		case "approvalId":
			p.approvalID = v
		case "providerExecuted":
			p.providerExec = v
		}
		return true
	})
	return p
}

// id is the decoded toolCallId ("" when absent or not a string).
func (p *aisdkPart) id() string {
	if len(p.toolCallID) > 0 && p.toolCallID[0] == '"' {
		return jsonraw.DecodeString(p.toolCallID)
	}
	return ""
}

// clientCall reports whether p is a tool-call the caller's code must answer.
func (p *aisdkPart) clientCall() bool { return p.typ == "tool-call" && p.providerExec != "true" }

// forEachPart calls fn with each element of a raw content array, read, and its index.
func forEachPart(content string, fn func(k int, p *aisdkPart) bool) {
	if len(content) == 0 || content[0] != '[' {
		return
	}
	k := 0
	jsonraw.ForEachElement(content, func(raw string) bool {
		p := readAISDKPart(raw)
		more := fn(k, &p)
		k++
		return more
	})
}

// note records what an item says about the list's calls, approvals and results.
func (st *aisdkState) note(role, content string) {
	forEachPart(content, func(_ int, p *aisdkPart) bool {
		switch {
		case role == "assistant" && p.clientCall():
			st.calls[p.id()] = jsonraw.DecodeString(p.toolName)
		case role == "assistant" && p.typ == "tool-approval-request":
			st.approvals[jsonraw.DecodeString(p.approvalID)] = p.id()
		case role == "tool" && p.typ == "tool-result":
			st.resulted[p.id()] = true
		}
		return true
	})
}

// answer is the call a part of a tool message answers: a tool-result's toolCallId,
// or the call a tool-approval-response approves when no tool-result answers it. A
// response to no request of the list answers the pseudo id approvalOrphanPrefix +
// its approvalId, which no call has: sanitizing removes it as an orphan (the SDK
// throws InvalidToolApprovalError on one). A response for a provider-executed call
// answers nothing: the SDK sends it to the provider as it is.
func (st *aisdkState) answer(p *aisdkPart) (string, bool) {
	switch p.typ {
	case "tool-result":
		return p.id(), true
	case "tool-approval-response":
		aid := jsonraw.DecodeString(p.approvalID)
		id, ok := st.approvals[aid]
		if !ok {
			return approvalOrphanPrefix + aid, true
		}
		if _, call := st.calls[id]; call && !st.resulted[id] {
			return id, true
		}
	}
	return "", false
}

// approvalOrphanPrefix starts the id a tool-approval-response to no request answers.
const approvalOrphanPrefix = "approval:"

func (f aisdkFormat) read(v gjson.Result, tc tokenCounter, _ *jsonraw.ArrayParts) ([]message, error) {
	if err := checkList(v, "AI SDK model messages"); err != nil {
		return nil, err
	}
	var items []string
	jsonraw.ForEachElement(v.Raw, func(raw string) bool {
		items = append(items, raw)
		if raw[0] == '{' {
			f.st.note(jsonraw.DecodeString(jsonraw.FindField(raw, "role")), jsonraw.FindField(raw, "content"))
		}
		return true
	})
	msgs := make([]message, len(items))
	for i, raw := range items {
		m, err := f.readOne(raw, pointer("/messages", i))
		if err != nil {
			return nil, err
		}
		m.tokens = f.countItem(tc, raw)
		msgs[i] = m
	}
	return msgs, nil
}

// readOne reads one ModelMessage: its role and content, its client tool calls, and
// (a tool message) the calls it answers.
func (f aisdkFormat) readOne(raw, path string) (message, error) {
	m := message{raw: raw}
	if raw == "" || raw[0] != '{' {
		return m, errorf(CodeInvalidMessages, path, "a message must be a JSON object")
	}
	var role string
	haveRole := false
	var err error
	jsonraw.ForEachField(raw, func(k, v string) bool {
		switch k {
		case "role":
			role, haveRole = v, true
		case "content":
			if v[0] != '"' && v[0] != 'n' && v[0] != '[' {
				err = errorf(CodeInvalidMessages, path+"/content", "content must be a string or an array of parts")
			}
			m.contentRaw = v
		}
		return true
	})
	switch {
	case !haveRole:
		return m, errorf(CodeInvalidMessages, path+"/role", "role is required (one of %s)", strings.Join(aisdkRoles, ", "))
	case role[0] != '"':
		return m, errorf(CodeInvalidMessages, path+"/role", "role must be a string")
	case err != nil:
		return m, err
	}
	m.role = jsonraw.DecodeString(role)
	if !contains(aisdkRoles, m.role) {
		return m, errorf(CodeInvalidMessages, path+"/role", "unknown role %q; an AI SDK message has %s", m.role, strings.Join(aisdkRoles, ", "))
	}
	f.st.note(m.role, m.contentRaw)
	switch m.role {
	case "assistant":
		forEachPart(m.contentRaw, func(_ int, p *aisdkPart) bool {
			if p.clientCall() {
				c := toolCall{id: p.id(), raw: p.raw}
				if len(p.toolName) > 0 && p.toolName[0] == '"' {
					c.nameRaw, c.name = p.toolName, jsonraw.DecodeString(p.toolName)
				}
				if p.input != "" {
					c.args = rawValue(p.input)
				} else {
					c.args = rawValue(p.args) // v4
				}
				m.calls = append(m.calls, c)
			}
			return true
		})
	case "tool":
		m.partResults = true
		m.results = []string{}
		forEachPart(m.contentRaw, func(_ int, p *aisdkPart) bool {
			if id, ok := f.st.answer(p); ok {
				m.results = append(m.results, id)
			}
			return true
		})
		if len(m.results) > 0 {
			m.resultFor = m.results[0]
		}
	}
	return m, nil
}

// countItem counts a ModelMessage by the chat rule (tokens_exact.go), with the AI
// SDK's parts in place of chat's: text and reasoning by their text, images at the
// fixed cost, a tool-call as a chat tool call (envelope, toolName, input as JSON), a
// tool-result by its output's text (a JSON value as JSON), anything else as JSON.
func (aisdkFormat) countItem(tc tokenCounter, raw string) int {
	var role, content string
	jsonraw.ForEachField(raw, func(k, v string) bool {
		switch k {
		case "role":
			role = v
		case "content":
			content = v
		}
		return true
	})
	n := messageOverheadTokens
	if tc.exact != nil {
		n = exactMessageTokens + tc.value(tc.wrap(role))
	}
	switch {
	case content == "":
	case content[0] == '"':
		n += tc.text(tc.wrap(content))
	case content[0] == '[':
		forEachPart(content, func(_ int, p *aisdkPart) bool {
			n += aisdkPartTokens(tc, p)
			return true
		})
	}
	return tc.scaled(n)
}

func aisdkPartTokens(tc tokenCounter, p *aisdkPart) int {
	switch p.typ {
	case "text", "reasoning":
		if p.text != "" {
			return tc.value(tc.wrap(p.text))
		}
		return 0
	case "image": // {image: base64, data: URL or URL, mediaType?}
		return imageCost(tc.images, jsonraw.DecodeString(jsonraw.FindField(p.raw, "image")), "")
	case "file": // an image file part {data, mediaType: "image/..."} is an image
		if mt := jsonraw.DecodeString(jsonraw.FindField(p.raw, "mediaType")); strings.HasPrefix(mt, "image/") {
			return imageCost(tc.images, jsonraw.DecodeString(jsonraw.FindField(p.raw, "data")), "")
		}
	case "tool-call":
		args := p.input
		if args == "" {
			args = p.args
		}
		return tc.callOverhead() + tc.value(tc.wrap(p.toolName)) + tc.value(tc.wrap(args))
	case "tool-result":
		if p.output == "" {
			return tc.value(tc.wrap(p.result)) // v4
		}
		return aisdkOutputTokens(tc, p.output)
	}
	if p.raw == "" {
		return 0
	}
	return tc.value(tc.wrap(p.raw))
}

// readAISDKOutput reads a tool-result's output object {type, value, reason}: the
// type decoded, value and reason as raw JSON ("" when absent; the last of
// duplicates, as every reader).
func readAISDKOutput(output string) (typ, value, reason string) {
	jsonraw.ForEachField(output, func(k, v string) bool {
		switch k {
		case "type":
			typ = jsonraw.DecodeString(v)
		case "value":
			value = v
		case "reason":
			reason = v
		}
		return true
	})
	return typ, value, reason
}

// aisdkOutputTokens counts a tool-result's output by its value: text as text, JSON as
// JSON, content parts as a chat content list.
func aisdkOutputTokens(tc tokenCounter, output string) int {
	if output == "" || output[0] != '{' {
		return tc.value(tc.wrap(output))
	}
	typ, value, reason := readAISDKOutput(output)
	switch {
	case typ == "execution-denied":
		return tc.value(tc.wrap(reason))
	case typ == "content" && len(value) > 0 && value[0] == '[':
		return tc.content(tc.wrap(value))
	case value != "":
		return tc.value(tc.wrap(value))
	}
	return 0
}

// aisdkOutputText is the text of a tool-result part's output: a string value as
// it is, a JSON value as its JSON text, content parts' text, a denial's reason; v4's
// result likewise.
func aisdkOutputText(part string) string {
	p := readAISDKPart(part)
	out := p.output
	if out == "" {
		return jsonValueText(p.result)
	}
	if out[0] != '{' {
		return jsonValueText(out)
	}
	typ, value, reason := readAISDKOutput(out)
	switch typ {
	case "execution-denied":
		return jsonValueText(reason)
	case "content":
		return rawContentText(value)
	}
	return jsonValueText(value)
}

// jsonValueText is a raw JSON value as text: a string decoded, null or absent "",
// anything else its compact JSON.
func jsonValueText(raw string) string {
	switch {
	case raw == "" || raw[0] == 'n':
		return ""
	case raw[0] == '"':
		return jsonraw.DecodeString(raw)
	}
	return string(canonicalJSON(nil, gjson.Parse(raw)))
}

// checkSystem: unreachable (topLevelSystem is false); the system prompt is a message.
func (aisdkFormat) checkSystem(gjson.Result, tokenCounter) (int, error) {
	return 0, errorf(CodeInvalidRequest, "/system", "an AI SDK conversation has no top-level system prompt: put it in a role \"system\" message")
}

func (aisdkFormat) checkMessages([]message) error { return nil }

// joinsPrevious: tool messages join their calls' group.
func (aisdkFormat) joinsPrevious(m *message) bool { return m.kind() == kindResult }

// resultsCloseGroup: results may come in several tool messages.
func (aisdkFormat) resultsCloseGroup() bool { return false }

// prunable: a tool message whose tool-result outputs longer than pruneMinChars
// characters (each), not yet pruned, add up to its prunable size.
func (aisdkFormat) prunable(m *message) (int, bool) {
	if m.role != "tool" {
		return 0, false
	}
	chars := 0
	forEachLongOutput(m, func(_ *aisdkPart, n int) { chars += n })
	return chars, chars > 0
}

// forEachLongOutput calls fn with each tool-result part of the tool message m whose
// output is longer than pruneMinChars characters and not a placeholder already.
func forEachLongOutput(m *message, fn func(p *aisdkPart, chars int)) {
	forEachPart(m.contentRaw, func(_ int, p *aisdkPart) bool {
		if p.typ != "tool-result" || len(p.output)+len(p.result) <= pruneMinChars+2 {
			return true
		}
		text := aisdkOutputText(p.raw)
		if strings.HasPrefix(text, PrunedPrefix) {
			return true
		}
		if n := utf8.RuneCountInString(text); n > pruneMinChars {
			fn(p, n)
		}
		return true
	})
}

// pruned gives each long output a text output holding the placeholder (v4's result
// becomes the placeholder string); every other byte of the message is kept.
func (aisdkFormat) pruned(m *message, calls callIndex, _ int) string {
	var content strings.Builder
	done := 0 // m.contentRaw[:done] is written
	forEachLongOutput(m, func(p *aisdkPart, n int) {
		val := p.output
		with := `{"type":"text","value":` + setString(placeholder(calls, p.id(), n)) + `}`
		if val == "" {
			val, with = p.result, setString(placeholder(calls, p.id(), n))
		}
		off := jsonraw.OffsetOf(m.contentRaw, val)
		content.WriteString(m.contentRaw[done:off])
		content.WriteString(with)
		done = off + len(val)
	})
	content.WriteString(m.contentRaw[done:])
	return splice(m.raw, m.contentRaw, content.String())
}

// fixResults takes out of a tool message the parts answering the ids in orphans (of
// an id answered more than once, the later answers); the message is removed when no
// part is left.
func (f aisdkFormat) fixResults(raw string, _, orphans []string) (string, bool) {
	content := gjson.Get(raw, "content")
	if !content.IsArray() {
		return raw, len(orphans) == 0
	}
	total := map[string]int{}
	forEachPart(content.Raw, func(_ int, p *aisdkPart) bool {
		if id, ok := f.st.answer(p); ok {
			total[id]++
		}
		return true
	})
	drop := map[string]int{}
	for _, id := range orphans {
		drop[id]++
	}
	seen := map[string]int{}
	var kept []string
	forEachPart(content.Raw, func(_ int, p *aisdkPart) bool {
		if id, ok := f.st.answer(p); ok {
			seen[id]++
			if seen[id] > total[id]-drop[id] {
				return true
			}
		}
		kept = append(kept, p.raw)
		return true
	})
	if len(kept) == 0 {
		return raw, false
	}
	return raw[:content.Index] + "[" + strings.Join(kept, ",") + "]" + raw[content.Index+len(content.Raw):], true
}

// stubResults: one new tool message after the group, with an error-text tool-result
// for each call left without a result (the SDK joins it to the tool messages
// before it).
func (f aisdkFormat) stubResults(ids []string, _ *outMsg) (added []string, into string) {
	var b strings.Builder
	b.WriteString(`{"role":"tool","content":[`)
	for k, id := range ids {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"tool-result","toolCallId":`)
		b.WriteString(setString(id))
		b.WriteString(`,"toolName":`)
		b.WriteString(setString(f.st.calls[id]))
		b.WriteString(`,"output":{"type":"error-text","value":`)
		b.WriteString(setString(stubResultText))
		b.WriteString(`}}`)
	}
	b.WriteString(`]}`)
	return []string{b.String()}, ""
}

// summaryMessage: {"role", "content": text}, a ModelMessage as it is.
func (aisdkFormat) summaryMessage(role, text string) string    { return roleTextMessage(role, text) }
func (aisdkFormat) mergeSummary(raw, text, role string) string { return mergeSummary(raw, text, role) }

// summaryEndsTurn reports whether a user summary message between msgs[last] and
// msgs[first] would end a turn Anthropic needs whole: the cut is inside a tool
// loop (a tool message before, an assistant message after), the session holds
// reasoning parts Anthropic signed (thinking is on), and the assistant message does
// not start with one. Anthropic's turn then starts at that assistant message,
// which must start with its thinking block, or the request is refused
// (docs/RULES.md, turn_starts_without_thinking); merged into it, the summary
// leaves the turn, and its first thinking block, as they were.
func (aisdkFormat) summaryEndsTurn(msgs []message, last, first int) bool {
	if msgs[last].role != "tool" || msgs[first].role != "assistant" {
		return false
	}
	if startsWithReasoning(gjson.Parse(msgs[first].contentRaw)) {
		return false
	}
	for k := range msgs {
		if msgs[k].role != "assistant" || !strings.Contains(msgs[k].contentRaw, `"reasoning"`) {
			continue
		}
		for _, part := range gjson.Parse(msgs[k].contentRaw).Array() {
			if fieldOf(part, "type").Str == "reasoning" && fieldOf(fieldOf(part, "providerOptions"), "anthropic").Exists() {
				return true
			}
		}
	}
	return false
}

// startsWithReasoning: a content list whose first part is a reasoning part.
func startsWithReasoning(c gjson.Result) bool {
	return c.IsArray() && fieldOf(firstElement(c), "type").Str == "reasoning"
}

// withSystemNote: the note goes at the end of the system message's string content.
func (aisdkFormat) withSystemNote(m *message) (string, bool)   { return withSystemNote(m) }
func (aisdkFormat) systemWithNote(gjson.Result) (string, bool) { return "", false }

// validateResults lints a tool message: its content is a list, each tool-result
// names a pending call of the group (or one an approval answered), each
// tool-approval-response answers a tool-approval-request of the group.
func (f aisdkFormat) validateResults(v *validation, m *message, mv gjson.Result, path string) bool {
	st := f.st
	if m.role != "tool" {
		st.byResult, st.byApproval = map[string]bool{}, map[string]bool{}
		return false
	}
	if st.byResult == nil {
		st.byResult, st.byApproval = map[string]bool{}, map[string]bool{}
	}
	if !fieldOf(mv, "content").IsArray() {
		v.add(ProblemInvalidMessage, path+"/content", "a tool message's content must be an array of tool-result parts")
		return true
	}
	forEachPart(m.contentRaw, func(k int, p *aisdkPart) bool {
		pp := pointer(path+"/content", k)
		switch p.typ {
		case "tool-result":
			id := p.id()
			switch {
			case id == "":
				v.add(ProblemMissingToolCallID, pp+"/toolCallId", "a tool-result part needs the toolCallId of the call it answers")
			case v.answer(id):
				st.byResult[id] = true
			case st.byApproval[id] && !st.byResult[id]:
				st.byResult[id] = true
			default:
				v.add(ProblemOrphanToolResult, pp, "tool-result "+strconv.Quote(id)+" does not answer a pending tool-call of the assistant message before it")
			}
		case "tool-approval-response":
			aid := jsonraw.DecodeString(p.approvalID)
			id, known := st.approvals[aid]
			_, client := st.calls[id]
			switch {
			case known && !client: // a provider-executed call's: the provider's to pair
			case !known:
				v.add(ProblemOrphanToolResult, pp, "tool-approval-response "+strconv.Quote(aid)+" answers no tool-approval-request")
			case v.answer(id):
				st.byApproval[id] = true
			case st.byResult[id] && !st.byApproval[id]:
				st.byApproval[id] = true
			default:
				v.add(ProblemOrphanToolResult, pp, "tool-approval-response "+strconv.Quote(aid)+" does not answer a pending tool-call of the assistant message before it")
			}
		}
		return true
	})
	return true
}

// callPath: the k-th client tool-call part of the content.
func (aisdkFormat) callPath(m *message, path string, k int) string {
	at := -1
	forEachPart(m.contentRaw, func(i int, p *aisdkPart) bool {
		if p.clientCall() {
			if k == 0 {
				at = i
				return false
			}
			k--
		}
		return true
	})
	return pointer(path+"/content", at)
}

// idKey: a tool-call part names its id toolCallId (validate's pointers).
func (aisdkFormat) idKey() string { return "toolCallId" }

// validateCall: a toolName, and an input (v4: args).
func (aisdkFormat) validateCall(v *validation, c *toolCall, cp string) {
	if c.name == "" {
		v.add(ProblemMissingToolName, cp+"/toolName", "a tool-call part needs a toolName")
	}
	if !c.args.Exists() {
		v.add(ProblemInvalidToolArguments, cp+"/input", "a tool-call part needs an input")
	}
}

// cacheMarks: providerOptions.anthropic.cacheControl (aisdkMarks).
func (aisdkFormat) cacheMarks() cacheMarks { return aisdkMarks{} }

// aisdkMarks places prompt-cache breakpoints as @ai-sdk/anthropic reads them
// (packages/anthropic/src/convert-to-anthropic-prompt.ts and get-cache-control.ts;
// the provider's docs, "Cache Control"): providerOptions.anthropic.cacheControl on a
// part marks that part; on a message it marks the message's last part. A message
// whose last part cannot carry one (reasoning, which Anthropic refuses to mark, an
// approval part the SDK does not send) is marked on its last part that can. The
// layout does not change where: the provider converts. "cache_control" is read as
// well as "cacheControl" (the provider takes both), and stripped.
type aisdkMarks struct{}

func (aisdkMarks) carrier(_ string, content gjson.Result, _ string) carrier {
	c := lastPartCarrier(content, carryTopLevel, aisdkPartCanCarry)
	if c.kind == carryPart && c.part == int(content.Get("#").Int())-1 {
		// The provider puts a message's mark on its last part: mark the message.
		return carrier{kind: carryTopLevel}
	}
	return c
}

func aisdkPartCanCarry(p gjson.Result) bool {
	switch fieldOf(p, "type").Str {
	case "text":
		t := fieldOf(p, "text")
		return t.Type == gjson.String && t.Str != ""
	case "image", "file", "tool-call", "tool-result":
		return true
	}
	return false
}

func (aisdkMarks) contentCarrier(gjson.Result, string) carrier { return carrier{} }

// strip removes the markers of the message, its parts and their tool-result outputs,
// and the providerOptions objects that held only them.
func (aisdkMarks) strip(m gjson.Result) string {
	raw := m.Raw
	if !strings.Contains(raw, `"cacheControl"`) && !strings.Contains(raw, `"cache_control"`) {
		return raw
	}
	raw = stripProviderMarker(raw, "providerOptions")
	n := int(gjson.Get(raw, "content.#").Int())
	for i := 0; i < n; i++ {
		base := "content." + strconv.Itoa(i)
		raw = stripProviderMarker(raw, base+".providerOptions")
		raw = stripProviderMarker(raw, base+".output.providerOptions")
	}
	return raw
}

// stripProviderMarker deletes anthropic.cacheControl and anthropic.cache_control
// under the providerOptions object at path in raw, then the objects left empty.
func stripProviderMarker(raw, path string) string {
	a := gjson.Get(raw, path+".anthropic")
	if !a.IsObject() || (!fieldOf(a, "cacheControl").Exists() && !fieldOf(a, "cache_control").Exists()) {
		return raw
	}
	for _, k := range []string{"cacheControl", "cache_control"} {
		for gjson.Get(raw, path+".anthropic."+k).Exists() {
			out, err := sjson.Delete(raw, path+".anthropic."+k)
			if err != nil {
				return raw
			}
			raw = out
		}
	}
	if len(gjson.Get(raw, path+".anthropic").Map()) == 0 {
		raw, _ = sjson.Delete(raw, path+".anthropic")
		if po := gjson.Get(raw, path); po.IsObject() && len(po.Map()) == 0 {
			raw, _ = sjson.Delete(raw, path)
		}
	}
	return raw
}

func (aisdkMarks) stripContent(content gjson.Result) string { return content.Raw }

func (aisdkMarks) mark(m gjson.Result, c carrier, marker string) string {
	path := "providerOptions.anthropic.cacheControl"
	switch c.kind {
	case carryTopLevel:
	case carryPart:
		path = "content." + strconv.Itoa(c.part) + "." + path
	default:
		return m.Raw
	}
	out, err := sjson.SetRaw(m.Raw, path, marker)
	if err != nil {
		return m.Raw
	}
	return out
}

func (aisdkMarks) markContent(content gjson.Result, _ carrier, _ string) string { return content.Raw }

// hasAISDKParts reports whether a raw message list holds a part only the AI SDK has
// (tool-call, tool-result, tool-approval-request or -response), for the ops that
// detect the format without reading the list into views.
func hasAISDKParts(v gjson.Result) bool {
	found := false
	v.ForEach(func(_, m gjson.Result) bool {
		fieldOf(m, "content").ForEach(func(_, p gjson.Result) bool {
			found = isAISDKPartType(fieldOf(p, "type").Str)
			return !found
		})
		return !found
	})
	return found
}

// isAISDKPartType reports whether a part type is one only the AI SDK's messages have.
func isAISDKPartType(t string) bool {
	switch t {
	case "tool-call", "tool-result", "tool-approval-request", "tool-approval-response":
		return true
	}
	return false
}
