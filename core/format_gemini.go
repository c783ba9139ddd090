package core

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// geminiFormat is the Gemini API's contents (FormatGemini), as the types of
// googleapis/js-genai 2.18.0 (src/types.ts: Content, Part, FunctionCall,
// FunctionResponse) describe them: a list of {role: "user"|"model", parts: [...]},
// each part one of text (with thought: true for the model's thoughts), inlineData,
// fileData, functionCall {id?, name, args}, functionResponse {id?, name, response},
// and other kinds kept as they are (executableCode, codeExecutionResult, toolCall,
// toolResponse...); any part may carry a thoughtSignature. A missing role is
// "user", as the API defaults it.
//
// In the view a model turn has role "assistant" and a user turn "user", so the
// phases' role rules (the summary's role, alternation) read Gemini turns as they read
// chat ones; what is written says "model".
//
// Pairing: a model turn's functionCall parts are answered by the functionResponse
// parts of the user turn right after it, by id when the response carries one that a
// call has, else by name and order among the calls not answered by id. The view
// gives each call an id (its own, or "name#k@i" for the k-th call of that name
// without one in the turn at index i) and each response the id of the call it
// pairs with, so every phase pairs by id. To pair by name the reader of a user
// turn needs the calls of the turn before it: the format remembers them by index
// (st.turns), as read; an item read again later (a pruned or repaired turn) is read
// with its input index (newMsg), so it pairs as it did.
//
// Thought signatures (ai.google.dev/gemini-api/docs/thought-signatures) stay on
// the part they came on and are never dropped: no model turn is ever rewritten but
// for a summary merged before its parts, and a functionResponse part that carries
// one is never pruned.
type geminiFormat struct{ st *geminiState }

// geminiState is what a Gemini reader remembers of the items it read.
type geminiState struct {
	// turns holds the calls of the model turn at each index read.
	turns map[int][]geminiCall
	// calls maps a call's view id to the call, for writing stub responses.
	calls map[string]geminiCall
	// answers maps a user turn's bytes to the view ids its responses answer, as
	// first read, for repairing it (fixResults gets only the bytes). The same bytes
	// at another index pair alike but for the turn in by-name ids (name#k@i), which
	// withParts leaves out when it compares.
	answers map[string][]string
}

// geminiCall is a functionCall part as the view pairs it: its view id, its name and
// its own id ("" when it has none).
type geminiCall struct{ view, name, id string }

func newGeminiFormat() geminiFormat {
	return geminiFormat{st: &geminiState{turns: map[int][]geminiCall{}, calls: map[string]geminiCall{}, answers: map[string][]string{}}}
}

func (geminiFormat) name() Format         { return FormatGemini }
func (geminiFormat) topLevelSystem() bool { return true }

// geminiPart is what one part of a Gemini content holds, read by readGeminiPart.
type geminiPart struct {
	typ, text, thought, signature string // raw values ("" when absent)
	call, response                string // the raw functionCall / functionResponse objects
	media                         string // the raw inlineData or fileData object
}

// readGeminiPart reads the fields of a part object; of duplicate keys the last
// counts, as everywhere (JSON.parse's rule).
func readGeminiPart(part string) (p geminiPart) {
	jsonraw.ForEachField(part, func(k, raw string) bool {
		var dst *string
		switch k {
		case "type":
			dst = &p.typ
		case "text":
			dst = &p.text
		case "thought":
			dst = &p.thought
		case "thoughtSignature":
			dst = &p.signature
		case "functionCall":
			dst = &p.call
		case "functionResponse":
			dst = &p.response
		case "inlineData", "fileData":
			dst = &p.media
		}
		if dst != nil {
			*dst = raw
		}
		return true
	})
	return p
}

