package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ctxcompact/ctxcompact/core"
)

// smallTrace is the smallest shared trace, for tests that call many times.
const smallTrace = "tau-bench-gpt4o-airline.json"

func traceNamed(t *testing.T, name string) json.RawMessage {
	t.Helper()
	for _, tr := range loadTraces(t) {
		if tr.name == name {
			return tr.messages
		}
	}
	t.Fatalf("trace %s not found", name)
	return nil
}

// native runs env through core.Call and decodes it like the typed methods do.
func native[T any](t *testing.T, env []byte) T {
	t.Helper()
	var v T
	raw, err := splitResponse(core.Call(env))
	if err != nil {
		t.Fatalf("core.Call(%s): %v", clip(env), err)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func env(t *testing.T, r *request) []byte {
	t.Helper()
	b, err := r.bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func requireOps(t *testing.T, ops ...string) {
	t.Helper()
	for _, op := range ops {
		if !hasOp(op) {
			t.Fatalf("the core has no %s op", op)
		}
	}
}

// TestTypedMethods checks each typed method against core.Call on the same request.
func TestTypedMethods(t *testing.T) {
	requireOps(t, "threshold.resolve", "should_compress", "hygiene.check", "tokens.count", "validate", "prune", "sanitize", "tokens.calibrate", "cache.policy")
	ctx := context.Background()
	e := sharedEngine(t)
	msgs := traceNamed(t, smallTrace)
	cfg := json.RawMessage(`{"model":{"context_length":32000}}`)
	check := func(name string, got, want any, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: wasm %+v\nnative %+v", name, got, want)
		}
	}
	thr, err := e.ThresholdResolve(ctx, cfg)
	check("ThresholdResolve", thr, native[core.ThresholdResult](t, env(t, newRequest("threshold.resolve").raw("config", cfg))), err)
	if thr.ThresholdTokens <= 0 || thr.ContextLength != 32000 {
		t.Errorf("ThresholdResolve: %+v", thr)
	}
	sc, err := e.ShouldCompress(ctx, 30000, ShouldCompressOptions{Config: cfg})
	check("ShouldCompress", sc, native[core.ShouldCompressResult](t, []byte(`{"op":"should_compress","config":{"model":{"context_length":32000}},"prompt_tokens":30000}`)), err)
	if !sc.ShouldCompress {
		t.Errorf("ShouldCompress(30000 of 32000) = %+v", sc)
	}
	hy, err := e.HygieneCheck(ctx, msgs, HygieneOptions{Config: cfg})
	check("HygieneCheck", hy, native[core.HygieneResult](t, env(t, newRequest("hygiene.check").raw("messages", msgs).raw("config", cfg))), err)
	tc, err := e.TokensCount(ctx, msgs, TokensCountOptions{})
	check("TokensCount", tc, native[core.CountTokensResult](t, env(t, newRequest("tokens.count").raw("messages", msgs))), err)
	if tc.Total <= 0 || len(tc.PerMessage) == 0 {
		t.Errorf("TokensCount: total %d over %d messages", tc.Total, len(tc.PerMessage))
	}
	va, err := e.Validate(ctx, msgs, ValidateOptions{})
	check("Validate", va, native[core.ValidateResult](t, env(t, newRequest("validate").raw("messages", msgs))), err)
	// One door: the host's Prune takes core.Prune's options and gives its result.
	popts := PruneOptions{Config: cfg, Output: core.OutputRefs}
	pr, err := e.Prune(ctx, msgs, popts)
	wantPr, nerr := core.Prune(msgs, popts)
	if nerr != nil {
		t.Fatal(nerr)
	}
	check("Prune", pr, wantPr, err)
	if len(pr.Messages) == 0 || pr.TokensBefore <= 0 {
		t.Errorf("Prune: %d messages, report %+v", len(pr.Messages), pr.PruneResult)
	}
	cal, err := e.TokensCalibrate(ctx, msgs, 9000, CalibrateOptions{})
	check("TokensCalibrate", cal, native[core.CalibrateResult](t, env(t, newRequest("tokens.calibrate").raw("messages", msgs).raw("prompt_tokens", json.RawMessage("9000")))), err)
	if cal.Factor <= 0 || cal.PromptTokens != 9000 {
		t.Errorf("TokensCalibrate: %+v", cal)
	}
	pol, err := e.CachePolicy(ctx, CachePolicyOptions{Model: "anthropic/claude-sonnet-4", Provider: "openrouter"})
	check("CachePolicy", pol, native[core.CachePolicy](t, []byte(`{"op":"cache.policy","model":"anthropic/claude-sonnet-4","provider":"openrouter"}`)), err)
	if !pol.Enabled || pol.Status == "" {
		t.Errorf("CachePolicy for Claude on OpenRouter: %+v", pol)
	}
	sa, err := e.Sanitize(ctx, json.RawMessage(`[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"x","content":"orphan"}]`), SanitizeOptions{})
	if err != nil || !reflect.DeepEqual(sa.Removed, []int{1}) || len(sa.Messages) != 1 || len(sa.Archived) != 1 {
		t.Errorf("Sanitize of an orphan result: %+v, %v", sa, err)
	}
	if want, err := core.Sanitize(json.RawMessage(`[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"x","content":"orphan"}]`), SanitizeOptions{}); err != nil || !reflect.DeepEqual(sa, want) {
		t.Errorf("Sanitize through the module %+v, natively %+v (%v)", sa, want, err)
	}
	_, err = e.ThresholdResolve(ctx, json.RawMessage(`{"model":{"context_length":0}}`))
	if !errors.Is(err, &core.Error{Code: core.CodeInvalidConfig}) {
		t.Errorf("ThresholdResolve with context_length 0: %v, want invalid_config", err)
	}
	unsigned := json.RawMessage(`[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"reasoning","text":"plan"},{"type":"text","text":"done"}]}]`)
	if va, err := e.Validate(ctx, unsigned, ValidateOptions{Format: FormatAISDK, Provider: "anthropic"}); err != nil || len(va.Problems) != 1 || va.Problems[0].Code != core.ProblemThinkingSignatureMissing {
		t.Errorf("Validate of an unsigned reasoning part for Anthropic: %+v, %v", va, err)
	}
	if va, err := e.Validate(ctx, unsigned, ValidateOptions{Format: FormatAISDK, Config: json.RawMessage(`{"model":{"provider":"anthropic"}}`)}); err != nil || len(va.Problems) != 1 || va.Problems[0].Code != core.ProblemThinkingSignatureMissing {
		t.Errorf("Validate with the provider from the config: %+v, %v", va, err)
	}
	if va, err := e.Validate(ctx, unsigned, ValidateOptions{Format: FormatAISDK, Provider: "openai", Config: json.RawMessage(`{"model":{"provider":"anthropic"}}`)}); err != nil || !va.OK {
		t.Errorf("Validate: an explicit provider wins over the config's: %+v, %v", va, err)
	}
	if _, err := e.Validate(ctx, unsigned, ValidateOptions{Format: FormatAISDK, Provider: "mistral"}); !errors.Is(err, &core.Error{Code: core.CodeInvalidRequest}) {
		t.Errorf("Validate with an unknown provider: %v, want invalid_request", err)
	}
	if _, err := e.Validate(ctx, json.RawMessage(`[{"role":`), ValidateOptions{}); !errors.Is(err, &core.Error{Code: core.CodeInvalidJSON}) {
		t.Errorf("Validate of invalid JSON: %v, want invalid_json", err)
	}
}

// TestCompact drives compact.begin / compact.finish with a Go summarizer and checks
// the result against the same flow run natively.
func TestCompact(t *testing.T) {
	requireOps(t, "compact.begin", "compact.finish")
	ctx := context.Background()
	e := sharedEngine(t)
	msgs := traceNamed(t, smallTrace)
	cfg := json.RawMessage(`{"model":{"context_length":32000}}`)
	const summary = "## Goal\nRebook the customer's flight.\n## Next Steps\nConfirm the new itinerary."

	var asked core.SummaryRequest
	got, err := e.Compact(ctx, msgs, cfg, func(_ context.Context, req core.SummaryRequest) (string, error) {
		asked = req
		return summary, nil
	}, CompactOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked.Messages) != 2 || asked.MaxTokens <= 0 || asked.Middle.To <= asked.Middle.From {
		t.Fatalf("summary request: %+v", asked)
	}
	req := CompactRequest{Messages: msgs, Config: cfg, Force: true, Summarizer: core.SummarizerHost}
	begin := native[core.CompactResult](t, env(t, req.beginEnvelope()))
	want := native[core.CompactResult](t, env(t, req.finishEnvelope(begin.State, summary, nil)))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Compact differs from the native begin/finish:\nwasm   %+v\nnative %+v", got.Report, want.Report)
	}
	if !got.Done || got.Report == nil || got.Report.Summarizer != core.SummarizerHost || got.Report.FallbackUsed {
		t.Fatalf("report: %+v", got.Report)
	}
	if !strings.Contains(joinRaw(got.Messages), "Rebook the customer") {
		t.Error("the summary is not in the compacted messages")
	}

	failed, err := e.Compact(ctx, msgs, cfg, func(context.Context, core.SummaryRequest) (string, error) {
		return "", errors.New("rate limited")
	}, CompactOptions{Force: true})
	if err != nil || failed.Report == nil || !failed.Report.FallbackUsed || !strings.Contains(failed.Report.FallbackReason, "rate limited") {
		t.Fatalf("a failing summarizer: err %v, report %+v", err, failed.Report)
	}

	builtin, err := e.Compact(ctx, msgs, cfg, nil, CompactOptions{Force: true})
	breq := CompactRequest{Messages: msgs, Config: cfg, Force: true, Summarizer: core.SummarizerBuiltin}
	wantBuiltin := native[core.CompactResult](t, env(t, breq.beginEnvelope()))
	if err != nil || !reflect.DeepEqual(builtin, wantBuiltin) || builtin.Report.Summarizer != core.SummarizerBuiltin {
		t.Fatalf("builtin compaction: err %v, report %+v", err, builtin.Report)
	}

	cctx, cancel := context.WithCancel(ctx)
	_, err = e.Compact(cctx, msgs, cfg, func(context.Context, core.SummaryRequest) (string, error) {
		cancel()
		return "", context.Canceled
	}, CompactOptions{Force: true})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Compact canceled during summarize: %v, want context.Canceled", err)
	}

	_, err = e.CompactFinish(ctx, req, CompactAnswer{State: "ccs1.bogus", Summary: summary})
	if !errors.Is(err, &core.Error{Code: core.CodeInvalidState}) {
		t.Errorf("CompactFinish with a bogus state: %v, want invalid_state", err)
	}
}

