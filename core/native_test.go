package core

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// What the native.* vectors mean (native_vectors_test.go writes them).

func nativeCall(t *testing.T, op string, req obj) gjson.Result {
	t.Helper()
	res, e := callOp(t, op, req)
	require.Nil(t, e, "%s: %v", op, e)
	return gjson.ParseBytes(res)
}

func TestRouteKeys(t *testing.T) {
	for _, c := range []struct {
		route NativeRoute
		want  string
	}{
		{NativeRoute{BaseURL: "https://api.openai.com/v1"}, RouteOpenAI},
		{NativeRoute{BaseURL: "https://API.OpenAI.com/v1/"}, RouteOpenAI},
		{NativeRoute{Provider: "openai"}, RouteOpenAI},
		{NativeRoute{BaseURL: "https://chatgpt.com/backend-api/codex"}, RouteCodex},
		{NativeRoute{BaseURL: "https://chatgpt.com/backend-api/codex/responses"}, RouteCodex},
		{NativeRoute{BaseURL: "https://chatgpt.com/backend-api/codexx"}, "other:chatgpt.com"},
		{NativeRoute{Provider: "openai-codex"}, RouteCodex},
		{NativeRoute{Provider: "anthropic"}, RouteAnthropic},
		{NativeRoute{BaseURL: "https://api.anthropic.com"}, RouteAnthropic},
		{NativeRoute{Provider: "openai", BaseURL: "https://openrouter.ai/api/v1"}, "other:openrouter.ai"},
		{NativeRoute{BaseURL: "https://api.openai.com.evil.example/v1"}, "other:api.openai.com.evil.example"},
		{NativeRoute{Provider: "openai-codex", APIMode: "codex_app_server"}, RouteCodexAppServer},
		{NativeRoute{}, "other"},
		{NativeRoute{BaseURL: "https://user:pw@api.openai.com:443/v1?x=1"}, RouteOpenAI},
		{NativeRoute{BaseURL: "https://chatgpt.com/backend-api/codex?x=1"}, RouteCodex},
		{NativeRoute{BaseURL: "http://[::1]:8080/v1"}, "other:[::1]"},
		{NativeRoute{BaseURL: "api.openai.com/v1"}, "other"}, // not absolute: no host
		{NativeRoute{BaseURL: "https://api.anthropic.com#frag"}, RouteAnthropic},
	} {
		assert.Equal(t, c.want, c.route.Key(), "%+v", c.route)
	}
}

func TestNativePolicyOpenAIGates(t *testing.T) {
	route := obj{"base_url": "https://api.openai.com/v1"}
	at := func(window int, kv ...any) gjson.Result {
		return nativeCall(t, "native.policy", obj{"config": nativeCfg("gpt-5.6", window, append([]any{"codex_responses_native", true}, kv...)...), "route": route})
	}
	// N = min(configured, threshold_tokens − 8192) at several windows: the server
	// compacts before the local compressor would.
	for _, c := range []struct{ window, want int }{{1_000_000, 200_000}, {272_000, 195_808}, {128_000, 87_808}, {32_000, 15_808}} {
		d := at(c.window)
		thr := ResolveThreshold(mustConfig(t, nativeCfg("gpt-5.6", c.window)))
		assert.Equal(t, min(200_000, thr.ThresholdTokens-nativeHeadroom), c.want, "window %d", c.window)
		assert.Equal(t, "sent", d.Get("reason").Str)
		assert.EqualValues(t, c.want, d.Get("body.context_management.0.compact_threshold").Int(), "window %d", c.window)
		assert.Equal(t, "compaction", d.Get("body.context_management.0.type").Str)
		assert.Less(t, c.want, int(d.Get("local.threshold_tokens").Int()))
		assert.True(t, d.Get("local.armed").Bool(), "the local compressor stays the fallback")
	}
	assert.Equal(t, "window_too_small", at(8000).Get("reason").Str)
	off := nativeCall(t, "native.policy", obj{"config": nativeCfg("gpt-5.6", 400_000), "route": route})
	assert.Equal(t, "not_enabled", off.Get("reason").Str)
	assert.False(t, off.Get("body.context_management").Exists())
	assert.Equal(t, `["context_management"]`, off.Get("remove").Raw, "a field left from before is removed")
	for _, model := range []string{"gpt-5.5", "gpt-5.60", "gpt-4o", "o3"} {
		d := nativeCall(t, "native.policy", obj{"config": nativeCfg(model, 400_000, "codex_responses_native", true), "route": route})
		assert.Equal(t, "model_not_eligible", d.Get("reason").Str, model)
	}
}

