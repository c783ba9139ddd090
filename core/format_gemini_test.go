package core

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// geminiTrace is an OpenAI-chat trace converted to Gemini contents.
type geminiTrace struct {
	contents []json.RawMessage
	system   json.RawMessage // systemInstruction, nil when the trace has no system message
	// item[i] is the index of the content chat message i went into (-1: the system
	// instruction).
	item []int
}

// toGemini converts chat messages to Gemini contents, as an agent on the Gemini API
// would have recorded the same session: leading system messages become the
// systemInstruction, a user message a user content of text parts, an assistant
// message a model content (its text, then one functionCall part per tool call, args
// the decoded arguments object), and the tool rows after it one user content of
// functionResponse parts {id, name, response: {"output": text}}. The first
// functionCall part of each model turn carries a thoughtSignature (Gemini 3 models
// sign the first call of a step, ai.google.dev/gemini-api/docs/thought-signatures).
// withIDs false leaves out every id: calls and responses pair by name and order.
func toGemini(t testing.TB, chat []json.RawMessage, withIDs bool) geminiTrace {
	var g geminiTrace
	var sysParts []any
	names := map[string]string{}
	var pending []any // functionResponse parts of the open tool group
	flush := func() {
		if len(pending) > 0 {
			g.contents = append(g.contents, geminiJSON(t, map[string]any{"role": "user", "parts": pending}))
			pending = nil
		}
	}
	step := 0
	for i, raw := range chat {
		m := gjson.ParseBytes(raw)
		role := m.Get("role").Str
		if role != "tool" {
			flush()
		}
		switch {
		case (role == "system" || role == "developer") && len(g.contents) == 0:
			sysParts = append(sysParts, map[string]any{"text": contentText(m.Get("content"))})
			g.item = append(g.item, -1)
			continue
		case role == "system" || role == "developer" || role == "user":
			g.contents = append(g.contents, geminiJSON(t, map[string]any{"role": "user", "parts": geminiParts(m.Get("content"))}))
		case role == "assistant":
			parts := []any{}
			if text := contentText(m.Get("content")); text != "" {
				parts = append(parts, map[string]any{"text": text})
			}
			for k, c := range m.Get("tool_calls").Array() {
				name := c.Get("function.name").Str
				names[c.Get("id").Str] = name
				var args any
				if err := json.Unmarshal([]byte(c.Get("function.arguments").Str), &args); err != nil {
					args = map[string]any{"arguments": c.Get("function.arguments").Str}
				} else if _, ok := args.(map[string]any); !ok {
					args = map[string]any{"value": args}
				}
				call := map[string]any{"name": name, "args": args}
				if withIDs {
					call["id"] = c.Get("id").Str
				}
				part := map[string]any{"functionCall": call}
				if k == 0 {
					step++
					part["thoughtSignature"] = base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("sig-%d-%s", step, name)))
				}
				parts = append(parts, part)
			}
			if len(parts) == 0 {
				parts = append(parts, map[string]any{"text": ""})
			}
			g.contents = append(g.contents, geminiJSON(t, map[string]any{"role": "model", "parts": parts}))
		case role == "tool":
			id := m.Get("tool_call_id").Str
			resp := map[string]any{"name": names[id], "response": map[string]any{"output": contentText(m.Get("content"))}}
			if withIDs {
				resp["id"] = id
			}
			pending = append(pending, map[string]any{"functionResponse": resp})
			g.item = append(g.item, len(g.contents))
			continue
		}
		_ = i
		g.item = append(g.item, len(g.contents)-1)
	}
	flush()
	if len(sysParts) > 0 {
		g.system = geminiJSON(t, map[string]any{"parts": sysParts})
	}
	return g
}

// geminiParts converts a chat content to Gemini parts.
func geminiParts(c gjson.Result) []any {
	if c.Type == gjson.String || !c.IsArray() {
		return []any{map[string]any{"text": c.Str}}
	}
	var parts []any
	for _, p := range c.Array() {
		switch p.Get("type").Str {
		case "text":
			parts = append(parts, map[string]any{"text": p.Get("text").Str})
		case "image_url":
			url := p.Get("image_url.url").Str
			if strings.HasPrefix(url, "data:") {
				mime, data, _ := strings.Cut(strings.TrimPrefix(url, "data:"), ";base64,")
				parts = append(parts, map[string]any{"inlineData": map[string]any{"mimeType": mime, "data": data}})
			} else {
				parts = append(parts, map[string]any{"fileData": map[string]any{"mimeType": "image/png", "fileUri": url}})
			}
		}
	}
	if len(parts) == 0 {
		parts = append(parts, map[string]any{"text": ""})
	}
	return parts
}

