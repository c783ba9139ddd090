package core

import (
	"strings"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// SummaryPrefix starts every summary message the compressor writes (docs/DESIGN.md §8).
// It is how a later compaction finds the previous summary in the messages (§8.6).
const SummaryPrefix = "[CONTEXT COMPACTION]"

// message is the core's view of one chat message. raw is the exact input JSON;
// nothing is re-serialized unless a phase changes the message.
type message struct {
	raw  string
	role string
	// contentRaw is the raw JSON of "content" ("" when absent); see content.
	contentRaw string
	// calls are the tool calls an assistant message makes: OpenAI tool_calls or
	// Anthropic tool_use blocks.
	calls []toolCall
	// resultFor is the tool_call_id a tool row answers ("" if absent).
	resultFor string
	// results are the tool_use ids an Anthropic user message's tool_result blocks
	// answer.
	results []string
	// blocks is true when the content holds Anthropic tool_use or tool_result blocks.
	blocks bool
	// aiSDKParts is true when the content holds parts only AI SDK messages have
	// (tool-call, tool-result, tool-approval-*): detectFormat reads it.
	aiSDKParts bool
	// partResults is true when results holds every call a role "tool" item answers
	// (an AI SDK tool message of several parts), rather than resultFor.
	partResults bool
	// continuesTurn is true for an item that is a further part of the turn of the
	// item before it (a format whose turn spans several items: a Responses message
	// and its function_call items): counts of messages (protect_first_n,
	// protect_last_n) count a turn once. Never set in the chat formats.
	continuesTurn bool
	// opaque is true for an item the format does not read (kindOpaque): kept byte
	// for byte. Never set in the chat formats.
	opaque bool
	// pinned is true for a message a compaction keeps verbatim (pins.go).
	pinned bool
	tokens int
	// chars1 is the number of characters of a string content plus one; 0 until
	// counted (see contentChars).
	chars1 int
	// contentTokens1 is roughString of a string content plus one, when validation
	// counted it; else 0.
	contentTokens1 int
}

type toolCall struct {
	id, name string
	nameRaw  string       // the raw JSON of function.name
	args     gjson.Result // function.arguments (a string) or a tool_use input (an object), undecoded; see argsText
	raw      string       // the whole call object or tool_use block
	// argsChars1 is the number of characters of string arguments plus one; 0 until
	// counted (see argsChars). argsTokens1 is their roughString plus one, when
	// validation counted them; else 0.
	argsChars1, argsTokens1 int
	// described is describeCall's text, "" until asked for.
	described string
}

// contentChars returns the number of characters of m's string content.
func (m *message) contentChars() int {
	if m.chars1 == 0 {
		m.chars1 = jsonraw.CountChars(m.contentRaw) + 1
	}
	return m.chars1 - 1
}

// argsChars returns the number of characters of the call's string arguments.
func (c *toolCall) argsChars() int {
	if c.argsChars1 == 0 {
		c.argsChars1 = jsonraw.CountChars(c.args.Raw) + 1
	}
	return c.argsChars1 - 1
}

// rawToolCalls reads a raw tool_calls array. Elements that are not objects are
// returned with only raw set; parseMessage rejects them.
func rawToolCalls(arr string) []toolCall {
	calls, _ := readToolCalls(arr, jsonraw.SkipSpace(arr, 0), nil)
	return calls
}

// countedArguments are the "arguments" strings that checkJSON counted in array.
type countedArguments struct {
	parts *jsonraw.ArrayParts
	array string
}

// at returns the counts of the string value at s[v], when s lies in the array and
// it was counted.
func (c *countedArguments) at(s string, v int) (jsonraw.Count, bool) {
	if c == nil {
		return jsonraw.Count{}, false
	}
	off, ok := jsonraw.LocatePart(c.array, s)
	if !ok {
		return jsonraw.Count{}, false
	}
	return c.parts.CountAt(off + v)
}

// readToolCalls reads the tool_calls array that starts at s[i] in one walk (each
// call's arguments are skipped once, or not at all when counted says where they
// end) and returns its calls and the index just past it (-1 if it is not a valid
// array).
func readToolCalls(s string, i int, counted *countedArguments) ([]toolCall, int) {
	if i >= len(s) || s[i] != '[' {
		return nil, -1
	}
	var calls []toolCall
	for i++; ; {
		i = jsonraw.SkipSpace(s, i)
		if i >= len(s) {
			return calls, -1
		}
		switch s[i] {
		case ']':
			return calls, i + 1
		case ',':
			i++
			continue
		}
		var tc toolCall
		end := -1
		if s[i] == '{' {
			end = jsonraw.WalkFields(s, i, func(k string, v int) int { return tc.readField(s, k, v, counted) })
		}
		if end < 0 { // not an object: kept raw, for the caller to refuse
			end = jsonraw.SkipValue(s, i)
		}
		if end <= i {
			return calls, -1
		}
		tc.raw = s[i:end]
		calls = append(calls, tc)
		i = end
	}
}

// readField reads the field k of a tool call, whose value starts at s[v], and
// returns the index just past the value. String arguments that checkJSON counted
// (counted may be nil) are neither skipped nor counted again.
func (tc *toolCall) readField(s, k string, v int, counted *countedArguments) int {
	switch {
	case k == "id":
		end := jsonraw.SkipValue(s, v)
		tc.id = jsonraw.DecodeString(s[v:end])
		return end
	case k == "function" && s[v] == '{':
		return jsonraw.WalkFields(s, v, func(fk string, fv int) int {
			if fk == "arguments" && s[fv] == '"' {
				if n, ok := counted.at(s, fv); ok {
					end := fv + int(n.Size)
					tc.args = rawValue(s[fv:end])
					tc.argsTokens1, tc.argsChars1 = roughCounted(n)
					return end
				}
			}
			end := jsonraw.SkipValue(s, fv)
			switch fk {
			case "name":
				tc.nameRaw, tc.name = s[fv:end], jsonraw.DecodeString(s[fv:end])
			case "arguments":
				tc.args, tc.argsTokens1, tc.argsChars1 = rawValue(s[fv:end]), 0, 0
			}
			return end
		})
	}
	return jsonraw.SkipValue(s, v)
}

// content returns the decoded content value. It decodes on every call: hot paths
// read contentRaw instead.
func (m *message) content() gjson.Result {
	if len(m.contentRaw) > 0 && m.contentRaw[0] == '"' {
		return gjson.Result{Type: gjson.String, Raw: m.contentRaw, Str: jsonraw.DecodeString(m.contentRaw)}
	}
	return gjson.Parse(m.contentRaw)
}

// text returns all text of the content, decoded.
func (m *message) text() string { return rawContentText(m.contentRaw) }

// isToolResult reports whether m carries a tool result, so that it belongs to the
// group of the assistant message that made the call.
func (m *message) isToolResult() bool { return m.role == "tool" || len(m.results) > 0 }

// itemKind is what an item of a conversation is to the phases, whatever its format.
type itemKind uint8

const (
	// kindMessage is a turn of text and parts: a system, user or assistant message.
	kindMessage itemKind = iota
	// kindCall is an assistant turn that makes tool calls (calls).
	kindCall
	// kindResult is tool output answering calls of its group (answers).
	kindResult
	// kindOpaque is an item the core does not read (a format's server-side or
	// unknown item): kept byte for byte, never split from its neighbours.
	kindOpaque
)

// kind returns what m is. The chat formats have no opaque items.
func (m *message) kind() itemKind {
	switch {
	case m.opaque:
		return kindOpaque
	case m.isToolResult():
		return kindResult
	case m.role == "assistant" && len(m.calls) > 0:
		return kindCall
	}
	return kindMessage
}

// answers returns the ids of the calls m answers: its tool_call_id (OpenAI) or its
// tool_result blocks' ids (Anthropic).
func (m *message) answers() []string {
	if m.role == "tool" && !m.partResults {
		return []string{m.resultFor}
	}
	return m.results
}

// isSystem reports whether m is a system-level instruction.
func (m *message) isSystem() bool { return m.role == "system" || m.role == "developer" }

// isSummary reports whether m is a summary written by an earlier compaction.
func (m *message) isSummary() bool {
	raw := m.contentRaw
	if len(raw) > 0 && raw[0] == '"' {
		raw = raw[1:]
		for {
			switch {
			case strings.HasPrefix(raw, " "):
				raw = raw[1:]
			case strings.HasPrefix(raw, `\n`):
				raw = raw[2:]
			default:
				return strings.HasPrefix(raw, SummaryPrefix)
			}
		}
	}
	return strings.HasPrefix(strings.TrimLeft(firstTextPart(raw), " \n"), SummaryPrefix)
}

// firstTextPart is firstText of a raw content array, read by the raw walkers: the
// text of its first part whose "type" is "text" (each key's first occurrence
// counts, as gjson finds it).
func firstTextPart(arr string) (text string) {
	if len(arr) == 0 || arr[0] != '[' {
		return ""
	}
	jsonraw.ForEachElement(arr, func(part string) bool {
		if part[0] != '{' {
			return true
		}
		var typ, txt string
		var haveType bool
		jsonraw.ForEachField(part, func(k, raw string) bool {
			switch {
			case k == "type": // the last of duplicate keys, as everywhere
				typ, haveType = raw, true
			case k == "text":
				txt = raw
			}
			return true
		})
		if typ == `"text"` || haveType && typ[0] == '"' && isTextPartType(jsonraw.DecodeString(typ)) || !haveType && isGeminiText(part) {
			text = jsonraw.DecodeString(txt)
			return false
		}
		return true
	})
	return text
}

// isTextPartType reports whether a part of this type holds its text in "text":
// the chat formats' "text", the Responses input_text and output_text.
func isTextPartType(t string) bool { return t == "text" || t == "input_text" || t == "output_text" }

// isRealUser reports whether m is a request typed by the user: role user and not a
// compaction summary.
func (m *message) isRealUser() bool {
	return m.role == "user" && len(m.results) == 0 && !m.isSummary()
}

// contentText returns all text of a content value, parts joined by newlines.
func contentText(content gjson.Result) string {
	switch {
	case content.Type == gjson.String:
		return content.Str
	case content.IsArray():
		return rawContentText(content.Raw)
	}
	return ""
}

// rawContentText is contentText of raw JSON: the decoded string, or the text
// parts of an array joined by newlines (images as "[image]", tool_result blocks by
// their content's text). Of a part's duplicate keys the last is read.
func rawContentText(raw string) string {
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		return jsonraw.DecodeString(raw)
	case '[':
	default:
		return ""
	}
	var b []byte
	first, parts := "", 0
	jsonraw.ForEachElement(raw, func(part string) bool {
		if part[0] != '{' {
			return true
		}
		var typ, text, content string
		jsonraw.ForEachField(part, func(k, v string) bool {
			switch {
			case k == "type":
				typ = v
			case k == "text":
				text = v
			case k == "content":
				content = v
			}
			return true
		})
		var t string
		switch jsonraw.DecodeString(typ) {
		case "text", "input_text", "output_text":
			t = jsonraw.DecodeString(text)
		case "image_url", "image", "input_image":
			t = "[image]"
		case "tool_result":
			t = rawContentText(content)
		case "tool-result": // AI SDK: the output's text
			t = aisdkOutputText(part)
		case "":
			if typ == "" {
				t = untypedPartText(part) // Gemini parts (format_gemini.go)
			}
		}
		if t == "" {
			return true
		}
		switch parts++; parts {
		case 1:
			first = t
		case 2:
			b = append(append(append(b, first...), '\n'), t...)
		default:
			b = append(append(b, '\n'), t...)
		}
		return true
	})
	if parts < 2 {
		return first
	}
	return string(b)
}