func joinRaw(msgs []json.RawMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		b.Write(m)
	}
	return b.String()
}

// TestFinishOnAnotherInstance: the state is the whole memory of a compaction, so
// compact.finish on another instance gives the result native begin/finish give.
func TestFinishOnAnotherInstance(t *testing.T) {
	requireOps(t, "compact.begin", "compact.finish")
	ctx := context.Background()
	e := sharedEngine(t)
	a, err := e.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer e.release(ctx, a, true)
	b, err := e.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer e.release(ctx, b, true)
	if a == b {
		t.Fatal("the pool lent the same instance twice")
	}
	req := CompactRequest{Messages: traceNamed(t, smallTrace), Config: json.RawMessage(`{"model":{"context_length":32000}}`),
		Force: true, Summarizer: core.SummarizerHost}
	resp, err := instCall(ctx, a, env(t, req.beginEnvelope()))
	if err != nil {
		t.Fatal(err)
	}
	var begin core.CompactResult
	raw, err := splitResponse(resp)
	if err != nil || json.Unmarshal(raw, &begin) != nil || begin.Done || begin.State == "" {
		t.Fatalf("compact.begin: %v %s", err, clip(resp))
	}
	finish := env(t, req.finishEnvelope(begin.State, "## Goal\nRebook.", nil))
	got, err := instCall(ctx, b, finish)
	if err != nil {
		t.Fatal(err)
	}
	if want := core.Call(finish); !bytes.Equal(got, want) {
		t.Fatalf("finish on another instance: wasm %s\nnative %s", clip(got), clip(want))
	}
	if !strings.Contains(string(got), `"done":true`) {
		t.Fatalf("finish did not complete: %s", clip(got))
	}
}

