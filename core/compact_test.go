package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

// loadTraces returns every shared trace's messages by file name (the folder's rule
// for when it is missing: internal/testtraces).
func loadTraces(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	paths := testtraces.Glob(t, "*.json", "anthropic-format/*.json")
	out := map[string]json.RawMessage{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		var f struct {
			Messages json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(data, &f), p)
		var compact bytes.Buffer // requests are sent compact, so compare compact bytes
		require.NoError(t, json.Compact(&compact, f.Messages))
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		if filepath.Base(filepath.Dir(p)) == "anthropic-format" {
			name = "anthropic-" + name
		}
		out[name] = compact.Bytes()
	}
	return out
}

func decodeResult(t *testing.T, res json.RawMessage) CompactResult {
	t.Helper()
	var r CompactResult
	require.NoError(t, json.Unmarshal(res, &r))
	return r
}

func roleOf(t *testing.T, raw json.RawMessage) string {
	var m struct {
		Role string `json:"role"`
	}
	require.NoError(t, json.Unmarshal(raw, &m))
	return m.Role
}

// checkCompaction asserts the invariants every compaction must keep (issue #2 §4).
// checkAccounted asserts what every compaction keeps, in any format (format ""
// detects it): providers accept the result (validate is clean on it, the provider
// rules of docs/RULES.md included; AI SDK messages under Anthropic's), every archived
// message is its input message, and every input message not archived is returned
// unchanged. It returns the archived entries by input index.
func checkAccounted(t *testing.T, format Format, input []json.RawMessage, r CompactResult) map[int]ArchivedMessage {
	t.Helper()
	return checkAccountedUnder(t, format, ProviderAnthropic, input, r)
}

// checkAccountedUnder is checkAccounted for AI SDK messages that go to provider.
func checkAccountedUnder(t *testing.T, format Format, provider string, input []json.RawMessage, r CompactResult) map[int]ArchivedMessage {
	t.Helper()
	req := map[string]any{"messages": r.Messages}
	if format != "" {
		req["format"] = format
	}
	v, e := callOp(t, "validate", req)
	require.Nil(t, e)
	var vr ValidateResult
	require.NoError(t, json.Unmarshal(v, &vr))
	require.True(t, vr.OK, "validate found problems in the output: %+v", vr.Problems)
	if format == FormatAISDK { // AI SDK messages hold to the rules of the provider they go to
		req["provider"] = provider
		v, e = callOp(t, "validate", req)
		require.Nil(t, e)
		require.NoError(t, json.Unmarshal(v, &vr))
		require.True(t, vr.OK, "validate found problems in the output under %s's rules: %+v", provider, vr.Problems)
	}

	archived := map[int]ArchivedMessage{}
	for _, a := range r.Archived {
		require.JSONEq(t, string(input[a.Index]), string(a.Message), "archived message %d differs from the input", a.Index)
		archived[a.Index] = a
	}
	unchanged := map[string]int{}
	for _, m := range r.Messages {
		unchanged[string(m)]++
	}
	for i, m := range input {
		if _, ok := archived[i]; !ok {
			require.Positive(t, unchanged[string(m)], "input message %d is neither returned unchanged nor archived", i)
		}
	}
	return archived
}

