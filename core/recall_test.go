package core

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// recallCall runs a recall op and returns its result, failing on an error.
func recallCall(t *testing.T, op, request string) gjson.Result {
	t.Helper()
	out := gjson.ParseBytes(Dispatch(op, []byte(request)))
	require.False(t, out.Get("error").Exists(), "%s: %s", op, out.Raw)
	return out.Get("result")
}

func recallError(t *testing.T, op, request string) gjson.Result {
	t.Helper()
	out := gjson.ParseBytes(Dispatch(op, []byte(request)))
	require.True(t, out.Get("error").Exists(), "%s: want an error, got %s", op, out.Raw)
	return out.Get("error")
}

func TestContextConfigSection(t *testing.T) {
	cfg, err := ParseConfig(nil)
	require.NoError(t, err)
	require.Equal(t, ContextEngineCompressor, cfg.Context.Engine)
	cfg, err = ParseConfig([]byte(`{"context":{"engine":"lossless"}}`))
	require.NoError(t, err)
	require.Equal(t, ContextEngineLossless, cfg.Context.Engine)
	for _, bad := range []string{`{"context":{"engine":"lcm"}}`, `{"context":{"engine":1}}`, `{"context":{"store":"x"}}`, `{"context":3}`} {
		_, err := ParseConfig([]byte(bad))
		require.Error(t, err, bad)
		require.Equal(t, CodeInvalidConfig, err.(*Error).Code, bad)
		require.True(t, strings.HasPrefix(err.(*Error).Path, "/context"), "%s: %s", bad, err.(*Error).Path)
	}
	// config.merge merges the section key by key, like the others.
	merged := recallCall(t, "config.merge", `{"base":{"context":{"engine":"lossless"},"model":{"name":"a"}},"config":{"model":{"name":"b"}}}`)
	require.Equal(t, "lossless", merged.Get("config.context.engine").Str)
	merged = recallCall(t, "config.merge", `{"base":{"context":{"engine":"lossless"}},"config":{"context":{"engine":"compressor"}}}`)
	require.Equal(t, "compressor", merged.Get("config.context.engine").Str)
	// An engine keeps it in its state.
	st := recallCall(t, "engine.start", `{"config":{"context":{"engine":"lossless"}}}`)
	require.Equal(t, "lossless", st.Get("state.config.context.engine").Str)
}

func TestRecallToolsShapes(t *testing.T) {
	for format, path := range map[string]string{"openai": "function.", "responses": "", "anthropic": ""} {
		tools := recallCall(t, "recall.tools", `{"format":"`+format+`"}`).Get("tools").Array()
		require.Len(t, tools, 2, format)
		params := "parameters"
		if format == "anthropic" {
			params = "input_schema"
			require.False(t, tools[0].Get("type").Exists())
		} else {
			require.Equal(t, "function", tools[0].Get("type").Str)
		}
		require.Equal(t, ToolContextSearch, tools[0].Get(path+"name").Str, format)
		require.Equal(t, ToolContextExpand, tools[1].Get(path+"name").Str, format)
		require.Equal(t, `["query"]`, tools[0].Get(path+params+".required").Raw, format)
		require.Equal(t, `["id"]`, tools[1].Get(path+params+".required").Raw, format)
		require.NotEmpty(t, tools[0].Get(path+"description").Str)
	}
}

