package host

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

// Each option of the typed methods reaches the op: the typed result equals what
// core.Call returns for an envelope written out by hand with that option, and
// differs from the result without it where the option changes anything.
func TestTypedOptionsReachTheOp(t *testing.T) {
	ctx := context.Background()
	e := sharedEngine(t)
	msgs := traceNamed(t, smallTrace)
	cfg := json.RawMessage(`{"model":{"context_length":32000}}`)
	same := func(name string, got, want any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: wasm %+v\nnative %+v", name, got, want)
		}
	}

	sc, err := e.ShouldCompress(ctx, 30000, ShouldCompressOptions{Config: cfg, LastCompactionTokens: 29000})
	same("ShouldCompress with the breaker", sc, native[core.ShouldCompressResult](t,
		[]byte(`{"op":"should_compress","config":{"model":{"context_length":32000}},"prompt_tokens":30000,"last_compaction_tokens":29000}`)), err)
	if open, _ := e.ShouldCompress(ctx, 30000, ShouldCompressOptions{Config: cfg}); reflect.DeepEqual(open, sc) {
		t.Errorf("LastCompactionTokens changed nothing: %+v", sc)
	}

	hy, err := e.HygieneCheck(ctx, msgs, HygieneOptions{Config: cfg, PromptTokens: 31000})
	same("HygieneCheck with prompt tokens", hy, native[core.HygieneResult](t,
		[]byte(`{"op":"hygiene.check","config":{"model":{"context_length":32000}},"prompt_tokens":31000,"messages":`+string(msgs)+`}`)), err)

	tc, err := e.TokensCount(ctx, msgs, TokensCountOptions{Encoding: core.EncodingCl100k})
	same("TokensCount with an encoding", tc, native[core.CountTokensResult](t,
		[]byte(`{"op":"tokens.count","encoding":"cl100k_base","messages":`+string(msgs)+`}`)), err)
	if tc.Encoding != core.EncodingCl100k {
		t.Errorf("TokensCount counted with %s", tc.Encoding)
	}

	n := len(gjson.ParseBytes(msgs).Array())
	cal, err := e.TokensCalibrate(ctx, msgs, 9000, CalibrateOptions{Encoding: core.EncodingO200k,
		Baseline: &core.CalibrationBaseline{MessageCount: n / 2, PromptTokens: 4000}})
	same("TokensCalibrate with a baseline", cal, native[core.CalibrateResult](t,
		[]byte(`{"op":"tokens.calibrate","encoding":"o200k_base","prompt_tokens":9000,`+
			`"baseline":{"message_count":`+itoa(n/2)+`,"prompt_tokens":4000},"messages":`+string(msgs)+`}`)), err)
	if cal.Method != "delta" || cal.Encoding != core.EncodingO200k {
		t.Errorf("TokensCalibrate with a baseline: %+v", cal)
	}
	cal, err = e.TokensCalibrate(ctx, msgs, 9000, CalibrateOptions{Config: cfg, FixedOverhead: 500})
	same("TokensCalibrate with a fixed overhead", cal, native[core.CalibrateResult](t,
		[]byte(`{"op":"tokens.calibrate","config":{"model":{"context_length":32000}},"prompt_tokens":9000,"fixed_overhead":500,"messages":`+string(msgs)+`}`)), err)
	if cal.Method != "ratio" || cal.FixedOverhead != 500 {
		t.Errorf("TokensCalibrate with a fixed overhead: %+v", cal)
	}
	_, err = e.TokensCalibrate(ctx, msgs, 9000, CalibrateOptions{FixedOverhead: 500, Baseline: &core.CalibrationBaseline{MessageCount: 2, PromptTokens: 10}})
	if !isCode(err, core.CodeInvalidRequest, "/fixed_overhead") {
		t.Errorf("TokensCalibrate with both: %v, want invalid_request at /fixed_overhead", err)
	}

	pol, err := e.CachePolicy(ctx, CachePolicyOptions{Config: json.RawMessage(`{"model":{"name":"claude-sonnet-4","provider":"anthropic"}}`), TTL: core.CacheTTL1h})
	same("CachePolicy from the config, with a TTL", pol, native[core.CachePolicy](t,
		[]byte(`{"op":"cache.policy","config":{"model":{"name":"claude-sonnet-4","provider":"anthropic"}},"ttl":"1h"}`)), err)
	if !pol.Enabled || pol.TTL != core.CacheTTL1h || pol.Layout != core.LayoutAnthropic {
		t.Errorf("CachePolicy: %+v", pol)
	}

	anth := anthropicTrace(t)
	const system = `"You are a coding agent."`
	pr, err := e.Prune(ctx, anth, PruneOptions{Config: cfg, Format: FormatAnthropic, System: json.RawMessage(system)})
	wantPr, nerr := core.Prune(anth, core.PruneOptions{Config: cfg, Format: core.FormatAnthropic, System: json.RawMessage(system)})
	if nerr != nil {
		t.Fatal(nerr)
	}
	same("Prune in the Anthropic format", pr, wantPr, err)
	if _, err := e.Prune(ctx, anth, PruneOptions{Format: FormatOpenAI, System: json.RawMessage(system)}); !isCode(err, core.CodeInvalidRequest, "/system") {
		t.Errorf("Prune with FormatOpenAI and a System: %v, want invalid_request at /system", err)
	}

	sa, err := e.Sanitize(ctx, json.RawMessage(`[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"x","content":"orphan"}]`), SanitizeOptions{Output: "refs"})
	if err != nil || len(sa.Messages) != 1 || string(sa.Messages[0]) != "0" {
		t.Errorf("Sanitize with refs output: %+v, %v", sa, err)
	}
}

