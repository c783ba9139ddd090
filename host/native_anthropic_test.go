package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// anthropicRequest is one request the fake Messages API got.
type anthropicRequest struct {
	beta string
	body []byte
}

// fakeMessages is a loopback stand-in for Anthropic's Messages API
// (POST /v1/messages): with the compact_20260112 edit its first answer starts with
// a compaction block; a request with "compaction" is answered by one block alone
// (stop_reason compaction); a request carrying a block anywhere but first in its
// first message is refused, as the API refuses it; request rejectAt is refused for
// its edit. Answers report the usage the test sets.
type fakeMessages struct {
	mu       sync.Mutex
	reqs     []anthropicRequest
	usage    int
	rejectAt int
	blocks   int // compaction blocks returned so far
}

func (f *fakeMessages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, anthropicRequest{beta: r.Header.Get("anthropic-beta"), body: body})
	n := len(f.reqs)
	w.Header().Set("Content-Type", "application/json")
	fail := func(msg string) {
		w.WriteHeader(http.StatusBadRequest)
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": "invalid_request_error", "message": msg}})
		w.Write(b)
	}
	if r.URL.Path != "/v1/messages" || !gjson.ValidBytes(body) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	edit := gjson.GetBytes(body, "context_management.edits.0.type").Str == "compact_20260112"
	if n == f.rejectAt && edit {
		fail("context_management.edits.0: compact_20260112 is not available for this organization")
		return
	}
	if carriesBlock(body) && gjson.GetBytes(body, "messages.0.content.0.type").Str != "compaction" {
		fail("messages.0: the compaction block must come first, with the messages it summarized removed")
		return
	}
	var content []any
	stop := "end_turn"
	block := func() map[string]any {
		f.blocks++
		return map[string]any{"type": "compaction", "content": fmt.Sprintf("Summary %d: the user is fixing a build.", f.blocks)}
	}
	switch {
	case gjson.GetBytes(body, "compaction.type").Str == "summarize":
		content, stop = []any{block()}, "compaction"
	case edit && n == 1:
		content = []any{block(), map[string]any{"type": "text", "text": "Done."}}
	default:
		content = []any{map[string]any{"type": "text", "text": fmt.Sprintf("Answer %d. %s", n, strings.Repeat("The tests pass now. ", 20))}}
	}
	json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant",
		"model": gjson.GetBytes(body, "model").Str, "content": content, "stop_reason": stop,
		"usage": map[string]int{"input_tokens": f.usage, "output_tokens": 50}})
}

// carriesBlock reports a compaction block anywhere in a request's messages.
func carriesBlock(body []byte) bool {
	found := false
	gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
		m.Get("content").ForEach(func(_, b gjson.Result) bool {
			found = found || b.Get("type").Str == "compaction"
			return !found
		})
		return !found
	})
	return found
}

func (f *fakeMessages) last() anthropicRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

func (f *fakeMessages) req(i int) anthropicRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[i]
}

// anthropicSession is a host on the Anthropic route: a ContextEngine, the local
// transcript and the fake API.
type anthropicSession struct {
	t          *testing.T
	ctx        context.Context
	ce         *ContextEngine
	api        *fakeMessages
	url        string
	transcript []json.RawMessage
}