func TestNativeObserveThenPolicy(t *testing.T) {
	// A rejection disables the field for the session; the next decision omits it.
	cfg := nativeCfg("gpt-5.6", 400_000, "codex_responses_native", true)
	route := obj{"base_url": "https://api.openai.com/v1"}
	obs := nativeCall(t, "native.observe", obj{"config": cfg, "route": route, "error": obj{"status": 400,
		"body": obj{"error": obj{"message": "Unsupported parameter: 'context_management'", "param": "context_management"}}}})
	assert.True(t, obs.Get("retry").Bool())
	d := nativeCall(t, "native.policy", obj{"config": cfg, "route": route, "session": json.RawMessage(obs.Get("session").Raw)})
	assert.Equal(t, "rejected", d.Get("reason").Str)
	assert.False(t, d.Get("body.context_management").Exists())

	// A compaction item seen on the Codex backend is another issuer's on api.openai.com.
	obs = nativeCall(t, "native.observe", obj{"config": cfg, "route": obj{"base_url": "https://chatgpt.com/backend-api/codex"},
		"response": obj{"output": []any{obj{"type": "compaction", "id": "cmp_9", "encrypted_content": "x"}}}})
	d = nativeCall(t, "native.policy", obj{"config": cfg, "route": route, "session": json.RawMessage(obs.Get("session").Raw)})
	assert.Equal(t, `["codex"]`, d.Get("drop_issuers").Raw)
	input := []any{obj{"role": "user", "content": "hi"}, obj{"type": "compaction", "id": "cmp_9", "encrypted_content": "x"}, obj{"role": "user", "content": "next"}}
	tr := nativeCall(t, "native.trim", obj{"messages": input, "route": route, "session": json.RawMessage(d.Get("session").Raw)})
	assert.Len(t, tr.Get("messages").Array(), 2)
	assert.Equal(t, `[{"index":1,"reason":"other_issuer"}]`, tr.Get("dropped").Raw)
}

func TestNativeTrimAccountsForEveryMessage(t *testing.T) {
	for _, name := range []string{"native.trim"} {
		raw, err := os.ReadFile("../testdata/" + name + ".json")
		require.NoError(t, err)
		for _, c := range gjson.GetBytes(raw, "cases").Array() {
			res := c.Get("want.result")
			if !res.Exists() {
				continue
			}
			in := len(c.Get("request.messages").Array())
			kept := len(res.Get("messages").Array())
			replaced := c.Get("request.replace").Exists()
			if replaced {
				kept-- // the block that replaced them is not an input
			}
			assert.Equal(t, in, kept+len(res.Get("dropped").Array()), c.Get("name").Str)
			assert.Equal(t, len(res.Get("dropped").Array()), len(res.Get("dropped_messages").Array()), c.Get("name").Str)
			for _, rw := range res.Get("rewritten").Array() {
				assert.True(t, rw.Get("original").IsObject(), "%s: a rewritten message keeps its original", c.Get("name").Str)
			}
		}
	}
}

func TestAnthropicCompactionBlockIsAHeadBoundary(t *testing.T) {
	// A long conversation whose fifth message holds a compaction block: the local
	// compressor never summarizes through it, so the block and what precedes it
	// stay as they were.
	block := obj{"type": "compaction", "content": "Summary of the first hour.", "signature": "sig"}
	msgs := []any{
		obj{"role": "user", "content": "start"},
		obj{"role": "assistant", "content": "ok"},
		obj{"role": "user", "content": "more"},
		obj{"role": "assistant", "content": "ok"},
		obj{"role": "assistant", "content": []any{block, obj{"type": "text", "text": "continuing"}}},
	}
	for i := 0; i < 40; i++ {
		msgs = append(msgs, obj{"role": "user", "content": strings.Repeat("question ", 200)},
			obj{"role": "assistant", "content": strings.Repeat("answer ", 200)})
	}
	req := obj{"messages": msgs, "format": "anthropic", "force": true, "config": obj{"model": obj{"context_length": 32000}}}
	begun := nativeCall(t, "compact.begin", req)
	require.False(t, begun.Get("done").Bool(), "the middle is summarized")
	req["state"], req["summary"] = begun.Get("state").Str, "The user asked questions; the assistant answered."
	res := nativeCall(t, "compact.finish", req)
	out := res.Get("messages").Array()
	require.Less(t, len(out), len(msgs), "it compacted")
	found := -1
	for i, m := range out {
		if strings.Contains(m.Raw, `"compaction"`) {
			found = i
		}
	}
	require.GreaterOrEqual(t, found, 4, "the block is kept, after everything before it")
	for i := 0; i <= 4; i++ {
		assert.JSONEq(t, asJSON(t, msgs[i]), out[i].Raw, "message %d is kept as it was", i)
	}
}