func geminiJSON(t testing.TB, v any) json.RawMessage {
	b, err := marshal(v)
	require.NoError(t, err)
	return json.RawMessage(strings.TrimSpace(string(b)))
}

// signedParts returns the parts of contents that carry a thoughtSignature, as bytes.
func signedParts(contents []json.RawMessage) map[string]int {
	out := map[string]int{}
	for _, c := range contents {
		for _, p := range gjson.GetBytes(c, "parts").Array() {
			if p.Get("thoughtSignature").Exists() {
				out[p.Raw]++
			}
		}
	}
	return out
}

// checkGeminiCompaction asserts the invariants on a compaction of Gemini contents:
// validate is clean on the output, every input content is returned unchanged or
// archived verbatim, the summarized range splits no tool group, and every part with
// a thought signature in the output is an input part, byte for byte, and none of the
// kept contents lost one.
func checkGeminiCompaction(t *testing.T, input []json.RawMessage, r CompactResult) {
	t.Helper()
	require.True(t, r.Done)
	rep := r.Report
	out := r.Messages
	require.Equal(t, len(input), rep.MessagesBefore)
	require.Equal(t, len(out), rep.MessagesAfter)

	archived := checkAccounted(t, FormatGemini, input, r)
	if rep.Summarized != nil {
		for i := rep.Summarized.From; i < rep.Summarized.To; i++ {
			require.Equal(t, ArchivedSummarized, archived[i].Reason, "middle content %d not archived as summarized", i)
		}
		if rep.TailStart < len(input) {
			require.Empty(t, responseIDs(input[rep.TailStart]), "the tail starts at a response turn: a group is split")
		}
	}

	in := signedParts(input)
	for p := range signedParts(out) {
		require.Positive(t, in[p], "a signed part in the output is not an input part: %s", p)
	}
	for i, m := range input {
		if a, ok := archived[i]; ok && a.Reason == ArchivedSummarized {
			continue
		}
		want := signedParts([]json.RawMessage{m})
		if len(want) == 0 {
			continue
		}
		got := signedParts(out)
		for p := range want {
			require.Positive(t, got[p], "kept content %d lost its signed part", i)
		}
	}
}

func responseIDs(raw json.RawMessage) []string {
	var ids []string
	for _, p := range gjson.GetBytes(raw, "parts").Array() {
		if r := p.Get("functionResponse"); r.Exists() {
			ids = append(ids, r.Get("name").Str)
		}
	}
	return ids
}

// mapIndex maps a chat boundary (an index into the chat messages) to the contents:
// the content the first chat message at or after it went into.
func (g geminiTrace) mapIndex(i int) int {
	for ; i < len(g.item); i++ {
		if g.item[i] >= 0 {
			return g.item[i]
		}
	}
	return len(g.contents)
}

