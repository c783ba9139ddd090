package core

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// engineCall runs an engine op and returns its result's state and status.
func engineCall(t *testing.T, op string, req map[string]any) (EngineState, EngineStatus, map[string]json.RawMessage) {
	t.Helper()
	res, e := callOp(t, op, req)
	require.Nil(t, e, "%s: %v", op, e)
	var out map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(res, &out))
	var s EngineState
	var st EngineStatus
	require.NoError(t, json.Unmarshal(out["state"], &s))
	require.NoError(t, json.Unmarshal(out["status"], &st))
	return s, st, out
}

// TestEngineSession walks a session through the engine ops as an agent loop does,
// with a real compaction in the middle, and checks what each step means: the
// trigger from reported usage, the breaker after a compaction that cannot fit (the
// JS engine never engaged it after nothing_to_compact), a model switch, a reset.
func TestEngineSession(t *testing.T) {
	s, st, _ := engineCall(t, "engine.start", map[string]any{"config": map[string]any{"model": map[string]any{"context_length": 8000}}})
	require.Equal(t, 6000, st.ThresholdTokens) // the small-context floor: 75% of 8,000
	require.Equal(t, "small_context_floor", st.ThresholdRule)

	s, st, _ = engineCall(t, "engine.usage", map[string]any{"state": s, "usage": map[string]any{"input_tokens": 10, "cache_read_input_tokens": 6000, "output_tokens": 50}})
	require.Equal(t, 6010, st.LastPromptTokens)
	_, _, out := engineCall(t, "engine.should_compress", map[string]any{"state": s})
	require.JSONEq(t, "true", string(out["should_compress"]))

	// A conversation whose head alone is over the threshold: nothing can be
	// compacted, and the result does not fit.
	huge := []any{sys(code("system", 30000)), user("hello"), say("hi")}
	res, e := callOp(t, "compact.begin", map[string]any{"messages": huge, "config": json.RawMessage(s.Config), "prompt_tokens": 6010, "summarizer": "builtin"})
	require.Nil(t, e)
	var r CompactResult
	require.NoError(t, json.Unmarshal(res, &r))
	require.False(t, r.Report.Compacted)
	require.False(t, r.Report.Fits)
	s, st, _ = engineCall(t, "engine.record", map[string]any{"state": s, "report": r.Report})
	require.NotNil(t, st.BreakerTokens)
	require.Equal(t, r.Report.TokensAfter, *st.BreakerTokens)
	require.Equal(t, 0, st.CompressionCount)
	// The next turn reports the same size: the breaker holds the trigger back.
	s, _, _ = engineCall(t, "engine.usage", map[string]any{"state": s, "usage": map[string]any{"prompt_tokens": r.Report.TokensAfter + 10}})
	_, _, out = engineCall(t, "engine.should_compress", map[string]any{"state": s})
	require.JSONEq(t, "false", string(out["should_compress"]))
	require.JSONEq(t, `"breaker_open"`, string(out["reason"]))

	// A bigger window clears the breaker.
	s, st, _ = engineCall(t, "engine.update_model", map[string]any{"state": s, "model": "claude-sonnet-4", "context_length": 200000, "provider": "anthropic"})
	require.Nil(t, st.BreakerTokens)
	require.Equal(t, 150000, st.ThresholdTokens)
	require.Equal(t, "claude-sonnet-4", st.Model)

	// A compaction that fits counts, and its estimate becomes the prompt size.
	s, st, _ = engineCall(t, "engine.record", map[string]any{"state": s, "report": Report{Compacted: true, Reason: "compacted", Fits: true, TokensAfter: 40000, FallbackUsed: true, FallbackCode: FallbackTimeout}})
	require.Equal(t, 1, st.CompressionCount)
	require.Equal(t, 40000, st.LastPromptTokens)
	require.Equal(t, FallbackTimeout, *st.LastFallbackCode)
	require.Equal(t, 20.0, st.UsagePercent)

	s, st, _ = engineCall(t, "engine.reset", map[string]any{"state": s})
	require.Equal(t, EngineStatus{Name: "ctxcompact", Model: "claude-sonnet-4", Provider: "anthropic", ContextLength: 200000,
		ThresholdTokens: 150000, ThresholdPercent: 0.75, ThresholdRule: "small_context_floor"}, st)
	require.JSONEq(t, `{"model":{"name":"claude-sonnet-4","context_length":200000,"provider":"anthropic"}}`, string(s.Config))
}

// TestFallbackCodes: the report says why the fallback was used, as the host's
// error code or, for an empty summary, "empty".
func TestFallbackCodes(t *testing.T) {
	req := map[string]any{"messages": smallSession(6), "config": tinyWindow, "force": true}
	res, e := callOp(t, "compact.begin", req)
	require.Nil(t, e)
	var begun CompactResult
	require.NoError(t, json.Unmarshal(res, &begun))
	for _, c := range []struct {
		finish map[string]any
		used   bool
		code   FallbackCode
		reason string
	}{
		{map[string]any{"summary": "## Goal\nShip it."}, false, "", ""},
		{map[string]any{"summary": " \n"}, true, FallbackEmpty, "the summarizer returned no summary"},
		{map[string]any{}, true, FallbackEmpty, "the summarizer returned no summary"},
		{map[string]any{"error": "boom"}, true, FallbackError, "boom"},
		{map[string]any{"error": map[string]any{"code": "timeout", "message": "no answer in 120000 ms"}}, true, FallbackTimeout, "no answer in 120000 ms"},
		{map[string]any{"error": map[string]any{"code": "cancelled"}}, true, FallbackCancelled, "cancelled"},
		{map[string]any{"error": map[string]any{"message": "rate limited"}}, true, FallbackError, "rate limited"},
		{map[string]any{"error": map[string]any{"code": "too_long", "message": "context_length_exceeded"}, "summary": "ignored"}, true, FallbackTooLong, "context_length_exceeded"},
	} {
		f := map[string]any{"state": begun.State}
		for k, v := range req {
			f[k] = v
		}
		for k, v := range c.finish {
			f[k] = v
		}
		res, e := callOp(t, "compact.finish", f)
		require.Nil(t, e, "%v", c.finish)
		var r CompactResult
		require.NoError(t, json.Unmarshal(res, &r))
		require.Equal(t, c.used, r.Report.FallbackUsed, "%v", c.finish)
		require.Equal(t, c.code, r.Report.FallbackCode, "%v", c.finish)
		require.Equal(t, c.reason, r.Report.FallbackReason, "%v", c.finish)
	}
}

// TestMergeConfig: the one merge rule, natively.
func TestMergeConfig(t *testing.T) {
	got, err := MergeConfig([]byte(`{"model":{"context_length":32000},"compression":{"model_thresholds":{"a":0.6},"threshold":0.6}}`),
		[]byte(`{"model":{"name":"gpt-4o"},"compression":{"model_thresholds":{"b":0.7}}}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"compression":{"model_thresholds":{"b":0.7},"threshold":0.6},"model":{"context_length":32000,"name":"gpt-4o"}}`, string(got))
	cfg, err := ParseConfig(got)
	require.NoError(t, err)
	require.Equal(t, 32000, cfg.Model.ContextLength) // the override of the name kept the window (Python lost it)
	_, err = MergeConfig(nil, []byte(`{"model":{"context_length":-1}}`))
	require.ErrorIs(t, err, &Error{Code: CodeInvalidConfig})
	require.Equal(t, "/config/model/context_length", err.(*Error).Path)
}
