package host

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/internal/loopback"
)

// summaryRequest is a summary request as the core writes one: the template as
// the system message, the serialized middle as the user message.
func summaryRequest() core.SummaryRequest {
	return core.SummaryRequest{
		Messages: []core.ChatMessage{
			{Role: "system", Content: "You summarize the earlier part of a long conversation."},
			{Role: "user", Content: "[#1 user]\nFix the parser.\n\n[#2 assistant]\nDone.\n"},
		},
		TargetTokens: 900, MaxTokens: 1200, Middle: core.IndexRange{From: 1, To: 3},
	}
}

func startLoopback(t *testing.T) *loopback.Server {
	t.Helper()
	srv, err := loopback.Start(loopback.Options{Trace: loopback.Trace{Name: "unit"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// must is the summarizer, or the test ends with the constructor's error.
func must(t *testing.T) func(Summarize, error) Summarize {
	return func(s Summarize, err error) Summarize {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// onlyRequest is the one request srv got.
func onlyRequest(t *testing.T, srv *loopback.Server) (loopback.Request, gjson.Result) {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the server got %d requests, want 1 (no retries)", len(reqs))
	}
	return reqs[0], gjson.ParseBytes(reqs[0].Body)
}

var wantSummary = loopback.SummaryText("unit", 2)

// TestOpenAIChatSummarizer: the template goes as the system message, the middle
// as the user message, the size as max_tokens, or max_completion_tokens for
// reasoning models, with the key and the extra headers.
func TestOpenAIChatSummarizer(t *testing.T) {
	for _, c := range []struct {
		model, param string
		override     int
	}{
		{"gpt-4.1-mini", "max_tokens", 0},
		{"gpt-4o", "max_tokens", 300},
		{"o3-mini", "max_completion_tokens", 0},
		{"o1", "max_completion_tokens", 0},
		{"gpt-5-mini", "max_completion_tokens", 500},
	} {
		srv := startLoopback(t)
		s := must(t)(OpenAISummarizer(OpenAISummarizerOptions{BaseURL: srv.OpenAIBaseURL() + "/", APIKey: "sk-test",
			Model: c.model, MaxTokens: c.override, Header: http.Header{"Openai-Project": {"proj_1"}}}))
		got, err := s(context.Background(), summaryRequest())
		if err != nil || got != wantSummary {
			t.Fatalf("%s: %q, %v; want %q", c.model, got, err, wantSummary)
		}
		rec, body := onlyRequest(t, srv)
		want := 1200
		if c.override > 0 {
			want = c.override
		}
		other := map[string]string{"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}[c.param]
		switch {
		case rec.Path != "/v1/chat/completions":
			t.Fatalf("%s: path %s", c.model, rec.Path)
		case body.Get("model").Str != c.model:
			t.Fatalf("%s: model %s", c.model, body.Get("model"))
		case body.Get(c.param).Int() != int64(want) || body.Get(other).Exists():
			t.Fatalf("%s: want %s %d and no %s: %s", c.model, c.param, want, other, rec.Body)
		case body.Get("messages.#").Int() != 2 || body.Get("messages.0.role").Str != "system" ||
			body.Get("messages.0.content").Str != summaryRequest().Messages[0].Content ||
			body.Get("messages.1.role").Str != "user" || body.Get("messages.1.content").Str != summaryRequest().Messages[1].Content:
			t.Fatalf("%s: messages %s", c.model, body.Get("messages").Raw)
		case rec.Header.Get("Authorization") != "Bearer sk-test" || rec.Header.Get("OpenAI-Project") != "proj_1" ||
			rec.Header.Get("Content-Type") != "application/json":
			t.Fatalf("%s: headers %v", c.model, rec.Header)
		}
	}
}

// TestOpenAIResponsesSummarizer: instructions carry the template, input the
// middle, max_output_tokens the size; the summary is the output_text parts.
func TestOpenAIResponsesSummarizer(t *testing.T) {
	srv := startLoopback(t)
	s := must(t)(OpenAISummarizer(OpenAISummarizerOptions{BaseURL: srv.OpenAIBaseURL(), Model: "gpt-5-mini", API: OpenAIResponses}))
	got, err := s(context.Background(), summaryRequest())
	if err != nil || got != wantSummary {
		t.Fatalf("%q, %v", got, err)
	}
	rec, body := onlyRequest(t, srv)
	switch {
	case rec.Path != "/v1/responses":
		t.Fatalf("path %s", rec.Path)
	case body.Get("instructions").Str != summaryRequest().Messages[0].Content:
		t.Fatalf("instructions %s", body.Get("instructions"))
	case body.Get("input.#").Int() != 1 || body.Get("input.0.role").Str != "user" ||
		body.Get("input.0.content").Str != summaryRequest().Messages[1].Content:
		t.Fatalf("input %s", body.Get("input").Raw)
	case body.Get("max_output_tokens").Int() != 1200 || body.Get("max_tokens").Exists() || body.Get("max_completion_tokens").Exists():
		t.Fatalf("size: %s", rec.Body)
	case body.Get("store").Raw != "false":
		t.Fatalf("store: %s", rec.Body)
	case rec.Header.Get("Authorization") != "":
		t.Fatalf("no key, no Authorization: %v", rec.Header)
	}

	// Several message items and parts are joined; other items are skipped.
	raw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"completed","output":[{"type":"reasoning","summary":[]},` +
			`{"type":"message","content":[{"type":"output_text","text":"## Goal\n"},{"type":"output_text","text":"A."}]},` +
			`{"type":"message","content":[{"type":"output_text","text":"\nB."}]}]}`))
	}))
	defer raw.Close()
	s = must(t)(OpenAISummarizer(OpenAISummarizerOptions{BaseURL: raw.URL, Model: "m", API: OpenAIResponses}))
	if got, err := s(context.Background(), summaryRequest()); err != nil || got != "## Goal\nA.\nB." {
		t.Fatalf("joined parts: %q, %v", got, err)
	}
}

// TestAnthropicSummarizer: system carries the template, the one user message the
// middle, max_tokens the size; x-api-key and anthropic-version are sent, and a
// base URL may end in /v1.
func TestAnthropicSummarizer(t *testing.T) {
	for _, c := range []struct {
		suffix, version string
		header          http.Header
	}{
		{"", DefaultAnthropicVersion, nil},
		{"/v1/", "2024-01-01", http.Header{"Anthropic-Version": {"2024-01-01"}, "Anthropic-Beta": {"b1"}}},
	} {
		srv := startLoopback(t)
		s := must(t)(AnthropicSummarizer(AnthropicSummarizerOptions{BaseURL: srv.URL + c.suffix, APIKey: "ak",
			Model: "claude-haiku-4-5", MaxTokens: 2000, Header: c.header}))
		got, err := s(context.Background(), summaryRequest())
		if err != nil || got != wantSummary {
			t.Fatalf("%q: %q, %v", c.suffix, got, err)
		}
		rec, body := onlyRequest(t, srv)
		switch {
		case rec.Path != "/v1/messages":
			t.Fatalf("%q: path %s", c.suffix, rec.Path)
		case body.Get("system").Str != summaryRequest().Messages[0].Content:
			t.Fatalf("system %s", body.Get("system"))
		case body.Get("messages.#").Int() != 1 || body.Get("messages.0.role").Str != "user" ||
			body.Get("messages.0.content").Str != summaryRequest().Messages[1].Content:
			t.Fatalf("messages %s", body.Get("messages").Raw)
		case body.Get("max_tokens").Int() != 2000 || body.Get("model").Str != "claude-haiku-4-5":
			t.Fatalf("body %s", rec.Body)
		case rec.Header.Get("x-api-key") != "ak" || rec.Header.Get("anthropic-version") != c.version ||
			len(rec.Header.Values("anthropic-version")) != 1 || rec.Header.Get("anthropic-beta") != c.header.Get("anthropic-beta"):
			t.Fatalf("headers %v", rec.Header)
		}
	}
}

// TestSummarizerHTTPErrors: every API's error status becomes one error, after one
// request, that starts with "ctxcompact: <api> summarizer:" and gives the status,
// retry-after and the API's message (or a short excerpt of the body).
func TestSummarizerHTTPErrors(t *testing.T) {
	srv := startLoopback(t)
	apis := map[string]Summarize{
		"openai":    must(t)(OpenAISummarizer(OpenAISummarizerOptions{BaseURL: srv.OpenAIBaseURL(), Model: "m"})),
		"responses": must(t)(OpenAISummarizer(OpenAISummarizerOptions{BaseURL: srv.OpenAIBaseURL(), Model: "m", API: OpenAIResponses})),
		"anthropic": must(t)(AnthropicSummarizer(AnthropicSummarizerOptions{BaseURL: srv.URL, Model: "m"})),
	}
	for _, c := range []struct {
		fault loopback.Fault
		want  []string
	}{
		{loopback.Fault{Status: 429, RetryAfter: "7"}, []string{"HTTP 429 (retry-after 7): loopback: injected HTTP 429 [rate_limit_error]"}},
		{loopback.Fault{Status: 500}, []string{"HTTP 500: loopback: injected HTTP 500"}},
		{loopback.Fault{Status: 400, Body: `{"error":{"message":"max_tokens is too large","type":"invalid_request_error","param":"max_tokens"}}`},
			[]string{"HTTP 400: max_tokens is too large [invalid_request_error]"}},
		{loopback.Fault{Status: 502, Body: "<html>\n  <body>bad gateway " + strings.Repeat("x", 600) + "</body></html>"},
			[]string{"HTTP 502: <html> <body>bad gateway xxx", "x…"}},
	} {
		for name, s := range apis {
			before := len(srv.Requests())
			srv.SetFault(c.fault)
			_, err := s(context.Background(), summaryRequest())
			if err == nil {
				t.Fatalf("%s %d: no error", name, c.fault.Status)
			}
			prefix := "ctxcompact: openai summarizer: "
			if name == "anthropic" {
				prefix = "ctxcompact: anthropic summarizer: "
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, prefix) || len(msg) > len(prefix)+400 {
				t.Fatalf("%s: %q", name, msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("%s: %q lacks %q", name, msg, w)
				}
			}
			if n := len(srv.Requests()) - before; n != 1 {
				t.Fatalf("%s %d: %d requests, want 1 (no retry)", name, c.fault.Status, n)
			}
		}
	}
	srv.SetFault(loopback.Fault{})
}

// TestSummarizerBadAnswers: a 200 that is not JSON, or has no choices, output or
// content, or a refusal, is an error; a blank content is returned blank (the core
// falls back with "empty").
func TestSummarizerBadAnswers(t *testing.T) {
	var answer string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(answer)) }))
	defer srv.Close()
	chat := must(t)(OpenAISummarizer(OpenAISummarizerOptions{BaseURL: srv.URL, Model: "m"}))
	responses := must(t)(OpenAISummarizer(OpenAISummarizerOptions{BaseURL: srv.URL, Model: "m", API: OpenAIResponses}))
	anthropic := must(t)(AnthropicSummarizer(AnthropicSummarizerOptions{BaseURL: srv.URL, Model: "m"}))
	for _, c := range []struct {
		s            Summarize
		answer, want string
		wantErr      bool
		what         string
	}{
		{chat, `not json`, "the answer is not JSON: not json", true, "chat: not JSON"},
		{chat, `{"choices":[]}`, "the answer has no choices", true, "chat: no choices"},
		{chat, `{"choices":[{"message":{"content":null,"refusal":"I can't."}}]}`, "the model refused: I can't.", true, "chat: refusal"},
		{chat, `{"choices":[{"message":{"content":"  "}}]}`, "  ", false, "chat: blank"},
		{chat, `{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}`, "ab", false, "chat: parts"},
		{responses, `{"id":"r"}`, "the answer has no output", true, "responses: no output"},
		{responses, `{"status":"failed","error":{"message":"server overloaded","code":"server_error"},"output":[]}`, "the response failed: server overloaded", true, "responses: failed"},
		{responses, `{"output_text":"from the field","output":[]}`, "from the field", false, "responses: output_text field"},
		{anthropic, `{"type":"message","role":"assistant"}`, "the answer has no content", true, "anthropic: no content"},
		{anthropic, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "Overloaded [overloaded_error]", true, "anthropic: error in a 200"},
		{anthropic, `{"type":"message","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"x"},{"type":"text","text":"y"}]}`, "xy", false, "anthropic: text blocks"},
	} {
		answer = c.answer
		got, err := c.s(context.Background(), summaryRequest())
		switch {
		case c.wantErr && (err == nil || !strings.HasPrefix(err.Error(), "ctxcompact: ") || !strings.Contains(err.Error(), c.want)):
			t.Fatalf("%s: want an error with %q, got %q, %v", c.what, c.want, got, err)
		case !c.wantErr && (err != nil || got != c.want):
			t.Fatalf("%s: want %q, got %q, %v", c.what, c.want, got, err)
		}
	}
}

// TestSummarizerContext: the request carries the summarizer's context: cancelled
// or past its deadline before the request, or cancelled while the server holds
// the answer back, the error wraps the context's error (the host's fallback
// codes "cancelled" and "timeout").
func TestSummarizerContext(t *testing.T) {
	srv := startLoopback(t)
	s := must(t)(OpenAISummarizer(OpenAISummarizerOptions{BaseURL: srv.OpenAIBaseURL(), Model: "m"}))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s(cancelled, summaryRequest()); !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "ctxcompact: openai summarizer: ") {
		t.Fatalf("cancelled: %v", err)
	}
	past, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if _, err := s(past, summaryRequest()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past its deadline: %v", err)
	}

	srv.SetFault(loopback.Fault{Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	before := len(srv.Requests())
	go func() { // cancel once the server holds the request
		for len(srv.Requests()) == before {
			runtime.Gosched()
		}
		cancel()
	}()
	_, err := s(ctx, summaryRequest())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled in flight: %v", err)
	}
	srv.SetFault(loopback.Fault{})
}

// TestSummarizerOptions: a model is required, and the API is chat or responses.
func TestSummarizerOptions(t *testing.T) {
	var ce *core.Error
	if _, err := OpenAISummarizer(OpenAISummarizerOptions{}); !errors.As(err, &ce) || ce.Code != core.CodeInvalidRequest || ce.Path != "/model" {
		t.Fatalf("no model: %v", err)
	}
	if _, err := OpenAISummarizer(OpenAISummarizerOptions{Model: "m", API: "completions"}); !errors.As(err, &ce) || ce.Path != "/api" ||
		!strings.HasPrefix(ce.Message, "ctxcompact: ") {
		t.Fatalf("a bad API: %v", err)
	}
	if _, err := AnthropicSummarizer(AnthropicSummarizerOptions{Model: " "}); !errors.As(err, &ce) || ce.Path != "/model" {
		t.Fatalf("no model: %v", err)
	}
	// A BaseURL every request would fail on is refused up front, not at each compaction.
	for _, base := range []string{"not-a-url", "ftp://example.com/v1", "https://", "api.openai.com/v1", "http://[::1"} {
		if _, err := OpenAISummarizer(OpenAISummarizerOptions{Model: "m", BaseURL: base}); !errors.As(err, &ce) || ce.Path != "/base_url" ||
			!strings.Contains(ce.Message, "must be an http or https URL") {
			t.Errorf("OpenAISummarizer BaseURL %q: %v", base, err)
		}
		if _, err := AnthropicSummarizer(AnthropicSummarizerOptions{Model: "m", BaseURL: base}); !errors.As(err, &ce) || ce.Path != "/base_url" {
			t.Errorf("AnthropicSummarizer BaseURL %q: %v", base, err)
		}
	}
	for _, base := range []string{"", "http://127.0.0.1:8080/v1", "https://api.anthropic.com"} {
		if _, err := AnthropicSummarizer(AnthropicSummarizerOptions{Model: "m", BaseURL: base}); err != nil {
			t.Errorf("BaseURL %q: %v", base, err)
		}
	}
}

// TestCompactWithReadySummarizers: Compact with each ready summarizer against the
// loopback model: the summary is the model's; a 429 falls back with code error
// and the status in the reason; no answer by the timeout falls back with timeout.
func TestCompactWithReadySummarizers(t *testing.T) {
	requireOps(t, "compact.begin", "compact.finish")
	e := sharedEngine(t)
	srv := startLoopback(t)
	ctx := context.Background()
	for name, s := range map[string]Summarize{
		"chat":      must(t)(OpenAISummarizer(OpenAISummarizerOptions{BaseURL: srv.OpenAIBaseURL(), Model: loopback.DefaultSummaryModel})),
		"responses": must(t)(OpenAISummarizer(OpenAISummarizerOptions{BaseURL: srv.OpenAIBaseURL(), Model: loopback.DefaultSummaryModel, API: OpenAIResponses})),
		"anthropic": must(t)(AnthropicSummarizer(AnthropicSummarizerOptions{BaseURL: srv.URL, Model: loopback.DefaultSummaryModel})),
	} {
		srv.SetFault(loopback.Fault{})
		res, err := compactSmall(t, e, ctx, s, 0)
		if err != nil || res.Report.FallbackUsed || res.Report.Summarizer != core.SummarizerHost {
			t.Fatalf("%s: %v %+v", name, err, res.Report)
		}
		last := srv.Requests()[len(srv.Requests())-1]
		if !last.Summary || last.Status != http.StatusOK {
			t.Fatalf("%s: the last request %+v", name, last)
		}
		if !strings.Contains(joinRaw(res.Messages), "Replay of unit.") {
			t.Fatalf("%s: the summary is not in the messages", name)
		}

		srv.SetFault(loopback.Fault{Status: 429, RetryAfter: "1"})
		res, err = compactSmall(t, e, ctx, s, 0)
		requireFallback(t, name+": 429", res, err, core.FallbackError, "HTTP 429 (retry-after 1)")

		srv.SetFault(loopback.Fault{Hang: true})
		res, err = compactSmall(t, e, ctx, s, 50*time.Millisecond)
		requireFallback(t, name+": no answer", res, err, core.FallbackTimeout, "did not answer within 50 ms")
	}
	srv.SetFault(loopback.Fault{})
}