func checkCompaction(t *testing.T, input []json.RawMessage, r CompactResult) {
	t.Helper()
	require.True(t, r.Done)
	rep := r.Report
	require.NotNil(t, rep)
	out := r.Messages
	require.Equal(t, len(out), rep.MessagesAfter)
	require.Equal(t, len(input), rep.MessagesBefore)

	archived := checkAccounted(t, "", input, r)
	for i, m := range input {
		if a, ok := archived[i]; ok && a.Reason == ArchivedSystemNote {
			var before, after struct {
				Content string `json:"content"`
			}
			require.NoError(t, json.Unmarshal(m, &before))
			require.NoError(t, json.Unmarshal(out[0], &after))
			require.Equal(t, before.Content+SystemNote, after.Content, "the system note is appended once")
		}
	}

	// Head and tail keep their bytes; the middle is summarized and archived.
	if rep.Summarized != nil {
		for i := rep.Summarized.From; i < rep.Summarized.To; i++ {
			require.Equal(t, ArchivedSummarized, archived[i].Reason, "middle message %d not archived as summarized", i)
		}
		offset := 1
		if rep.SummaryRole == "merged" {
			offset = 0
		}
		for i := 0; i < rep.HeadEnd; i++ {
			if i == 0 && rep.SystemNoteAdded {
				continue
			}
			if a, ok := archived[i]; ok && a.Reason == ArchivedPruned {
				require.Contains(t, string(out[i]), PrunedPrefix, "a head output pruned under pressure has a placeholder")
				continue
			}
			require.Equal(t, string(input[i]), string(out[i]), "head message %d changed", i)
		}
		k := rep.HeadEnd + offset
		for i := rep.TailStart; i < len(input) && k < len(out); i++ {
			if a, ok := archived[i]; ok && a.Reason == ArchivedOrphanRemoved {
				continue
			}
			for k < len(out) && roleOf(t, out[k]) == "tool" && strings.Contains(string(out[k]), stubResultText) {
				k++
			}
			if a, ok := archived[i]; ok && (a.Reason == ArchivedPruned || a.Reason == ArchivedMerged) {
				k++
				continue
			}
			require.Equal(t, string(input[i]), string(out[k]), "tail message %d changed", i)
			k++
		}
	}

	// No new adjacent user/user or assistant/assistant pair.
	pos := map[string]int{}
	for i, m := range input {
		pos[string(m)] = i
	}
	for k := 0; k+1 < len(out); k++ {
		a, b := roleOf(t, out[k]), roleOf(t, out[k+1])
		if a != b || (a != "user" && a != "assistant") {
			continue
		}
		i, okA := pos[string(out[k])]
		j, okB := pos[string(out[k+1])]
		require.True(t, okA && okB && j == i+1, "new adjacent %s/%s pair at output %d", a, b, k)
	}

	// The report's numbers are the output's.
	c, e := callOp(t, "tokens.count", map[string]any{"messages": out})
	require.Nil(t, e)
	var tc struct {
		Total int `json:"total"`
	}
	require.NoError(t, json.Unmarshal(c, &tc))
	require.Equal(t, rep.TokensAfter, tc.Total)
	require.Equal(t, rep.TokensAfter < rep.ThresholdTokens, rep.Fits)
}

// TestCompactTraces compacts every shared trace at several windows, with the
// builtin summarizer and through the host protocol, and checks the invariants.
func TestCompactTraces(t *testing.T) {
	for name, msgs := range loadTraces(t) {
		var input []json.RawMessage
		require.NoError(t, json.Unmarshal(msgs, &input))
		for _, window := range []int{16_000, 32_000, 64_000, 128_000} {
			t.Run(fmt.Sprintf("%s/%dk", name, window/1000), func(t *testing.T) {
				cfg := map[string]any{"model": map[string]any{"context_length": window}}
				res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "force": true, "summarizer": "builtin"})
				require.Nil(t, e)
				r := decodeResult(t, res)
				checkCompaction(t, input, r)
				if window <= 64_000 {
					require.True(t, r.Report.Fits, "a %dk window should fit: %+v", window/1000, r.Report)
				}

				// The host protocol: begin asks, finish assembles the host's summary.
				res, e = callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "force": true})
				require.Nil(t, e)
				begin := decodeResult(t, res)
				if begin.Done {
					require.False(t, begin.Report.Compacted && begin.Report.Summarized != nil)
					return
				}
				require.Equal(t, []string{"system", "user"}, []string{begin.SummaryRequest.Messages[0].Role, begin.SummaryRequest.Messages[1].Role})
				summary := "## Goal\nHost summary of " + name
				res, e = callOp(t, "compact.finish", map[string]any{"messages": msgs, "config": cfg, "force": true, "state": begin.State, "summary": summary})
				require.Nil(t, e)
				fin := decodeResult(t, res)
				checkCompaction(t, input, fin)
				require.False(t, fin.Report.FallbackUsed)
				require.Contains(t, string(fin.Messages[fin.Report.HeadEnd]), "Host summary of "+name)

				// Compacting the result again updates the summary instead of starting over.
				var again []json.RawMessage
				again = append(again, fin.Messages...)
				res, e = callOp(t, "compact.begin", map[string]any{"messages": again, "config": cfg, "force": true})
				require.Nil(t, e)
				second := decodeResult(t, res)
				if !second.Done {
					require.True(t, second.SummaryRequest.Iterative)
					require.Contains(t, second.SummaryRequest.Messages[1].Content, "Host summary of "+name)
				}
			})
		}
	}
}

