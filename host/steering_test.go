package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ctxcompact/ctxcompact/core"
)

// steeringConversation is a short coding session whose middle names a ledger
// module among others, for the focus tests.
func steeringConversation() json.RawMessage {
	msgs := []map[string]any{{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the failing tests."}}
	for i, topic := range []string{"parser", "ledger", "cache", "router", "auth", "logging"} {
		id := "c" + string(rune('0'+i))
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": "Looking at the " + topic + " module.", "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "read_file", "arguments": `{"path":"src/` + topic + `.py"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": strings.Repeat("# "+topic+" code line\n", 60)})
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": "Read them all."}, map[string]any{"role": "user", "content": "Now fix it."})
	b, _ := json.Marshal(msgs)
	return b
}

// TestCompactFocusAndInstructions: through the module (Compact's Focus, the
// config's compression.instructions) and natively (core.Compact), the summarizer
// is asked for both, and the builtin summary keeps what matches the focus first.
func TestCompactFocusAndInstructions(t *testing.T) {
	ctx := context.Background()
	e := sharedEngine(t)
	msgs := steeringConversation()
	cfg := json.RawMessage(`{"model":{"context_length":3000},"compression":{"instructions":"Keep every file path."}}`)
	var asked core.SummaryRequest
	res, err := e.Compact(ctx, msgs, cfg, func(_ context.Context, r core.SummaryRequest) (string, error) {
		asked = r
		return "## Goal\nFix the failing tests.", nil
	}, CompactOptions{Force: true, Focus: "the ledger module"})
	if err != nil || !res.Report.Compacted {
		t.Fatalf("Compact: %v, %+v", err, res.Report)
	}
	prompt := asked.Messages[1].Content
	if !strings.Contains(prompt, "Standing instructions for every summary (follow them):\nKeep every file path.") ||
		!strings.HasSuffix(prompt, "Focus topic: give priority to everything about the ledger module.") {
		t.Fatalf("the summary request lacks the instructions or the focus: ...%s", prompt[max(0, len(prompt)-300):])
	}
	builtin, err := core.Compact(msgs, core.CompactOptions{Config: cfg, Force: true, Focus: "ledger"})
	if err != nil {
		t.Fatal(err)
	}
	var summary struct{ Content string }
	_ = json.Unmarshal(builtin.Messages[builtin.Report.HeadEnd], &summary)
	if !strings.Contains(summary.Content, "## Focus: ledger\n- #") || !strings.Contains(summary.Content, "src/ledger.py") {
		t.Fatalf("the builtin summary keeps no Focus section naming src/ledger.py:\n%s", summary.Content)
	}
	if _, err := e.Compact(ctx, msgs, cfg, nil, CompactOptions{Force: true, Focus: strings.Repeat("x", 1001)}); !isCode(err, core.CodeInvalidRequest, "/focus") {
		t.Fatalf("a 1,001-byte focus: %v, want invalid_request at /focus", err)
	}
}

// TestAgentToolsOfACompressorEngine: a compressor engine gives the agent
// context_status and compact_now; compact_now makes ShouldCompress true (reason
// requested) and the next Compress forced, with its focus, which clears it.
func TestAgentToolsOfACompressorEngine(t *testing.T) {
	ctx := context.Background()
	var asked core.SummaryRequest
	ce, err := NewContextEngine(ctx, sharedEngine(t), json.RawMessage(`{"model":{"context_length":3000}}`), ContextEngineOptions{
		Summarize: func(_ context.Context, r core.SummaryRequest) (string, error) {
			asked = r
			return "## Goal\nFix the tests.", nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := ce.ToolSchemas(ctx, "anthropic")
	if err != nil || !strings.Contains(string(tools), `"name":"context_status"`) || !strings.Contains(string(tools), `"name":"compact_now"`) {
		t.Fatalf("ToolSchemas: %s, %v", tools, err)
	}
	if should, err := ce.ShouldCompress(ctx, 500); err != nil || should {
		t.Fatalf("ShouldCompress far below the threshold: %v, %v", should, err)
	}
	ans, err := ce.HandleToolCall(ctx, "compact_now", json.RawMessage(`{"focus":"the ledger module"}`))
	if err != nil || !strings.Contains(ans, `"ok":true`) || !ce.Status().CompactionRequested {
		t.Fatalf("compact_now: %s, %v, status %+v", ans, err, ce.Status())
	}
	if should, err := ce.ShouldCompress(ctx, 500); err != nil || !should {
		t.Fatalf("ShouldCompress after compact_now: %v, %v", should, err)
	}
	res, err := ce.Compress(ctx, steeringConversation(), CompressOptions{})
	if err != nil || !res.Report.Compacted {
		t.Fatalf("Compress after compact_now (below the threshold, so forced): %v, %+v", err, res.Report)
	}
	if !strings.HasSuffix(asked.Messages[1].Content, "Focus topic: give priority to everything about the ledger module.") {
		t.Fatalf("the requested focus is not in the summary request")
	}
	status, err := ce.HandleToolCall(ctx, "context_status", nil)
	if err != nil || !strings.Contains(status, `"compaction_requested":false`) || !strings.Contains(status, `"compactions":1`) || ce.Status().CompactionRequested {
		t.Fatalf("context_status after the compaction: %s, %v", status, err)
	}
}

// TestCompressInChunks: a ContextEngine whose summarizer's window is a third of
// what one summary request would take gets the summary in chunks, each request
// fitting that window (a summarizer refusing larger ones never refuses), the
// last one's answer in the conversation.
func TestCompressInChunks(t *testing.T) {
	ctx := context.Background()
	e := sharedEngine(t)
	var messages json.RawMessage
	for _, tr := range loadTraces(t) {
		if tr.name == "claude-code-spotter-4d5611e5-precompact.json" {
			messages = tr.messages
		}
	}
	if messages == nil {
		t.Fatal("the trace is not among the shared traces")
	}
	const window = 11000 // one request: about 33,000 tokens (core's TestSummaryInChunksFitsTheSummarizer)
	var asked, refused, largest int
	summarize := func(ctx context.Context, r core.SummaryRequest) (string, error) {
		b, _ := json.Marshal(r.Messages)
		n, err := e.TokensCount(ctx, b, TokensCountOptions{Encoding: "o200k_base"})
		if err != nil {
			return "", err
		}
		if n.Total+r.MaxTokens > window {
			refused++
			return "", fmt.Errorf("the input is %d tokens; the window is %d", n.Total+r.MaxTokens, window)
		}
		asked++
		largest = max(largest, n.Total)
		return fmt.Sprintf("## Goal\nKeep going.\n- request %d read turns %d-%d", asked, r.Middle.From, r.Middle.To-1), nil
	}
	ce, err := NewContextEngine(ctx, e, json.RawMessage(fmt.Sprintf(`{"model":{"context_length":64000},"compression":{"summary_context_length":%d}}`, window)),
		ContextEngineOptions{Summarize: summarize})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ce.Compress(ctx, messages, CompressOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	rep := res.Report
	if refused != 0 || rep.FallbackUsed || rep.SummaryChunks < 3 || rep.SummaryChunks != asked {
		t.Fatalf("refused %d, fallback %v, %d chunks of %d requests", refused, rep.FallbackUsed, rep.SummaryChunks, asked)
	}
	summary := string(res.Messages[rep.HeadEnd])
	if !strings.Contains(summary, fmt.Sprintf("- request %d read turns", asked)) {
		t.Fatalf("the last chunk's answer is not the summary: %.300s", summary)
	}
	t.Logf("%d requests, the largest %d tokens of a %d-token window", asked, largest, window)
}

// TestBackgroundCompaction: ShouldPrepare says so below the trigger; a
// PrepareCompaction whose summarizer is still running holds nothing up (the
// session answers ShouldCompress and usage meanwhile); the Compress at the
// trigger splices it into the grown conversation without calling the
// summarizer, the messages appended since verbatim after the summary.
func TestBackgroundCompaction(t *testing.T) {
	ctx := context.Background()
	var prefix []json.RawMessage
	if err := json.Unmarshal(steeringConversation(), &prefix); err != nil {
		t.Fatal(err)
	}
	grown := append(append([]json.RawMessage{}, prefix...),
		json.RawMessage(`{"role":"assistant","content":"The parser test fails on empty input."}`),
		json.RawMessage(`{"role":"user","content":"Fix that first."}`))
	asked, release := make(chan core.SummaryRequest, 1), make(chan struct{})
	calls := 0
	ce, err := NewContextEngine(ctx, sharedEngine(t), json.RawMessage(`{"model":{"context_length":3000}}`), ContextEngineOptions{
		Summarize: func(_ context.Context, r core.SummaryRequest) (string, error) {
			calls++
			select {
			case asked <- r:
			default: // a later chunk's request
			}
			<-release
			return "## Goal\nFix the failing tests, the parser's first.", nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	threshold := ce.Status().ThresholdTokens
	if should, err := ce.ShouldPrepare(ctx, threshold*9/10); err != nil || !should {
		t.Fatalf("ShouldPrepare at 90%% of the threshold: %v, %v", should, err)
	}
	if should, _ := ce.ShouldPrepare(ctx, threshold/2); should {
		t.Fatal("ShouldPrepare at half the threshold (below prepare_ratio 0.85)")
	}
	done := make(chan core.PrepareResult)
	go func() {
		res, err := ce.PrepareCompaction(ctx, mustJoin(prefix), CompressOptions{})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-asked // the summarizer is running: the session goes on
	if err := ce.UpdateFromResponse(ctx, json.RawMessage(`{"prompt_tokens":2100,"completion_tokens":40}`)); err != nil {
		t.Fatal(err)
	}
	if should, err := ce.ShouldCompress(ctx, 0); err != nil || should {
		t.Fatalf("ShouldCompress while the summary is prepared: %v, %v", should, err)
	}
	close(release)
	prepared := <-done
	if prepared.Prepared == nil || prepared.Prepared.Messages != len(prefix) {
		t.Fatalf("prepared: %+v", prepared)
	}
	if should, _ := ce.ShouldPrepare(ctx, threshold*9/10); should {
		t.Fatal("ShouldPrepare with a fresh one kept")
	}
	before := calls
	res, err := ce.Compress(ctx, mustJoin(grown), CompressOptions{PromptTokens: threshold + 100})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Report.Prepared || !res.Report.Compacted || calls != before {
		t.Fatalf("the splice: prepared %v, compacted %v, %d summarizer calls at the trigger", res.Report.Prepared, res.Report.Compacted, calls-before)
	}
	n := len(res.Messages)
	if string(res.Messages[n-2]) != string(grown[len(grown)-2]) || string(res.Messages[n-1]) != string(grown[len(grown)-1]) {
		t.Fatalf("the messages appended since are not verbatim at the end: %s", res.Messages[n-2:])
	}
	if !strings.Contains(string(res.Messages[res.Report.HeadEnd]), "the parser's first") {
		t.Fatalf("the prepared summary is not in the conversation: %.200s", res.Messages[res.Report.HeadEnd])
	}
}

func mustJoin(msgs []json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(msgs)
	return b
}

// TestPinsThroughTheEngine: a pin given to one Compress holds in the next,
// at the message's new index, and Engine.Compact takes pins too.
func TestPinsThroughTheEngine(t *testing.T) {
	ctx := context.Background()
	e := sharedEngine(t)
	msgs := steeringConversation()
	res, err := e.Compact(ctx, msgs, json.RawMessage(`{"model":{"context_length":3000}}`), nil, CompactOptions{Force: true, Pins: []core.Pin{core.PinCall("c1")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Report.Pinned) != 2 || !strings.Contains(string(res.Messages[res.Report.HeadEnd+1]), `"id":"c1"`) {
		t.Fatalf("Compact's pin: pinned %v, after the summary %s", res.Report.Pinned, res.Messages[res.Report.HeadEnd+1])
	}
	ce, err := NewContextEngine(ctx, e, json.RawMessage(`{"model":{"context_length":3000}}`), ContextEngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := ce.Compress(ctx, msgs, CompressOptions{Force: true, Pins: []core.Pin{core.PinIndex(4)}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(first.Report.Pinned) != "[4 5]" {
		t.Fatalf("pinned %v", first.Report.Pinned)
	}
	var out []json.RawMessage
	out = append(out, first.Messages...)
	out = append(out, json.RawMessage(`{"role":"assistant","content":"Fixed the ledger."}`), json.RawMessage(`{"role":"user","content":"Go on."}`))
	second, err := ce.Compress(ctx, mustJoin(out), CompressOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Report.Pinned) != 2 {
		t.Fatalf("the pin did not hold: pinned %v", second.Report.Pinned)
	}
	if got, want := string(second.Messages[second.Report.HeadEnd+1]), string(first.Messages[first.Report.HeadEnd+1]); got != want {
		t.Fatalf("the pinned message changed:\n%s\n%s", got, want)
	}
}

// TestUndoThroughTheEngine: Undo gives back the last Compress's input, then
// what came after, and refuses a second time.
func TestUndoThroughTheEngine(t *testing.T) {
	ctx := context.Background()
	ce, err := NewContextEngine(ctx, sharedEngine(t), json.RawMessage(`{"model":{"context_length":3000}}`), ContextEngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := steeringConversation()
	res, err := ce.Compress(ctx, msgs, CompressOptions{Force: true})
	if err != nil || !res.Report.Compacted {
		t.Fatalf("compress: %v", err)
	}
	if st := ce.Status(); !st.CanUndo || st.LastCompaction == nil || !strings.Contains(st.LastCompaction.Summary, "## Goal") {
		t.Fatalf("status: %+v", st)
	}
	grown := append(append([]json.RawMessage{}, res.Messages...), json.RawMessage(`{"role":"user","content":"Undo that."}`))
	back, err := ce.Undo(ctx, mustJoin(grown))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []any
	if err := json.Unmarshal(back, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(msgs, &want); err != nil {
		t.Fatal(err)
	}
	want = append(want, map[string]any{"role": "user", "content": "Undo that."})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("undo gave %d messages, want the %d of the input and the one after", len(got), len(want))
	}
	if _, err := ce.Undo(ctx, back); err == nil || !strings.Contains(err.Error(), "no compaction to undo") {
		t.Fatalf("a second undo: %v", err)
	}
}

// TestRangeCompactionThroughTheEngine: Range summarizes exactly the messages
// named, below the threshold too.
func TestRangeCompactionThroughTheEngine(t *testing.T) {
	ctx := context.Background()
	res, err := sharedEngine(t).Compact(ctx, steeringConversation(), json.RawMessage(`{"model":{"context_length":200000}}`), nil,
		CompactOptions{Range: &core.IndexRange{From: 4, To: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Report.Summarized; s == nil || *s != (core.IndexRange{From: 4, To: 8}) {
		t.Fatalf("summarized %v", res.Report.Summarized)
	}
	ce, err := NewContextEngine(ctx, sharedEngine(t), json.RawMessage(`{"model":{"context_length":200000}}`), ContextEngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ce.Compress(ctx, steeringConversation(), CompressOptions{Range: &core.IndexRange{From: 2, To: 6}})
	if err != nil || got.Report.Summarized == nil || *got.Report.Summarized != (core.IndexRange{From: 2, To: 6}) {
		t.Fatalf("the engine's range compaction: %v, %v", got.Report, err)
	}
}