// Compaction sends Format and System: an Anthropic conversation with a top-level
// system prompt compacts as the native begin/finish of the same request written by
// hand, the system prompt comes back (with the note) in the result's System, and
// the same request with FormatOpenAI is refused at /system.
func TestCompactFormatAndSystem(t *testing.T) {
	ctx := context.Background()
	e := sharedEngine(t)
	msgs := anthropicTrace(t)
	const system = `[{"type":"text","text":"You are a coding agent. Be brief."}]`
	const summary = "## Goal\nShip the spotter fix.\n## Next Steps\nRun the tests."
	cfg := json.RawMessage(`{"model":{"context_length":32000}}`)
	got, err := e.Compact(ctx, msgs, cfg, func(context.Context, core.SummaryRequest) (string, error) {
		return summary, nil
	}, CompactOptions{Force: true, Format: FormatAnthropic, System: json.RawMessage(system)})
	if err != nil {
		t.Fatal(err)
	}
	fields := `"format":"anthropic","system":` + system + `,"config":{"model":{"context_length":32000}},"force":true,"summarizer":"host"`
	begin := native[core.CompactResult](t, []byte(`{"op":"compact.begin",`+fields+`,"messages":`+string(msgs)+`}`))
	if begin.Done || begin.State == "" {
		t.Fatalf("native compact.begin finished at once: %+v", begin.Report)
	}
	want := native[core.CompactResult](t, []byte(`{"op":"compact.finish",`+fields+`,"state":`+string(mustString(begin.State))+
		`,"summary":`+string(mustString(summary))+`,"messages":`+string(msgs)+`}`))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Compact differs from the native begin/finish:\nwasm   %+v\nnative %+v", got.Report, want.Report)
	}
	if len(got.System) == 0 || !strings.Contains(string(got.System), "You are a coding agent") || !got.Report.SystemNoteAdded {
		t.Errorf("the result's System: %s (note added: %v)", got.System, got.Report.SystemNoteAdded)
	}

	_, err = e.Compact(ctx, msgs, cfg, nil, CompactOptions{Force: true, Format: FormatOpenAI, System: json.RawMessage(system)})
	if !isCode(err, core.CodeInvalidRequest, "/system") {
		t.Errorf("FormatOpenAI with a System: %v, want invalid_request at /system", err)
	}
	_, err = e.Compact(ctx, json.RawMessage(`[{"role":"system","content":"s"},{"role":"user","content":"hi"}]`), cfg, nil,
		CompactOptions{Force: true, Format: FormatAnthropic})
	if !isCode(err, core.CodeInvalidMessages, "/messages/0/role") {
		t.Errorf("FormatAnthropic with a system message: %v, want invalid_messages at /messages/0/role", err)
	}

	// CompactFinish with the summarizer's failure: the extractive summary, as
	// the native finish with the same error string.
	req := CompactRequest{Messages: msgs, Format: FormatAnthropic, System: json.RawMessage(system), Config: cfg,
		Force: true, Summarizer: core.SummarizerHost}
	failed, err := e.CompactFinish(ctx, req, CompactAnswer{State: begin.State, Summary: "ignored", SummaryError: "rate limited"})
	wantFailed := native[core.CompactResult](t, []byte(`{"op":"compact.finish",`+fields+`,"state":`+string(mustString(begin.State))+
		`,"error":"rate limited","messages":`+string(msgs)+`}`))
	if err != nil || !reflect.DeepEqual(failed, wantFailed) || !failed.Report.FallbackUsed || failed.Report.FallbackCode != core.FallbackError {
		t.Errorf("CompactFinish with SummaryError: %v, report %+v", err, failed.Report)
	}
}