// TestWorkedExample pins the meaning of the docs/DESIGN.md §8 worked example.
func TestWorkedExample(t *testing.T) {
	msgs := workedSession()
	res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "force": true, "summarizer": "builtin"})
	require.Nil(t, e)
	r := decodeResult(t, res)
	rep := r.Report
	require.Equal(t, 45, rep.MessagesBefore)
	require.Equal(t, 25, rep.MessagesAfter)
	require.InDelta(t, 95_000, rep.TokensBefore, 10_000)
	require.Less(t, rep.TokensAfter, 35_000)
	require.True(t, rep.SystemNoteAdded)
	require.Contains(t, string(r.Messages[0]), "[Note: earlier turns")
	require.Contains(t, string(r.Messages[1]), "Help me set up a FastAPI project")
	summary := string(r.Messages[4])
	require.Equal(t, "assistant", rep.SummaryRole)
	for _, want := range []string{SummaryPrefix, "Help me set up a FastAPI project", "app/main.py", "tests/test_main.py", "8 passed, 2 failed", "test_create_item_duplicate"} {
		require.Contains(t, summary, want)
	}
	require.Contains(t, string(r.Messages[5]), "Fix the failing tests")
	require.Contains(t, string(r.Messages[24]), "Error handling is in place")
	input := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		input[i], _ = json.Marshal(m)
	}
	checkCompaction(t, input, r)
}

