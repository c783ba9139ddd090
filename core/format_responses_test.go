package core

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

// chatToResponses converts an OpenAI chat message list into Responses input items
// (openai-node 7.5.0 shapes): system and user messages as message items (text parts
// as input_text, images as input_image), an assistant message as an optional
// reasoning item (withReasoning: an encrypted one before each assistant message),
// a message item of output_text parts when it has text, and one function_call
// item per tool call; a tool row as a function_call_output. first[i] is the index of
// chat message i's first item (first[len(msgs)] is the number of items).
func chatToResponses(t testing.TB, msgs []json.RawMessage, withReasoning bool) (items []json.RawMessage, first []int) {
	t.Helper()
	add := func(v any) {
		b, err := marshal(v)
		require.NoError(t, err)
		items = append(items, json.RawMessage(strings.TrimSpace(string(b))))
	}
	parts := func(c gjson.Result, textType string) any {
		if c.Type == gjson.String || !c.IsArray() {
			return c.String()
		}
		var out []any
		for _, p := range c.Array() {
			switch p.Get("type").Str {
			case "image_url":
				out = append(out, map[string]any{"type": "input_image", "image_url": p.Get("image_url.url").Str, "detail": "auto"})
			default:
				out = append(out, map[string]any{"type": textType, "text": p.Get("text").Str})
			}
		}
		return out
	}
	for i, raw := range msgs {
		first = append(first, len(items))
		m := gjson.ParseBytes(raw)
		role := m.Get("role").Str
		switch role {
		case "tool":
			add(map[string]any{"type": "function_call_output", "call_id": m.Get("tool_call_id").Str, "output": parts(m.Get("content"), "input_text")})
		case "assistant":
			if withReasoning {
				add(map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", i), "summary": []any{}, "encrypted_content": fmt.Sprintf("gAAAAB%08d==", i)})
			}
			calls := m.Get("tool_calls").Array()
			if text := contentText(m.Get("content")); text != "" || len(calls) == 0 {
				add(map[string]any{"type": "message", "role": "assistant", "id": fmt.Sprintf("msg_%d", i), "status": "completed",
					"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
			}
			for _, c := range calls {
				add(map[string]any{"type": "function_call", "call_id": c.Get("id").Str, "name": c.Get("function.name").Str, "arguments": c.Get("function.arguments").Str})
			}
		default:
			add(map[string]any{"type": "message", "role": role, "content": parts(m.Get("content"), "input_text")})
		}
	}
	first = append(first, len(items))
	return items, first
}

// checkResponsesCompaction asserts the invariants of a compaction of Responses items:
// validate is clean on the output, every input item is returned unchanged or
// archived verbatim, and no reasoning item is left without the item it precedes.
func checkResponsesCompaction(t *testing.T, input []json.RawMessage, r CompactResult) {
	t.Helper()
	require.True(t, r.Done)
	out := r.Messages
	checkAccounted(t, FormatResponses, input, r)
	for k, m := range out {
		if gjson.GetBytes(m, "type").Str != "reasoning" {
			continue
		}
		require.Less(t, k+1, len(out), "a reasoning item ends the output")
		next := gjson.ParseBytes(out[k+1])
		typ := next.Get("type").Str
		require.True(t, typ == "function_call" || typ == "reasoning" || next.Get("role").Str == "assistant",
			"reasoning item at output %d is followed by %s", k, out[k+1])
	}
}

// TestResponsesTraces converts every shared OpenAI-chat trace to Responses items
// (plain, and with a reasoning item before each assistant message), compacts each
// at 16K-128K, and checks the invariants and that it is the chat trace's compaction:
// the same chat messages summarized (head_end and tail_start mapped to items
// agree) and the tokens before and after within 5%.
func TestResponsesTraces(t *testing.T) {
	skipShort(t)
	paths := testtraces.Glob(t, "*.json")
	var names []string
	traces := map[string][]json.RawMessage{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		data := gjson.ParseBytes(raw)
		if data.Get("format").Str != "openai-chat" {
			continue
		}
		var msgs []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(data.Get("messages").Raw), &msgs))
		name := strings.TrimSuffix(p[strings.LastIndexByte(p, '/')+1:], ".json")
		names = append(names, name)
		traces[name] = msgs
	}
	sort.Strings(names)
	runs, same := 0, 0
	maxDiff := 0.0
	type variant struct {
		name                    string
		reasoning, instructions bool
	}
	variants := []variant{{"plain", false, false}, {"reasoning", true, false}, {"instructions", false, true}}
	for _, name := range names {
		msgs := traces[name]
		for _, vr := range variants {
			items, first := chatToResponses(t, msgs, vr.reasoning)
			var system any
			if vr.instructions {
				if gjson.GetBytes(msgs[0], "role").Str != "system" {
					continue
				}
				// The system message becomes the instructions (which protect_first_n
				// counts as the first turn, as it counts a top-level system).
				system = gjson.GetBytes(msgs[0], "content").Str
				items = items[1:]
				for i := range first {
					first[i] = max(0, first[i]-1)
				}
			}
			for _, encoding := range []string{"rough", EncodingO200k} {
				for _, window := range []int{16_000, 32_000, 64_000, 128_000} {
					t.Run(fmt.Sprintf("%s/%s/%s/%dk", name, vr.name, encoding, window/1000), func(t *testing.T) {
						cfg := func() map[string]any {
							return map[string]any{"model": map[string]any{"context_length": window}, "tokens": map[string]any{"encoding": encoding},
								"compression": map[string]any{"protect_first_n": 3}}
						}
						res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg(), "force": true, "summarizer": "builtin"})
						require.Nil(t, e)
						chat := decodeResult(t, res).Report
						req := map[string]any{"messages": items, "config": cfg(), "force": true, "summarizer": "builtin"}
						if system != nil {
							req["system"] = system
						}
						res, e = callOp(t, "compact.begin", req)
						require.Nil(t, e)
						r := decodeResult(t, res)
						checkResponsesCompaction(t, items, r)
						rep := r.Report
						if system == nil { // the report's numbers are the output's
							c, e := callOp(t, "tokens.count", map[string]any{"messages": r.Messages, "config": cfg()})
							require.Nil(t, e)
							priming := 0 // tokens.count adds the reply priming of an exact count, as for chat
							if encoding != "rough" {
								priming = exactReplyTokens
							}
							require.Equal(t, rep.TokensAfter+priming, int(gjson.GetBytes(c, "total").Int()))
						}
						runs++
						if chat.TailStart > chat.HeadEnd { // something summarized: the same range
							require.Equal(t, first[chat.HeadEnd], rep.HeadEnd, "head_end: chat %d", chat.HeadEnd)
							require.Equal(t, first[chat.TailStart], rep.TailStart, "tail_start: chat %d", chat.TailStart)
						} else {
							require.Nil(t, rep.Summarized, "chat summarized nothing")
						}
						require.Equal(t, chat.Pruned == nil || len(chat.Pruned) == 0, len(rep.Pruned) == 0, "pruned: chat %v, responses %v", chat.Pruned, rep.Pruned)
						if vr.instructions && rep.Summarized != nil {
							require.Contains(t, gjson.GetBytes(res, "system").Str, "[Note: earlier turns", "the instructions take the note")
						}
						same++
						for _, pair := range [][2]int{{chat.TokensBefore, rep.TokensBefore}, {chat.TokensAfter, rep.TokensAfter}} {
							d := math.Abs(float64(pair[1]-pair[0])) / float64(pair[0])
							maxDiff = max(maxDiff, d)
							require.Less(t, d, 0.05, "tokens chat %d, responses %d", pair[0], pair[1])
						}
					})
				}
			}
		}
	}
	t.Logf("responses: %d compactions of %d traces, %d the chat trace's, tokens within %.2f%%", runs, len(names), same, 100*maxDiff)
}

