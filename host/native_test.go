package host

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// gpt56 is a config that opts in to OpenAI server-side compaction for gpt-5.6.
const gpt56 = `{"model":{"name":"gpt-5.6","context_length":200000},"compression":{"codex_responses_native":true}}`

var openaiRoute = core.NativeRoute{Provider: "openai", BaseURL: "https://api.openai.com/v1", APIMode: "codex_responses"}

// TestNativeTypedMethods checks NativePolicy, NativeObserve and NativeTrim against
// core.Call on the same request, and the gates they exist for.
func TestNativeTypedMethods(t *testing.T) {
	requireOps(t, "native.policy", "native.observe", "native.trim", "threshold.resolve")
	ctx := context.Background()
	e := sharedEngine(t)
	check := func(name string, got, want any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		} else if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: wasm %+v\nnative %+v", name, got, want)
		}
	}
	cfg := json.RawMessage(gpt56)
	thr, err := e.ThresholdResolve(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := min(200000, thr.ThresholdTokens-8192)

	d, err := e.NativePolicy(ctx, NativePolicyOptions{Config: cfg, Route: openaiRoute, Tokens: 1000})
	check("NativePolicy", d, native[core.NativeDecision](t, env(t, newRequest("native.policy").raw("config", cfg).
		raw("route", routeJSON(openaiRoute)).num("tokens", 1000))), err)
	if d.Route != "openai" || d.Mechanism != "openai_compaction" || d.Reason != "sent" || d.CompactThreshold != n ||
		gjson.GetBytes(bodyJSON(d), "context_management.0.compact_threshold").Int() != int64(n) ||
		gjson.GetBytes(bodyJSON(d), "context_management.0.type").Str != "compaction" || len(d.Remove) != 0 {
		t.Fatalf("gpt-5.6 on api.openai.com, opted in: %+v (body %s), want compact_threshold %d", d, d.Body, n)
	}
	// Each gate alone keeps the field out.
	for _, c := range []struct {
		name, cfg string
		route     core.NativeRoute
		reason    string
	}{
		{"not opted in", `{"model":{"name":"gpt-5.6","context_length":200000}}`, openaiRoute, "not_enabled"},
		{"gpt-5.5", strings.Replace(gpt56, "gpt-5.6", "gpt-5.5", 1), openaiRoute, "model_not_eligible"},
		{"another host", gpt56, core.NativeRoute{BaseURL: "https://openrouter.ai/api/v1"}, "route_not_eligible"},
		{"chat completions", gpt56, core.NativeRoute{BaseURL: "https://api.openai.com/v1", APIMode: "chat_completions"}, "not_responses_api"},
	} {
		d, err := e.NativePolicy(ctx, NativePolicyOptions{Config: json.RawMessage(c.cfg), Route: c.route})
		// The field is removed where it must never go, the OpenAI routes; elsewhere
		// a context_management is the host's own.
		remove := []string{}
		if d.Route == "openai" {
			remove = []string{"context_management"}
		}
		if err != nil || d.Reason != c.reason || gjson.GetBytes(bodyJSON(d), "context_management").Exists() ||
			!slices.Equal(d.Remove, remove) {
			t.Fatalf("%s: %v %+v (body %s), want reason %s", c.name, err, d, d.Body, c.reason)
		}
	}

	// NativePrepare applies it to a body; on Anthropic it merges the compaction
	// edit into the host's own edits.
	body := json.RawMessage(`{"model":"gpt-5.6","input":[{"role":"user","content":"hi"}]}`)
	pp, err := e.NativePrepare(ctx, body, NativePolicyOptions{Config: cfg, Route: openaiRoute})
	check("NativePrepare", pp, native[core.NativePrepared](t, env(t, newRequest("native.prepare").raw("config", cfg).
		raw("route", routeJSON(openaiRoute)).raw("body", body))), err)
	if gjson.GetBytes(pp.Body, "context_management.0.compact_threshold").Int() != int64(n) || string(pp.CompactionBody) != "null" {
		t.Fatalf("NativePrepare on the OpenAI route: %s, compaction body %s", pp.Body, pp.CompactionBody)
	}
	anth := json.RawMessage(`{"model":{"name":"claude-opus-4-7","context_length":200000},"compression":{"anthropic_native":"threshold"}}`)
	mine := json.RawMessage(`{"model":"claude-opus-4-7","messages":[{"role":"user","content":"hi"}],"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]}}`)
	pp, err = e.NativePrepare(ctx, mine, NativePolicyOptions{Config: anth, Route: core.NativeRoute{Provider: "anthropic"}})
	if err != nil || gjson.GetBytes(pp.Body, "context_management.edits.#").Int() != 2 ||
		gjson.GetBytes(pp.Body, "context_management.edits.0.type").Str != "clear_tool_uses_20250919" ||
		gjson.GetBytes(pp.Body, "context_management.edits.1.type").Str != "compact_20260112" || !slices.Equal(pp.Betas, []string{"compact-2026-01-12"}) {
		t.Fatalf("NativePrepare over the host's own edit: %v %s %v", err, pp.Body, pp.Betas)
	}

	// A structured rejection disables it for the session.
	rejection := NativeError{Status: 400, Body: []byte(`{"error":{"message":"Unknown parameter: 'context_management'.","type":"invalid_request_error","param":"context_management","code":"unknown_parameter"}}`)}
	ob, err := e.NativeObserve(ctx, NativeObserveOptions{Config: cfg, Route: openaiRoute, Session: &d.Session, Error: &rejection})
	check("NativeObserve", ob, native[core.NativeObservation](t, env(t, newRequest("native.observe").raw("config", cfg).
		raw("route", routeJSON(openaiRoute)).raw("session", sessionJSON(&d.Session)).raw("error", errorJSON(rejection)))), err)
	if !ob.Retry || ob.Disabled == nil || *ob.Disabled != "openai_compaction" || ob.Reason != "rejected" {
		t.Fatalf("a 400 naming context_management: %+v", ob)
	}
	again, err := e.NativePolicy(ctx, NativePolicyOptions{Config: cfg, Route: openaiRoute, Session: &ob.Session})
	if err != nil || again.Reason != "rejected" || gjson.GetBytes(bodyJSON(again), "context_management").Exists() {
		t.Fatalf("after the rejection: %v %+v", err, again)
	}
	// A body that is not JSON goes as a string, and says nothing about the field.
	ob, err = e.NativeObserve(ctx, NativeObserveOptions{Config: cfg, Route: openaiRoute, Error: &NativeError{Status: 502, Body: []byte("<html>Bad gateway</html>")}})
	if err != nil || ob.Retry || ob.Disabled != nil || ob.Reason != "unrelated" {
		t.Fatalf("a 502 with an HTML body: %v %+v", err, ob)
	}

	// A compaction item seen on the OpenAI route is the OpenAI route's; on another
	// route it is dropped.
	resp := json.RawMessage(`{"object":"response","output":[{"type":"compaction","id":"cmp_1","encrypted_content":"gAAAA"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}]}`)
	ob, err = e.NativeObserve(ctx, NativeObserveOptions{Config: cfg, Route: openaiRoute, Response: resp})
	if err != nil || len(ob.Seen) != 1 || ob.Seen[0] != (core.NativeSeen{Kind: "openai_compaction", Key: "cmp_1", Issuer: "openai"}) {
		t.Fatalf("a Responses output with a compaction item: %v %+v", err, ob)
	}
	input := json.RawMessage(`[{"role":"developer","content":"Be brief."},{"role":"user","content":"one"},{"type":"compaction","id":"cmp_1","encrypted_content":"gAAAA"},{"role":"user","content":"two"}]`)
	other := core.NativeRoute{BaseURL: "https://chatgpt.com/backend-api/codex"}
	tr, err := e.NativeTrim(ctx, input, NativeTrimOptions{Format: core.FormatResponses, Session: &ob.Session, Route: other})
	check("NativeTrim", tr, native[core.NativeTrimResult](t, env(t, newRequest("native.trim").raw("messages", input).
		str("format", "responses").raw("session", sessionJSON(&ob.Session)).raw("route", routeJSON(other)))), err)
	if !tr.Changed || len(tr.Messages) != 3 || !reflect.DeepEqual(tr.Dropped, []core.NativeDropped{{Index: 2, Reason: "other_issuer"}}) ||
		len(tr.DroppedMessages) != 1 {
		t.Fatalf("trimming an openai item for the codex route: %+v", tr)
	}
	// On its own route, what precedes it goes (the developer message stays),
	// unless KeepBeforeNewest.
	tr, err = e.NativeTrim(ctx, input, NativeTrimOptions{Format: core.FormatResponses, Session: &ob.Session, Route: openaiRoute})
	if err != nil || !reflect.DeepEqual(tr.Dropped, []core.NativeDropped{{Index: 1, Reason: "before_compaction"}}) || len(tr.Messages) != 3 {
		t.Fatalf("trimming before the newest item: %v %+v", err, tr)
	}
	tr, err = e.NativeTrim(ctx, input, NativeTrimOptions{Format: core.FormatResponses, Session: &ob.Session, Route: openaiRoute, KeepBeforeNewest: true})
	if err != nil || tr.Changed || len(tr.Messages) != 4 {
		t.Fatalf("KeepBeforeNewest: %v %+v", err, tr)
	}
	// Replace swaps the first messages for one (Anthropic on-demand).
	msgs := json.RawMessage(`[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]`)
	block := json.RawMessage(`{"role":"assistant","content":[{"type":"compaction","content":"summary of a and b"}]}`)
	tr, err = e.NativeTrim(ctx, msgs, NativeTrimOptions{Format: FormatAnthropic, Route: core.NativeRoute{Provider: "anthropic"},
		Replace: &NativeReplace{Count: 2, Message: block}})
	if err != nil || len(tr.Messages) != 2 || !strings.Contains(string(tr.Messages[0]), "summary of a and b") ||
		!reflect.DeepEqual(tr.Dropped, []core.NativeDropped{{Index: 0, Reason: "replaced"}, {Index: 1, Reason: "replaced"}}) {
		t.Fatalf("replace: %v %+v", err, tr)
	}
	_, err = e.NativeObserve(ctx, NativeObserveOptions{Config: cfg, Route: openaiRoute, Session: &core.NativeSession{V: 99}, Response: resp})
	if !errors.Is(err, &core.Error{Code: core.CodeInvalidState}) && !errors.Is(err, &core.Error{Code: core.CodeInvalidRequest}) {
		t.Fatalf("a session of another version: %v", err)
	}
}