var knownRoles = []string{"system", "developer", "user", "assistant", "tool"}

// parseMessages reads the "messages" array of a request into views, estimating each
// message's tokens once with tc. Structural problems (not an array, a message that
// is not an object, an unknown role, a content of the wrong type, malformed
// tool_calls) are invalid_messages errors with a JSON-pointer path; broken tool
// pairing is not an error here: compaction repairs it and validate reports it.
func parseMessages(v gjson.Result, tc tokenCounter, known *jsonraw.ArrayParts) ([]message, error) {
	if !v.Exists() {
		return nil, errorf(CodeInvalidMessages, "/messages", "messages is required: an array of chat messages")
	}
	if !v.IsArray() {
		return nil, errorf(CodeInvalidMessages, "/messages", "messages must be an array of chat messages")
	}
	count := 0
	if known != nil {
		count = len(known.Elements)
	}
	msgs := make([]message, 0, max(count, 16)) // count: the messages checkJSON found, if known
	// next reads the next message into its place in msgs and estimates it.
	next := func(read func(m *message, path messagePath) error) error {
		msgs = append(msgs, message{})
		m := &msgs[len(msgs)-1]
		if err := read(m, messagePath{"/messages", len(msgs) - 1}); err != nil {
			return err
		}
		if tc.exact == nil {
			m.tokens = tc.scaled(tc.roughView(m))
		} else {
			m.tokens = tc.message(rawValue(m.raw))
		}
		return nil
	}
	if known.HasFields(v.Raw) { // the validating pass found every message and its fields
		for k, raw := range known.Elements {
			fields, _ := known.FieldsOf(k)
			if err := next(func(m *message, path messagePath) error { return readMessageFields(m, known, v.Raw, raw, fields, path) }); err != nil {
				return nil, err
			}
		}
		return msgs, nil
	}
	arr := v.Raw
	for i := jsonraw.SkipSpace(arr, 0) + 1; ; { // past the '['
		i = jsonraw.SkipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return msgs, nil
		}
		if arr[i] == ',' {
			i++
			continue
		}
		err := next(func(m *message, path messagePath) (err error) {
			i, err = readMessage(m, arr, i, path)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
}

// messagePath is the JSON pointer of a message, for errors: the array's and an
// index, or (index < 0) the array's pointer alone. It is built only for an error.
type messagePath struct {
	array string
	index int
}

func (p messagePath) String() string {
	if p.index < 0 {
		return p.array
	}
	return pointer(p.array, p.index)
}

// parseMessage reads one message object; path is its JSON pointer, for errors.
func parseMessage(mv gjson.Result, path string) (m message, err error) {
	_, err = readMessage(&m, mv.Raw, jsonraw.SkipSpace(mv.Raw, 0), messagePath{path, -1})
	m.raw = mv.Raw // the value as the caller holds it
	return m, err
}

// readMessage reads into m the message object that starts at s[i], in one walk
// over its fields, and returns where it ends.
func readMessage(m *message, s string, i int, path messagePath) (end int, err error) {
	if i >= len(s) || s[i] != '{' {
		m.raw = s[i:jsonraw.SkipValue(s, i)]
		return 0, errorf(CodeInvalidMessages, path.String(), "a message must be a JSON object")
	}
	r := messageReader{m: m, path: path}
	end = jsonraw.WalkFields(s, i, func(k string, v int) int {
		if k == "tool_calls" && s[v] == '[' { // read in place: the walk needs its end
			var vEnd int
			r.parsed, vEnd = readToolCalls(s, v, nil)
			if vEnd > v {
				r.calls = s[v:vEnd]
			}
			return vEnd
		}
		vEnd := jsonraw.SkipValue(s, v)
		if vEnd <= v || !r.field(k, s[v:vEnd]) {
			return -1
		}
		return vEnd
	})
	if r.err != nil {
		return 0, r.err
	}
	if end < 0 { // unreachable on validated input; refuse rather than misread
		return 0, errorf(CodeInvalidMessages, path.String(), "a message must be a JSON object")
	}
	m.raw = s[i:end]
	return end, r.finish()
}

// readMessageFields is readMessage of a message whose fields checkJSON recorded in
// parts of array, the text of the messages: nothing is walked or skipped again, and
// a string content and string tool-call arguments come counted.
func readMessageFields(m *message, parts *jsonraw.ArrayParts, array, raw string, fields []jsonraw.ElementField, path messagePath) error {
	m.raw = raw
	if raw[0] != '{' {
		return errorf(CodeInvalidMessages, path.String(), "a message must be a JSON object")
	}
	r := messageReader{m: m, path: path}
	for i := range fields {
		f := &fields[i]
		key, value := f.Key(array), f.Value(array)
		k := key[1 : len(key)-1]
		if jsonraw.HasByte(k, '\\') {
			k = jsonraw.DecodeString(key)
		}
		if k == "tool_calls" && value[0] == '[' {
			r.parsed, _ = readToolCalls(value, 0, &countedArguments{parts, array})
			r.calls = value
			continue
		}
		if !r.field(k, value) {
			return r.err
		}
		if n, ok := parts.CountAt(int(f.ValueStart)); ok && k == "content" {
			m.contentTokens1, m.chars1 = roughCounted(n)
		}
	}
	return r.finish()
}

// messageReader holds what the fields of one message tell, as they are read.
type messageReader struct {
	m      *message
	path   messagePath
	calls  string     // the raw tool_calls
	parsed []toolCall // read from calls when it is an array
	err    error
}

// field reads one field of the message (raw is its value); false when it is invalid.
func (r *messageReader) field(k, raw string) bool {
	m := r.m
	switch k {
	case "role":
		if raw[0] != '"' {
			r.err = errorf(CodeInvalidMessages, r.path.String()+"/role", "role must be a string")
		}
		m.role = jsonraw.DecodeString(raw)
	case "content":
		if raw[0] != '"' && raw[0] != 'n' && raw[0] != '[' {
			r.err = errorf(CodeInvalidMessages, r.path.String()+"/content", "content must be a string, null or an array of parts")
		}
		m.contentRaw, m.contentTokens1, m.chars1 = raw, 0, 0
	case "tool_calls":
		r.calls, r.parsed = raw, nil
	case "tool_call_id":
		if raw[0] == '"' {
			m.resultFor = jsonraw.DecodeString(raw)
		}
	}
	return r.err == nil
}

// finish checks what the fields left to check, and reads the content's blocks and
// the tool calls.
func (r *messageReader) finish() error {
	m, path := r.m, r.path.String
	if m.role == "" {
		return errorf(CodeInvalidMessages, path()+"/role", "role is required (one of %s)", strings.Join(knownRoles, ", "))
	}
	if !contains(knownRoles, m.role) {
		return errorf(CodeInvalidMessages, path()+"/role", "unknown role %q; allowed: %s", m.role, strings.Join(knownRoles, ", "))
	}
	if len(m.contentRaw) > 0 && m.contentRaw[0] == '[' {
		readBlocks(m)
	}
	if r.calls != "" && r.calls[0] != 'n' {
		if r.calls[0] != '[' {
			return errorf(CodeInvalidMessages, path()+"/tool_calls", "tool_calls must be an array")
		}
		m.calls = r.parsed
		for k, c := range m.calls {
			if c.raw[0] != '{' {
				return errorf(CodeInvalidMessages, pointer(path()+"/tool_calls", k), "a tool call must be an object")
			}
		}
	}
	return nil
}

// readBlocks reads the Anthropic tool_use blocks of m's content as its calls and
// its tool_result blocks as the ids it answers.
func readBlocks(m *message) {
	jsonraw.ForEachElement(m.contentRaw, func(block string) bool {
		if block[0] != '{' {
			return true
		}
		var typ, id, idKey string
		var tc toolCall
		jsonraw.ForEachField(block, func(k, raw string) bool {
			switch k {
			case "type":
				typ = jsonraw.DecodeString(raw)
			case "id", "tool_use_id":
				id, idKey = jsonraw.DecodeString(raw), k
			case "name":
				tc.nameRaw, tc.name = raw, jsonraw.DecodeString(raw)
			case "input":
				tc.args = rawValue(raw)
			}
			return true
		})
		switch {
		case typ == "tool_use" && idKey == "id":
			tc.id, tc.raw = id, block
			m.calls = append(m.calls, tc)
			m.blocks = true
		case typ == "tool_result" && idKey == "tool_use_id":
			m.results = append(m.results, id)
			m.blocks = true
		case isAISDKPartType(typ):
			m.aiSDKParts = true
		}
		return true
	})
}
