package core

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// Lossless recall (issue 17, docs/OPS.md "recall.*"): what the three runtimes share
// about the archive of compacted turns. A binding's store keeps the rows in SQLite
// (one schema, docs/RECALL.md); these ops decide everything else: the tool
// schemas the agent sees, the rows one compaction archives and the text search
// reads, how a query becomes an FTS5 expression or LIKE patterns, and the JSON
// strings the tools answer with. The ops are pure: no SQL, no state.

// Recall tool names.
const (
	ToolContextSearch = "context_search"
	ToolContextExpand = "context_expand"
)

// Recall limits.
const (
	recallDefaultLimit = 10
	recallMaxLimit     = 50
	// recallMaxText bounds the searchable text of one row; longer text keeps its
	// head and tail.
	recallMaxText = 64 << 10
	// recallSnippetChars is about how many characters a hit's snippet shows.
	recallSnippetChars = 200
	// recallMinFTSTerm is the shortest term (in characters) the trigram index can
	// match; shorter terms are matched by LIKE only.
	recallMinFTSTerm = 3
	// RecallMaxQueryChars, RecallMaxTerms and RecallMaxTermChars bound a search
	// query (recall.query, recall.check_call): a longer query, more terms or a
	// longer term is refused with a clear error before any store sees it. (SQLite
	// refuses a LIKE pattern of 50,000 bytes and a statement of 999+ parameters;
	// FTS5 reads a NUL as the end of its expression.)
	RecallMaxQueryChars = 4000
	RecallMaxTerms      = 32
	RecallMaxTermChars  = 1000
)

// toolDef is a tool given to the agent: its name, description and JSON schema.
type toolDef struct {
	name, description string
	parameters        string
}

var recallToolDefs = []toolDef{
	{ToolContextSearch,
		"Search the archived part of this conversation: the original messages and tool outputs that earlier compactions summarized, and the summaries themselves. Every word (or \"quoted phrase\") must appear, as a case-insensitive substring, so file paths and identifiers such as src/app.py or foo.bar match literally. Hits come newest first, each with an id to pass to context_expand.",
		`{"type":"object","properties":{"query":{"type":"string","description":"Words, paths or identifiers to find; \"quote\" a phrase to find it as one piece."},"limit":{"type":"integer","minimum":1,"maximum":50,"description":"How many hits to return (default 10, at most 50)."}},"required":["query"],"additionalProperties":false}`},
	{ToolContextExpand,
		"Get back the original archived messages, byte for byte: a range id such as r2 (everything one compaction summarized, as named in its summary) or a message id such as r2.17 (from context_search). Without max_tokens the messages come whole; with it they are cut to fit, with a note.",
		`{"type":"object","properties":{"id":{"type":"string","description":"A range id (r2) or a message id (r2.17)."},"max_tokens":{"type":"integer","minimum":1,"description":"Cut the answer to about this many tokens; omit it for the whole."}},"required":["id"],"additionalProperties":false}`},
}

// opRecallTools is recall.tools {format}: the tool schemas in the shape of format.
func opRecallTools(req opRequest) ([]byte, error) {
	b, err := appendToolSchemas([]byte(`{"tools":`), req.params.Get("format"), recallToolDefs)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// appendToolSchemas appends the JSON array of defs in the shape the request's format
// field names (openai, the default, responses or anthropic).
func appendToolSchemas(b []byte, formatField gjson.Result, defs []toolDef) ([]byte, error) {
	format := "openai"
	if v := formatField; v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.String {
			return nil, errorf(CodeInvalidRequest, "/format", "format must be a string: openai, responses or anthropic")
		}
		format = v.Str
	}
	b = append(b, '[')
	for i, t := range defs {
		if i > 0 {
			b = append(b, ',')
		}
		switch format {
		case "openai":
			b = append(b, `{"type":"function","function":{"name":`...)
			b = jsonraw.AppendString(b, t.name)
			b = append(b, `,"description":`...)
			b = jsonraw.AppendString(b, t.description)
			b = append(append(append(b, `,"parameters":`...), t.parameters...), "}}"...)
		case "responses":
			b = append(b, `{"type":"function","name":`...)
			b = jsonraw.AppendString(b, t.name)
			b = append(b, `,"description":`...)
			b = jsonraw.AppendString(b, t.description)
			b = append(append(append(b, `,"parameters":`...), t.parameters...), '}')
		case "anthropic":
			b = append(b, `{"name":`...)
			b = jsonraw.AppendString(b, t.name)
			b = append(b, `,"description":`...)
			b = jsonraw.AppendString(b, t.description)
			b = append(append(append(b, `,"input_schema":`...), t.parameters...), '}')
		default:
			return nil, errorf(CodeInvalidRequest, "/format", "format must be openai, responses or anthropic, got %q", format)
		}
	}
	return append(b, ']'), nil
}