// TestFinishEnvelopeEndsWithMessages: compact.finish repeats begin's fields and
// ends with its messages, byte for byte, which lets the instance that kept the
// begun compaction read it without them.
func TestFinishEnvelopeEndsWithMessages(t *testing.T) {
	msgs := json.RawMessage(`[{"role":"user","content":"hi"},{"role":"assistant","content":"a \"b\""}]`)
	req := CompactRequest{Messages: msgs, Config: json.RawMessage(`{"model":{"context_length":8000}}`),
		Force: true, PromptTokens: 12, Summarizer: core.SummarizerHost, Output: "refs"}
	begin := string(env(t, req.beginEnvelope()))
	tail := `,"messages":` + string(msgs) + `}`
	fields := strings.TrimSuffix(strings.TrimPrefix(begin, `{"op":"compact.begin"`), tail)
	if !strings.HasSuffix(begin, tail) {
		t.Fatalf("begin does not end with the messages: %s", begin)
	}
	for _, failure := range []json.RawMessage{nil, mustString("timeout"), summaryFailure("timeout", "no answer")} {
		finish := string(env(t, req.finishEnvelope("ccs1.x", "## Goal", failure)))
		if !strings.HasPrefix(finish, `{"op":"compact.finish"`+fields+`,"state":"ccs1.x",`) || !strings.HasSuffix(finish, tail) {
			t.Fatalf("finish does not repeat begin's fields and end with its messages:\nbegin  %s\nfinish %s", begin, finish)
		}
	}
}

