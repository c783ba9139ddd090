package core

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// compactMsgs runs compact.begin (builtin summarizer) on msgs and checks the
// invariants every compaction keeps.
func compactMsgs(t *testing.T, msgs []any, cfg map[string]any, force bool) CompactResult {
	t.Helper()
	res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "force": force, "summarizer": "builtin"})
	require.Nil(t, e)
	r := decodeResult(t, res)
	input := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		input[i], _ = marshal(m)
	}
	checkCompaction(t, input, r)
	return r
}

func window(n int) map[string]any {
	return map[string]any{"model": map[string]any{"context_length": n}}
}

// asAny turns output messages back into request messages.
func asAny(t *testing.T, out []json.RawMessage) []any {
	t.Helper()
	var msgs []any
	for _, m := range out {
		var v any
		require.NoError(t, json.Unmarshal(m, &v))
		msgs = append(msgs, v)
	}
	return msgs
}

// A pattern of recordings we do not have: the newest user message alone is 24K
// tokens at a 32K window. It must be written once, capped so the result fits under
// the threshold, its head and tail kept and the cut marked, the original archived.
func TestHugeNewestUserMessageAt32K(t *testing.T) {
	// A 10K-token head (a long first request), as in the recordings that overflowed.
	msgs := []any{sys("You are a coding agent."), user("Port the billing service to Go. The service as it stands:\n" + code("legacy", 40_000))}
	for i := 0; i < 6; i++ {
		msgs = append(msgs, toolTurn(fmt.Sprintf("c%d", i), "read_file", args("path", fmt.Sprintf("billing/mod_%d.py", i)), code(fmt.Sprintf("billing%d", i), 4000))...)
	}
	msgs = append(msgs, say("I have read the modules."))
	spec := "HEAD-OF-SPEC: here is the full log you asked for\n\"quoted\" line\n" + code("log", 96_000) + "\nTAIL-OF-SPEC: fix what this shows."
	msgs = append(msgs, user(spec))
	for _, summarizer := range []string{"builtin", "host"} {
		t.Run(summarizer, func(t *testing.T) {
			req := map[string]any{"messages": msgs, "config": window(32_000)}
			var r CompactResult
			if summarizer == "builtin" {
				r = compactMsgs(t, msgs, window(32_000), false)
			} else {
				res, e := callOp(t, "compact.begin", req)
				require.Nil(t, e)
				begin := decodeResult(t, res)
				require.False(t, begin.Done)
				require.Less(t, len(begin.SummaryRequest.Messages[1].Content), 40_000, "the summary request does not ask the LLM to repeat the request")
				res, e = callOp(t, "compact.finish", map[string]any{"messages": msgs, "config": window(32_000), "state": begin.State, "summary": "## Goal\nPort the billing service to Go.\n## Relevant Files\n- billing/mod_0.py"})
				require.Nil(t, e)
				require.Greater(t, decodeResult(t, res).Report.TokensAfter, 10_000, "the head is kept")
				require.Nil(t, e)
				r = decodeResult(t, res)
			}
			rep := r.Report
			require.True(t, rep.ActiveRequestInSummary)
			require.True(t, rep.Fits, "head + summary with the capped request fit under the threshold: %+v", rep)
			require.Less(t, rep.TokensAfter, rep.ThresholdTokens-4_000, "and leave room for the turns that follow")
			require.Less(t, rep.TokensAfter, rep.ThresholdTokens)
			all := ""
			for _, m := range r.Messages {
				all += string(m)
			}
			require.Equal(t, 1, strings.Count(all, "HEAD-OF-SPEC"), "written once")
			require.Equal(t, 1, strings.Count(all, "TAIL-OF-SPEC"), "its tail is kept too")
			require.Contains(t, all, "characters cut to fit the window; the whole message is archived as input message #15")
			require.Contains(t, all, `\"quoted\" line`, "quoted as written: one JSON escape, not a second strconv one")
			var archived bool
			for _, a := range r.Archived {
				archived = archived || a.Index == 15 && a.Reason == ArchivedSummarized
			}
			require.True(t, archived)
		})
	}
}