// RecallRange is one archived range: what one compaction summarized.
type RecallRange struct {
	ID        string `json:"id"`
	FromIndex int    `json:"from_index"`
	ToIndex   int    `json:"to_index"`
	Summary   string `json:"summary"`
}

// RecallRow is one row of ctxc_messages a binding inserts.
type RecallRow struct {
	ID       string `json:"id"`
	RangeID  string `json:"range_id"`
	Position int    `json:"position"`
	Role     string `json:"role"`
	Reason   string `json:"reason"`
	// JSON is the original message, byte for byte as the compaction's input had it.
	JSON string `json:"json"`
	// Text is what search reads (recallText).
	Text string `json:"text"`
}

// RecallArchive is the result of recall.archive.
type RecallArchive struct {
	Range RecallRange `json:"range"`
	Rows  []RecallRow `json:"rows"`
}

// IsRangeID reports whether id is a range id r<k> (k from 1, at most 9 digits, no
// leading zero). (By hand: package regexp would add about 600 KB to the module.)
func IsRangeID(id string) bool {
	if len(id) < 2 || len(id) > 10 || id[0] != 'r' || id[1] == '0' {
		return false
	}
	for i := 1; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return false
		}
	}
	return true
}

// opRecallArchive is recall.archive {session, range_id, report, archived,
// summary_message}: the range and the rows to insert for one compaction.
func opRecallArchive(req opRequest) ([]byte, error) {
	p := req.params
	if v := p.Get("session"); v.Type != gjson.String || v.Str == "" {
		return nil, errorf(CodeInvalidRequest, "/session", "session must be a non-empty string")
	}
	rid := p.Get("range_id")
	if rid.Type != gjson.String || !IsRangeID(rid.Str) {
		return nil, errorf(CodeInvalidRequest, "/range_id", "range_id must be a range id r<k> (r1, r2, ...)")
	}
	return buildRecallArchive(nil, rid.Str, p.Get("report"), p.Get("archived"), p.Get("messages"), p.Get("summary_message"))
}

// buildRecallArchive appends to b the range rid and its rows (appendRecallArchive)
// from a compaction's report, its archived entries (with their messages) and its
// output messages (refs allowed), where the summary message is found unless
// summaryMessage names it.
func buildRecallArchive(b []byte, rid string, report, archived, messages, summaryMessage gjson.Result) ([]byte, error) {
	if !report.IsObject() {
		return nil, errorf(CodeInvalidRequest, "/report", "report must be the compaction's report object")
	}
	if !archived.IsArray() {
		return nil, errorf(CodeInvalidRequest, "/archived", "archived must be the compaction's archived array, with messages")
	}
	var entries []archivedMsg
	var err error
	archived.ForEach(func(k, a gjson.Result) bool {
		at := pointer("/archived", int(k.Int()))
		idx, reason, msg := fieldOf(a, "index"), fieldOf(a, "reason"), fieldOf(a, "message")
		switch {
		case !a.IsObject():
			err = errorf(CodeInvalidRequest, at, "an archived entry must be an object {index, reason, message}")
		case idx.Type != gjson.Number || idx.Num < 0 || idx.Num != float64(int(idx.Num)):
			err = errorf(CodeInvalidRequest, at+"/index", "index must be a non-negative integer")
		case reason.Type != gjson.String:
			err = errorf(CodeInvalidRequest, at+"/reason", "reason must be a string")
		case !msg.IsObject():
			err = errorf(CodeInvalidRequest, at+"/message", "message must be the original message object (a result with output refs leaves it out: put it back)")
		}
		if err != nil {
			return false
		}
		entries = append(entries, archivedMsg{index: int(idx.Num), reason: ArchiveReason(reason.Str), raw: msg.Raw})
		return true
	})
	if err != nil {
		return nil, err
	}
	var summarized *IndexRange
	if s := fieldOf(report, "summarized"); s.IsObject() {
		summarized = &IndexRange{From: int(fieldOf(s, "from").Int()), To: int(fieldOf(s, "to").Int())}
	}
	sm := summaryMessage
	if (!sm.Exists() || sm.Type == gjson.Null) && messages.IsArray() && summarized != nil {
		sm = summaryMessageOf(messages, int(fieldOf(report, "head_end").Int()))
	}
	if sm.Exists() && sm.Type != gjson.Null && !sm.IsObject() {
		return nil, errorf(CodeInvalidRequest, "/summary_message", "summary_message must be the summary message object, or null")
	}
	return appendRecallArchive(b, rid, entries, summarized, sm), nil
}