// TestNativeContextEngine runs the OpenAI route through a ContextEngine: the field
// sent, the compaction item carried and recorded, a rejection disabling the field,
// and a route change dropping the other issuer's item from the body.
func TestNativeContextEngine(t *testing.T) {
	requireOps(t, "native.policy", "native.observe", "native.trim", "engine.start")
	ctx := context.Background()
	ce, err := NewContextEngine(ctx, sharedEngine(t), json.RawMessage(`{"model":{"name":"gpt-5.6","context_length":200000,"provider":"openai"},"compression":{"codex_responses_native":true}}`), ContextEngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ce.UpdateModel(ctx, core.ModelUpdate{Model: "gpt-5.6", ContextLength: 200000, Provider: "openai",
		BaseURL: "https://api.openai.com/v1", APIMode: "codex_responses"}); err != nil {
		t.Fatal(err)
	}
	body := json.RawMessage(`{"model":"gpt-5.6","input":[{"role":"user","content":"hi"}],"store":false}`)
	pr, err := ce.PrepareRequest(ctx, body, PrepareRequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := pr.Decision.CompactThreshold
	if n <= 0 || gjson.GetBytes(pr.Body, "context_management.0.compact_threshold").Int() != int64(n) ||
		gjson.GetBytes(pr.Body, "store").Type != gjson.False || gjson.GetBytes(pr.Body, "input.#").Int() != 1 {
		t.Fatalf("the first request: %s (%+v)", pr.Body, pr.Decision)
	}
	if s := ce.NativeSession(); s.Route != "openai" || s.V != 1 {
		t.Fatalf("session after the first decision: %+v", s)
	}
	// The response's compaction item is recorded and carried.
	if _, err := ce.ObserveResponse(ctx, json.RawMessage(`{"object":"response","output":[{"type":"compaction","encrypted_content":"gAAAAsecret"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}]}`)); err != nil {
		t.Fatal(err)
	}
	s := ce.NativeSession()
	if len(s.Issuers) != 1 {
		t.Fatalf("issuers after a compaction item: %+v", s.Issuers)
	}
	for k, v := range s.Issuers {
		if !strings.HasPrefix(k, "fnv64:") || len(k) != len("fnv64:")+16 || v != "openai" {
			t.Fatalf("the issuer of an item without id: %q → %q", k, v)
		}
	}
	turn2 := json.RawMessage(`{"model":"gpt-5.6","input":[{"role":"user","content":"hi"},{"type":"compaction","encrypted_content":"gAAAAsecret"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}]}`)
	pr, err = ce.PrepareRequest(ctx, turn2, PrepareRequestOptions{})
	if err != nil || gjson.GetBytes(pr.Body, "input.0.type").Str != "compaction" || gjson.GetBytes(pr.Body, "input.#").Int() != 3 ||
		len(pr.Trimmed.DroppedMessages) != 1 || pr.Trimmed.List != "input" || !gjson.GetBytes(pr.Body, "context_management").Exists() {
		t.Fatalf("the second request, its item carried and what precedes it left out: %v %s", err, pr.Body)
	}
	// The provider rejects the field: the session disables it, and the retry goes
	// without it.
	ob, err := ce.ObserveError(ctx, 400, []byte(`{"error":{"message":"Unsupported parameter: context_management","type":"invalid_request_error","param":"context_management"}}`))
	if err != nil || !ob.Retry || ob.Disabled == nil || *ob.Disabled != "openai_compaction" {
		t.Fatalf("ObserveError of the rejection: %v %+v", err, ob)
	}
	withField, _ := json.Marshal(map[string]any{"model": "gpt-5.6", "input": []any{}, "context_management": []any{map[string]any{"type": "compaction"}}})
	pr, err = ce.PrepareRequest(ctx, withField, PrepareRequestOptions{})
	if err != nil || gjson.GetBytes(pr.Body, "context_management").Exists() || pr.Decision.Reason != "rejected" {
		t.Fatalf("the retry: %v %s %+v", err, pr.Body, pr.Decision)
	}
	if s := ce.NativeSession(); !slices.Equal(s.Disabled, []string{"openai_compaction"}) {
		t.Fatalf("disabled: %+v", s.Disabled)
	}
	// The session moves to the Codex backend: the openai item is not sent there.
	if err := ce.UpdateModel(ctx, core.ModelUpdate{Model: "gpt-5.6", ContextLength: 200000, Provider: "openai-codex",
		BaseURL: "https://chatgpt.com/backend-api/codex", APIMode: "codex_responses"}); err != nil {
		t.Fatal(err)
	}
	pr, err = ce.PrepareRequest(ctx, turn2, PrepareRequestOptions{})
	if err != nil || pr.Decision.Route != "codex" || !slices.Contains(pr.Decision.DropIssuers, "openai") ||
		strings.Contains(string(pr.Body), "gAAAAsecret") || gjson.GetBytes(pr.Body, "input.#").Int() != 3 {
		t.Fatalf("on the codex route: %v %s %+v", err, pr.Body, pr.Decision)
	}
	// A session reset starts a fresh native session: the rejected field is sent
	// again.
	if err := ce.OnSessionReset(ctx); err != nil {
		t.Fatal(err)
	}
	if s := ce.NativeSession(); s != nil {
		t.Fatalf("the native session after a reset: %+v", s)
	}
	pr, err = ce.PrepareRequest(ctx, withField, PrepareRequestOptions{})
	if err != nil || pr.Decision.Reason != "sent" || !gjson.GetBytes(pr.Body, "context_management.0.compact_threshold").Exists() {
		t.Fatalf("after the reset: %v %s %+v", err, pr.Body, pr.Decision)
	}
	if _, err := ce.PrepareRequest(ctx, json.RawMessage(`[1]`), PrepareRequestOptions{}); !errors.Is(err, &core.Error{Code: core.CodeInvalidRequest}) {
		t.Fatalf("a body that is not an object: %v", err)
	}
	if _, err := ce.PrepareRequest(ctx, json.RawMessage(`{"input":[`), PrepareRequestOptions{}); !errors.Is(err, &core.Error{Code: core.CodeInvalidJSON}) {
		t.Fatalf("a body that is not JSON: %v", err)
	}
	// An event's boundary is the count given; a negative count records none.
	done := json.RawMessage(`{"method":"item/completed","params":{"threadId":"t","turnId":"u","item":{"type":"contextCompaction","id":"c"}}}`)
	for _, n := range []int{-1, 0, 7} {
		if _, err := ce.ObserveEvent(ctx, done, n); err != nil {
			t.Fatal(err)
		}
	}
	if s := ce.NativeSession(); s.AppServer.Compactions != 3 || !slices.Equal(s.AppServer.Boundaries, []int{0, 7}) {
		t.Fatalf("boundaries of counts -1, 0 and 7: %+v", s.AppServer)
	}
}

// bodyJSON is a decision's body as JSON.
func bodyJSON(d core.NativeDecision) []byte {
	b, _ := json.Marshal(d.Body)
	return b
}