// The other unseen pattern: the first tool group is 20K tokens. Under pressure the
// head's outputs are pruned (originals archived), so one compaction leaves room and
// the next turn does not compact again.
func TestHugeFirstToolGroupIsPrunedUnderPressure(t *testing.T) {
	msgs := []any{sys("You are a coding agent."), user("Explain the dump."),
		calls("Reading it.", "read_file", "h1", args("path", "dump/core.txt")), result("h1", code("dump", 88_000))}
	for i := 0; i < 8; i++ {
		msgs = append(msgs, toolTurn(fmt.Sprintf("c%d", i), "terminal", args("command", fmt.Sprintf("grep -n frame%d dump/core.txt", i)), code(fmt.Sprintf("frame%d", i), 1500))...)
	}
	msgs = append(msgs, say("The crash is in frame 3."), user("Why frame 3?"))
	r := compactMsgs(t, msgs, window(32_000), false)
	rep := r.Report
	require.Equal(t, 4, rep.HeadEnd, "the head runs to the end of the first tool group")
	require.Contains(t, rep.Pruned, 3, "the head's 20K-token output is pruned")
	require.Contains(t, string(r.Messages[3]), PrunedPrefix)
	require.Contains(t, string(r.Messages[3]), `read_file(path=\"dump/core.txt\")`)
	require.True(t, rep.Fits)
	// The agent's next turn: well under the threshold, so it does not compact again.
	next := append(asAny(t, r.Messages), say("Because the pointer was freed in frame 2."))
	res, e := callOp(t, "tokens.count", map[string]any{"messages": next})
	require.Nil(t, e)
	var count struct{ Total int }
	require.NoError(t, json.Unmarshal(res, &count))
	require.Less(t, count.Total, rep.ThresholdTokens-4_800, "the compaction leaves the tail budget free")

	// Without pressure the head is kept whole (docs/DESIGN.md §8).
	r = compactMsgs(t, msgs, window(200_000), true)
	require.NotContains(t, r.Report.Pruned, 3)
}

// protect_last_n 0, and every floor value, keeps the newest real user message:
// in the tail, or quoted as the active request.
func TestEveryFloorKeepsTheNewestUserMessage(t *testing.T) {
	msgs := []any{sys("You are a coding agent."), user("Set up the project.")}
	for i := 0; i < 6; i++ {
		msgs = append(msgs, toolTurn(fmt.Sprintf("a%d", i), "read_file", args("path", fmt.Sprintf("src/a%d.py", i)), code("a", 3000))...)
	}
	msgs = append(msgs, user("NEWEST: now rename \"Item\" to Product\nacross the code."))
	for i := 0; i < 6; i++ {
		msgs = append(msgs, toolTurn(fmt.Sprintf("b%d", i), "patch", args("path", fmt.Sprintf("src/b%d.py", i)), code("b", 3000))...)
	}
	for _, n := range []int{0, 1, 2, 3, 5, 20} {
		for _, users := range []int{0, 1, 2} {
			for _, w := range []int{4_000, 8_000, 32_000} {
				cfg := map[string]any{"model": map[string]any{"context_length": w}, "compression": map[string]any{"protect_last_n": n, "min_tail_user_messages": users}}
				r := compactMsgs(t, msgs, cfg, true)
				found := false
				for _, m := range r.Messages {
					found = found || strings.Contains(string(m), `NEWEST: now rename \"Item\" to Product\nacross the code.`) ||
						strings.Contains(string(m), `## Active Request (the user's newest message, as written)\nNEWEST: now rename \"Item\" to Product\nacross the code.`)
				}
				require.True(t, found, "protect_last_n %d, min_tail_user_messages %d, window %d: the newest user message is lost", n, users, w)
			}
		}
	}
}