// appendRecallArchive appends recall.archive's result, RecallArchive's JSON: the
// range rid (summarized, or else what the entries span), a row per archived entry
// and, when summary is a message, the summary's row. It is written row by row: a
// compaction of 1.4M messages is not held as rows and then encoded (that trapped
// the instance out of memory).
func appendRecallArchive(b []byte, rid string, archived []archivedMsg, summarized *IndexRange, summary gjson.Result) []byte {
	from, to := archiveSpan(archived, summarized)
	rng := RecallRange{ID: rid, FromIndex: from, ToIndex: to, Summary: summaryMessageText(summary)}
	return appendArchiveRows(appendArchiveRange(b, rng), rid, archived, summary, from)
}

// archiveSpan is the input range an archive stands for: the summarized range, or
// else what its entries span.
func archiveSpan(archived []archivedMsg, summarized *IndexRange) (from, to int) {
	if summarized != nil {
		return summarized.From, summarized.To
	}
	from, to = -1, -1
	for _, a := range archived {
		if from < 0 || a.index < from {
			from = a.index
		}
		to = max(to, a.index+1)
	}
	if from < 0 {
		return 0, 0
	}
	return from, to
}

// summaryMessageText is the text of a summary message, "" for none.
func summaryMessageText(summary gjson.Result) string {
	if !summary.Exists() || summary.Type == gjson.Null {
		return ""
	}
	return messageText(summary)
}

// appendArchiveRange opens an archive's JSON with its range: {"range":{...},
// appendArchiveRows closes it.
func appendArchiveRange(b []byte, rng RecallRange) []byte {
	b = jsonraw.AppendString(append(b, `{"range":{"id":`...), rng.ID)
	b = strconv.AppendInt(append(b, `,"from_index":`...), int64(rng.FromIndex), 10)
	b = strconv.AppendInt(append(b, `,"to_index":`...), int64(rng.ToIndex), 10)
	b = jsonraw.AppendString(append(b, `,"summary":`...), rng.Summary)
	return append(b, "},"...)
}

// appendArchiveRows appends "rows":[...]} (after appendArchiveRange, or after
// "{"): a row per entry of range rid and, when summary is a message, the summary's
// row at position summaryAt.
func appendArchiveRows(b []byte, rid string, archived []archivedMsg, summary gjson.Result, summaryAt int) []byte {
	hasSummary := summary.Exists() && summary.Type != gjson.Null
	row := func(b []byte, id string, position int, role, reason, raw, text string) []byte {
		b = jsonraw.AppendString(append(b, `{"id":`...), id)
		b = jsonraw.AppendString(append(b, `,"range_id":`...), rid)
		b = strconv.AppendInt(append(b, `,"position":`...), int64(position), 10)
		b = jsonraw.AppendString(append(b, `,"role":`...), role)
		b = jsonraw.AppendString(append(b, `,"reason":`...), reason)
		b = jsonraw.AppendString(append(b, `,"json":`...), raw)
		b = jsonraw.AppendString(append(b, `,"text":`...), text)
		return append(b, '}')
	}
	// Grown once, by about what the rows take (the message escaped as a string,
	// its text, the fields): a buffer doubled row by row peaks at twice the rows.
	size := 256 + 2*len(summary.Raw)
	for _, a := range archived {
		size += 2*len(a.raw) + len(a.raw)/4 + 96
	}
	b = slices.Grow(b, size)
	b = append(b, `"rows":[`...)
	for i, a := range archived {
		if i > 0 {
			b = append(b, ',')
		}
		m := gjson.Parse(a.raw)
		b = row(b, rid+"."+strconv.Itoa(a.index), a.index, messageRole(m), string(a.reason), a.raw, recallText(m))
	}
	if hasSummary {
		if len(archived) > 0 {
			b = append(b, ',')
		}
		b = row(b, rid+".summary", summaryAt, "summary", "summary", summary.Raw, capText("summary\n"+summaryMessageText(summary)))
	}
	return append(b, "]}"...)
}

// summaryMessageOf finds the summary message in a compaction's output messages
// (refs allowed: an unchanged message, an index, is never it): the one at
// head_end when it carries the summary, else the first that does. The summary
// message is new, or a tail message the summary was merged into.
func summaryMessageOf(msgs gjson.Result, headEnd int) gjson.Result {
	all := msgs.Array()
	isSummary := func(m gjson.Result) bool {
		return m.IsObject() && strings.Contains(messageText(m), SummaryPrefix)
	}
	if headEnd >= 0 && headEnd < len(all) && isSummary(all[headEnd]) {
		return all[headEnd]
	}
	for _, m := range all {
		if isSummary(m) {
			return m
		}
	}
	return gjson.Result{}
}

