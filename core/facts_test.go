package core

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// scanFacts takes compound names, ids and long numbers, trimmed of separators at
// their ends, and nothing else.
func TestScanFacts(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"call np.hstack on left.shape, then compute_n_outputs()", []string{"np.hstack", "left.shape", "compute_n_outputs"}},
		{"edit /usr/lib/python3/site.py and ./src/app/main.go.", []string{"usr/lib/python3/site.py", "src/app/main.go"}},
		{"camelCase csrfToken getElementById short aB", []string{"camelCase", "csrfToken", "getElementById"}},
		{"commit 3f9a2c1d and deadbeef, abcdef, 1234567, 12345, 2024", []string{"3f9a2c1d", "1234567"}},
		{"reservation ZFA04Y for HAT276 at 2024-05-22", []string{"ZFA04Y", "HAT276", "2024-05-22"}},
		{"plain words only: because something happened", nil},
		{"--verbose ---- a..b .hidden_file -123456", []string{"hidden_file", "123456"}},
		{"née_straße.py ünïcode_名前", []string{"née_straße.py", "ünïcode_名前"}},
		{strings.Repeat("a_", 70) + "b", nil}, // 141 characters: a blob, not a name
	} {
		var got []string
		scanFacts(c.in, func(f string) { got = append(got, f) })
		require.Equal(t, c.want, got, c.in)
	}
}

// The index lists what the agent is likely to use again first: what it wrote in
// its tool calls before what a tool only printed, and leaves out what the kept
// context or the summary already holds.
func TestFactsIndexRanksAndLeavesOutWhatIsKept(t *testing.T) {
	var msgs []any
	msgs = append(msgs, sys("You are a coding agent."), user("Fix the failing test in pkg/billing."), say("I will search first.")) // the head
	msgs = append(msgs, toolTurn("c1", "bash", args("command", "grep -rn invoice_total pkg/billing"), "pkg/billing/calc.go:12: func invoice_total(order_lines)\npkg/billing/tax.go:40: vat_rate_table\n"+code("billing", 6000))...)
	msgs = append(msgs, toolTurn("c2", "bash", args("command", "cat pkg/billing/tax.go"), "only_in_output_1 only_in_output_2 kept_in_tail_name\n"+code("tax", 6000))...)
	for i := 0; i < 6; i++ {
		msgs = append(msgs, toolTurn(fmt.Sprintf("d%d", i), "bash", args("command", fmt.Sprintf("ls dir_%d", i)), code(fmt.Sprintf("m%d", i), 3000))...)
	}
	msgs = append(msgs, say("Next I will look at kept_in_tail_name."), user("go on"))
	req := map[string]any{"messages": msgs, "config": window(16_000), "force": true}
	res, e := callOp(t, "compact.begin", req)
	require.Nil(t, e)
	begin := decodeResult(t, res)
	req["state"], req["summary"] = begin.State, "The agent searched pkg/billing/tax.go." // an LLM's summary that names little
	res, e = callOp(t, "compact.finish", req)
	require.Nil(t, e)
	r := decodeResult(t, res)
	require.NotNil(t, r.Report.Summarized)
	lines := indexLinesOf(t, r.Messages)
	require.NotEmpty(t, lines)
	all := strings.Join(lines, "\n")
	require.Contains(t, all, "invoice_total", "a name the agent passed to a tool")
	require.Contains(t, all, "only_in_output_1", "a name a tool printed")
	require.NotContains(t, all, "kept_in_tail_name", "the tail holds it")
	require.NotContains(t, all, "pkg/billing/tax.go", "the summary holds it")
	require.Regexp(t, `^- names #\d+ \((bash output|bash call)\): `, lines[0], "a line names its source message and what it was")
	require.Equal(t, 1, strings.Count(allText(t, r.Messages), AnchorsTitle), "the anchors and the index share one section")
}

// factScore: what the agent or user wrote ranks before what a tool printed, a
// tool-call argument higher still, then how many messages name it.
func TestFactScoreOrder(t *testing.T) {
	printedOnce := &factStat{count: 1}
	printedTwice := &factStat{count: 2}
	written := &factStat{used: true, count: 1}
	passed := &factStat{used: true, args: true, count: 1}
	require.Less(t, factScore(printedOnce), factScore(printedTwice))
	require.Less(t, factScore(printedTwice), factScore(written))
	require.Less(t, factScore(written), factScore(passed))
	require.Equal(t, factScore(&factStat{count: 4}), factScore(&factStat{count: 40}), "counts saturate: a name printed in every output is not the best one")
}