// Summaries of summaries: the previous summary is carried by section, so files and
// requests of every generation survive, the Goal appears once, nothing nests, and
// requests read as the user wrote them.
func TestSummaryOfSummaryKeepsSections(t *testing.T) {
	live := []any{sys("You are a coding agent."), user("Build the \"ledger\" tool.\nKeep it small.")}
	var paths, asks []string
	for gen := 0; gen < 6; gen++ {
		ask := fmt.Sprintf("Step %d: add the \"%d\" report,\n  then   test it.", gen, gen)
		asks = append(asks, fmt.Sprintf(`Step %d: add the "%d" report, then test it.`, gen, gen))
		live = append(live, user(ask))
		for i := 0; i < 5; i++ {
			p := fmt.Sprintf("ledger/gen%d/part_%d.go", gen, i)
			paths = append(paths, p)
			live = append(live, toolTurn(fmt.Sprintf("g%d_%d", gen, i), "write_file", args("path", p, "content", code("part", 3000)), "ok")...)
		}
		live = append(live, say(fmt.Sprintf("Generation %d done.", gen)))
		r := compactMsgs(t, live, window(128_000), true)
		live = asAny(t, r.Messages)
	}
	var text, raw strings.Builder
	for _, m := range live {
		b, _ := json.Marshal(m)
		raw.Write(b)
		var s struct{ Content string }
		_ = json.Unmarshal(b, &s)
		text.WriteString(s.Content + "\n")
	}
	out := text.String()
	for _, p := range paths {
		require.Contains(t, raw.String(), p, "in the summary or in a kept call")
	}
	for _, a := range asks {
		require.Contains(t, collapseSpace(out), a, "requests are quoted as written, whitespace collapsed")
	}
	require.NotContains(t, out, `\"`, "nothing is escaped twice")
	require.Equal(t, 1, strings.Count(out, "## Goal"), "the Goal appears once")
	require.NotContains(t, out, "Earlier Summary", "an extractive summary merges into the lists instead of nesting")
	require.LessOrEqual(t, strings.Count(out, "## Relevant Files"), 1)
}

// Over budget, lines go in the stated order (tool calls first), never by a blind cut.
func TestExtractiveSummaryDropsLinesInOrder(t *testing.T) {
	s := summaryParts{goal: "g", next: "- n", critical: "c",
		requests: []string{"- #1: request one"}, files: []string{"- a/b.py"},
		calls:  []string{"- #2 read_file(path=\"a/b.py\")", "- #3 read_file(path=\"a/c.py\")"},
		errors: []string{"- #4 terminal: Error: boom"}, progress: []string{"- Done: turns #1–#4 were compacted; tool calls made: none"}}
	full := len(s.render())
	calls := s
	calls.calls = append([]string{}, s.calls...)
	calls.fit(full - 1)
	require.Less(t, len(calls.calls), 2, "tool-call lines go first")
	require.Len(t, calls.errors, 1)
	require.Len(t, calls.files, 1)
	require.Len(t, calls.requests, 1)
	tight := s
	tight.calls = append([]string{}, s.calls...)
	tight.fit(1)
	require.Empty(t, tight.calls)
	require.Empty(t, tight.errors)
	require.Empty(t, tight.files)
	require.Empty(t, tight.requests, "requests go last")
	require.Contains(t, tight.render(), "## Goal\ng", "the Goal stays")
	require.Contains(t, tight.render(), "## Next Steps\n- n")
	require.NotContains(t, tight.render(), "characters omitted", "no blind cut")
}