// readFunction reads the id and name of a functionCall or functionResponse object,
// and a functionCall's args (raw, "" when absent).
func readFunction(obj string) (id, name, nameRaw, args string) {
	jsonraw.ForEachField(obj, func(k, raw string) bool {
		switch k {
		case "id":
			if raw[0] == '"' {
				id = jsonraw.DecodeString(raw)
			}
		case "name":
			nameRaw = raw
			if raw[0] == '"' {
				name = jsonraw.DecodeString(raw)
			}
		case "args":
			args = raw
		}
		return true
	})
	return id, name, nameRaw, args
}

// indexOfPath is the index at the end of an item's JSON pointer ("/messages/7"),
// -1 when there is none.
func indexOfPath(path string) int {
	k := strings.LastIndexByte(path, '/')
	if k < 0 {
		return -1
	}
	n, err := strconv.Atoi(path[k+1:])
	if err != nil {
		return -1
	}
	return n
}

// withoutTurn is a by-name id without its turn ("read#2@7" -> "read#2"); any other
// id as it is. The responses of one turn all pair with one turn, so within a turn
// this loses nothing.
func withoutTurn(id string) string {
	k := strings.LastIndexByte(id, '@')
	if k < 0 || !strings.Contains(id[:k], "#") {
		return id
	}
	if _, err := strconv.Atoi(id[k+1:]); err != nil {
		return id
	}
	return id[:k]
}

func byNameID(name string, k, turn int) string {
	return name + "#" + strconv.Itoa(k) + "@" + strconv.Itoa(turn)
}

func (f geminiFormat) read(v gjson.Result, tc tokenCounter, _ *jsonraw.ArrayParts) ([]message, error) {
	if err := checkList(v, "Gemini contents"); err != nil {
		return nil, err
	}
	var msgs []message
	var err error
	jsonraw.ForEachElement(v.Raw, func(raw string) bool {
		var m message
		if m, err = f.readOne(raw, pointer("/messages", len(msgs))); err != nil {
			return false
		}
		m.tokens = f.countItem(tc, raw)
		msgs = append(msgs, m)
		return true
	})
	if err != nil {
		return nil, err
	}
	return msgs, nil
}

// readOne reads one content; path is its pointer, whose index pairs a user turn's
// responses with the calls of the model turn before it (see geminiFormat).
func (f geminiFormat) readOne(raw, path string) (message, error) {
	m := message{raw: raw}
	if raw == "" || raw[0] != '{' {
		return m, errorf(CodeInvalidMessages, path, "a Gemini content must be a JSON object {role, parts}")
	}
	role := "user"
	var err error
	jsonraw.ForEachField(raw, func(k, v string) bool {
		switch k {
		case "role":
			if v[0] != '"' {
				err = errorf(CodeInvalidMessages, path+"/role", "role must be a string")
				return false
			}
			role = jsonraw.DecodeString(v)
		case "parts":
			if v[0] != '[' && v[0] != 'n' {
				err = errorf(CodeInvalidMessages, path+"/parts", "parts must be an array of parts")
				return false
			}
			if v[0] == '[' {
				m.contentRaw = v
			}
		}
		return true
	})
	if err != nil {
		return m, err
	}
	switch role {
	case "model":
		m.role = "assistant"
	case "user":
		m.role = "user"
	default:
		return m, errorf(CodeInvalidMessages, path+"/role", "a Gemini content's role is \"user\" or \"model\" (got %q); the system prompt goes in system (systemInstruction)", role)
	}
	index := indexOfPath(path)
	var calls []geminiCall
	byName := map[string]int{}
	var responses []geminiCall // of a user turn: id and name, paired below
	k := 0
	jsonraw.ForEachElement(m.contentRaw, func(part string) bool {
		if part[0] != '{' {
			err = errorf(CodeInvalidMessages, pointer(path+"/parts", k), "a part must be a JSON object")
			return false
		}
		p := readGeminiPart(part)
		switch {
		case p.call != "" && p.call[0] == '{' && m.role == "assistant":
			id, name, nameRaw, args := readFunction(p.call)
			c := geminiCall{view: id, name: name, id: id}
			if id == "" {
				byName[name]++
				c.view = byNameID(name, byName[name], index)
			}
			tc := toolCall{id: c.view, name: name, nameRaw: nameRaw, raw: part}
			if args != "" {
				tc.args = rawValue(args)
			}
			m.calls = append(m.calls, tc)
			calls = append(calls, c)
		case p.call != "" && p.call[0] != '{':
			err = errorf(CodeInvalidMessages, pointer(path+"/parts", k, "functionCall"), "functionCall must be an object")
		case p.response != "" && p.response[0] != '{':
			err = errorf(CodeInvalidMessages, pointer(path+"/parts", k, "functionResponse"), "functionResponse must be an object")
		case p.response != "" && m.role == "user":
			id, name, _, _ := readFunction(p.response)
			responses = append(responses, geminiCall{name: name, id: id})
		}
		k++
		return err == nil
	})
	if err != nil {
		return m, err
	}
	if len(calls) > 0 {
		f.st.turns[index] = calls
		for _, c := range calls {
			if _, dup := f.st.calls[c.view]; !dup {
				f.st.calls[c.view] = c
			}
		}
	}
	if len(responses) > 0 {
		m.results = pairResponses(responses, f.st.turns[index-1], index-1)
		if _, seen := f.st.answers[raw]; !seen {
			f.st.answers[raw] = m.results
		}
	}
	return m, nil
}

