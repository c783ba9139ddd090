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

// fakeResponses is a loopback stand-in for the OpenAI Responses API
// (POST /v1/responses): the first answer carries a compaction item, the third
// request is rejected for its context_management field, and every answer reports
// the usage the test sets. It keeps each request body it got.
type fakeResponses struct {
	mu       sync.Mutex
	bodies   [][]byte
	usage    int // input_tokens of the next answer
	rejectAt int // the request (1-based) answered 400 for context_management
}

func (f *fakeResponses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	n, usage := len(f.bodies), f.usage
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path != "/v1/responses" || !gjson.ValidBytes(body) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if n == f.rejectAt && gjson.GetBytes(body, "context_management").Exists() {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"Unsupported parameter: 'context_management' is not supported with this model.","type":"invalid_request_error","param":"context_management","code":"unsupported_parameter"}}`)
		return
	}
	out := []any{}
	if n == 1 {
		out = append(out, map[string]any{"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-opaque-1"})
	}
	out = append(out, map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", n), "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": fmt.Sprintf("Answer %d: %s", n, strings.Repeat("the build passes again after the fix. ", 20))}}})
	json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("resp_%d", n), "object": "response", "output": out,
		"usage": map[string]any{"input_tokens": usage, "output_tokens": 100, "total_tokens": usage + 100}})
}

func (f *fakeResponses) body(i int) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

// TestNativeOpenAIRoundTrip is a multi-turn session against a loopback Responses
// API through a ContextEngine: the field sent, the compaction item kept and sent
// back, a rejection disabling the field with a retry without it, and the local
// compressor taking over past the threshold, with the compaction item kept whole.
func TestNativeOpenAIRoundTrip(t *testing.T) {
	requireOps(t, "native.policy", "native.observe", "native.trim", "engine.start", "compact.begin")
	ctx := context.Background()
	api := &fakeResponses{usage: 2000, rejectAt: 3}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cfg := json.RawMessage(`{"model":{"name":"gpt-5.6","context_length":32000,"provider":"openai"},"compression":{"codex_responses_native":true}}`)
	ce, err := NewContextEngine(ctx, sharedEngine(t), cfg, ContextEngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The route is api.openai.com's (what the route key reads); the requests go to
	// the loopback server.
	if err := ce.UpdateModel(ctx, core.ModelUpdate{Model: "gpt-5.6", ContextLength: 32000, Provider: "openai",
		BaseURL: "https://api.openai.com/v1", APIMode: "codex_responses"}); err != nil {
		t.Fatal(err)
	}
	threshold := ce.Status().ThresholdTokens
	want := min(200000, threshold-8192)

	var transcript []json.RawMessage
	post := func(body json.RawMessage) (int, []byte) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/responses", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	// turn sends the transcript and the user's text, retrying once when the
	// engine says so, and appends the answer's output to the transcript.
	turn := func(text string) (retried bool) {
		t.Helper()
		u, _ := json.Marshal(map[string]any{"role": "user", "content": text + " " + strings.Repeat("please look at the failing test again. ", 20)})
		transcript = append(transcript, u)
		input, _ := json.Marshal(transcript)
		body := json.RawMessage(`{"model":"gpt-5.6","store":false,"input":` + string(input) + `}`)
		for attempt := 0; ; attempt++ {
			pr, err := ce.PrepareRequest(ctx, body, PrepareRequestOptions{})
			if err != nil {
				t.Fatal(err)
			}
			status, resp := post(pr.Body)
			if status != http.StatusOK {
				ob, err := ce.ObserveError(ctx, status, resp)
				if err != nil {
					t.Fatal(err)
				}
				if !ob.Retry || attempt > 0 {
					t.Fatalf("%q: status %d %s, observed %+v", text, status, resp, ob)
				}
				retried = true
				continue
			}
			if _, err := ce.ObserveResponse(ctx, resp); err != nil {
				t.Fatal(err)
			}
			if err := ce.UpdateFromResponse(ctx, json.RawMessage(gjson.GetBytes(resp, "usage").Raw)); err != nil {
				t.Fatal(err)
			}
			gjson.GetBytes(resp, "output").ForEach(func(_, item gjson.Result) bool {
				transcript = append(transcript, json.RawMessage(item.Raw))
				return true
			})
			return retried
		}
	}

	// Turn 1: the field is sent, with N clamped below the local threshold.
	if turn("Fix the build.") {
		t.Fatal("turn 1 was retried")
	}
	first := api.body(0)
	if got := gjson.GetBytes(first, "context_management.0"); got.Get("type").Str != "compaction" || got.Get("compact_threshold").Int() != int64(want) {
		t.Fatalf("turn 1 sent %s, want compact_threshold %d", got.Raw, want)
	}
	if s := ce.NativeSession(); s == nil || s.Issuers["cmp_1"] != "openai" {
		t.Fatalf("the compaction item was not recorded as openai's: %+v", s)
	}
	// Turn 2: the item goes back, standing in for what precedes it.
	turn("Now the linter.")
	second := api.body(1)
	if gjson.GetBytes(second, "input.0.id").Str != "cmp_1" || !gjson.GetBytes(second, "context_management").Exists() ||
		strings.Contains(string(second), "Fix the build.") {
		t.Fatalf("turn 2 sent %s", second)
	}
	// Turn 3: rejected, disabled, retried without the field.
	if !turn("And the docs.") {
		t.Fatal("turn 3 was not retried after the rejection")
	}
	if third, retry := api.body(2), api.body(3); !gjson.GetBytes(third, "context_management").Exists() ||
		gjson.GetBytes(retry, "context_management").Exists() || gjson.GetBytes(retry, "input.0.id").Str != "cmp_1" {
		t.Fatalf("the rejected request %s\nand its retry %s", third, retry)
	}
	if s := ce.NativeSession(); len(s.Disabled) != 1 || s.Disabled[0] != "openai_compaction" {
		t.Fatalf("disabled after the rejection: %+v", s.Disabled)
	}
	// More turns, none with the field; the last one reports a prompt past the
	// threshold, and the local compressor takes over.
	for i := 4; i <= 12; i++ {
		if i == 12 {
			api.usage = threshold + 500
		}
		turn(fmt.Sprintf("Step %d.", i))
		if b := api.body(i); gjson.GetBytes(b, "context_management").Exists() {
			t.Fatalf("request %d sent the disabled field", i+1)
		}
	}
	if yes, err := ce.ShouldCompress(ctx, 0); err != nil || !yes {
		t.Fatalf("ShouldCompress at %d of %d: %v %v", ce.Status().LastPromptTokens, threshold, yes, err)
	}
	all, _ := json.Marshal(transcript)
	res, err := ce.Compress(ctx, all, CompressOptions{Format: core.FormatResponses})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done || !res.Report.Compacted || len(res.Messages) >= len(transcript) {
		t.Fatalf("the local compaction: %+v, %d of %d items", res.Report, len(res.Messages), len(transcript))
	}
	kept := false
	for _, m := range res.Messages {
		if gjson.GetBytes(m, "type").Str == "compaction" {
			kept = kept || bytes.Equal(m, transcript[1])
		}
	}
	if !kept || ce.Status().CompressionCount != 1 {
		t.Fatalf("the compaction item was not kept whole by the local compaction (count %d)", ce.Status().CompressionCount)
	}
}