// A previous summary written by an LLM: sections the builder knows merge into its
// lists, the others are carried verbatim within the carry budget.
func TestLLMSummaryCarriedByTheExtractiveBuilder(t *testing.T) {
	prev := "## Goal\nShip v2.\n## Open Questions\n- Should the cache be per user?\n- Who owns the migration?\n## Relevant Files\n- `svc/cache.go`: the LRU\n## Progress\n- In Progress: the LRU eviction\n## Next Steps\n- Benchmark the LRU"
	msgs := []any{sys("You are a coding agent."), user("Ship v2."), say("On it."),
		user(summaryText(prev, IndexRange{3, 40}))}
	for i := 0; i < 8; i++ {
		msgs = append(msgs, toolTurn(fmt.Sprintf("x%d", i), "read_file", args("path", fmt.Sprintf("svc/x%d.go", i)), code("x", 2000))...)
	}
	msgs = append(msgs, say("Read."), user("Go on."))
	r := compactMsgs(t, msgs, map[string]any{"model": map[string]any{"context_length": 16_000}, "compression": map[string]any{"protect_last_n": 2}}, true)
	summary := string(r.Messages[r.Report.HeadEnd])
	for _, want := range []string{"### Open Questions (from the earlier summary)", "Should the cache be per user?", "Who owns the migration?", "Benchmark the LRU", "svc/cache.go", "In Progress: the LRU eviction", "svc/x0.go"} {
		require.Contains(t, summary, want)
	}
	require.Equal(t, 1, strings.Count(summary, "## Goal"))
	// Within the carry budget: a huge unknown section is carried in part, marked.
	huge := "## Goal\nShip v2.\n## Notes\n" + strings.Repeat("- a note that goes on and on\n", 2000)
	msgs[3] = user(summaryText(huge, IndexRange{3, 40}))
	r = compactMsgs(t, msgs, map[string]any{"model": map[string]any{"context_length": 16_000}, "compression": map[string]any{"protect_last_n": 2}}, true)
	summary = string(r.Messages[r.Report.HeadEnd])
	require.Contains(t, summary, "lines of the earlier summary left out to fit")
	require.Less(t, strings.Count(summary, "a note that goes on and on"), 2000)
}

// The anchor check: a host summary that forgets everything gets the summarized
// range's files, requests and last error appended in one bounded section.
func TestAnchorCheckOfAUselessHostSummary(t *testing.T) {
	msgs, cfg := importerSession()
	res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "force": true})
	require.Nil(t, e)
	begin := decodeResult(t, res)
	require.False(t, begin.Done)
	res, e = callOp(t, "compact.finish", map[string]any{"messages": msgs, "config": cfg, "force": true, "state": begin.State, "summary": "The user and the agent worked on some code."})
	require.Nil(t, e)
	fin := decodeResult(t, res)
	rep := fin.Report
	kinds := map[string][]string{}
	for _, a := range rep.AnchorsAdded {
		kinds[a.Kind] = append(kinds[a.Kind], a.Value)
	}
	require.Contains(t, kinds[AnchorRequest], `Start with "csv" files, please.`)
	require.Len(t, kinds[AnchorError], 1)
	require.Contains(t, kinds[AnchorError][0], "UnicodeDecodeError")
	for i := 0; i < 6; i++ {
		require.Contains(t, kinds[AnchorFile], fmt.Sprintf("importer/step_%d.py", i))
	}
	summary := string(fin.Messages[rep.HeadEnd])
	require.Contains(t, summary, "The user and the agent worked on some code.")
	require.Contains(t, summary, "## Anchors (added by ctxcompact")
	require.Contains(t, summary, "- file: importer/step_5.py")
	require.False(t, rep.SummaryTruncated)

	// A summary that names everything gets nothing added.
	var good strings.Builder
	good.WriteString("## Goal\nFix the importer.\n## Constraints & Preferences\n- Start with \"csv\" files, please.\n## Relevant Files\n")
	for i := 0; i < 6; i++ {
		fmt.Fprintf(&good, "- importer/step_%d.py\n", i)
	}
	good.WriteString("## Critical Context\n- FAILED tests/test_csv.py::test_bom - UnicodeDecodeError: bad byte")
	res, e = callOp(t, "compact.finish", map[string]any{"messages": msgs, "config": cfg, "force": true, "state": begin.State, "summary": good.String()})
	require.Nil(t, e)
	require.Empty(t, decodeResult(t, res).Report.AnchorsAdded)

	// The builtin summary is not checked: it is built from the anchors.
	res, e = callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "force": true, "summarizer": "builtin"})
	require.Nil(t, e)
	require.Empty(t, decodeResult(t, res).Report.AnchorsAdded)

	// Bounded: thousands of forgotten files add one section of at most half the target.
	many := []any{sys("s"), user("Index everything."), say("ok")}
	for i := 0; i < 300; i++ {
		many = append(many, toolTurn(fmt.Sprintf("f%d", i), "read_file", args("path", fmt.Sprintf("repo/dir_%03d/file_%03d.py", i, i)), code("f", 300))...)
	}
	many = append(many, say("done"), user("next"))
	res, e = callOp(t, "compact.begin", map[string]any{"messages": many, "config": cfg, "force": true})
	require.Nil(t, e)
	begin = decodeResult(t, res)
	res, e = callOp(t, "compact.finish", map[string]any{"messages": many, "config": cfg, "force": true, "state": begin.State, "summary": "Useless."})
	require.Nil(t, e)
	fin = decodeResult(t, res)
	require.NotEmpty(t, fin.Report.AnchorsAdded)
	anchorChars := len(AnchorsTitle)
	for _, a := range fin.Report.AnchorsAdded {
		anchorChars += len(anchorLine(a)) + 1
	}
	require.LessOrEqual(t, anchorChars, max(anchorMinChars, begin.SummaryRequest.TargetTokens*roughCharsPerToken/2))
}