// pairResponses returns the view ids of a user turn's responses: the id of the
// call of the turn before (calls, at index turn) each answers, by id when it has
// one a call has, else by name and order among the calls not answered by id. A
// response that answers none keeps its own id, or gets a by-name id no call has.
func pairResponses(responses, calls []geminiCall, turn int) []string {
	out := make([]string, len(responses))
	taken := make([]bool, len(calls))
	for r, resp := range responses {
		if resp.id == "" {
			continue
		}
		for c := range calls {
			if !taken[c] && calls[c].id == resp.id {
				out[r], taken[c] = calls[c].view, true
				break
			}
		}
	}
	byName := map[string]int{}
	for r, resp := range responses {
		if out[r] != "" {
			continue
		}
		for c := range calls {
			if !taken[c] && calls[c].name == resp.name && (resp.id == "" || calls[c].id == "") {
				out[r], taken[c] = calls[c].view, true
				break
			}
		}
		if out[r] == "" {
			if resp.id != "" {
				out[r] = resp.id
			} else {
				byName[resp.name]++
				out[r] = byNameID(resp.name, len(calls)+byName[resp.name], turn) // past every call's
			}
		}
	}
	return out
}

// countItem counts a content with the chat rule (tokens_exact.go) adapted: the
// message envelope (and, exactly, the role), each text part (thoughts too: they are
// sent), a functionCall as a tool call (3 or 4 + name + args as compact JSON), a
// functionResponse as each top-level field of its response (a string by its text,
// anything else as compact JSON; its name and id pair it, like a chat tool row's
// tool_call_id, and are not counted), inlineData
// and fileData at the fixed image cost, any other part as its compact JSON.
// thoughtSignature is not counted (an opaque token, like the chat formats'
// reasoning fields).
func (geminiFormat) countItem(tc tokenCounter, raw string) int {
	return tc.scaled(geminiTokens(tc, raw))
}

func geminiTokens(tc tokenCounter, raw string) int {
	n := messageOverheadTokens
	if tc.exact != nil {
		n = exactMessageTokens
	}
	jsonraw.ForEachField(raw, func(k, v string) bool {
		switch k {
		case "role":
			if tc.exact != nil {
				n += tc.value(tc.wrap(v))
			}
		case "parts":
			if v[0] == '[' {
				jsonraw.ForEachElement(v, func(part string) bool {
					n += geminiPartTokens(tc, part)
					return true
				})
			}
		}
		return true
	})
	return n
}