func TestRecallArchiveRows(t *testing.T) {
	user := `{"role":"user","content":"Please fix src/app.py"}`
	call := `{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"src/app.py\"}"}}]}`
	tool := `{"role":"tool","tool_call_id":"c1","content":"caf\u00e9\n  x = 1"}`
	summary := `{"role":"user","content":"[CONTEXT COMPACTION] summary text"}`
	req := `{"session":"s","range_id":"r2","report":{"summarized":{"from":4,"to":9}},"archived":[` +
		`{"index":4,"reason":"summarized","message":` + user + `},{"index":5,"reason":"summarized","message":` + call + `},` +
		`{"index":6,"reason":"pruned","message":` + tool + `}],"summary_message":` + summary + `}`
	var res RecallArchive
	require.NoError(t, json.Unmarshal([]byte(recallCall(t, "recall.archive", req).Raw), &res))
	require.Equal(t, RecallRange{ID: "r2", FromIndex: 4, ToIndex: 9, Summary: "[CONTEXT COMPACTION] summary text"}, res.Range)
	require.Len(t, res.Rows, 4)
	for i, want := range []struct{ id, role, reason, json string }{
		{"r2.4", "user", "summarized", user}, {"r2.5", "assistant", "summarized", call},
		{"r2.6", "tool", "pruned", tool}, {"r2.summary", "summary", "summary", summary},
	} {
		r := res.Rows[i]
		require.Equal(t, want.id, r.ID)
		require.Equal(t, "r2", r.RangeID)
		require.Equal(t, want.role, r.Role)
		require.Equal(t, want.reason, r.Reason)
		require.Equal(t, want.json, r.JSON, "the original JSON, byte for byte")
	}
	require.Equal(t, 4, res.Rows[3].Position, "the summary row sits at from_index")
	// The tool call's arguments are searchable decoded, the tool output's escapes too.
	require.Contains(t, res.Rows[1].Text, `read_file`)
	require.Contains(t, res.Rows[1].Text, `{"path": "src/app.py"}`)
	require.Contains(t, res.Rows[2].Text, "café\n  x = 1")
	require.True(t, strings.HasPrefix(res.Rows[0].Text, "user\n"))
}

func TestRecallTextAnthropicAndCap(t *testing.T) {
	m := gjson.Parse(`{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"t","name":"bash","input":{"command":"ls tests/"}}]}`)
	text := recallText(m)
	require.Contains(t, text, "Let me look.")
	require.Contains(t, text, "bash")
	require.Contains(t, text, `"ls tests/"`)
	r := recallText(gjson.Parse(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"tests/test_app.py"}]}]}`))
	require.Contains(t, r, "tests/test_app.py")

	long := strings.Repeat("é", 50_000) + "MIDDLE" + strings.Repeat("ü", 50_000) + "THE-END"
	raw, _ := json.Marshal(map[string]string{"role": "tool", "content": long})
	capped := recallText(gjson.ParseBytes(raw))
	require.LessOrEqual(t, len(capped), recallMaxText)
	require.True(t, utf8.ValidString(capped))
	require.True(t, strings.HasPrefix(capped, "tool\néé"))
	require.True(t, strings.HasSuffix(capped, "üüTHE-END"), "the tail is kept")
	require.NotContains(t, capped, "MIDDLE")
}

func TestRecallQuery(t *testing.T) {
	q, err := BuildRecallQuery(`  src/app.py  "error handling"  a_b 50%  ok `)
	require.NoError(t, err)
	require.Equal(t, []string{"src/app.py", "error handling", "a_b", "50%", "ok"}, q.Terms)
	require.Equal(t, `"src/app.py" AND "error handling" AND "a_b" AND "50%"`, q.FTS, "ok is too short for the trigram index")
	require.Equal(t, []string{`%src/app.py%`, `%error handling%`, `%a\_b%`, `%50\%%`, `%ok%`}, q.Like)
	q, err = BuildRecallQuery(`say"x"y`)
	require.NoError(t, err)
	require.Equal(t, []string{"say", "x", "y"}, q.Terms)
	q, err = BuildRecallQuery(`"it""s"`)
	require.NoError(t, err)
	require.Equal(t, []string{"it", "s"}, q.Terms)
	q, err = BuildRecallQuery(`"unclosed phrase`)
	require.NoError(t, err)
	require.Equal(t, []string{"unclosed phrase"}, q.Terms)
	q, err = BuildRecallQuery(`x"y`) // a quote inside a term is not a phrase start after the term
	require.NoError(t, err)
	require.Equal(t, []string{"x", "y"}, q.Terms)
	_, err = BuildRecallQuery(` "" `)
	require.Error(t, err)
	require.Equal(t, "/query", err.(*Error).Path)
	// A double quote inside an FTS phrase is doubled.
	q, _ = BuildRecallQuery(`"say ""`)
	require.Equal(t, `"say"`, q.FTS)
}