// Responses builders for edge-case scenarios.
func rmsg(role, text string) map[string]any {
	return map[string]any{"type": "message", "role": role, "content": text}
}
func rcall(typ, id string, extra ...any) map[string]any {
	m := map[string]any{"type": typ, "call_id": id}
	if typ == "mcp_approval_request" {
		m = map[string]any{"type": typ, "id": id, "server_label": "deepwiki"}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}
func rout(typ, id string, extra ...any) map[string]any {
	m := map[string]any{"type": typ, "call_id": id}
	switch typ {
	case "local_shell_call_output":
		m = map[string]any{"type": typ, "id": id}
	case "mcp_approval_response":
		m = map[string]any{"type": typ, "approval_request_id": id}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}
func rfn(id, path string) map[string]any {
	return rcall("function_call", id, "name", "read_file", "arguments", args("path", path))
}
func rfnOut(id, out string) map[string]any { return rout("function_call_output", id, "output", out) }
func reasoning(id string) map[string]any {
	return map[string]any{"type": "reasoning", "id": id, "summary": []any{}, "encrypted_content": "gAAAAB" + id + "=="}
}

// responsesSession is smallSession as Responses items, each tool turn a reasoning
// item, a function_call and its output.
func responsesSession(turns int) []any {
	m := []any{rmsg("developer", "You are a coding agent."), rmsg("user", "Refactor the parser module."), rmsg("assistant", "I'll start by reading the files.")}
	for i := 0; i < turns; i++ {
		id := fmt.Sprintf("t%d", i)
		m = append(m, reasoning("rs_"+id), rfn(id, fmt.Sprintf("src/parser_%d.py", i)), rfnOut(id, code(fmt.Sprintf("parser%d", i), 800)))
	}
	return append(m, rmsg("assistant", "The parser is split into a lexer and a grammar now."), rmsg("user", "Now add tests for the lexer."))
}

func responsesBeginCases() []genCase {
	s := responsesSession(6)
	parallelHead := cat(s[:2], reasoning("rs_p"), rmsg("assistant", "Reading all three at once."),
		rfn("p1", "a.toml"), rfn("p2", "b.toml"), rfn("p3", "c.toml"),
		rfnOut("p1", code("a", 300)), rfnOut("p2", code("b", 300)), rfnOut("p3", code("c", 300)), s[3:])
	parallelTail := cat(s[:len(s)-2], reasoning("rs_q"),
		rcall("function_call", "q1", "name", "terminal", "arguments", args("command", "ruff check src")),
		rcall("function_call", "q2", "name", "terminal", "arguments", args("command", "mypy src")),
		rfnOut("q1", code("ruff", 500)), rfnOut("q2", code("mypy", 500)),
		rmsg("assistant", "Both linters pass."), rmsg("user", "Ship it."))
	compaction := cat([]any{rmsg("user", "Refactor the parser module."), map[string]any{"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAABcompacted=="}}, s[3:])
	orphans := cat(s, rfnOut("ghost", "a result whose call was never recorded"),
		rcall("function_call", "lost", "name", "terminal", "arguments", args("command", "pytest")),
		rcall("custom_tool_call", "lost_custom", "name", "apply_grammar", "input", "start: expr"),
		rcall("local_shell_call", "lost_local", "action", map[string]any{"type": "exec", "command": []any{"ls"}, "env": map[string]any{}}),
		rcall("shell_call", "lost_shell", "action", map[string]any{"commands": []any{"make"}}),
		rcall("apply_patch_call", "lost_patch", "status", "completed", "operation", map[string]any{"type": "delete_file", "path": "old.py"}),
		rmsg("user", "Did the tests pass?"),
		reasoning("rs_c"), rcall("computer_call", "lost_computer", "id", "cu_1", "status", "completed", "pending_safety_checks", []any{}, "action", map[string]any{"type": "screenshot"}),
		rcall("mcp_approval_request", "mcpr_1", "name", "ask_question", "arguments", "{}"),
		rmsg("user", "And the screenshot?"),
		map[string]any{"type": "compaction_trigger"},
		rout("computer_call_output", "ghost_computer", "output", map[string]any{"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}),
		rout("mcp_approval_response", "ghost_mcp", "approve", true),
		rout("local_shell_call_output", "ghost_local", "output", "{}"),
		map[string]any{"type": "web_search_call", "id": "ws_1", "status": "completed", "action": map[string]any{"type": "search", "query": "lexer"}},
		rmsg("assistant", "Searched."))
	camel := []any{rmsg("system", "You are a coding agent."), map[string]any{"role": "user", "content": "Refactor the parser module."}}
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("c%d", i)
		camel = append(camel, map[string]any{"type": "function_call", "callId": id, "name": "read_file", "arguments": args("path", fmt.Sprintf("src/p%d.py", i)), "status": "completed"},
			map[string]any{"type": "function_call_result", "callId": id, "name": "read_file", "status": "completed", "output": code(fmt.Sprintf("p%d", i), 800)})
	}
	camel = append(camel, map[string]any{"type": "function_call", "callId": "c_lost", "name": "terminal", "arguments": args("command", "make"), "status": "completed"},
		map[string]any{"role": "user", "content": "Now add tests."})
	return []genCase{
		{"responses-session-builtin", map[string]any{"messages": s, "format": "responses", "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"responses-instructions-take-the-note", map[string]any{"messages": s[1:], "system": "You are a coding agent.", "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"responses-parallel-calls-at-head-boundary", map[string]any{"messages": parallelHead, "format": "openai-responses", "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"responses-parallel-calls-at-tail-boundary", map[string]any{"messages": parallelTail, "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"responses-head-extends-through-compaction-item", map[string]any{"messages": compaction, "config": map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_first_n": 0, "protect_last_n": 4}}, "force": true, "summarizer": "builtin"}},
		{"responses-orphans-of-each-call-type", map[string]any{"messages": orphans, "config": map[string]any{"model": map[string]any{"context_length": 6000}, "compression": map[string]any{"protect_last_n": 12}}, "force": true, "summarizer": "builtin"}},
		{"responses-agents-sdk-camel-case", map[string]any{"messages": camel, "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"responses-summary-request", map[string]any{"messages": s, "config": tinyWindow, "force": true}},
	}
}

func compactResult(t *testing.T, req map[string]any) CompactResult {
	t.Helper()
	res, e := callOp(t, "compact.begin", req)
	require.Nil(t, e)
	return decodeResult(t, res)
}

// TestResponsesScenarios asserts the meaning of each Responses vector.
func TestResponsesScenarios(t *testing.T) {
	cases := map[string]map[string]any{}
	for _, c := range responsesBeginCases() {
		cases[c.name] = c.request
	}
	types := func(out []json.RawMessage) []string {
		var ts []string
		for _, m := range out {
			ts = append(ts, gjson.GetBytes(m, "type").Str)
		}
		return ts
	}
	t.Run("session", func(t *testing.T) {
		r := compactResult(t, cases["responses-session-builtin"])
		checkResponsesCompaction(t, toRaw(t, cases["responses-session-builtin"]["messages"]), r)
		require.NotNil(t, r.Report.Summarized)
		sum := gjson.ParseBytes(r.Messages[r.Report.HeadEnd])
		require.Equal(t, "message", sum.Get("type").Str)
		require.Contains(t, sum.Get("content").Str, SummaryPrefix)
		require.Contains(t, string(r.Messages[0]), "[Note: earlier turns", "the developer message takes the note")
		// A boundary never falls between a reasoning item and its call.
		in := toRaw(t, cases["responses-session-builtin"]["messages"])
		require.NotEqual(t, "function_call", gjson.GetBytes(in[r.Report.TailStart], "type").Str)
	})
	t.Run("instructions", func(t *testing.T) {
		res, e := callOp(t, "compact.begin", cases["responses-instructions-take-the-note"])
		require.Nil(t, e)
		require.Contains(t, gjson.GetBytes(res, "system").Str, "[Note: earlier turns")
		r := decodeResult(t, res)
		require.True(t, r.Report.SystemNoteAdded)
	})
	for _, name := range []string{"responses-parallel-calls-at-head-boundary", "responses-parallel-calls-at-tail-boundary"} {
		t.Run(name, func(t *testing.T) {
			in := toRaw(t, cases[name]["messages"])
			r := compactResult(t, cases[name])
			checkResponsesCompaction(t, in, r)
			for _, b := range []int{r.Report.HeadEnd, r.Report.TailStart} {
				if b < len(in) {
					typ := gjson.GetBytes(in[b], "type").Str
					require.NotContains(t, []string{"function_call", "function_call_output"}, typ, "boundary %d inside a group", b)
				}
			}
		})
	}
	t.Run("compaction-item", func(t *testing.T) {
		r := compactResult(t, cases["responses-head-extends-through-compaction-item"])
		require.Equal(t, 2, r.Report.HeadEnd, "the head keeps everything through the compaction item, and no more with protect_first_n 0")
		require.Equal(t, "compaction", gjson.GetBytes(r.Messages[1], "type").Str)
		require.NotNil(t, r.Report.Summarized)
	})
	t.Run("orphans", func(t *testing.T) {
		in := toRaw(t, cases["responses-orphans-of-each-call-type"]["messages"])
		r := compactResult(t, cases["responses-orphans-of-each-call-type"])
		checkResponsesCompaction(t, in, r)
		require.ElementsMatch(t, []string{"lost", "lost_custom", "lost_local", "lost_shell", "lost_patch"}, r.Report.StubsAdded)
		ts := types(r.Messages)
		for _, gone := range []string{"computer_call", "mcp_approval_request", "compaction_trigger", "computer_call_output", "mcp_approval_response", "local_shell_call_output"} {
			if gone == "local_shell_call_output" {
				require.Contains(t, string(joinItems(r.Messages)), `"id":"lost_local"`, "the local shell stub answers by id")
				continue
			}
			require.NotContains(t, ts, gone)
		}
		require.Contains(t, ts, "web_search_call", "a server-side item is kept")
		// The reasoning item before the removed computer_call goes with it.
		for _, i := range r.Report.OrphansRemoved {
			if gjson.GetBytes(in[i], "type").Str == "computer_call" {
				require.Contains(t, r.Report.OrphansRemoved, i-1)
			}
		}
	})
	t.Run("camel", func(t *testing.T) {
		in := toRaw(t, cases["responses-agents-sdk-camel-case"]["messages"])
		r := compactResult(t, cases["responses-agents-sdk-camel-case"])
		checkResponsesCompaction(t, in, r)
		require.Equal(t, []string{"c_lost"}, r.Report.StubsAdded)
		require.Contains(t, string(joinItems(r.Messages)), `{"callId":"c_lost","name":"terminal","output":"`+stubResultText+`","status":"completed","type":"function_call_result"}`)
	})
}

func toRaw(t *testing.T, v any) []json.RawMessage {
	b, err := marshal(v)
	require.NoError(t, err)
	var out []json.RawMessage
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func joinItems(ms []json.RawMessage) []byte {
	var b []byte
	for _, m := range ms {
		b = append(append(b, m...), '\n')
	}
	return b
}

// responsesPartsSession has outputs as lists of input_text parts (and a screenshot
// output, never pruned).
func responsesPartsSession() []any {
	m := []any{rmsg("developer", "You are a coding agent."), rmsg("user", "Read the modules.")}
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("v%d", i)
		m = append(m, rfn(id, fmt.Sprintf("pkg/m%d.go", i)), rout("function_call_output", id, "output", []any{
			map[string]any{"type": "input_text", "text": code(fmt.Sprintf("m%d", i), 600)},
			map[string]any{"type": "input_text", "text": code(fmt.Sprintf("n%d", i), 300)}}))
	}
	m = append(m, rcall("computer_call", "cc1", "id", "cu_1", "status", "completed", "pending_safety_checks", []any{}, "action", map[string]any{"type": "screenshot"}),
		rout("computer_call_output", "cc1", "output", map[string]any{"type": "computer_screenshot", "image_url": "data:image/png;base64," + strings.Repeat("QUFB", 200)}))
	return append(m, rmsg("assistant", "Read them all."), rmsg("user", "Summarize."))
}

// TestResponsesPrune: long outputs outside the budgeted tail become placeholders
// (a list of parts becomes the placeholder string); a screenshot is kept.
func TestResponsesPrune(t *testing.T) {
	res, e := callOp(t, "prune", map[string]any{"messages": responsesPartsSession(), "config": tinyWindow})
	require.Nil(t, e)
	var r struct {
		Messages []json.RawMessage `json:"messages"`
		Pruned   []int             `json:"pruned"`
	}
	require.NoError(t, json.Unmarshal(res, &r))
	require.NotEmpty(t, r.Pruned)
	for _, i := range r.Pruned {
		out := gjson.GetBytes(r.Messages[i], "output")
		require.Equal(t, gjson.String, out.Type)
		require.True(t, strings.HasPrefix(out.Str, PrunedPrefix), out.Str)
		require.Contains(t, out.Str, "read_file")
		require.Equal(t, "function_call_output", gjson.GetBytes(r.Messages[i], "type").Str)
	}
	for _, m := range r.Messages {
		if gjson.GetBytes(m, "type").Str == "computer_call_output" {
			require.Equal(t, "computer_screenshot", gjson.GetBytes(m, "output.type").Str)
		}
	}
}

// TestResponsesCacheMarks: cache.apply puts prompt_cache_breakpoint on input parts
// (the developer message and the last three items that can carry one; never an
// assistant message or a call), a string becomes an input_text part, and applying
// it to its own output gives the same bytes.
func TestResponsesCacheMarks(t *testing.T) {
	msgs := cat(responsesSession(2), rmsg("assistant", "Tests added."))
	res, e := callOp(t, "cache.apply", map[string]any{"messages": msgs})
	require.Nil(t, e)
	var r struct {
		Messages []json.RawMessage `json:"messages"`
		Marked   []int             `json:"marked"`
	}
	require.NoError(t, json.Unmarshal(res, &r))
	in := toRaw(t, msgs)
	// 0 developer, 1 user, 2 assistant, 3 rs, 4 fc, 5 out, 6 rs, 7 fc, 8 out, 9 assistant, 10 user, 11 assistant
	require.Equal(t, []int{0, 5, 8, 10}, r.Marked)
	for i, m := range r.Messages {
		if !slices.Contains(r.Marked, i) {
			require.JSONEq(t, string(in[i]), string(m), "item %d unmarked", i)
			continue
		}
		key := "content"
		if gjson.GetBytes(m, "type").Str == "function_call_output" {
			key = "output"
		}
		require.Equal(t, `{"mode":"explicit"}`, gjson.GetBytes(m, key+".0.prompt_cache_breakpoint").Raw, "item %d: %s", i, m)
		require.Equal(t, "input_text", gjson.GetBytes(m, key+".0.type").Str)
	}
	again, e := callOp(t, "cache.apply", map[string]any{"messages": r.Messages, "format": "responses"})
	require.Nil(t, e)
	require.Equal(t, string(res), string(again), "idempotent")
}

// TestResponsesHostSummary: the host protocol on Responses items: begin asks,
// finish writes the host's summary as a message item, and compacting the result
// again updates that summary (it is found as the previous one).
func TestResponsesHostSummary(t *testing.T) {
	req := map[string]any{"messages": responsesSession(8), "config": tinyWindow, "force": true}
	res, e := callOp(t, "compact.begin", req)
	require.Nil(t, e)
	begin := decodeResult(t, res)
	require.False(t, begin.Done)
	req["state"], req["summary"] = begin.State, "## Goal\nHost summary of the parser refactor."
	res, e = callOp(t, "compact.finish", req)
	require.Nil(t, e)
	fin := decodeResult(t, res)
	in := toRaw(t, responsesSession(8))
	checkResponsesCompaction(t, in, fin)
	sum := gjson.ParseBytes(fin.Messages[fin.Report.HeadEnd])
	require.Equal(t, "message", sum.Get("type").Str)
	require.Contains(t, sum.Get("content").Str, "Host summary of the parser refactor.")

	again := cat(toAny(fin.Messages), reasoning("rs_x"), rfn("x1", "src/lexer.py"), rfnOut("x1", code("lexer", 800)),
		rmsg("assistant", "Read the lexer."), rmsg("user", "Go on."))
	res, e = callOp(t, "compact.begin", map[string]any{"messages": again, "config": tinyWindow, "force": true})
	require.Nil(t, e)
	second := decodeResult(t, res)
	require.False(t, second.Done)
	require.True(t, second.SummaryRequest.Iterative)
	require.Contains(t, second.SummaryRequest.Messages[1].Content, "Host summary of the parser refactor.")
}

func toAny(ms []json.RawMessage) []any {
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// TestResponsesReader pins how items read: kinds, ids, summaries in parts.
func TestResponsesReader(t *testing.T) {
	f := newResponsesFormat()
	read := func(raw string) *message {
		m, err := f.readOne(raw, "/messages/0")
		require.NoError(t, err, raw)
		return &m
	}
	require.True(t, read(`{"type":"message","role":"user","content":[{"type":"input_text","text":"`+SummaryPrefix+` earlier"}]}`).isSummary())
	require.Equal(t, kindOpaque, read(`{"id":"msg_1"}`).kind(), "an item_reference without its type")
	require.Equal(t, kindOpaque, read(`{"type":"some_future_item","x":1}`).kind())
	c := read(`{"type":"local_shell_call","call_id":"ls1","action":{"type":"exec","command":["ls"]}}`)
	require.Equal(t, kindCall, c.kind())
	require.Equal(t, "ls1", c.calls[0].id)
	require.Equal(t, "ls1", read(`{"type":"local_shell_call_output","id":"ls1","output":"{}"}`).resultFor)
	require.Equal(t, "mcpr_1", read(`{"type":"mcp_approval_request","id":"mcpr_1","name":"n","arguments":"{}","server_label":"s"}`).calls[0].id)
	require.Equal(t, "mcpr_1", read(`{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}`).resultFor)
	require.Equal(t, "c1", read(`{"type":"function_call_result","callId":"c1","name":"f","status":"completed","output":"x"}`).resultFor)
	require.Equal(t, "user", read(`{"role":"user","content":"hi"}`).role, "an EasyInputMessage")
	for raw, path := range map[string]string{
		`[1]`:                                 "/messages/0",
		`{"type":7}`:                          "/messages/0/type",
		`{"type":"message","content":"x"}`:    "/messages/0/role",
		`{"type":"message","role":"tool"}`:    "/messages/0/role",
		`{"role":"user","content":{"a":1}}`:   "/messages/0/content",
		`{"content":"neither type nor role"}`: "/messages/0",
	} {
		_, err := f.readOne(raw, "/messages/0")
		require.Error(t, err, raw)
		require.Equal(t, path, err.(*Error).Path, raw)
		require.Equal(t, CodeInvalidMessages, err.(*Error).Code)
	}
}

// TestResponsesOutputObjects: output objects are counted (a screenshot as an image)
// and the Agents SDK's text object is pruned to the placeholder string.
func TestResponsesOutputObjects(t *testing.T) {
	f := newResponsesFormat()
	shot := `{"type":"computer_call_output","call_id":"c1","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,` + strings.Repeat("QUFB", 5000) + `"}}`
	require.Equal(t, messageOverheadTokens+imageTokens, f.countItem(roughCounter, shot))
	long := code("out", 900)
	obj := `{"type":"function_call_result","callId":"c2","name":"read_file","status":"completed","output":{"type":"text","text":` + string(mustMarshal(long)) + `}}`
	require.Greater(t, f.countItem(roughCounter, obj), 200)
	m, err := f.readOne(obj, "")
	require.NoError(t, err)
	n, ok := f.prunable(&m)
	require.True(t, ok)
	require.Equal(t, len(long), n)
	out := gjson.Parse(f.pruned(&m, callIndex{}, n)).Get("output")
	require.Equal(t, gjson.String, out.Type)
	require.True(t, strings.HasPrefix(out.Str, PrunedPrefix))
	m, _ = f.readOne(shot, "")
	_, ok = f.prunable(&m)
	require.False(t, ok, "a screenshot is never pruned")
}

// BenchmarkCompactTracesResponses is BenchmarkCompactTraces/builtin on the OpenAI-chat
// traces converted to Responses items (the anthropic-format copies left out), beside
// the same traces as chat: MB/s over each request's bytes.
func BenchmarkCompactTracesResponses(b *testing.B) {
	traces := loadTraces(b)
	var names []string
	for n := range traces {
		if !strings.HasPrefix(n, "anthropic-") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, format := range []string{"chat", "responses"} {
		b.Run(format, func(b *testing.B) {
			var reqs [][]byte
			var total int64
			for _, n := range names {
				msgs := traces[n]
				if format == "responses" {
					var chat []json.RawMessage
					require.NoError(b, json.Unmarshal(msgs, &chat))
					items, _ := chatToResponses(b, chat, true)
					var err error
					msgs, err = json.Marshal(items)
					require.NoError(b, err)
				}
				req := []byte(fmt.Sprintf(`{"op":"compact.begin","force":true,"summarizer":"builtin","config":{"model":{"context_length":32000}},"messages":%s}`, msgs))
				reqs = append(reqs, req)
				total += int64(len(req))
			}
			b.SetBytes(total)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, r := range reqs {
					Call(r)
				}
			}
		})
	}
}