// A host summary longer than its max_tokens is cut at a section boundary.
func TestHostSummaryCutAtMaxTokens(t *testing.T) {
	msgs := smallSession(6)
	cfg := tinyWindow
	res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "force": true})
	require.Nil(t, e)
	begin := decodeResult(t, res)
	var long strings.Builder
	for k := 0; long.Len() < 5<<20; k++ {
		fmt.Fprintf(&long, "## Section %d\nline one of section %d\nline two of section %d\n", k, k, k)
	}
	res, e = callOp(t, "compact.finish", map[string]any{"messages": msgs, "config": cfg, "force": true, "state": begin.State, "summary": long.String()})
	require.Nil(t, e)
	fin := decodeResult(t, res)
	require.True(t, fin.Report.SummaryTruncated)
	summary := string(fin.Messages[fin.Report.HeadEnd])
	require.Contains(t, summary, "…[the rest of this summary was cut: it was longer than its max_tokens]…")
	before, _, _ := strings.Cut(summary, "…[the rest of this summary")
	require.Regexp(t, `line two of section \d+\\n\\n$`, before, "the cut falls at a section boundary")
	cut, _ := cutSummary(roughCounter, long.String(), begin.SummaryRequest.MaxTokens)
	require.LessOrEqual(t, textTokens(roughCounter, cut), begin.SummaryRequest.MaxTokens)

	short := "## Goal\nRefactor."
	res, e = callOp(t, "compact.finish", map[string]any{"messages": msgs, "config": cfg, "force": true, "state": begin.State, "summary": short})
	require.Nil(t, e)
	require.False(t, decodeResult(t, res).Report.SummaryTruncated)
}

// Summary budgets are consistent at every window: the target never exceeds the
// window's max_summary_tokens (the 2,000-token floor yields to it).
func TestSummaryBudgetsAtEveryWindow(t *testing.T) {
	for _, w := range []int{2_000, 8_000, 16_000, 32_000, 40_000, 64_000, 200_000, 1_000_000} {
		thr := ResolveThreshold(Config{Model: ModelConfig{ContextLength: w}, Compression: DefaultConfig().Compression})
		for _, content := range []int{0, 1_000, 10_000, 100_000, 10_000_000} {
			got := summaryTargetTokens(content, thr.MaxSummaryTokens)
			require.LessOrEqual(t, got, thr.MaxSummaryTokens, "window %d content %d", w, content)
			if thr.MaxSummaryTokens >= summaryTokensFloor {
				require.GreaterOrEqual(t, got, summaryTokensFloor)
			}
		}
	}
}