// The typed cache methods decode what cache.apply and cache.simulate return: the
// same values as the raw results of the native ops, the simulator's strategies in
// the core's order with their names.
func TestTypedCacheMethods(t *testing.T) {
	ctx := context.Background()
	e := sharedEngine(t)
	msgs := traceNamed(t, smallTrace)

	ap, err := e.CacheApply(ctx, msgs, CacheApplyOptions{Layout: core.LayoutOpenAI, TTL: core.CacheTTL1h})
	if err != nil {
		t.Fatal(err)
	}
	raw := nativeRaw(t, `{"op":"cache.apply","layout":"openai","ttl":"1h","messages":`+string(msgs)+`}`)
	if want := gjson.GetBytes(raw, "messages").Array(); len(ap.Messages) != len(want) {
		t.Fatalf("CacheApply: %d messages, the op returned %d", len(ap.Messages), len(want))
	} else {
		for i, m := range ap.Messages {
			if string(m) != want[i].Raw {
				t.Fatalf("CacheApply message %d: %s, the op's %s", i, clip(m), clip([]byte(want[i].Raw)))
			}
		}
	}
	var marked []int
	for _, v := range gjson.GetBytes(raw, "marked").Array() {
		marked = append(marked, int(v.Int()))
	}
	if !reflect.DeepEqual(ap.Marked, marked) || ap.Markers != int(gjson.GetBytes(raw, "markers").Int()) ||
		ap.SystemMarked != gjson.GetBytes(raw, "system_marked").Bool() || ap.TTL != "1h" || ap.System != nil {
		t.Errorf("CacheApply: marked %v markers %d system %v ttl %s; the op's %s", ap.Marked, ap.Markers, ap.SystemMarked, ap.TTL, clip(raw))
	}
	if ap.Markers == 0 || len(ap.Marked) == 0 {
		t.Errorf("CacheApply placed no markers: %+v", ap.Marked)
	}

	const system = `"You are a coding agent."`
	anth := anthropicTrace(t)
	apn, err := e.CacheApply(ctx, anth, CacheApplyOptions{Layout: core.LayoutAnthropic, System: json.RawMessage(system)})
	rawn := nativeRaw(t, `{"op":"cache.apply","layout":"anthropic","system":`+system+`,"messages":`+string(anth)+`}`)
	if err != nil || string(apn.System) != gjson.GetBytes(rawn, "system").Raw || !apn.SystemMarked || apn.TTL != core.CacheTTL5m {
		t.Errorf("CacheApply with a native system: %v, system %s marked %v ttl %s; the op's system %s", err, apn.System, apn.SystemMarked, apn.TTL, gjson.GetBytes(rawn, "system").Raw)
	}

	n := len(gjson.ParseBytes(msgs).Array())
	times := make([]time.Time, n)
	stamps := make([]string, n)
	start := time.Date(2026, 2, 12, 10, 11, 12, 345_000_000, time.FixedZone("CET", 3600))
	for i := range times {
		stamps[i] = "null"
		if i%3 != 1 { // every third unknown
			times[i] = start.Add(time.Duration(i) * 47 * time.Second)
			stamps[i] = `"` + times[i].UTC().Format("2006-01-02T15:04:05.000Z") + `"`
		}
	}
	opts := CacheSimulateOptions{Layout: core.LayoutOpenAI, Strategies: []core.Strategy{core.StrategyAnchored, core.StrategyNone},
		Model: "claude-sonnet-4", MinCacheableTokens: 1, PerRequest: true, Timestamps: times}
	sim, err := e.CacheSimulate(ctx, msgs, opts)
	if err != nil {
		t.Fatal(err)
	}
	simEnv := `{"op":"cache.simulate","layout":"openai","model":"claude-sonnet-4","min_cacheable_tokens":1,"per_request":true,` +
		`"strategies":["anchored","none"],"timestamps":[` + strings.Join(stamps, ",") + `],"messages":` + string(msgs) + `}`
	rawSim := nativeRaw(t, simEnv)
	if !sim.Timed || sim.MinCacheableTokens != 1 || sim.Requests == 0 {
		t.Errorf("CacheSimulate: timed %v, min %d, %d requests", sim.Timed, sim.MinCacheableTokens, sim.Requests)
	}
	// Written back with core.SimulateResult's own MarshalJSON, the typed result is
	// the op's raw result.
	if back, err := json.Marshal(sim); err != nil || !jsonEqual(back, rawSim) {
		t.Errorf("CacheSimulate re-encoded: %v\n%s\nthe op's\n%s", err, clip(back), clip(rawSim))
	}
	var names []core.Strategy
	for _, s := range sim.Strategies {
		names = append(names, s.Name)
		if len(s.Requests) != sim.Requests {
			t.Errorf("strategy %s: %d per-request rows for %d requests", s.Name, len(s.Requests), sim.Requests)
		}
	}
	if !reflect.DeepEqual(names, []core.Strategy{core.StrategyNone, core.StrategyAnchored}) {
		t.Errorf("CacheSimulate strategies %v, want the core's order none, anchored", names)
	}
	if _, err := e.CacheSimulate(ctx, msgs, CacheSimulateOptions{Strategies: []core.Strategy{"nope"}}); !isCode(err, core.CodeInvalidRequest, "") {
		t.Errorf("CacheSimulate with an unknown strategy: %v, want invalid_request", err)
	}
}

// anthropicTrace is the messages of the shared Anthropic-format trace.
func anthropicTrace(t *testing.T) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(testtraces.File(t, "anthropic-format/claude-code-spotter-ae4a77f8-precompact.json"))
	if err != nil {
		t.Fatal(err)
	}
	return json.RawMessage(gjson.GetBytes(b, "messages").Raw)
}

// nativeRaw is the raw result of an envelope run by core.Call.
func nativeRaw(t *testing.T, envelope string) json.RawMessage {
	t.Helper()
	raw, err := splitResponse(core.Call([]byte(envelope)))
	if err != nil {
		t.Fatalf("core.Call(%s): %v", clip([]byte(envelope)), err)
	}
	return raw
}

// isCode reports whether err is the core's error with code, at path when path is
// not "".
func isCode(err error, code core.ErrorCode, path string) bool {
	var ce *core.Error
	return errors.As(err, &ce) && ce.Code == code && (path == "" || ce.Path == path)
}

// jsonEqual compares two JSON texts as values.
func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