func newAnthropicSession(t *testing.T, mode string, window int, api *fakeMessages) *anthropicSession {
	t.Helper()
	requireOps(t, "native.policy", "native.observe", "native.trim", "engine.start")
	ctx := context.Background()
	cfg := fmt.Sprintf(`{"model":{"name":"claude-opus-4-7","context_length":%d,"provider":"anthropic"},"compression":{"anthropic_native":%q}}`, window, mode)
	ce, err := NewContextEngine(ctx, sharedEngine(t), json.RawMessage(cfg), ContextEngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ce.UpdateModel(ctx, core.ModelUpdate{Model: "claude-opus-4-7", ContextLength: window, Provider: "anthropic",
		BaseURL: "https://api.anthropic.com", APIMode: "anthropic_messages"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &anthropicSession{t: t, ctx: ctx, ce: ce, api: api, url: srv.URL}
}

// send posts body with the betas and returns the status and response.
func (s *anthropicSession) send(body json.RawMessage, betas []string) (int, []byte) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/messages", bytes.NewReader(body))
	if len(betas) > 0 {
		req.Header.Set("anthropic-beta", strings.Join(betas, ","))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// body is a Messages request of the transcript.
func (s *anthropicSession) body() json.RawMessage {
	msgs, _ := json.Marshal(s.transcript)
	return json.RawMessage(`{"model":"claude-opus-4-7","max_tokens":1024,"system":"You are a coding agent.","messages":` + string(msgs) + `}`)
}

// turn sends the user's text (retrying once when the engine says so) and
// appends the answer; it returns the last decision and whether it retried.
func (s *anthropicSession) turn(text string) (core.NativeDecision, bool) {
	s.t.Helper()
	return s.turnAt(text, 0)
}

// turnAt is turn with the prompt's size for the decision (0: the last usage).
func (s *anthropicSession) turnAt(text string, tokens int) (core.NativeDecision, bool) {
	s.t.Helper()
	u, _ := json.Marshal(map[string]any{"role": "user", "content": text})
	s.transcript = append(s.transcript, u)
	retried := false
	for {
		pr, err := s.ce.PrepareRequest(s.ctx, s.body(), PrepareRequestOptions{Tokens: tokens})
		if err != nil {
			s.t.Fatal(err)
		}
		status, resp := s.send(pr.Body, pr.Betas)
		if status != http.StatusOK {
			ob, err := s.ce.ObserveError(s.ctx, status, resp)
			if err != nil || !ob.Retry || retried {
				s.t.Fatalf("%q: status %d %s, observed %+v %v", text, status, resp, ob, err)
			}
			retried = true
			continue
		}
		s.answer(resp)
		return pr.Decision, retried
	}
}

// answer observes a response and appends it to the transcript.
func (s *anthropicSession) answer(resp []byte) core.NativeObservation {
	s.t.Helper()
	ob, err := s.ce.ObserveResponse(s.ctx, resp)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.ce.UpdateFromResponse(s.ctx, json.RawMessage(gjson.GetBytes(resp, "usage").Raw)); err != nil {
		s.t.Fatal(err)
	}
	m, _ := json.Marshal(map[string]any{"role": "assistant", "content": json.RawMessage(gjson.GetBytes(resp, "content").Raw)})
	s.transcript = append(s.transcript, m)
	return ob
}

// TestNativeAnthropicThreshold: the compact_20260112 edit and its beta sent, the
// returned block sent first with what precedes it left out, a rejection turning
// it off (the block then goes as text, without the beta), and the local
// compressor taking over with the block's message in its head.
func TestNativeAnthropicThreshold(t *testing.T) {
	api := &fakeMessages{usage: 3000, rejectAt: 3}
	// A window whose trigger clears the API's 50,000 minimum, small enough for the
	// conversation below to outgrow the local tail.
	s := newAnthropicSession(t, "threshold", 80000, api)
	trigger := s.ce.Status().ThresholdTokens - 8192

	d, _ := s.turn("Fix the build.")
	first := api.req(0)
	if d.Mechanism != "anthropic_threshold" || first.beta != "compact-2026-01-12" ||
		gjson.GetBytes(first.body, "context_management.edits.0.trigger.value").Int() != int64(trigger) ||
		gjson.GetBytes(first.body, "system").Str != "You are a coding agent." {
		t.Fatalf("turn 1: beta %q, body %s, decision %+v", first.beta, first.body, d)
	}
	if sess := s.ce.NativeSession(); sess == nil || len(sess.Issuers) != 1 {
		t.Fatalf("the block was not recorded: %+v", sess)
	}
	s.turn("Now the linter.")
	second := api.req(1).body
	if gjson.GetBytes(second, "messages.0.content.0.type").Str != "compaction" || strings.Contains(string(second), "Fix the build.") ||
		gjson.GetBytes(second, "messages.#").Int() != 2 {
		t.Fatalf("turn 2 sent %s", second)
	}
	if _, retried := s.turn("And the docs."); !retried {
		t.Fatal("the rejected edit was not retried")
	}
	retry := api.req(3)
	if retry.beta != "" || gjson.GetBytes(retry.body, "context_management").Exists() ||
		strings.Contains(string(retry.body), `"type":"compaction"`) || !strings.Contains(string(retry.body), "Summary 1: the user is fixing a build.") {
		t.Fatalf("the retry: beta %q, body %s", retry.beta, retry.body)
	}
	if sess := s.ce.NativeSession(); len(sess.Disabled) != 1 || sess.Disabled[0] != "anthropic_compaction" {
		t.Fatalf("disabled: %+v", sess.Disabled)
	}
	for i := 4; i <= 12; i++ {
		if i == 12 {
			api.usage = s.ce.Status().ThresholdTokens + 1000
		}
		d, _ := s.turn(fmt.Sprintf("Step %d. %s", i, strings.Repeat("Look at the failing test again, and at its log. ", 60)))
		if d.Reason != "rejected" || len(d.Betas) != 0 {
			t.Fatalf("turn %d after the rejection: %+v", i, d)
		}
	}
	if yes, err := s.ce.ShouldCompress(s.ctx, 0); err != nil || !yes {
		t.Fatalf("ShouldCompress past the threshold: %v %v", yes, err)
	}
	all, _ := json.Marshal(s.transcript)
	res, err := s.ce.Compress(s.ctx, all, CompressOptions{Format: core.FormatAnthropic, System: json.RawMessage(`"You are a coding agent."`)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Report.Compacted || len(res.Messages) >= len(s.transcript) || res.Report.HeadEnd < 2 {
		t.Fatalf("the local compaction: %+v", res.Report)
	}
	if !bytes.Equal(res.Messages[1], s.transcript[1]) {
		t.Fatalf("the message holding the block changed: %s", res.Messages[1])
	}
}

// TestNativeAnthropicOnDemand: the beta on every request, compact_now past the
// trigger, the compaction request answered by one block, and the block swapped
// in for the messages it summarized (the API refuses anything else).
func TestNativeAnthropicOnDemand(t *testing.T) {
	api := &fakeMessages{usage: 3000}
	s := newAnthropicSession(t, "on_demand", 200000, api)
	trigger := s.ce.Status().ThresholdTokens - 8192
	for i := 1; i <= 3; i++ {
		d, _ := s.turn(fmt.Sprintf("Step %d.", i))
		if d.Mechanism != "anthropic_on_demand" || d.CompactNow || d.Reason != "armed" || api.req(i-1).beta != "compact-2026-09-04" {
			t.Fatalf("turn %d: beta %q, %+v", i, api.req(i-1).beta, d)
		}
	}
	api.usage = trigger
	s.turn("Step 4.")
	pr, err := s.ce.PrepareRequest(s.ctx, s.body(), PrepareRequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !pr.Decision.CompactNow || pr.Decision.Reason != "compact_now" || gjson.GetBytes(pr.CompactionBody, "compaction.type").Str != "summarize" ||
		gjson.GetBytes(pr.CompactionBody, "messages.#").Int() != int64(len(s.transcript)) {
		t.Fatalf("at the trigger (%d tokens): %+v, compaction body %s", trigger, pr.Decision, pr.CompactionBody)
	}
	// The compaction request: the conversation with compaction {type: summarize}.
	status, resp := s.send(pr.CompactionBody, pr.Betas)
	if status != http.StatusOK {
		t.Fatalf("the compaction request: %d %s", status, resp)
	}
	ob, err := s.ce.ObserveResponse(s.ctx, resp)
	if err != nil || ob.Reason != "compaction_returned" || len(ob.Seen) != 1 || ob.Seen[0].Kind != "anthropic_compaction" {
		t.Fatalf("observing the block: %v %+v", err, ob)
	}
	// Swap the block in for the whole transcript it summarized.
	summarized := len(s.transcript)
	block, _ := json.Marshal(map[string]any{"role": "assistant", "content": json.RawMessage(gjson.GetBytes(resp, "content").Raw)})
	msgs, _ := json.Marshal(s.transcript)
	tr, err := sharedEngine(t).NativeTrim(s.ctx, msgs, NativeTrimOptions{Format: core.FormatAnthropic,
		Session: s.ce.NativeSession(), Route: core.NativeRoute{Provider: "anthropic", BaseURL: "https://api.anthropic.com"},
		Replace: &NativeReplace{Count: summarized, Message: block}})
	if err != nil || len(tr.Messages) != 1 || len(tr.DroppedMessages) != summarized {
		t.Fatalf("the swap: %v %d messages, %d dropped", err, len(tr.Messages), len(tr.DroppedMessages))
	}
	s.transcript = tr.Messages
	// The last reported usage is the summarized conversation's: the next decision
	// takes the new prompt's estimate.
	now, _ := json.Marshal(s.transcript)
	tokens, err := sharedEngine(t).TokensCount(s.ctx, now, TokensCountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	api.usage = 3000
	d, retried := s.turnAt("Step 5.", tokens.Total)
	last := api.last()
	if retried || d.CompactNow || last.beta != "compact-2026-09-04" || gjson.GetBytes(last.body, "messages.0.content.0.type").Str != "compaction" ||
		gjson.GetBytes(last.body, "messages.#").Int() != 2 {
		t.Fatalf("after the swap: %+v, beta %q, body %s", d, last.beta, last.body)
	}
}