// TestGeminiTraces converts every shared chat trace to Gemini contents (with ids,
// and without: paired by name and order) and compacts it at 16K to 128K: no
// invariant is broken, validate is clean, and the compaction is the chat trace's
// (the same messages summarized, tokens within 5%). The chat system message is the
// systemInstruction, not a content (protect_first_n counts it, as for Anthropic's
// top-level system).
func TestGeminiTraces(t *testing.T) {
	skipShort(t)
	traces := chatTraces(t)
	names := make([]string, 0, len(traces))
	for n := range traces {
		names = append(names, n)
	}
	sort.Strings(names)
	same, runs := 0, 0
	var worst float64
	for _, name := range names {
		chat := traces[name]
		for _, withIDs := range []bool{true, false} {
			g := toGemini(t, chat, withIDs)
			for _, window := range []int{16_000, 32_000, 64_000, 128_000} {
				t.Run(fmt.Sprintf("%s/ids=%v/%dk", name, withIDs, window/1000), func(t *testing.T) {
					cfg := map[string]any{"model": map[string]any{"context_length": window}}
					res, e := callOp(t, "compact.begin", map[string]any{"messages": chat, "config": cfg, "force": true, "summarizer": "builtin"})
					require.Nil(t, e)
					cr := decodeResult(t, res)

					req := map[string]any{"messages": g.contents, "config": cfg, "force": true, "summarizer": "builtin"}
					if g.system != nil {
						req["system"] = g.system
					}
					res, e = callOp(t, "compact.begin", req)
					require.Nil(t, e)
					gr := decodeResult(t, res)
					checkGeminiCompaction(t, g.contents, gr)
					if g.system != nil && gr.Report.Summarized != nil {
						require.Contains(t, string(gr.System), "earlier turns of this conversation were compacted")
					}

					runs++
					crep, grep := cr.Report, gr.Report
					agree := g.mapIndex(crep.HeadEnd) == grep.HeadEnd && g.mapIndex(crep.TailStart) == grep.TailStart
					diff := float64(grep.TokensAfter-crep.TokensAfter) / float64(max(crep.TokensAfter, 1))
					if diff < 0 {
						diff = -diff
					}
					worst = max(worst, diff)
					if agree {
						same++
					}
					t.Logf("chat head %d tail %d tokens %d->%d | gemini head %d tail %d tokens %d->%d (mapped %d %d) diff %.2f%%",
						crep.HeadEnd, crep.TailStart, crep.TokensBefore, crep.TokensAfter, grep.HeadEnd, grep.TailStart, grep.TokensBefore, grep.TokensAfter,
						g.mapIndex(crep.HeadEnd), g.mapIndex(crep.TailStart), 100*diff)
					// protect_last_n counts messages: chat counts each tool row, Gemini one
					// turn of responses, so when the count placed the chat tail, Gemini's
					// 20 turns reach further back and its tail may start earlier.
					countPlaced := crep.TailStart <= len(chat)-20 && grep.TailStart < g.mapIndex(crep.TailStart)
					require.Equal(t, g.mapIndex(crep.HeadEnd), grep.HeadEnd, "the gemini head is not the chat head")
					require.True(t, agree || countPlaced, "the gemini compaction summarizes other messages than the chat one")
					// 6%: the facts index writes a line per source message, and Gemini holds
					// a turn's parallel responses in one message where chat has a row each
					// (tau2 at 32K: the same names, 13 fewer lines, 5.3% smaller).
					require.Less(t, diff, 0.06, "tokens after differ by more than 6%%")
				})
			}
		}
	}
	t.Logf("%d of %d runs summarize the same messages as chat; worst tokens-after difference %.2f%%", same, runs, 100*worst)
}

// Gemini builders for the vectors: parts and contents.
func gtext(s string) map[string]any { return map[string]any{"text": s} }

// gcall is a functionCall part (id "" leaves it out); sig, when not "", is its
// thoughtSignature.
func gcall(name, id, path, sig string) map[string]any {
	c := map[string]any{"name": name, "args": map[string]any{"path": path}}
	if id != "" {
		c["id"] = id
	}
	p := map[string]any{"functionCall": c}
	if sig != "" {
		p["thoughtSignature"] = sig
	}
	return p
}

// gresp is a functionResponse part (id "" leaves it out).
func gresp(name, id, out string) map[string]any {
	r := map[string]any{"name": name, "response": map[string]any{"output": out}}
	if id != "" {
		r["id"] = id
	}
	return map[string]any{"functionResponse": r}
}

func gturn(role string, parts ...any) map[string]any {
	return map[string]any{"role": role, "parts": parts}
}

var gsystem = map[string]any{"parts": []any{gtext("You are a coding agent on Gemini.")}}

// geminiSession is a short Gemini session: a request, signed read calls (with ids,
// or without when ids is false) answered in the next user turn, and a final
// exchange.
func geminiSession(turns, size int, ids bool) []any {
	id := func(s string) string {
		if ids {
			return s
		}
		return ""
	}
	m := []any{gturn("user", gtext("Refactor the parser module."))}
	for i := 0; i < turns; i++ {
		k := fmt.Sprintf("g%d", i)
		m = append(m, gturn("model", gcall("read_file", id(k), fmt.Sprintf("src/part_%d.py", i), "c2lnLQ"+k)),
			gturn("user", gresp("read_file", id(k), code(fmt.Sprintf("part%d", i), size))))
	}
	return append(m, gturn("model", gtext("The parser is split into a lexer and a grammar now.")), gturn("user", gtext("Now add tests for the lexer.")))
}