func messageRole(m gjson.Result) string {
	if r := fieldOf(m, "role"); r.Type == gjson.String && r.Str != "" {
		return r.Str
	}
	if t := fieldOf(m, "type"); t.Type == gjson.String && t.Str != "" {
		return t.Str // a Responses API item without a role: function_call, ...
	}
	return "unknown"
}

// recallText is the searchable text of one message: its role, its content's text,
// its tool calls' names and arguments (decoded), its tool results' text, one piece
// a line; at most 64 KiB (longer: the head and the tail, cut at a character).
func recallText(m gjson.Result) string {
	var b strings.Builder
	add := func(s string) {
		if s == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	add(messageRole(m))
	if n := fieldOf(m, "name"); n.Type == gjson.String {
		add(n.Str)
	}
	addContent(fieldOf(m, "content"), add)
	fieldOf(m, "tool_calls").ForEach(func(_, c gjson.Result) bool {
		add(fieldOf(fieldOf(c, "function"), "name").Str)
		add(argumentsText(fieldOf(fieldOf(c, "function"), "arguments")))
		return true
	})
	// Responses API items.
	if fieldOf(m, "type").Str == "function_call" {
		add(fieldOf(m, "name").Str)
		add(argumentsText(fieldOf(m, "arguments")))
	}
	if o := fieldOf(m, "output"); o.Exists() {
		addContent(o, add)
	}
	addGeminiParts(fieldOf(m, "parts"), add)
	return capText(b.String())
}

// addGeminiParts adds the text of a Gemini content's parts, read as the Gemini
// format reads them (format_gemini.go): a function call's or response's name and
// the call's arguments, then what untypedPartText gives (text, a response's text,
// "[image]" or "[file]"); a thought's text too, which that leaves out.
func addGeminiParts(parts gjson.Result, add func(string)) {
	parts.ForEach(func(_, part gjson.Result) bool {
		p := readGeminiPart(part.Raw)
		if p.thought == "true" && p.text != "" && p.text[0] == '"' {
			add(jsonraw.DecodeString(p.text))
		}
		if p.call != "" && p.call[0] == '{' {
			_, name, _, args := readFunction(p.call)
			add(name)
			add(argumentsText(gjson.Parse(args)))
		}
		if p.response != "" && p.response[0] == '{' {
			_, name, _, _ := readFunction(p.response)
			add(name)
		}
		add(untypedPartText(part.Raw))
		return true
	})
}

// messageText is the text of a message's content, or of its parts (Gemini): what a
// summary message says.
func messageText(m gjson.Result) string {
	if t := contentText(fieldOf(m, "content")); t != "" {
		return t
	}
	return rawContentText(fieldOf(m, "parts").Raw)
}

// addContent adds the text of a content value: a string, or the parts of an
// array (text parts, tool_use name and input, tool_result content).
func addContent(c gjson.Result, add func(string)) {
	switch {
	case c.Type == gjson.String:
		add(c.Str)
	case c.IsArray():
		c.ForEach(func(_, part gjson.Result) bool {
			if part.Type == gjson.String {
				add(part.Str)
				return true
			}
			switch fieldOf(part, "type").Str {
			case "tool_use", "server_tool_use", "function_call":
				add(fieldOf(part, "name").Str)
				if in := fieldOf(part, "input"); in.Exists() {
					add(in.Raw)
				}
				add(argumentsText(fieldOf(part, "arguments")))
			case "tool_result", "function_call_output":
				addContent(fieldOf(part, "content"), add)
				addContent(fieldOf(part, "output"), add)
			case "tool-call": // AI SDK
				add(fieldOf(part, "toolName").Str)
				add(argumentsText(fieldOf(part, "input")))
			case "tool-result": // AI SDK
				add(fieldOf(part, "toolName").Str)
				add(aisdkOutputText(part.Raw))
			case "image", "image_url", "input_image":
				add("[image]")
			case "file", "input_file":
				add("[file]")
			default:
				if t := fieldOf(part, "text"); t.Type == gjson.String {
					add(t.Str)
				}
			}
			return true
		})
	case c.IsObject():
		if t := fieldOf(c, "text"); t.Type == gjson.String {
			add(t.Str)
		}
	}
}

// argumentsText is a tool call's arguments as text: the decoded string (OpenAI
// sends a JSON string), or the raw JSON of an object.
func argumentsText(a gjson.Result) string {
	switch {
	case a.Type == gjson.String:
		return a.Str
	case a.Exists() && a.Type != gjson.Null:
		return a.Raw
	}
	return ""
}

// capText keeps text under recallMaxText bytes: the head and the tail, with a
// marker between, cut at character boundaries.
func capText(s string) string {
	if len(s) <= recallMaxText {
		return s
	}
	const marker = "\n[...]\n"
	half := (recallMaxText - len(marker)) / 2
	head := s[:half]
	for len(head) > 0 && !utf8.RuneStart(s[len(head)]) {
		head = head[:len(head)-1]
	}
	ts := len(s) - half
	for ts < len(s) && !utf8.RuneStart(s[ts]) {
		ts++
	}
	return head + marker + s[ts:]
}

// RecallQuery is the result of recall.query.
type RecallQuery struct {
	Terms []string `json:"terms"`
	// FTS is the FTS5 MATCH expression of the terms of at least 3 characters,
	// "" when there is none.
	FTS string `json:"fts"`
	// Like has one LIKE pattern per term, for text LIKE ? ESCAPE '\'.
	Like []string `json:"like"`
}

// QueryTerms splits a query on whitespace; a "quoted phrase" is one term. Empty
// terms are dropped, duplicates (ASCII case-insensitive: they match the same rows)
// kept once, as first written.
func QueryTerms(q string) []string {
	var terms []string
	seen := map[string]bool{}
	addTerm := func(t string) {
		if k := asciiLower(t); t != "" && !seen[k] {
			seen[k] = true
			terms = append(terms, t)
		}
	}
	for i := 0; i < len(q); {
		r, n := utf8.DecodeRuneInString(q[i:])
		switch {
		case isQuerySpace(r):
			i += n
		case r == '"':
			end := strings.IndexByte(q[i+1:], '"')
			if end < 0 { // an unclosed quote: the rest is the phrase
				addTerm(strings.TrimSpace(q[i+1:]))
				i = len(q)
			} else {
				addTerm(strings.TrimSpace(q[i+1 : i+1+end]))
				i += end + 2
			}
		default:
			j := i
			for j < len(q) {
				r, n := utf8.DecodeRuneInString(q[j:])
				if isQuerySpace(r) || r == '"' {
					break
				}
				j += n
			}
			addTerm(q[i:j])
			i = j
		}
	}
	return terms
}

func isQuerySpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v' || r == 0x85 || r == 0xA0 ||
		r == 0x1680 || (r >= 0x2000 && r <= 0x200A) || r == 0x2028 || r == 0x2029 || r == 0x202F || r == 0x205F || r == 0x3000
}

