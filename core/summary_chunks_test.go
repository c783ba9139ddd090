package core

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

// windowedSummarizer is a scripted summarizer with a window: it refuses a request
// whose messages (o200k) and answer do not fit, and otherwise answers the summary
// it was given to update (its previous_summary) with one line naming the turns it
// read, so the end summary shows every request that built it.
type windowedSummarizer struct {
	window   int
	middles  []IndexRange
	largest  int
	refusals int
}

var previousSummaryRE = regexp.MustCompile(`(?s)<previous_summary>\n(.*)\n</previous_summary>`)

func (s *windowedSummarizer) answer(t *testing.T, request any) any {
	b, err := json.Marshal(gjson.Get(jsonOf(t, request), "messages").Value())
	require.NoError(t, err)
	n, err := CountTokens(b, CountTokensOptions{Encoding: "o200k_base"})
	require.NoError(t, err)
	req := gjson.Parse(jsonOf(t, request))
	if need := n.Total + int(req.Get("max_tokens").Int()); need > s.window {
		s.refusals++
		return failAnswer("error", fmt.Sprintf("the input is %d tokens; this model's window is %d", need, s.window))
	}
	s.largest = max(s.largest, n.Total)
	m := IndexRange{From: int(req.Get("middle.from").Int()), To: int(req.Get("middle.to").Int())}
	s.middles = append(s.middles, m)
	prompt := req.Get("messages.1.content").Str
	summary := "## Goal\nKeep the work going."
	if p := previousSummaryRE.FindStringSubmatch(prompt); p != nil && strings.Contains(p[1], "- read turns") {
		summary = p[1]
	}
	return ok(fmt.Sprintf("%s\n- read turns #%d-#%d", summary, m.From, m.To-1))
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// runCompress runs a compress event natively to its end (runEvent), answering
// its summarize effects with sum; it returns the end's result and state.
func runCompress(t *testing.T, state json.RawMessage, fields map[string]any, sum *windowedSummarizer) (map[string]any, json.RawMessage) {
	t.Helper()
	f := map[string]any{"summarizer": "host"}
	for k, v := range fields {
		f[k] = v
	}
	res, end := runEvent(t, state, EventCompress, f, func(effect map[string]any) any {
		require.Equal(t, EffectSummarize, effect["type"])
		return sum.answer(t, effect["request"])
	})
	return res.(map[string]any), end
}

func traceForChunks(t *testing.T) []any {
	data, err := os.ReadFile(testtraces.File(t, "claude-code-spotter-4d5611e5-precompact.json"))
	require.NoError(t, err)
	var tr struct {
		Messages []any `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(data, &tr))
	return tr.Messages
}

func startEngine(t *testing.T, cfg map[string]any) json.RawMessage {
	start, e := callOp(t, "engine.start", map[string]any{"config": cfg})
	require.Nil(t, e)
	return json.RawMessage(jsonField(t, start, "state"))
}

// TestSummaryInChunksFitsTheSummarizer: a middle 2x and 5x the summarizer's
// window is summarized in chunks that each fit it (a summarizer refusing any
// larger input never refuses), cover the middle in order with no turn left out,
// and build one summary through the iterative update.
func TestSummaryInChunksFitsTheSummarizer(t *testing.T) {
	if testing.Short() {
		t.Skip("a shared trace; runs without -short")
	}
	msgs := traceForChunks(t)
	const mainWindow = 64000
	base := map[string]any{"model": map[string]any{"context_length": mainWindow}, "compression": map[string]any{"summary_context_length": 1000000}}
	// The middle's size, summarized in one request by a summarizer that takes it all.
	one := &windowedSummarizer{window: 1 << 30}
	res, _ := runCompress(t, startEngine(t, base), map[string]any{"messages": msgs, "force": true}, one)
	require.Len(t, one.middles, 1)
	middle := one.largest
	t.Logf("the middle in one request: %d tokens, turns %v", middle, one.middles[0])
	require.Greater(t, middle, 25000)
	whole := res["report"].(map[string]any)["summarized"]

	for _, times := range []int{2, 5} {
		t.Run(fmt.Sprintf("%dx", times), func(t *testing.T) {
			window := middle / times
			cfg := map[string]any{"model": map[string]any{"context_length": mainWindow}, "compression": map[string]any{"summary_context_length": window}}
			sum := &windowedSummarizer{window: window}
			res, _ := runCompress(t, startEngine(t, cfg), map[string]any{"messages": msgs, "force": true}, sum)
			rep := res["report"].(map[string]any)
			require.Zero(t, sum.refusals, "every request fits the summarizer's window")
			require.Equal(t, false, rep["fallback_used"])
			require.Equal(t, whole, rep["summarized"], "the same middle as one request")
			require.GreaterOrEqual(t, len(sum.middles), times)
			require.EqualValues(t, len(sum.middles), rep["summary_chunks"])
			from := one.middles[0].From
			for _, m := range sum.middles {
				require.Equal(t, from, m.From, "the chunks follow each other")
				from = m.To
			}
			require.Equal(t, one.middles[0].To, from, "and end where the middle ends")
			// The end summary is the last update: it names every chunk.
			out, _ := json.Marshal(res["messages"])
			for _, m := range sum.middles {
				require.Contains(t, string(out), fmt.Sprintf("- read turns #%d-#%d", m.From, m.To-1))
			}
			t.Logf("%d chunks, the largest request %d tokens of a %d-token window", len(sum.middles), sum.largest, window)
		})
	}
}

// TestSwitchToASmallerModelCompactsInChunks: after update_model to a window the
// conversation is already above, the engine says to compress, and the compress
// (its summarizer the new model, window and all) fits the new window.
func TestSwitchToASmallerModelCompactsInChunks(t *testing.T) {
	if testing.Short() {
		t.Skip("a shared trace; runs without -short")
	}
	msgs := traceForChunks(t)
	state := startEngine(t, map[string]any{"model": map[string]any{"name": "claude-sonnet-4-5", "context_length": 200000}})
	n, err := CountTokens([]byte(jsonOf(t, msgs)), CountTokensOptions{})
	require.NoError(t, err)
	const small = 32000
	require.Greater(t, n.Total, small, "the conversation is above the new window")
	res, e := callOp(t, "engine.update_model", map[string]any{"state": state, "model": "gpt-4o", "context_length": small})
	require.Nil(t, e)
	state = json.RawMessage(jsonField(t, res, "state"))
	res, e = callOp(t, "engine.should_compress", map[string]any{"state": state, "prompt_tokens": n.Total})
	require.Nil(t, e)
	require.Equal(t, "true", string(jsonField(t, res, "should_compress")))

	sum := &windowedSummarizer{window: small}
	out, end := runCompress(t, state, map[string]any{"messages": msgs, "prompt_tokens": n.Total}, sum)
	rep := out["report"].(map[string]any)
	require.Zero(t, sum.refusals)
	require.Equal(t, true, rep["compacted"])
	require.Equal(t, false, rep["fallback_used"])
	require.Equal(t, true, rep["fits"], "the result fits the new window: %v", rep)
	require.Less(t, rep["tokens_after"].(float64), float64(small))
	require.Greater(t, len(sum.middles), 1)
	require.EqualValues(t, 1, gjson.GetBytes(end, "compression_count").Int())
}