// geminiBeginCases are the Gemini compaction vectors (compact.begin.json).
func geminiBeginCases() []genCase {
	parallel := func(ids bool) (head, tail []any) {
		id := func(s string) string {
			if ids {
				return s
			}
			return ""
		}
		head = cat(gturn("user", gtext("Check the three configs.")),
			gturn("model", gtext("Reading all three at once."), gcall("read_file", id("p1"), "a.toml", "c2lnLXAx"), gcall("read_file", id("p2"), "b.toml", ""), gcall("read_file", id("p3"), "c.toml", "")),
			gturn("user", gresp("read_file", id("p1"), code("a", 300)), gresp("read_file", id("p2"), code("b", 300)), gresp("read_file", id("p3"), code("c", 300))),
			geminiSession(6, 800, ids)[1:])
		s := geminiSession(6, 800, ids)
		tail = cat(s[:len(s)-2],
			gturn("model", gtext("Running the linters in parallel."), gcall("terminal", id("q1"), "ruff check src", "c2lnLXEx"), gcall("terminal", id("q2"), "mypy src", "")),
			gturn("user", gresp("terminal", id("q2"), code("mypy", 500)), gresp("terminal", id("q1"), code("ruff", 500))),
			gturn("model", gtext("Both linters pass.")), gturn("user", gtext("Ship it.")))
		return head, tail
	}
	headIDs, tailIDs := parallel(true)
	headNoIDs, tailNoIDs := parallel(false)
	s := geminiSession(6, 800, true)
	mismatch := cat(s[:len(s)-2],
		gturn("model", gcall("read_file", "x1", "a.py", "c2lnLXgx"), gcall("read_file", "x2", "b.py", "")),
		gturn("user", gresp("read_file", "x1", "ok"), gresp("read_file", "ghost", "stray")),
		gturn("model", gcall("terminal", "", "make", "c2lnLXkx")), gturn("user", gtext("Did it build?")))
	noIDs := geminiSession(6, 800, false)
	byName := cat(noIDs[:len(noIDs)-2],
		gturn("model", gcall("read_file", "", "a.py", "c2lnLWEx"), gcall("read_file", "", "b.py", "")),
		gturn("user", gresp("read_file", "", "a")),
		gturn("user", gtext("Did you read both?")))
	gfmt := func(req map[string]any) map[string]any { req["format"] = "gemini"; return req }
	return []genCase{
		{"gemini-with-system-instruction", map[string]any{"messages": geminiSession(6, 800, true), "system": gsystem, "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"gemini-detected-from-parts", map[string]any{"messages": geminiSession(6, 800, true), "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"gemini-parallel-calls-at-head-boundary", gfmt(map[string]any{"messages": headIDs, "system": gsystem, "config": tinyWindow, "force": true, "summarizer": "builtin"})},
		{"gemini-parallel-calls-at-tail-boundary", gfmt(map[string]any{"messages": tailIDs, "config": tinyWindow, "force": true, "summarizer": "builtin"})},
		{"gemini-calls-without-id-at-head-boundary", gfmt(map[string]any{"messages": headNoIDs, "config": tinyWindow, "force": true, "summarizer": "builtin"})},
		{"gemini-calls-without-id-at-tail-boundary", gfmt(map[string]any{"messages": tailNoIDs, "config": tinyWindow, "force": true, "summarizer": "builtin"})},
		{"gemini-count-mismatch-repaired", gfmt(map[string]any{"messages": mismatch, "config": tinyWindow, "force": true, "summarizer": "builtin"})},
		{"gemini-missing-response-by-name-stubbed-after", gfmt(map[string]any{"messages": byName, "config": tinyWindow, "force": true, "summarizer": "builtin"})},
		{"gemini-long-responses-pruned-in-place", gfmt(map[string]any{"messages": geminiSession(6, 2400, true), "config": map[string]any{"model": map[string]any{"context_length": 8000}, "compression": map[string]any{"protect_last_n": 8}}, "force": true, "summarizer": "builtin"})},
		{"gemini-summary-as-a-model-turn", gfmt(map[string]any{"messages": cat(gturn("user", gtext("Refactor the parser module.")), gturn("model", gtext("Reading.")), gturn("user", gtext(code("spec", 3000))),
			gturn("model", gtext(code("plan", 3000))), gturn("user", gtext("Go on.")), gturn("model", gtext("Reading the lexer."), gcall("read_file", "", "lexer.py", "c2lnLW0x")), gturn("user", gresp("read_file", "", "ok"))),
			"config": map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 1, "protect_first_n": 1}}, "force": true, "summarizer": "builtin"})},
		{"gemini-summary-request", map[string]any{"messages": geminiSession(6, 800, false), "system": gsystem, "format": "gemini", "config": tinyWindow, "force": true}},
		{"gemini-rejects-assistant-role", map[string]any{"messages": []any{gturn("user", gtext("hi")), gturn("assistant", gtext("hello"))}, "format": "gemini"}},
		{"gemini-rejects-string-system", map[string]any{"messages": []any{gturn("user", gtext("hi"))}, "system": "You are helpful.", "format": "gemini"}},
		{"gemini-rejects-non-object-part", map[string]any{"messages": []any{map[string]any{"role": "user", "parts": []any{"hi"}}}, "format": "gemini"}},
	}
}