func TestEngineStateKeepsTheNativeSession(t *testing.T) {
	st := nativeCall(t, "engine.start", obj{"config": obj{"model": obj{"name": "gpt-5.6", "context_length": 400000}}})
	assert.False(t, st.Get("state.native").Exists(), "omitted until used")
	var state obj
	require.NoError(t, json.Unmarshal([]byte(st.Get("state").Raw), &state))
	state["native"] = nativeSessionWith("route", "openai", "disabled", []any{"openai_compaction"})
	next := nativeCall(t, "engine.usage", obj{"state": state, "usage": obj{"prompt_tokens": 10, "completion_tokens": 1}})
	assert.Equal(t, `["openai_compaction"]`, next.Get("state.native.disabled").Raw)
	_, e := callOp(t, "engine.usage", obj{"state": func() obj { s := state; s["native"] = obj{"v": 9}; return s }(), "usage": nil})
	require.NotNil(t, e)
	assert.Equal(t, CodeInvalidState, e.Code)
}

func mustConfig(t *testing.T, c obj) Config {
	raw, err := json.Marshal(c)
	require.NoError(t, err)
	cfg, err := ParseConfig(raw)
	require.NoError(t, err)
	return cfg
}

func asJSON(t *testing.T, v any) string {
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}

func TestNativePrepareKeepsTheHostsEdits(t *testing.T) {
	clear := obj{"type": "clear_tool_uses_20250919"}
	body := obj{"model": "claude-opus-4-7", "messages": []any{obj{"role": "user", "content": "hi"}},
		"context_management": obj{"edits": []any{clear, obj{"type": "compact_20260112", "trigger": obj{"type": "input_tokens", "value": 1}}}}}
	p := nativeCall(t, "native.prepare", obj{"config": nativeCfg("claude-opus-4-7", 1_000_000, "anthropic_native", "threshold"),
		"route": obj{"provider": "anthropic"}, "body": body})
	edits := p.Get("body.context_management.edits").Array()
	require.Len(t, edits, 2, p.Get("body").Raw)
	assert.Equal(t, "clear_tool_uses_20250919", edits[0].Get("type").Str, "the host's edit stays, first")
	assert.Equal(t, "compact_20260112", edits[1].Get("type").Str)
	assert.EqualValues(t, 1_000_000/2-nativeHeadroom, edits[1].Get("trigger.value").Int(), "one compaction edit, ours (a 1M window has no floor)")
	assert.Equal(t, `["compact-2026-01-12"]`, p.Get("betas").Raw)
	assert.Equal(t, `"claude-opus-4-7"`, p.Get("body.model").Raw, "the rest of the body as it was")
}

func TestNativePrepareHandsEachDropForArchivingOnce(t *testing.T) {
	cfg := nativeCfg("gpt-5.6", 400_000, "codex_responses_native", true)
	route := obj{"base_url": "https://api.openai.com/v1"}
	user := func(s string) obj { return obj{"role": "user", "content": s} }
	c1 := obj{"type": "compaction", "id": "cmp_1", "encrypted_content": "a"}
	c2 := obj{"type": "compaction", "id": "cmp_2", "encrypted_content": "b"}
	history := []any{user("one"), user("two"), c1, user("three")}
	p := nativeCall(t, "native.prepare", obj{"config": cfg, "route": route, "body": obj{"input": history}})
	assert.Len(t, p.Get("trimmed.archive").Array(), 2, "one and two, summarized by cmp_1")
	session := json.RawMessage(p.Get("decision.session").Raw)
	// The host resends its whole history: the same drops, nothing new to archive.
	p = nativeCall(t, "native.prepare", obj{"config": cfg, "route": route, "session": session, "body": obj{"input": history}})
	assert.Len(t, p.Get("trimmed.dropped").Array(), 2)
	assert.Empty(t, p.Get("trimmed.archive").Array())
	session = json.RawMessage(p.Get("decision.session").Raw)
	// A newer compaction: what precedes it and was not handed over before (cmp_1
	// itself, three and four; one and two went with cmp_1).
	history = append(history, user("four"), c2, user("five"))
	p = nativeCall(t, "native.prepare", obj{"config": cfg, "route": route, "session": session, "body": obj{"input": history}})
	var idx []int64
	for _, a := range p.Get("trimmed.archive").Array() {
		idx = append(idx, a.Get("index").Int())
	}
	assert.Equal(t, []int64{2, 3, 4}, idx)
	assert.Equal(t, `["cmp_1","cmp_2"]`, p.Get("decision.session.archived").Raw)
}