// checkQuery is why a search query is refused ("" when it is not): no terms, a
// NUL, more than RecallMaxQueryChars characters, more than RecallMaxTerms terms or
// a term of more than RecallMaxTermChars characters. terms is QueryTerms(q).
func checkQuery(q string, terms []string) string {
	if n := utf8.RuneCountInString(q); n > RecallMaxQueryChars {
		return "query is too long: " + strconv.Itoa(n) + " characters, at most " + strconv.Itoa(RecallMaxQueryChars)
	}
	if strings.IndexByte(q, 0) >= 0 {
		return "query must not contain a NUL character (U+0000)"
	}
	if len(terms) == 0 {
		return "query has no words to search for"
	}
	if len(terms) > RecallMaxTerms {
		return "query has " + strconv.Itoa(len(terms)) + " terms, at most " + strconv.Itoa(RecallMaxTerms) +
			" (every term must match; \"quote\" a phrase to search for it as one term)"
	}
	for _, t := range terms {
		if n := utf8.RuneCountInString(t); n > RecallMaxTermChars {
			return "a term of the query is too long: " + strconv.Itoa(n) + " characters, at most " + strconv.Itoa(RecallMaxTermChars)
		}
	}
	return ""
}

// BuildRecallQuery is recall.query: the terms, the FTS5 expression (each term of
// at least 3 characters as a quoted phrase, joined with AND) and a LIKE pattern per
// term (%, _ and \ escaped with \). A query checkQuery refuses is invalid_request
// at /query.
func BuildRecallQuery(q string) (RecallQuery, error) {
	terms := QueryTerms(q)
	if msg := checkQuery(q, terms); msg != "" {
		return RecallQuery{}, errorf(CodeInvalidRequest, "/query", "%s", msg)
	}
	out := RecallQuery{Terms: terms, Like: make([]string, len(terms))}
	var fts []string
	for i, t := range terms {
		if utf8.RuneCountInString(t) >= recallMinFTSTerm {
			fts = append(fts, `"`+strings.ReplaceAll(t, `"`, `""`)+`"`)
		}
		var b strings.Builder
		b.WriteByte('%')
		for j := 0; j < len(t); j++ {
			if c := t[j]; c == '%' || c == '_' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(t[j])
		}
		b.WriteByte('%')
		out.Like[i] = b.String()
	}
	out.FTS = strings.Join(fts, " AND ")
	return out, nil
}