func geminiPartTokens(tc tokenCounter, part string) int {
	if part[0] != '{' {
		return tc.value(tc.wrap(part))
	}
	p := readGeminiPart(part)
	switch {
	case p.text != "":
		return tc.value(tc.wrap(p.text))
	case p.call != "" && p.call[0] == '{':
		_, _, nameRaw, args := readFunction(p.call)
		n := tc.callOverhead()
		if nameRaw != "" {
			n += tc.value(tc.wrap(nameRaw))
		}
		if args != "" {
			n += tc.value(tc.wrap(args))
		}
		return n
	case p.response != "" && p.response[0] == '{':
		n := 0
		jsonraw.ForEachField(p.response, func(k, v string) bool {
			switch k {
			case "response":
				if v[0] == '{' {
					jsonraw.ForEachField(v, func(_, fv string) bool {
						n += tc.value(tc.wrap(fv))
						return true
					})
				} else {
					n += tc.value(tc.wrap(v))
				}
			case "parts":
				if v[0] == '[' {
					jsonraw.ForEachElement(v, func(fp string) bool { n += geminiPartImageTokens(fp); return true })
				}
			}
			return true
		})
		return n
	case p.media != "":
		return geminiMediaTokens(p.media)
	}
	return tc.value(tc.wrap(part))
}

// checkSystem: systemInstruction is a Content object, {parts: [...]}, its role
// optional (the API ignores it).
func (geminiFormat) checkSystem(sys gjson.Result, tc tokenCounter) (int, error) {
	if !sys.IsObject() || !fieldOf(sys, "parts").IsArray() {
		return 0, errorf(CodeInvalidRequest, "/system", "system must be a Gemini systemInstruction: a Content object {\"parts\": [{\"text\": ...}]}")
	}
	bad := -1
	for k, p := range fieldOf(sys, "parts").Array() {
		if !p.IsObject() && bad < 0 {
			bad = k
		}
	}
	if bad >= 0 {
		return 0, errorf(CodeInvalidRequest, pointer("/system/parts", bad), "a part must be a JSON object")
	}
	return tc.scaled(geminiTokens(tc, sys.Raw)), nil
}

// checkMessages: the reader already refused roles other than user and model.
func (geminiFormat) checkMessages([]message) error { return nil }

// joinsPrevious: a user turn of functionResponse parts joins its model turn.
func (geminiFormat) joinsPrevious(m *message) bool { return m.kind() == kindResult }

// resultsCloseGroup: the one user turn after a model turn answers all its calls.
func (geminiFormat) resultsCloseGroup() bool { return true }

// responseText is the text a functionResponse's response holds: its "output" when
// that is a string, else the response as compact JSON.
func responseText(resp string) string {
	if resp == "" {
		return ""
	}
	if resp[0] == '{' {
		if out := jsonraw.FindField(resp, "output"); out != "" && out[0] == '"' {
			return jsonraw.DecodeString(out)
		}
	}
	return string(canonicalJSON(nil, gjson.Parse(resp)))
}

// forEachLongResponse calls fn with each functionResponse part of a Gemini user
// turn whose response is longer than pruneMinChars characters and not yet pruned,
// and that carries no thoughtSignature (such a part is never rewritten), with the
// raw response (in m.contentRaw), the view id it answers and its length.
func forEachLongResponse(m *message, fn func(resp, id, name string, chars int)) {
	r := 0
	jsonraw.ForEachElement(m.contentRaw, func(part string) bool {
		if part[0] != '{' {
			return true
		}
		p := readGeminiPart(part)
		if p.response == "" || p.response[0] != '{' {
			return true
		}
		id := ""
		if r < len(m.results) {
			id = m.results[r]
		}
		r++
		resp := jsonraw.FindField(p.response, "response")
		if p.signature != "" || len(resp) <= pruneMinChars+2 {
			return true
		}
		text := responseText(resp)
		if strings.HasPrefix(text, PrunedPrefix) {
			return true
		}
		if n := utf8.RuneCountInString(text); n > pruneMinChars {
			_, name, _, _ := readFunction(p.response)
			fn(resp, id, name, n)
		}
		return true
	})
}