// Property: at 8K to 1M windows, in every format, the index stays within its
// budget, the core writes one anchors section, every input message is accounted
// for, and a re-compaction carries the index without nesting it or growing past
// the budget.
func TestFactsIndexWithinBudgetEveryFormat(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the shared traces in every format (not with -short)")
	}
	traces := loadTraces(t)
	names := make([]string, 0, len(traces))
	for n := range traces {
		names = append(names, n)
	}
	sort.Strings(names)
	runs := 0
	for _, name := range names {
		var chat []json.RawMessage
		require.NoError(t, json.Unmarshal(traces[name], &chat))
		inputs := map[Format][]json.RawMessage{FormatAnthropic: chat} // the anthropic-format recordings
		formats := []Format{FormatAnthropic}
		if !strings.HasPrefix(name, "anthropic-") {
			items, _ := chatToResponses(t, chat, true)
			g := toGemini(t, chat, true)
			inputs = map[Format][]json.RawMessage{
				FormatOpenAI: chat, FormatResponses: items, FormatGemini: g.contents, FormatAISDK: chatToAISDK(t, chat),
			}
			formats = []Format{FormatOpenAI, FormatResponses, FormatGemini, FormatAISDK}
		}
		for _, f := range formats {
			for _, w := range []int{8_000, 32_000, 200_000, 1_000_000} {
				in := inputs[f]
				cfg := map[string]any{"model": map[string]any{"context_length": w}}
				budget := factsBudgetChars(ResolveThreshold(mustConfig(t, cfg)))
				for round := 0; round < 2; round++ {
					res, e := callOp(t, "compact.begin", map[string]any{"messages": in, "format": f, "config": cfg, "force": true, "summarizer": "builtin"})
					require.Nil(t, e, "%s %s %d", name, f, w)
					r := decodeResult(t, res)
					checkAccounted(t, f, in, r)
					if r.Report.Summarized == nil {
						break
					}
					runs++
					require.LessOrEqual(t, strings.Count(allText(t, r.Messages), AnchorsTitle), 1, "%s %s %d: one anchors section", name, f, w)
					used := len(AnchorsTitle) + 1
					for _, l := range indexLinesOf(t, r.Messages) {
						used += len(l) + 1
					}
					require.LessOrEqual(t, used, budget, "%s %s %d round %d", name, f, w, round)
					if !r.Report.ActiveRequestInSummary { // the active request is quoted whole, within the room left
						// Every section: the summary's within its target (at most
						// max_summary_tokens), the index within its budget, and the
						// message's fixed text.
						thr := ResolveThreshold(mustConfig(t, cfg))
						require.LessOrEqual(t, r.Report.SummaryTokens, thr.MaxSummaryTokens+factsBudgetTokens(thr)+summaryFrameTokens,
							"%s %s %d round %d", name, f, w, round)
					}
					in = r.Messages // and again: the summary is summarized with its index
				}
			}
		}
	}
	require.Positive(t, runs)
}

// The legacy tail mode is Hermes Agent's compressor: no index.
func TestLegacyTailModeHasNoIndex(t *testing.T) {
	msgs := []any{sys("s"), user("Fix invoice_total in pkg/billing.")}
	for i := 0; i < 10; i++ {
		msgs = append(msgs, toolTurn(fmt.Sprintf("c%d", i), "bash", args("command", fmt.Sprintf("grep some_name_%d pkg", i)), code(fmt.Sprintf("m%d", i), 3000))...)
	}
	msgs = append(msgs, user("go on"))
	for mode, want := range map[string]bool{"tiered": true, "legacy": false} {
		cfg := map[string]any{"model": map[string]any{"context_length": 16_000}, "compression": map[string]any{"tail_mode": mode}}
		res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "force": true, "summarizer": "builtin"})
		require.Nil(t, e)
		require.Equal(t, want, len(indexLinesOf(t, decodeResult(t, res).Messages)) > 0, mode)
	}
}

// allText is every string of the messages, decoded, one per line.
func allText(t *testing.T, msgs []json.RawMessage) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x + "\n")
		case []any:
			for _, y := range x {
				walk(y)
			}
		case map[string]any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	for _, m := range msgs {
		var v any
		require.NoError(t, json.Unmarshal(m, &v))
		walk(v)
	}
	return b.String()
}

// indexLinesOf returns the facts index lines of a compaction's output.
func indexLinesOf(t *testing.T, msgs []json.RawMessage) []string {
	var out []string
	for _, l := range strings.Split(allText(t, msgs), "\n") {
		if indexLine(l) {
			out = append(out, l)
		}
	}
	return out
}