func opRecallQuery(req opRequest) ([]byte, error) {
	v := req.params.Get("query")
	if v.Type != gjson.String {
		return nil, errorf(CodeInvalidRequest, "/query", "query must be a string")
	}
	q, err := BuildRecallQuery(v.Str)
	if err != nil {
		return nil, err
	}
	return marshal(q)
}

// RecallHit is one row a search found, as a binding passes it to
// recall.search_result.
type RecallHit struct {
	ID       string `json:"id"`
	RangeID  string `json:"range_id"`
	Position int    `json:"position"`
	Role     string `json:"role"`
	Text     string `json:"text"`
}

// recallToolHit is a hit in context_search's answer.
type recallToolHit struct {
	ID       string `json:"id"`
	Range    string `json:"range"`
	Role     string `json:"role"`
	Position int    `json:"position"`
	Snippet  string `json:"snippet"`
}

// SearchResult is recall.search_result: context_search's answer for hits (newest
// first), keeping the first limit of them. total is how many matched (hits may be
// only the first ones); a negative total means len(hits).
func SearchResult(query string, hits []RecallHit, limit, total int) string {
	if limit <= 0 {
		limit = recallDefaultLimit
	}
	limit = min(limit, recallMaxLimit)
	if total < len(hits) {
		total = len(hits)
	}
	terms := QueryTerms(query)
	out := struct {
		Query string          `json:"query"`
		Hits  []recallToolHit `json:"hits"`
		Total int             `json:"total"`
	}{Query: query, Hits: []recallToolHit{}, Total: total}
	for i, h := range hits {
		if i == limit {
			break
		}
		out.Hits = append(out.Hits, recallToolHit{ID: h.ID, Range: h.RangeID, Role: h.Role, Position: h.Position,
			Snippet: Snippet(h.Text, terms)})
	}
	b, _ := marshal(out)
	return string(b)
}