// geminiPruneCases are the Gemini prune vectors (prune.json).
func geminiPruneCases() []genCase {
	return []genCase{
		{"gemini-prunes-responses-keeping-signed-parts", map[string]any{"messages": cat(geminiSession(6, 900, true)[:5],
			gturn("model", gcall("read_file", "s1", "src/signed.py", "")),
			gturn("user", map[string]any{"functionResponse": map[string]any{"name": "read_file", "id": "s1", "response": map[string]any{"output": code("signed", 900)}}, "thoughtSignature": "c2lnLXMx"}),
			geminiSession(6, 900, true)[5:]), "format": "gemini", "config": tinyWindow}},
	}
}

// TestGeminiHostProtocol runs the host protocol over every converted trace at 32K:
// compact.begin asks for a summary, compact.finish assembles the host's (the
// invariants hold, the summary is a Gemini content), and compacting the result again
// updates that summary (it is found in a Gemini content). With o200k_base the same
// invariants hold and the exact counts are the report's.
func TestGeminiHostProtocol(t *testing.T) {
	for name, chat := range chatTraces(t) {
		g := toGemini(t, chat, false)
		for _, enc := range []string{"rough", "o200k_base"} {
			t.Run(name+"/"+enc, func(t *testing.T) {
				cfg := map[string]any{"model": map[string]any{"context_length": 32_000}, "tokens": map[string]any{"encoding": enc}}
				req := map[string]any{"messages": g.contents, "config": cfg, "force": true, "format": "gemini"}
				if g.system != nil {
					req["system"] = g.system
				}
				res, e := callOp(t, "compact.begin", req)
				require.Nil(t, e)
				begin := decodeResult(t, res)
				if begin.Done {
					return
				}
				fin := map[string]any{"state": begin.State, "summary": "## Goal\nHost summary of " + name}
				for k, v := range req {
					fin[k] = v
				}
				res, e = callOp(t, "compact.finish", fin)
				require.Nil(t, e)
				r := decodeResult(t, res)
				checkGeminiCompaction(t, g.contents, r)
				require.False(t, r.Report.FallbackUsed)
				summary := gjson.ParseBytes(r.Messages[r.Report.HeadEnd])
				require.Contains(t, []string{"user", "model"}, summary.Get("role").Str)
				require.Contains(t, summary.Get("parts.0.text").Str, "Host summary of "+name)

				// The report's tokens are the output's, as tokens.count counts them.
				count := map[string]any{"messages": r.Messages, "format": "gemini", "config": cfg}
				if r.System != nil {
					count["system"] = r.System
				}
				c, e := callOp(t, "tokens.count", count)
				require.Nil(t, e)
				tc, err := counterFor(enc, "", 0, "", "")
				require.NoError(t, err)
				require.Equal(t, r.Report.TokensAfter+tc.replyPriming(), int(gjson.GetBytes(c, "total").Int()), "tokens after are not the output's")

				again := map[string]any{"messages": r.Messages, "config": cfg, "force": true}
				if r.System != nil {
					again["system"] = r.System
				}
				res, e = callOp(t, "compact.begin", again)
				require.Nil(t, e)
				second := decodeResult(t, res)
				if !second.Done {
					require.True(t, second.SummaryRequest.Iterative, "the Gemini summary content is found again")
					require.Contains(t, second.SummaryRequest.Messages[1].Content, "Host summary of "+name)
				}
			})
		}
	}
}