func TestRecallSearchResult(t *testing.T) {
	var hits []RecallHit
	for i := 0; i < 60; i++ {
		hits = append(hits, RecallHit{ID: "r1." + string(rune('a'+i%26)), RangeID: "r1", Position: i, Role: "tool", Text: strings.Repeat("filler ", 100) + "Found src/app.py here" + strings.Repeat(" more", 100)})
	}
	out := gjson.Parse(SearchResult("SRC/APP.PY", hits, 0, -1))
	require.Len(t, out.Get("hits").Array(), 10, "default limit")
	require.Equal(t, int64(60), out.Get("total").Int())
	sn := out.Get("hits.0.snippet").Str
	require.Contains(t, sn, "src/app.py", "the snippet shows the match (case-insensitively found)")
	require.LessOrEqual(t, utf8.RuneCountInString(sn), recallSnippetChars+6)
	require.True(t, strings.HasPrefix(sn, "...") && strings.HasSuffix(sn, "..."))
	require.Equal(t, int64(0), out.Get("hits.0.position").Int(), "hits keep the store's order (newest first)")
	out = gjson.Parse(SearchResult("x", hits, 500, -1))
	require.Len(t, out.Get("hits").Array(), 50, "at most 50")
	out = gjson.Parse(SearchResult("x", hits[:2], 5, 99))
	require.Equal(t, int64(99), out.Get("total").Int())
	// The op answers the same string.
	res := recallCall(t, "recall.search_result", `{"query":"zz","hits":[{"id":"r1.0","range_id":"r1","position":0,"role":"user","text":"user\nzz top"}]}`)
	require.Equal(t, SearchResult("zz", []RecallHit{{ID: "r1.0", RangeID: "r1", Role: "user", Text: "user\nzz top"}}, 0, -1), res.Get("result").Str)
}