// prunable: a user turn whose functionResponse parts hold long responses.
func (geminiFormat) prunable(m *message) (int, bool) {
	if len(m.results) == 0 {
		return 0, false
	}
	chars := 0
	forEachLongResponse(m, func(_, _, _ string, n int) { chars += n })
	return chars, chars > 0
}

// pruned replaces each long response with {"output": placeholder}: the API reads
// the "output" key as the function's output ("Use "output" key to specify function
// output and "error" key to specify error details", FunctionResponse.response in
// js-genai's types), so the model reads the placeholder as what the call returned.
// Every other byte of the turn is kept.
func (geminiFormat) pruned(m *message, calls callIndex, _ int) string {
	var content strings.Builder
	done := 0
	forEachLongResponse(m, func(resp, id, name string, n int) {
		off := jsonraw.OffsetOf(m.contentRaw, resp)
		content.WriteString(m.contentRaw[done:off])
		idx := calls
		if _, ok := calls[id]; !ok { // the call is not in the list: name it by the response's name
			idx = callIndex{id: &toolCall{name: name}}
		}
		content.WriteString(`{"output":` + setString(placeholder(idx, id, n)) + `}`)
		done = off + len(resp)
	})
	content.WriteString(m.contentRaw[done:])
	return splice(m.raw, m.contentRaw, content.String())
}

// stubPart is a functionResponse part answering the call of view id with the stub
// text as its error.
func (f geminiFormat) stubPart(view string) string {
	c, ok := f.st.calls[view]
	if !ok { // a by-name id: name#k@i
		c.name = view
		if k := strings.LastIndexByte(view, '#'); k >= 0 {
			c.name = view[:k]
		}
	}
	name, _ := marshal(c.name)
	text, _ := marshal(stubResultText)
	b := `{"functionResponse":{"name":` + strings.TrimSpace(string(name))
	if c.id != "" {
		id, _ := marshal(c.id)
		b += `,"id":` + strings.TrimSpace(string(id))
	}
	return b + `,"response":{"error":` + strings.TrimSpace(string(text)) + `}}}`
}

// withParts returns the content raw with the parts answering the ids in drop
// taken out (answers: the view ids of raw's responses, in order) and stub parts for
// the ids in stub put in at: after the last functionResponse part (so responses
// paired by order keep their order) or, when there is none, first.
func (f geminiFormat) withParts(raw string, answers, stub, drop []string) string {
	var parts []string
	r, insert := 0, 0
	dropped := make([]string, len(drop))
	for k, id := range drop {
		dropped[k] = withoutTurn(id)
	}
	jsonraw.ForEachElement(jsonraw.FindField(raw, "parts"), func(part string) bool {
		if part[0] == '{' && jsonraw.FindField(part, "functionResponse") != "" {
			id := ""
			if r < len(answers) {
				id = answers[r]
			}
			r++
			if contains(dropped, withoutTurn(id)) {
				return true
			}
			parts = append(parts, part)
			insert = len(parts)
			return true
		}
		parts = append(parts, part)
		return true
	})
	stubs := make([]string, 0, len(stub))
	for _, id := range stub {
		stubs = append(stubs, f.stubPart(id))
	}
	parts = append(parts[:insert], append(stubs, parts[insert:]...)...)
	joined := "[" + strings.Join(parts, ",") + "]"
	if at := jsonraw.FindField(raw, "parts"); at != "" {
		return splice(raw, at, joined)
	}
	out, err := sjson.SetRaw(raw, "parts", joined)
	if err != nil {
		return raw
	}
	return out
}