// indexFacts returns the facts of index lines in the order the lines list them.
func indexFacts(lines []string) []string {
	var out []string
	for _, l := range lines {
		_, list, _ := strings.Cut(l, "): ")
		out = append(out, strings.Split(list, ", ")...)
	}
	return out
}

// summaryFrameTokens bounds the summary message's own text around its sections
// (the prefix naming the compacted range, the tags, the anchors title).
const summaryFrameTokens = 120

// An earlier summary's names are candidates again; the lossless closing's names
// (context_expand) are not; the text of the message it was merged into stays in
// front of the agent (as a request of the anchors) and is not listed twice.
func TestFactsOfAnEarlierMergedSummary(t *testing.T) {
	earlier := withClosing(summaryText("## Goal\nPort billing_service_v2.", IndexRange{From: 3, To: 9}), "Archived as r1 (messages 3-8): call context_expand with {\"id\": \"r1\"}.") +
		SummaryDelimiter + "Also look at merged_user_name please."
	msgs := []any{sys("s"), user("Fix the failing test."), say("I will search first."), user(earlier)}
	for i := 0; i < 8; i++ {
		msgs = append(msgs, toolTurn(fmt.Sprintf("c%d", i), "bash", args("command", fmt.Sprintf("ls dir_%d", i)), code(fmt.Sprintf("m%d", i), 3000))...)
	}
	msgs = append(msgs, user("go on"))
	req := map[string]any{"messages": msgs, "config": window(16_000), "force": true, "archive_id": "r2"}
	res, e := callOp(t, "compact.begin", req)
	require.Nil(t, e)
	begin := decodeResult(t, res)
	req["state"], req["summary"] = begin.State, "The agent listed directories."
	res, e = callOp(t, "compact.finish", req)
	require.Nil(t, e)
	r := decodeResult(t, res)
	require.NotNil(t, r.Report.Summarized)
	require.Equal(t, 3, r.Report.Summarized.From, "the earlier summary is summarized again")
	facts := indexFacts(indexLinesOf(t, r.Messages))
	require.Contains(t, facts, "billing_service_v2", "the earlier summary's names")
	require.NotContains(t, facts, "context_expand", "not the closing's tool names")
	require.NotContains(t, facts, "merged_user_name", "the anchors hold it")
	require.Equal(t, 1, strings.Count(allText(t, r.Messages), "merged_user_name"))
}

// TestFactsIndexPutsTheFocusFirst: when the index cannot hold every fact, a focus
// keeps the facts that match it (or whose message does) over newer ones.
func TestFactsIndexPutsTheFocusFirst(t *testing.T) {
	var msgs []any
	msgs = append(msgs, sys("You are a coding agent."), user("Fix the build."), say("Reading the logs."))
	msgs = append(msgs, toolTurn("l0", "bash", args("command", "cat sync.log"), "ledger sync reconciled settle_batch_rows and post_journal_entry\n"+strings.Repeat("the log goes on. ", 200))...)
	for i := 0; i < 8; i++ {
		var names []string
		for k := 0; k < 120; k++ {
			names = append(names, fmt.Sprintf("helper_fn_%d_%d", i, k))
		}
		msgs = append(msgs, toolTurn(fmt.Sprintf("c%d", i), "bash", args("command", fmt.Sprintf("grep -rn helper dir_%d", i)), strings.Join(names, " ")+"\n"+code(fmt.Sprintf("m%d", i), 3000))...)
	}
	msgs = append(msgs, say("Next I will fix it."), user("go on"))
	index := func(focus string) string {
		req := map[string]any{"messages": msgs, "config": window(16_000), "force": true}
		if focus != "" {
			req["focus"] = focus
		}
		res, e := callOp(t, "compact.begin", req)
		require.Nil(t, e)
		req["state"], req["summary"] = decodeResult(t, res).State, "The agent read the logs." // names little
		res, e = callOp(t, "compact.finish", req)
		require.Nil(t, e)
		r := decodeResult(t, res)
		require.NotNil(t, r.Report.Summarized)
		return strings.Join(indexLinesOf(t, r.Messages), "\n")
	}
	without := index("")
	require.Contains(t, without, "helper_fn_7_", "the index lists facts")
	require.NotContains(t, without, "settle_batch_rows", "the oldest output's names do not fit without a focus")
	with := index("ledger sync")
	require.Contains(t, with, "settle_batch_rows", "its message matches the focus")
	require.Contains(t, with, "post_journal_entry")
	require.Contains(t, with, "sync.log", "and before them all, a fact that names it")
}