// Snippet is about 200 characters of text around the first match of any term
// (ASCII case-insensitive), whitespace runs shown as one space, "..." where cut.
func Snippet(text string, terms []string) string {
	lower := asciiLower(text)
	at := -1
	for _, t := range terms {
		if i := strings.Index(lower, asciiLower(t)); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at < 0 {
		at = 0
	}
	// Start about a third of the window before the match, in characters.
	start := at
	for n := 0; start > 0 && n < recallSnippetChars/3; n++ {
		_, size := utf8.DecodeLastRuneInString(text[:start])
		start -= size
	}
	end := start
	for n := 0; end < len(text) && n < recallSnippetChars; n++ {
		_, size := utf8.DecodeRuneInString(text[end:])
		end += size
	}
	s := strings.Join(strings.Fields(text[start:end]), " ")
	if start > 0 {
		s = "..." + s
	}
	if end < len(text) {
		s += "..."
	}
	return s
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func opRecallSearchResult(req opRequest) ([]byte, error) {
	p := req.params
	q := p.Get("query")
	if q.Type != gjson.String {
		return nil, errorf(CodeInvalidRequest, "/query", "query must be a string")
	}
	limit, err := optInt(p, "limit", 1)
	if err != nil {
		return nil, err
	}
	total, err := optInt(p, "total", 0)
	if err != nil {
		return nil, err
	}
	if !p.Get("total").Exists() {
		total = -1
	}
	hv := p.Get("hits")
	if !hv.IsArray() {
		return nil, errorf(CodeInvalidRequest, "/hits", "hits must be an array of {id, range_id, position, role, text}")
	}
	var hits []RecallHit
	hv.ForEach(func(k, h gjson.Result) bool {
		at := pointer("/hits", int(k.Int()))
		if !h.IsObject() || fieldOf(h, "id").Type != gjson.String || fieldOf(h, "text").Type != gjson.String {
			err = errorf(CodeInvalidRequest, at, "a hit must be an object with string id and text")
			return false
		}
		hits = append(hits, RecallHit{ID: fieldOf(h, "id").Str, RangeID: fieldOf(h, "range_id").Str,
			Position: int(fieldOf(h, "position").Int()), Role: fieldOf(h, "role").Str, Text: fieldOf(h, "text").Str})
		return true
	})
	if err != nil {
		return nil, err
	}
	return marshal(map[string]string{"result": SearchResult(q.Str, hits, limit, total)})
}

// optInt reads an optional integer parameter of at least lo (0 when absent or null).
func optInt(p params, key string, lo int) (int, error) {
	v := p.Get(key)
	if !v.Exists() || v.Type == gjson.Null {
		return 0, nil
	}
	if v.Type != gjson.Number || v.Num != float64(int64(v.Num)) || v.Num < float64(lo) || v.Num > 1e9 {
		return 0, errorf(CodeInvalidRequest, "/"+key, "%s must be an integer of at least %d", key, lo)
	}
	return int(v.Num), nil
}

// ExpandResult is recall.expand_result: context_expand's answer with the
// original messages (JSON texts) behind id, cut to about maxTokens when it is
// above 0. No messages is the error answer for an unknown id.
func ExpandResult(id string, messages []string, maxTokens int) string {
	if len(messages) == 0 {
		b, _ := marshal(map[string]string{"error": "no archived message or range with id " + id + " in this session"})
		return string(b)
	}
	b := []byte(`{"id":`)
	b = jsonraw.AppendString(b, id)
	b = append(b, `,"messages":[`...)
	budget := maxTokens
	whole, cut, partial := 0, false, false
	for i, m := range messages {
		t := jsonTokens(m)
		if maxTokens > 0 && t > budget {
			if part, ok := cutMessage(m, budget); ok {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, part...)
				partial = true
			}
			cut = true
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
		budget -= t
		whole++
	}
	b = append(b, `],"truncated":`...)
	if !cut {
		return string(append(b, `false}`...))
	}
	note := "cut to about " + strconv.Itoa(maxTokens) + " tokens: " + strconv.Itoa(whole) + " of " +
		strconv.Itoa(len(messages)) + " messages whole"
	switch {
	case partial && whole+1 < len(messages):
		note += ", then message " + strconv.Itoa(whole+1) + " cut short and the rest left out"
	case partial:
		note += ", then message " + strconv.Itoa(whole+1) + " cut short"
	case whole+1 < len(messages):
		note += "; message " + strconv.Itoa(whole+1) + " did not fit and it and the rest are left out"
	default:
		note += "; message " + strconv.Itoa(whole+1) + " did not fit and is left out"
	}
	note += "; call context_expand again with a larger max_tokens, or without it for everything, or with a message id for one message"
	b = append(b, `true,"note":`...)
	b = jsonraw.AppendString(b, note)
	return string(append(b, '}'))
}

// jsonTokens estimates the tokens of a JSON text: one per four bytes.
func jsonTokens(s string) int { return (len(s) + roughCharsPerToken - 1) / roughCharsPerToken }

// cutMessage cuts the text of message m (JSON) to fit about budget tokens: a string
// content is shortened; in a content array, the parts that fit are kept and the
// first that does not has its text (or tool_result content string) shortened.
// ok is false when nothing useful fits.
func cutMessage(m string, budget int) (string, bool) {
	content := fieldIn(m, "content") // Index relative to m
	keepBytes := budget*roughCharsPerToken - (len(m) - len(content.Raw)) - 16
	if keepBytes <= 0 {
		return "", false
	}
	var newContent []byte
	switch {
	case content.Type == gjson.String:
		newContent = jsonraw.AppendString(nil, cutString(content.Str, keepBytes)+" [...]")
	case content.IsArray():
		newContent = append(newContent, '[')
		n := 0
		content.ForEach(func(_, part gjson.Result) bool {
			if len(part.Raw) <= keepBytes {
				if n > 0 {
					newContent = append(newContent, ',')
				}
				newContent = append(newContent, part.Raw...)
				keepBytes -= len(part.Raw) + 1
				n++
				return true
			}
			for _, key := range []string{"text", "content"} {
				if f := fieldIn(part.Raw, key); f.Type == gjson.String { // Index relative to part.Raw
					rest := keepBytes - (len(part.Raw) - len(f.Raw))
					if rest > 0 {
						if n > 0 {
							newContent = append(newContent, ',')
						}
						newContent = append(newContent, replaceRaw(part.Raw, f, string(jsonraw.AppendString(nil, cutString(f.Str, rest)+" [...]")))...)
						n++
					}
					break
				}
			}
			return false
		})
		newContent = append(newContent, ']')
		if n == 0 {
			return "", false
		}
	default:
		return "", false
	}
	return replaceRaw(m, content, string(newContent)), true
}

// replaceRaw replaces the value v (found in s by gjson, so v.Index is set) with raw.
func replaceRaw(s string, v gjson.Result, raw string) string {
	if v.Index <= 0 || v.Index+len(v.Raw) > len(s) || s[v.Index:v.Index+len(v.Raw)] != v.Raw {
		panic("recall: replaceRaw without the value's index")
	}
	return s[:v.Index] + raw + s[v.Index+len(v.Raw):]
}

// cutString cuts s to at most n bytes at a character boundary.
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func opRecallExpandResult(req opRequest) ([]byte, error) {
	p := req.params
	id := p.Get("id")
	if id.Type != gjson.String {
		return nil, errorf(CodeInvalidRequest, "/id", "id must be a string")
	}
	maxTokens, err := optInt(p, "max_tokens", 1)
	if err != nil {
		return nil, err
	}
	mv := p.Get("messages")
	if !mv.IsArray() {
		return nil, errorf(CodeInvalidRequest, "/messages", "messages must be an array of the original messages (objects, or their JSON texts as strings)")
	}
	var msgs []string
	mv.ForEach(func(k, m gjson.Result) bool {
		switch {
		case m.IsObject():
			msgs = append(msgs, m.Raw)
		case m.Type == gjson.String && gjson.Valid(m.Str) && gjson.Parse(m.Str).IsObject():
			msgs = append(msgs, strings.TrimSpace(m.Str))
		default:
			err = errorf(CodeInvalidRequest, pointer("/messages", int(k.Int())), "a message must be an object or the JSON text of one")
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return marshal(map[string]string{"result": ExpandResult(id.Str, msgs, maxTokens)})
}

// checkToolCall is recall.check_call: the tool call's arguments (an object or
// its JSON text; absent or null is {}) checked and normalized, or the error
// answer for the agent.
func checkToolCall(name string, arguments gjson.Result) (args map[string]any, errResult string) {
	fail := func(msg string) (map[string]any, string) {
		b, _ := marshal(map[string]string{"error": msg})
		return nil, string(b)
	}
	if name != ToolContextSearch && name != ToolContextExpand {
		return fail("unknown tool " + strconv.Quote(name) + "; the context tools are context_search and context_expand")
	}
	a := arguments
	if a.Type == gjson.String {
		if strings.TrimSpace(a.Str) == "" {
			a = gjson.Parse("{}")
		} else if !gjson.Valid(a.Str) {
			return fail(name + ": arguments are not valid JSON")
		} else {
			a = gjson.Parse(a.Str)
		}
	}
	if !a.Exists() || a.Type == gjson.Null {
		a = gjson.Parse("{}")
	}
	if !a.IsObject() {
		return fail(name + ": arguments must be a JSON object")
	}
	intArg := func(key string, lo int) (int, bool, string) {
		v := fieldOf(a, key)
		if !v.Exists() || v.Type == gjson.Null {
			return 0, false, ""
		}
		if v.Type != gjson.Number || v.Num != float64(int64(v.Num)) || v.Num < float64(lo) || v.Num > 1e9 {
			return 0, false, name + ": " + key + " must be an integer of at least " + strconv.Itoa(lo)
		}
		return int(v.Num), true, ""
	}
	switch name {
	case ToolContextSearch:
		q := fieldOf(a, "query")
		if q.Type != gjson.String {
			return fail("context_search: query is required, a string of words, paths or identifiers to find")
		}
		if msg := checkQuery(q.Str, QueryTerms(q.Str)); msg != "" {
			return fail("context_search: " + msg)
		}
		limit, ok, msg := intArg("limit", 1)
		if msg != "" {
			return fail(msg)
		}
		if !ok {
			limit = recallDefaultLimit
		}
		return map[string]any{"query": q.Str, "limit": min(limit, recallMaxLimit)}, ""
	default:
		id := fieldOf(a, "id")
		if id.Type != gjson.String || strings.TrimSpace(id.Str) == "" {
			return fail("context_expand: id is required, a range id (r2) or a message id (r2.17)")
		}
		out := map[string]any{"id": strings.TrimSpace(id.Str)}
		mt, ok, msg := intArg("max_tokens", 1)
		if msg != "" {
			return fail(msg)
		}
		if ok {
			out["max_tokens"] = mt
		}
		return out, ""
	}
}

func opRecallCheckCall(req opRequest) ([]byte, error) {
	p := req.params
	name := p.Get("name")
	if name.Type != gjson.String {
		return nil, errorf(CodeInvalidRequest, "/name", "name must be the tool's name, a string")
	}
	args, errResult := checkToolCall(name.Str, p.Get("arguments"))
	if errResult != "" {
		return marshal(map[string]any{"ok": false, "result": errResult})
	}
	return marshal(map[string]any{"ok": true, "args": args})
}