// fixResults takes the orphan responses out of the user turn and adds stubs for
// the missing ones; the turn is removed when no part is left.
func (f geminiFormat) fixResults(raw string, missing, orphans []string) (string, bool) {
	answers, ok := f.st.answers[raw]
	if !ok { // not read by this format: read alone, it pairs by its own ids and names
		m, _ := f.readOne(raw, "")
		answers = m.results
	}
	fixed := f.withParts(raw, answers, missing, orphans)
	return fixed, len(fieldIn(fixed, "parts").Array()) > 0
}

// stubResults: stub functionResponse parts go first in the next user turn, or in a
// new user turn when the next content is not one.
func (f geminiFormat) stubResults(ids []string, next *outMsg) (added []string, into string) {
	if next != nil && next.view.role == "user" {
		return nil, f.withParts(next.raw, nil, ids, nil)
	}
	return []string{f.withParts(`{"role":"user","parts":[]}`, nil, ids, nil)}, ""
}

// cacheMarks: Gemini has no prompt-cache breakpoints (its context caching is a
// separate cachedContents resource).
func (geminiFormat) cacheMarks() cacheMarks { return nil }

// summaryMessage: {"role": "user"|"model", "parts": [{"text": ...}]}.
func (geminiFormat) summaryMessage(role, text string) string {
	if role == "assistant" {
		role = "model"
	}
	r, _ := marshal(role)
	t, _ := marshal(text)
	return `{"role":` + strings.TrimSpace(string(r)) + `,"parts":[{"text":` + strings.TrimSpace(string(t)) + `}]}`
}

// mergeSummary puts the summary (and the delimiter for role, the view's) in a text
// part before the tail turn's parts; the parts themselves, and any thought
// signature on them, are kept.
func (geminiFormat) mergeSummary(raw, text, role string) string {
	delim := SummaryDelimiter
	if role == "assistant" {
		delim = assistantDelimiter
	}
	t, _ := marshal(text + delim)
	part := `{"text":` + strings.TrimSpace(string(t)) + `}`
	parts := jsonraw.FindField(raw, "parts")
	var out string
	var err error
	if parts == "" || parts[0] != '[' {
		out, err = sjson.SetRaw(raw, "parts", "["+part+"]")
	} else {
		items := strings.TrimSpace(parts[1 : len(parts)-1])
		if items != "" {
			items = "," + items
		}
		out = splice(raw, parts, "["+part+items+"]")
	}
	if err != nil {
		return raw
	}
	return out
}

// withSystemNote: the format has no system contents; its system prompt is the
// top-level systemInstruction (systemWithNote).
func (geminiFormat) withSystemNote(*message) (string, bool) { return "", false }

// systemWithNote appends SystemNote as a text part of systemInstruction, or false
// when the note is already there.
func (geminiFormat) systemWithNote(sys gjson.Result) (string, bool) {
	parts := jsonraw.FindField(sys.Raw, "parts")
	if parts == "" || parts[0] != '[' || strings.Contains(rawContentText(parts), strings.TrimSpace(SystemNote)) {
		return "", false
	}
	t, _ := marshal(strings.TrimPrefix(SystemNote, "\n\n"))
	items := strings.TrimSpace(parts[1 : len(parts)-1])
	if items != "" {
		items += ","
	}
	return splice(sys.Raw, parts, "["+items+`{"text":`+strings.TrimSpace(string(t))+`}]`), true
}

// ProblemFunctionResponseCount is a user turn whose functionResponse parts are not
// as many as the functionCall parts of the model turn before it (Gemini rejects
// the request).
const ProblemFunctionResponseCount = "function_response_count"