// TestScenarioMeanings checks what each compact.begin vector means, beyond its bytes:
// one subtest per vector, each with its own check (reports holds every vector's
// result, for the checks that compare two).
func TestScenarioMeanings(t *testing.T) {
	reports := map[string]CompactResult{}
	for _, c := range compactBeginCases() {
		res, e := callOp(t, "compact.begin", c.request)
		require.Nil(t, e, c.name)
		reports[c.name] = decodeResult(t, res)
	}
	type check func(t *testing.T, r CompactResult)
	cases := []struct {
		vector string
		check  check
	}{
		{"below-threshold-is-unchanged", func(t *testing.T, r CompactResult) {
			require.Equal(t, ReasonBelowThreshold, r.Report.Reason)
		}},
		{"disabled-is-unchanged", func(t *testing.T, r CompactResult) {
			require.Equal(t, ReasonDisabled, r.Report.Reason)
		}},
		{"reported-prompt-tokens-trigger", func(t *testing.T, r CompactResult) { require.True(t, r.Report.Compacted) }},
		{"estimate-triggers-without-force", func(t *testing.T, r CompactResult) { require.True(t, r.Report.Compacted) }},
		{"below-threshold-as-refs", func(t *testing.T, r CompactResult) {
			for i, m := range r.Messages {
				require.Equal(t, fmt.Sprint(i), string(m), "unchanged messages come back as their index")
			}
		}},
		{"parallel-calls-at-head-boundary", func(t *testing.T, r CompactResult) {
			require.Equal(t, 6, r.Report.HeadEnd, "the head runs to the end of the parallel group")
		}},
		{"parallel-calls-at-tail-boundary", func(t *testing.T, r CompactResult) {
			require.Equal(t, 15, r.Report.TailStart, "the tail starts at the group's assistant")
		}},
		{"pre-existing-orphans-repaired", func(t *testing.T, r CompactResult) {
			require.Equal(t, []int{17}, r.Report.OrphansRemoved)
			require.Equal(t, []string{"lost"}, r.Report.StubsAdded)
		}},
		{"summary-merged-when-no-role-fits", func(t *testing.T, r CompactResult) {
			require.Equal(t, "merged", r.Report.SummaryRole)
		}},
		{"summary-as-user-before-assistant-tail", func(t *testing.T, r CompactResult) {
			require.Equal(t, "user", r.Report.SummaryRole)
		}},
		{"iterative-update-of-previous-summary", func(t *testing.T, r CompactResult) {
			require.True(t, r.Report.Iterative)
			summary := string(r.Messages[3])
			require.Contains(t, summary, "splitting the lexer out of src/parser.py")
			// The extractive summary merges a previous summary rather than nesting it.
			require.NotContains(t, summary, "Earlier Summary")
			require.Equal(t, 1, strings.Count(summary, "## Goal"))
		}},
		{"iterative-summary-request", func(t *testing.T, r CompactResult) {
			require.True(t, r.SummaryRequest.Iterative)
			require.Equal(t, 100, r.SummaryRequest.TargetTokens, "at a 2K window the summary asks for the window's cap, not the 2,000-token floor")
		}},
		{"anthropic-summary-request", func(t *testing.T, r CompactResult) {
			require.Equal(t, 100, r.SummaryRequest.TargetTokens)
		}},
		{"worked-example-45-messages-summary-request", func(t *testing.T, r CompactResult) {
			require.Equal(t, 10_000, r.SummaryRequest.TargetTokens, "at 200K the cap (10,000) is above the floor")
		}},
		{"newest-request-too-big-goes-into-summary", func(t *testing.T, r CompactResult) {
			require.True(t, r.Report.ActiveRequestInSummary)
			require.True(t, r.Report.Fits, "the active request is capped to the room left under the threshold")
			summary := string(r.Messages[3])
			require.Equal(t, 1, strings.Count(summary, "Please apply this spec"), "the active request is written once")
			require.Contains(t, summary, "characters cut to fit the window; the whole message is archived as input message #12")
			require.Contains(t, summary, "spec_handler_0(request, db)", "its head is kept")
			require.True(t, slices.ContainsFunc(r.Archived, func(a ArchivedMessage) bool {
				return a.Index == 12 && a.Reason == ArchivedSummarized
			}), "the whole request is archived")
		}},
		{"newest-request-that-fits-stays-in-the-tail", func(t *testing.T, r CompactResult) {
			require.False(t, r.Report.ActiveRequestInSummary)
			require.Contains(t, string(r.Messages[len(r.Messages)-1]), "Please apply this spec", "the request stays the last message, whole")
			require.NotContains(t, string(r.Messages[r.Report.HeadEnd]), "Please apply this spec", "and is not also in the summary")
		}},
		{"count-floor-kept-with-outputs-pruned-32k", func(t *testing.T, r CompactResult) {
			require.Len(t, r.Report.Pruned, 8)
		}},
		{"small-window-tail-rule-32k", func(t *testing.T, r CompactResult) {
			// Below 200K with protect_last_n and target_ratio unset, the tail is sized
			// for the window: here the newest tool group (whole) and the newest request.
			require.Empty(t, r.Report.Pruned, "the tail keeps the newest step whole and nothing else")
			require.Equal(t, r.Report.MessagesBefore-2, r.Report.TailStart, "the tail is the last exchange")
			floor := reports["count-floor-kept-with-outputs-pruned-32k"].Report
			require.Less(t, r.Report.TokensAfter, floor.TokensAfter, "a small window compacts deeper than the explicit floor of 20")
		}},
		{"count-floor-yields-to-fit-32k", func(t *testing.T, r CompactResult) {
			require.True(t, r.Report.Fits)
			require.Less(t, r.Report.MessagesBefore-r.Report.TailStart, 20, "the protect_last_n floor yields to fit")
		}},
		{"anthropic-layout-with-system", func(t *testing.T, r CompactResult) {
			require.True(t, r.Report.SystemNoteAdded, "the note goes on the top-level system")
			require.Contains(t, string(r.System), "[Note: earlier turns")
			require.Equal(t, 3, r.Report.HeadEnd, "system counts as the first head message; the head runs to the end of its tool group")
		}},
		{"anthropic-layout-detected-from-blocks", func(t *testing.T, r CompactResult) { require.Nil(t, r.System) }},
		{"anthropic-long-results-pruned-in-place", func(t *testing.T, r CompactResult) {
			require.Equal(t, []int{10, 12}, r.Report.Pruned)
		}},
		{"anthropic-orphan-and-missing-results-repaired", func(t *testing.T, r CompactResult) {
			require.Equal(t, []int{16, 18}, r.Report.Repaired)
			require.Equal(t, []string{"x2", "y1"}, r.Report.StubsAdded)
			require.NotContains(t, string(r.Messages[len(r.Messages)-3]), "ghost", "the orphan tool_result block is taken out")
			require.Contains(t, string(r.Messages[len(r.Messages)-1]), "Did it build?", "stubs go first in the next user turn")
		}},
		{"worked-example-45-messages-builtin", func(t *testing.T, r CompactResult) {
			require.NotContains(t, string(r.Messages[4]), "(none", "no placeholder lines for empty sections")
		}},
		{"instructions-and-focus-reach-the-summary-request", func(t *testing.T, r CompactResult) {
			prompt := r.SummaryRequest.Messages[1].Content
			require.Contains(t, prompt, "\n\nStanding instructions for every summary (follow them):\nKeep every file path and the exact error text.")
			require.True(t, strings.HasSuffix(prompt, "\n\nFocus topic: give priority to everything about parser_3."), "the focus comes last: %q", prompt[max(0, len(prompt)-200):])
		}},
		{"builtin-summary-keeps-the-focus", func(t *testing.T, r CompactResult) {
			var m struct{ Content string }
			require.NoError(t, json.Unmarshal(r.Messages[r.Report.HeadEnd], &m))
			require.Contains(t, m.Content, "## Goal\nRefactor the parser module.\n\n## Focus: parser_3\n- #", "the focus section comes first")
			require.Contains(t, m.Content, "## Focus: parser_3\n- #9 assistant: call read_file(path=\"src/parser_3.py\")", "it quotes what the turns said of the focus")
		}},
		{"smaller-summarizer-window-bounds-the-request", func(t *testing.T, r CompactResult) {
			small, full := r.SummaryRequest, reports["worked-example-45-messages-summary-request"].SummaryRequest
			require.Less(t, len(small.Messages[1].Content), len(full.Messages[1].Content))
			require.LessOrEqual(t, len(small.Messages[1].Content)/roughCharsPerToken, 8000-small.MaxTokens)
		}},
	}
	for _, c := range cases {
		t.Run(c.vector, func(t *testing.T) {
			r, ok := reports[c.vector]
			require.True(t, ok, "no compact.begin vector named %q", c.vector)
			c.check(t, r)
		})
	}
	// Issue 14: every report says whether a host summary was cut and which anchors
	// were added; builtin summaries are neither cut nor checked.
	t.Run("every-report-lists-cuts-and-anchors", func(t *testing.T) {
		for name, r := range reports {
			if r.Report != nil {
				require.False(t, r.Report.SummaryTruncated, name)
				require.Empty(t, r.Report.AnchorsAdded, name)
				require.NotNil(t, r.Report.AnchorsAdded, "%s: an empty list, not null", name)
			}
		}
	})
}