// FuzzGeminiSanitize: on any list read as Gemini contents, no op panics, and what
// sanitize returns has no pairing problem left (no orphan, missing result or count
// mismatch), and compaction's output validates as cleanly as sanitize's.
func FuzzGeminiSanitize(f *testing.F) {
	for _, c := range geminiBeginCases() {
		if b, err := marshal(c.request["messages"]); err == nil {
			f.Add(string(b))
		}
	}
	f.Add(`[{"role":"model","parts":[{"functionCall":{"name":"a"}},{"functionCall":{"name":"a","id":"x"}}]},{"parts":[{"functionResponse":{"name":"a"}},{"functionResponse":{"name":"a"}},{"functionResponse":{"name":"b","id":"x"}}]}]`)
	f.Add(`[{"parts":[{"functionResponse":{"name":"a","response":{"output":"x"}}}]},{"role":"model","parts":[]},{"role":"model","parts":[{"functionCall":{"name":"a","id":"d"}},{"functionCall":{"name":"a","id":"d"}}]}]`)
	pairing := map[string]bool{ProblemOrphanToolResult: true, ProblemMissingToolResult: true, ProblemFunctionResponseCount: true}
	f.Fuzz(func(t *testing.T, list string) {
		if !gjson.Valid(list) || !gjson.Parse(list).IsArray() {
			return
		}
		msgs := json.RawMessage(list)
		res, e := callOp(t, "sanitize", map[string]any{"messages": msgs, "format": "gemini"})
		if e != nil {
			return // refused as malformed: nothing to check
		}
		var s struct {
			Messages []json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(res, &s))
		v, e := callOp(t, "validate", map[string]any{"messages": s.Messages, "format": "gemini"})
		require.Nil(t, e)
		var vr ValidateResult
		require.NoError(t, json.Unmarshal(v, &vr))
		for _, p := range vr.Problems { // duplicate ids are reported, not repaired (as in chat)
			if p.Code == ProblemDuplicateToolCallID {
				return
			}
		}
		for _, p := range vr.Problems {
			if pairing[p.Code] {
				require.Failf(t, "sanitize left a pairing problem", "%+v in %s", p, s.Messages)
			}
		}
		_, _ = callOp(t, "compact.begin", map[string]any{"messages": msgs, "format": "gemini", "config": tinyWindow, "force": true, "summarizer": "builtin"})
		_, _ = callOp(t, "prune", map[string]any{"messages": msgs, "format": "gemini", "config": tinyWindow})
	})
}

// TestGeminiSanitizeIdenticalTurns: two user turns with the same bytes answering
// different model turns (by name, so their view ids differ in the turn) are each
// repaired as read.
func TestGeminiSanitizeIdenticalTurns(t *testing.T) {
	extra := gturn("user", gresp("bash", "", "ok"), gresp("bash", "", "ok"))
	msgs := []any{gturn("user", gtext("Run it twice.")), gturn("model", gcall("bash", "", "make", "c2ln")), extra, gturn("model", gcall("bash", "", "make", "c2ln")), extra, gturn("model", gtext("Done."))}
	res, e := callOp(t, "sanitize", map[string]any{"messages": msgs, "format": "gemini"})
	require.Nil(t, e)
	var s struct {
		Messages []json.RawMessage `json:"messages"`
		Repaired []int             `json:"repaired"`
	}
	require.NoError(t, json.Unmarshal(res, &s))
	require.Equal(t, []int{2, 4}, s.Repaired)
	v, e := callOp(t, "validate", map[string]any{"messages": s.Messages})
	require.Nil(t, e)
	require.JSONEq(t, `{"ok":true,"problems":[]}`, string(v))
	for _, k := range []int{2, 4} {
		require.Equal(t, `{"parts":[{"functionResponse":{"name":"bash","response":{"output":"ok"}}}],"role":"user"}`, string(s.Messages[k]))
	}
}

// TestGeminiLossless: the lossless engine's compaction of every converted trace at
// 32K keeps the same invariants.
func TestGeminiLossless(t *testing.T) {
	for name, chat := range chatTraces(t) {
		g := toGemini(t, chat, false)
		t.Run(name, func(t *testing.T) {
			cfg := map[string]any{"model": map[string]any{"context_length": 32000}, "context": map[string]any{"engine": "lossless"}}
			req := map[string]any{"messages": g.contents, "config": cfg, "force": true, "summarizer": "builtin"}
			if g.system != nil {
				req["system"] = g.system
			}
			res, e := callOp(t, "compact.begin", req)
			require.Nil(t, e)
			r := decodeResult(t, res)
			checkGeminiCompaction(t, g.contents, r)
			if r.Report.Summarized != nil {
				require.Contains(t, gjson.ParseBytes(r.Messages[r.Report.HeadEnd]).Get("parts.0.text").Str, SummaryPrefix)
			}
		})
	}
}