// The small-window tail rule applies only where the config leaves both tail keys
// unset; explicit values are obeyed.
func TestSmallWindowTailRule(t *testing.T) {
	parse := func(cfg string) (CompressionConfig, ThresholdResult) {
		c, err := ParseConfig([]byte(cfg))
		require.NoError(t, err)
		return c.Compression, ResolveThreshold(c)
	}
	cc, thr := parse(`{"model":{"context_length":32000}}`)
	require.Equal(t, TailRuleSmallWindow, thr.TailRule)
	require.Equal(t, tokensOf(24_000, 0.2*smallWindowScale(32_000)), thr.TailTokenBudget)
	require.Less(t, thr.TailTokenBudget, 4_800)
	require.Equal(t, smallWindowMinCount, tailCount(cc, thr))
	cc, thr = parse(`{"model":{"context_length":32000},"compression":{"target_ratio":0.2}}`)
	require.Equal(t, "target_ratio", thr.TailRule)
	require.Equal(t, 4_800, thr.TailTokenBudget)
	require.Equal(t, 20, tailCount(cc, thr), "one tail key set: the config's tail, as written")
	cc, thr = parse(`{"model":{"context_length":32000},"compression":{"protect_last_n":20}}`)
	require.Equal(t, 4_800, thr.TailTokenBudget)
	require.Equal(t, 20, tailCount(cc, thr))
	cc, thr = parse(`{"model":{"context_length":200000}}`)
	require.Equal(t, "target_ratio", thr.TailRule, "from 200K up the configured tail is kept")
	require.Equal(t, 20, tailCount(cc, thr))
	cc, thr = parse(`{"model":{"context_length":32000},"compression":{"tail_mode":"lean"}}`)
	require.Equal(t, 20, tailCount(cc, thr), "the lean tail is its own rule")
	// The state tells an explicit 20 from an unset one.
	msgs := smallSession(6)
	res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": window(32_000), "force": true})
	require.Nil(t, e)
	st := decodeResult(t, res).State
	res, e = callOp(t, "compact.finish", map[string]any{"messages": msgs, "config": map[string]any{"model": map[string]any{"context_length": 32_000}, "compression": map[string]any{"protect_last_n": 20}}, "force": true, "state": st, "summary": "x"})
	require.NotNil(t, e)
	require.Equal(t, CodeInvalidState, e.Code)
}

// importerSession is a made-up coding session at an 8K window: a request with a
// quote and a newline, ten file reads, a failing test run, a last request. Its
// summarized range names files, requests and an error, for the anchor check and
// the archive lines to find.
func importerSession() ([]any, map[string]any) {
	msgs := []any{sys("You are a coding agent."), user("Fix the importer."), say("Looking.")}
	msgs = append(msgs, user("Start with \"csv\" files,\nplease."))
	for i := 0; i < 6; i++ {
		msgs = append(msgs, toolTurn(fmt.Sprintf("i%d", i), "read_file", args("path", fmt.Sprintf("importer/step_%d.py", i)), code("imp", 2000))...)
	}
	msgs = append(msgs, toolTurn("t1", "terminal", args("command", "pytest -q"), "collected 3 items\nFAILED tests/test_csv.py::test_bom - UnicodeDecodeError: bad byte")...)
	for i := 0; i < 4; i++ {
		msgs = append(msgs, toolTurn(fmt.Sprintf("j%d", i), "read_file", args("path", "tests/test_csv.py"), code("t", 2000))...)
	}
	msgs = append(msgs, say("The BOM breaks it."), user("Fix it then."))
	cfg := map[string]any{"model": map[string]any{"context_length": 8000}, "compression": map[string]any{"protect_last_n": 2}}
	return msgs, cfg
}