// TestFNV64a: the written-out hash behind compact.begin's state is hash/fnv's.
func TestFNV64a(t *testing.T) {
	for _, s := range []string{"", "a", "assistant", "call_9f\x00\xff", strings.Repeat("é中", 50)} {
		want := fnv.New64a()
		want.Write([]byte(s))
		want.Write([]byte{0, 1})
		require.Equal(t, want.Sum64(), uint64(fnv64a(fnvOffset64).string(s).byte(0).bytes([]byte{1})), "FNV-1a of %q", s)
	}
}

// TestSystemNoteKeepsTheContentBytes: the note is written after a string content
// as the caller encoded it; a message whose content does not lie in its raw JSON
// (one built in the core) gets it through sjson.
func TestSystemNoteKeepsTheContentBytes(t *testing.T) {
	raw := `{"role":"system","content":"<policy> caf\u00e9 \"q\"","name":"x"}`
	m, err := parseMessage(gjson.Parse(raw), "/messages/0")
	require.NoError(t, err)
	got, ok := withSystemNote(&m)
	require.True(t, ok)
	note, _ := marshal(SystemNote)
	require.Equal(t, `{"role":"system","content":"<policy> caf\u00e9 \"q\"`+string(note[1:len(note)-1])+`","name":"x"}`, got)
	require.Equal(t, "<policy> café \"q\""+SystemNote, gjson.Get(got, "content").Str)

	built := message{role: "system", raw: raw, contentRaw: strings.Clone(`"<policy>"`)}
	got, ok = withSystemNote(&built)
	require.True(t, ok)
	require.Equal(t, "<policy>"+SystemNote, gjson.Get(got, "content").Str)
	_, again := withSystemNote(&message{role: "system", raw: got, contentRaw: gjson.Get(got, "content").Raw})
	require.False(t, again, "the note is added once")
}