func TestRecallExpandResult(t *testing.T) {
	a := `{"role":"user","content":"first \u00e9 request"}`
	b := `{"role":"tool","tool_call_id":"c","content":"` + strings.Repeat("0123456789", 200) + `"}`
	c := `{"role":"assistant","content":"after"}`
	whole := gjson.Parse(ExpandResult("r1", []string{a, b, c}, 0))
	require.False(t, whole.Get("truncated").Bool())
	ms := whole.Get("messages").Array()
	require.Len(t, ms, 3)
	require.Equal(t, a, ms[0].Raw, "byte for byte, escapes included")
	require.Equal(t, b, ms[1].Raw)

	cut := gjson.Parse(ExpandResult("r1", []string{a, b, c}, 100))
	require.True(t, cut.Get("truncated").Bool())
	require.Contains(t, cut.Get("note").Str, "1 of 3 messages whole")
	ms = cut.Get("messages").Array()
	require.Len(t, ms, 2, "the first whole, the second cut, the third left out")
	require.Equal(t, a, ms[0].Raw)
	require.True(t, strings.HasPrefix(ms[1].Get("content").Str, "0123456789"))
	require.True(t, strings.HasSuffix(ms[1].Get("content").Str, "[...]"))
	require.Equal(t, "c", ms[1].Get("tool_call_id").Str, "the rest of the message stays")
	require.LessOrEqual(t, (len(ms[0].Raw)+len(ms[1].Raw))/4, 100, "what is kept fits the budget")

	// Strings holding JSON texts are the same as the objects, kept byte for byte.
	viaOp := recallCall(t, "recall.expand_result", `{"id":"r1","messages":[`+string(mustJSON(a))+`,`+b+`]}`)
	require.Equal(t, ExpandResult("r1", []string{a, b}, 0), viaOp.Get("result").Str)

	missing := gjson.Parse(ExpandResult("r9", nil, 0))
	require.Equal(t, "no archived message or range with id r9 in this session", missing.Get("error").Str)
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

func TestRecallCheckCall(t *testing.T) {
	ok := recallCall(t, "recall.check_call", `{"name":"context_search","arguments":"{\"query\":\"a b\",\"limit\":3}"}`)
	require.True(t, ok.Get("ok").Bool())
	require.Equal(t, `{"limit":3,"query":"a b"}`, ok.Get("args").Raw)
	ok = recallCall(t, "recall.check_call", `{"name":"context_expand","arguments":{"id":" r3 "}}`)
	require.Equal(t, `{"id":"r3"}`, ok.Get("args").Raw)
	for _, bad := range []string{
		`{"name":"context_search","arguments":{"query":7}}`,
		`{"name":"context_search","arguments":{"query":"x","limit":1.5}}`,
		`{"name":"context_expand","arguments":{"id":"r1","max_tokens":0}}`,
		`{"name":"context_expand","arguments":[1]}`,
		`{"name":"other"}`,
	} {
		r := recallCall(t, "recall.check_call", bad)
		require.False(t, r.Get("ok").Bool(), bad)
		require.True(t, gjson.Get(r.Get("result").Str, "error").Type == gjson.String, "%s: %s", bad, r.Raw)
	}
	require.Equal(t, "/name", recallError(t, "recall.check_call", `{}`).Get("path").Str)
}

// With archive_id the summary message ends with the two lines that name the
// archived range and what of it the summary leaves out; without it nothing changes.
func TestSummaryNamesItsArchivedRange(t *testing.T) {
	msgs, cfg := importerSession()
	begin := func(extra map[string]any) (CompactResult, *Error) {
		req := map[string]any{"messages": msgs, "config": cfg, "force": true}
		for k, v := range extra {
			req[k] = v
		}
		res, e := callOp(t, "compact.begin", req)
		if e != nil {
			return CompactResult{}, e
		}
		return decodeResult(t, res), nil
	}
	plain, e := begin(map[string]any{"summarizer": "builtin"})
	require.Nil(t, e)
	named, e := begin(map[string]any{"summarizer": "builtin", "archive_id": "r3"})
	require.Nil(t, e)
	rep := named.Report
	text := gjson.GetBytes(named.Messages[rep.HeadEnd], "content").Str
	plainText := gjson.GetBytes(plain.Messages[rep.HeadEnd], "content").Str
	require.True(t, strings.HasPrefix(text, plainText), "the lines are added at the end, nothing else changes")
	lines := strings.Split(text, "\n")
	last2 := lines[len(lines)-2:]
	want1 := fmt.Sprintf(`Archived as r3 (messages %d-%d of the conversation before this compaction): call context_expand with {"id": "r3"} for the originals, or context_search to find something in them.`, rep.Summarized.From, rep.Summarized.To-1)
	require.Equal(t, want1, last2[0])
	require.True(t, strings.HasPrefix(last2[1], RecallDetailsPrefix), last2[1])
	require.LessOrEqual(t, len(last2[1])-len(RecallDetailsPrefix), recallDetailsChars+100)
	require.Greater(t, rep.SummaryTokens, plain.Report.SummaryTokens, "summary_tokens counts the lines")
	require.NotContains(t, plainText, "Archived as")

	// A host summary that names nothing: the line lists the paths, the calls, the
	// requests and the error it left out, in that order.
	b, e := begin(map[string]any{"archive_id": "r1"})
	require.Nil(t, e)
	res, e := callOp(t, "compact.finish", map[string]any{"messages": msgs, "config": cfg, "force": true, "archive_id": "r1", "state": b.State, "summary": "The user and the agent worked on some code."})
	require.Nil(t, e)
	fin := decodeResult(t, res)
	text = gjson.GetBytes(fin.Messages[fin.Report.HeadEnd], "content").Str
	details := text[strings.LastIndex(text, RecallDetailsPrefix)+len(RecallDetailsPrefix):]
	require.Contains(t, text, "Archived as r1 (messages ")
	// The anchor check already put the paths, the requests and the error in the
	// summary (its Anchors section): the line does not repeat them; the calls with
	// their key arguments it lists.
	require.NotContains(t, details, "importer/step_5.py")
	require.Equal(t, `terminal(command="pytest -q")`, details, "a call on a file is listed by its path, and those the summary has")

	// Something the summary mentions is not listed.
	res, e = callOp(t, "compact.finish", map[string]any{"messages": msgs, "config": cfg, "force": true, "archive_id": "r1", "state": b.State, "summary": "Ran pytest -q; read importer/step_0.py."})
	require.Nil(t, e)
	fin = decodeResult(t, res)
	text = gjson.GetBytes(fin.Messages[fin.Report.HeadEnd], "content").Str
	details = text[strings.LastIndex(text, RecallDetailsPrefix)+len(RecallDetailsPrefix):]
	require.NotContains(t, details, "pytest -q")

	_, e = begin(map[string]any{"archive_id": "3"})
	require.NotNil(t, e)
	require.Equal(t, "/archive_id", e.Path)
	_, e = begin(map[string]any{"archive_id": 3})
	require.NotNil(t, e)
	require.Equal(t, "/archive_id", e.Path)
}

func TestRecallClosingOrderAndBound(t *testing.T) {
	var msgs []message
	raw := []string{`{"role":"user","content":"first request about the parser"}`}
	for i := 0; i < 40; i++ {
		raw = append(raw, fmt.Sprintf(`{"role":"assistant","content":"","tool_calls":[{"id":"c%d","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"pkg/dir_%02d/file.go\"}"}}]}`, i, i),
			fmt.Sprintf(`{"role":"tool","tool_call_id":"c%d","content":"ok"}`, i))
	}
	arr := "[" + strings.Join(raw, ",") + "]"
	msgs, err := parseMessages(gjson.Parse(arr), roughCounter, nil)
	require.NoError(t, err)
	out := recallClosing(msgs, plan{headEnd: 0, tailStart: len(msgs)}, "nothing named", "r1")
	line := strings.SplitN(out, "\n", 2)[1]
	require.True(t, strings.HasPrefix(line, RecallDetailsPrefix+"pkg/dir_00/file.go, pkg/dir_01/file.go"), "paths first, in order: %s", line)
	require.True(t, strings.HasSuffix(line, ", ..."), "bounded, and says so")
	require.LessOrEqual(t, len(line), len(RecallDetailsPrefix)+recallDetailsChars+5)
}

func TestIsRangeID(t *testing.T) {
	for _, ok := range []string{"r1", "r9", "r10", "r123456789"} {
		require.True(t, IsRangeID(ok), ok)
	}
	for _, bad := range []string{"", "r", "r0", "r01", "R1", "r1.2", "r1a", "1", "r1234567890", " r1"} {
		require.False(t, IsRangeID(bad), bad)
	}
}

// TestRecallFindsArchivedContentInEveryFormat: a compaction's archive, in every
// format, is searchable by what its messages say (texts, tool calls' names and
// arguments, tool outputs), not by their roles only, and its range carries the
// summary: the rows recall.archive makes of each generated session (the provider
// rules' sessions: every format, AI SDK for each provider), compacted at 8K, hold
// every call id the original message mentions and every text, as a store's
// case-insensitive substring search reads them.
func TestRecallFindsArchivedContentInEveryFormat(t *testing.T) {
	ids := regexp.MustCompile(`(?:call|toolu|read)_\d{3}_\d`)
	texts := regexp.MustCompile(`Task \d+: port the module\.|Done with step \d+\.`)
	for _, kind := range ruleKinds {
		t.Run(kind.name, func(t *testing.T) {
			s := genRuleSession(kind, 101, true)
			r := compactRules(t, s, s.msgs, 8_000)
			require.NotNil(t, r.Report.Summarized)
			req, err := json.Marshal(map[string]any{"session": "s", "range_id": "r1", "report": r.Report, "archived": r.Archived, "messages": r.Messages})
			require.NoError(t, err)
			var res RecallArchive
			require.NoError(t, json.Unmarshal([]byte(recallCall(t, "recall.archive", string(req)).Raw), &res))
			require.Contains(t, res.Range.Summary, SummaryPrefix, "the range's summary text")
			byID := map[string]RecallRow{}
			for _, row := range res.Rows {
				byID[row.ID] = row
			}
			require.Contains(t, strings.ToLower(byID["r1.summary"].Text), "summary")
			checked := 0
			for _, a := range r.Archived {
				row := byID["r1."+strconv.Itoa(a.Index)]
				text := strings.ToLower(row.Text)
				for _, w := range append(ids.FindAllString(string(a.Message), -1), texts.FindAllString(string(a.Message), -1)...) {
					require.Contains(t, text, strings.ToLower(w), "archived message %d (%s) is not found by %q: %s", a.Index, row.Role, w, a.Message)
					checked++
				}
			}
			require.Greater(t, checked, len(r.Archived), "words checked")
		})
	}
}