// TestFinishKept: with a ticket, the engine whose instance ran compact.begin
// finishes without the messages (the request below has none to send); an engine
// whose instances kept nothing answers invalid_state at /messages to the short
// finish and CompactFinishKept sends the whole one. Both equal the native finish.
func TestFinishKept(t *testing.T) {
	requireOps(t, "compact.begin", "compact.finish")
	ctx := context.Background()
	req := CompactRequest{Messages: traceNamed(t, smallTrace), Config: json.RawMessage(`{"model":{"context_length":32000}}`),
		Force: true, Summarizer: core.SummarizerHost, Output: "refs", Ticket: newTicket()}
	want := core.Call(env(t, req.finishEnvelope(stateOf(t, req), "## Goal\nRebook.", nil)))

	kept := newEngine(t, WithPoolSize(1))
	begin, err := kept.CompactBegin(ctx, req)
	if err != nil || begin.Done {
		t.Fatalf("compact.begin: %v %+v", err, begin)
	}
	noMessages := req
	noMessages.Messages = nil
	got, err := kept.CompactFinishKept(ctx, noMessages, CompactAnswer{State: begin.State, Summary: "## Goal\nRebook."})
	if err != nil {
		t.Fatalf("the finish without messages on the instance that began it: %v", err)
	}
	requireSameResult(t, want, got)

	_, err = kept.CompactFinishKept(ctx, noMessages, CompactAnswer{State: begin.State, Summary: "## Goal\nRebook."})
	if !errors.Is(err, &core.Error{Code: core.CodeInvalidState}) {
		t.Fatalf("a second finish without messages (nothing kept, none to send): %v", err)
	}
	other := newEngine(t, WithPoolSize(1))
	got, err = other.CompactFinishKept(ctx, req, CompactAnswer{State: begin.State, Summary: "## Goal\nRebook."})
	if err != nil {
		t.Fatalf("the whole finish after the miss: %v", err)
	}
	requireSameResult(t, want, got)
	if a, b := newTicket(), newTicket(); a == b {
		t.Fatalf("two tickets alike: %s", a)
	}
}

// stateOf is the state compact.begin gives req, natively.
func stateOf(t *testing.T, req CompactRequest) string {
	var r core.CompactResult
	raw, err := splitResponse(core.Call(env(t, req.beginEnvelope())))
	if err != nil || json.Unmarshal(raw, &r) != nil || r.State == "" {
		t.Fatalf("native compact.begin: %v %s", err, raw)
	}
	return r.State
}

// requireSameResult compares a typed result with a native response envelope.
func requireSameResult(t *testing.T, envelope []byte, got core.CompactResult) {
	t.Helper()
	var want core.CompactResult
	raw, err := splitResponse(envelope)
	if err != nil || json.Unmarshal(raw, &want) != nil {
		t.Fatalf("native compact.finish: %v %s", err, clip(envelope))
	}
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if !bytes.Equal(w, g) {
		t.Fatalf("finish: got %s\nwant %s", clip(g), clip(w))
	}
}