// validateResults lints a Gemini content: a user turn needs parts; one with
// functionResponse parts answers the calls of the model turn before it, as many as
// they are, each once.
func (geminiFormat) validateResults(v *validation, m *message, _ gjson.Result, path string) bool {
	if m.role == "user" && (m.contentRaw == "" || strings.TrimSpace(m.contentRaw[1:len(m.contentRaw)-1]) == "") {
		v.add(ProblemInvalidMessage, path+"/parts", "a Gemini content needs at least one part")
	}
	if len(m.results) == 0 {
		return false
	}
	if len(m.results) != len(v.pending) {
		v.add(ProblemFunctionResponseCount, path+"/parts", "this turn has "+strconv.Itoa(len(m.results))+" functionResponse parts for the "+strconv.Itoa(len(v.pending))+" functionCall parts of the model turn before it: Gemini needs one response per call")
	}
	k, r := 0, 0
	jsonraw.ForEachElement(m.contentRaw, func(part string) bool {
		if part[0] == '{' && jsonraw.FindField(part, "functionResponse") != "" && r < len(m.results) {
			if id := m.results[r]; !v.answer(id) {
				v.add(ProblemOrphanToolResult, pointer(path+"/parts", k, "functionResponse"), "functionResponse "+strconv.Quote(id)+" does not answer a functionCall of the model turn before it")
			}
			r++
		}
		k++
		return true
	})
	v.closeGroup()
	return true
}

// callPath: the part of the k-th call.
func (geminiFormat) callPath(m *message, path string, k int) string {
	i, calls := 0, 0
	at := -1
	jsonraw.ForEachElement(m.contentRaw, func(part string) bool {
		if part[0] == '{' && jsonraw.FindField(part, "functionCall") != "" {
			if calls == k {
				at = i
				return false
			}
			calls++
		}
		i++
		return true
	})
	return pointer(path+"/parts", at)
}

// validateCall: a name, and args that are an object when given.
func (geminiFormat) validateCall(v *validation, c *toolCall, cp string) {
	if c.name == "" {
		v.add(ProblemMissingToolName, cp+"/functionCall/name", "a functionCall needs a name")
	}
	if c.args.Exists() && !c.args.IsObject() {
		v.add(ProblemInvalidToolArguments, cp+"/functionCall/args", "a functionCall's args must be an object")
	}
}

// untypedPartText is the text rawContentText gives a part without a "type": a
// Gemini part's text (not a thought's), "[image]" or "[file]" for inlineData and
// fileData, a functionResponse's response text; "" for anything else.
func untypedPartText(part string) string {
	p := readGeminiPart(part)
	switch {
	case p.typ != "":
	case p.text != "" && p.text[0] == '"':
		if p.thought == "true" {
			return ""
		}
		return jsonraw.DecodeString(p.text)
	case p.response != "" && p.response[0] == '{':
		return responseText(jsonraw.FindField(p.response, "response"))
	case p.media != "" && p.media[0] == '{':
		if mime := jsonraw.FindField(p.media, "mimeType"); mime != "" && mime[0] == '"' && strings.HasPrefix(jsonraw.DecodeString(mime), "image/") {
			return "[image]"
		}
		return "[file]"
	}
	return ""
}

// isGeminiText reports whether a part is a Gemini text part (no "type", a string
// "text") that is not a thought.
func isGeminiText(part string) bool {
	p := readGeminiPart(part)
	return p.typ == "" && p.text != "" && p.text[0] == '"' && p.thought != "true"
}

// geminiPartImageTokens counts one part of a functionResponse's parts: its inlineData
// by Gemini's image rule, anything else at the fixed imageTokens (as before).
func geminiPartImageTokens(part string) int {
	if part != "" && part[0] == '{' {
		if media := jsonraw.FindField(part, "inlineData"); media != "" {
			return geminiMediaTokens(media)
		}
	}
	return imageTokens
}

// geminiMediaTokens counts an inlineData object {mimeType, data} by Gemini's image
// rule (docs/TOKENS.md); fileData (a URI) and unreadable data cost imageTokens.
func geminiMediaTokens(media string) int {
	data := ""
	if media != "" && media[0] == '{' {
		data = jsonraw.DecodeString(jsonraw.FindField(media, "data"))
	}
	return imageCost(imageRuleGemini, data, "")
}