// TestFinishVectorMeanings asserts what the generated compact.finish cases mean.
func TestFinishVectorMeanings(t *testing.T) {
	var suite struct {
		Cases []struct {
			Name    string
			Request map[string]any
			Want    struct{ Result json.RawMessage }
		}
	}
	data, err := os.ReadFile("../testdata/compact.finish.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &suite))
	got := map[string]CompactResult{}
	for _, c := range suite.Cases {
		if c.Want.Result != nil {
			got[c.Name] = decodeResult(t, c.Want.Result)
		}
	}
	anchors := func(name string) map[string][]string {
		out := map[string][]string{}
		for _, a := range got[name].Report.AnchorsAdded {
			out[a.Kind] = append(out[a.Kind], a.Value)
		}
		return out
	}
	// A host summary that names no file gets the summarized turns' files appended.
	host := anchors("host-summary")
	require.ElementsMatch(t, []string{"src/parser_0.py", "src/parser_1.py", "src/parser_2.py", "src/parser_3.py", "src/parser_4.py"}, host[AnchorFile])
	require.Contains(t, string(got["host-summary"].Messages[got["host-summary"].Report.HeadEnd]), "- file: src/parser_0.py")
	require.Equal(t, host, anchors("host-summary-as-refs"))
	// The worked example's host summary names app/ only as a package and the test
	// run only as "8 of 10": the files and the last error line are appended.
	worked := anchors("worked-example-with-host-summary")
	require.Contains(t, worked[AnchorFile], "app/models.py")
	require.NotContains(t, worked[AnchorFile], "tests/test_main.py", "the summary names it")
	require.Equal(t, []string{"========================= 8 passed, 2 failed in 0.84s =========================="}, worked[AnchorError])
	for _, name := range []string{"summarizer-error-string-uses-fallback", "summarizer-error-object-uses-fallback", "empty-summary-uses-fallback", "missing-summary-uses-fallback"} {
		require.True(t, got[name].Report.FallbackUsed, name)
		require.Empty(t, got[name].Report.AnchorsAdded, "%s: the extractive summary is not checked", name)
	}
	for name, r := range got {
		require.False(t, r.Report.SummaryTruncated, name)
	}
}

// skipShort skips a format trace test under -short (go test -short ./core, the
// quick loop); the whole suite, ./build.sh test, runs it.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a format trace test: it runs without -short")
	}
}
