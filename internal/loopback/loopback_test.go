package loopback

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// testTrace: a system prompt, a user turn, an assistant tool call and its result,
// then an assistant answer.
func testTrace() Trace {
	return Trace{Name: "t1", Messages: []json.RawMessage{
		json.RawMessage(`{"role":"system","content":"You are an agent."}`),
		json.RawMessage(`{"role":"user","content":"List the files."}`),
		json.RawMessage(`{"role":"assistant","content":"Listing.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]}`),
		json.RawMessage(`{"role":"tool","tool_call_id":"call_1","content":"a.go"}`),
		json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"One file: a.go."}]}`),
	}}
}

func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start(Options{Trace: testTrace()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, url, body string) (int, http.Header, gjson.Result) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, gjson.ParseBytes(data)
}

// TestAgentTurns: each API gets the recorded assistant turns in order, in its own
// shape, with usage from the request's and the answer's JSON sizes; past the
// last turn it answers 409.
func TestAgentTurns(t *testing.T) {
	s := start(t)
	msgs := `[{"role":"user","content":"List the files."}]`
	code, _, a := post(t, s.URL+"/v1/chat/completions", `{"model":"agent","messages":`+msgs+`}`)
	turn := testTrace().Messages[2]
	switch {
	case code != 200:
		t.Fatalf("chat: %d %s", code, a.Raw)
	case a.Get("choices.0.message.content").Str != "Listing." || a.Get("choices.0.finish_reason").Str != "tool_calls":
		t.Fatalf("chat: %s", a.Raw)
	case a.Get("choices.0.message.tool_calls").Raw != gjson.GetBytes(turn, "tool_calls").Raw:
		t.Fatalf("chat: the tool calls are not as recorded: %s", a.Raw)
	case a.Get("usage.prompt_tokens").Int() != int64((len(msgs)+3)/4):
		t.Fatalf("chat: prompt_tokens %d for %d bytes", a.Get("usage.prompt_tokens").Int(), len(msgs))
	case a.Get("usage.completion_tokens").Int() != int64((len(turn)+3)/4):
		t.Fatalf("chat: completion_tokens %d for %d bytes", a.Get("usage.completion_tokens").Int(), len(turn))
	}

	code, _, a = post(t, s.URL+"/v1/responses", `{"model":"agent","instructions":"Be brief.","input":`+msgs+`}`)
	wantPrompt := (len(msgs) + len(`"Be brief."`) + 3) / 4
	if code != 200 || a.Get("output.#").Int() != 1 || a.Get("output.0.type").Str != "message" ||
		a.Get("output.0.content.0.text").Str != "One file: a.go." || a.Get("usage.input_tokens").Int() != int64(wantPrompt) {
		t.Fatalf("responses: %d %s", code, a.Raw)
	}
	if s.Turns() != 2 {
		t.Fatalf("cursor %d after two turns", s.Turns())
	}
	code, _, a = post(t, s.URL+"/v1/messages", `{"model":"agent","max_tokens":10,"messages":`+msgs+`}`)
	if code != 409 || a.Get("error.type").Str != "invalid_request_error" || !strings.Contains(a.Get("error.message").Str, "no more assistant turns") {
		t.Fatalf("past the trace: %d %s", code, a.Raw)
	}
}

// TestToolCallShapes: a recorded tool call is a function_call item (Responses)
// and a tool_use block with the parsed arguments (Anthropic).
func TestToolCallShapes(t *testing.T) {
	s := start(t)
	_, _, a := post(t, s.URL+"/v1/responses", `{"model":"agent","input":"hi"}`)
	if a.Get("output.1.type").Str != "function_call" || a.Get("output.1.call_id").Str != "call_1" ||
		a.Get("output.1.name").Str != "bash" || a.Get("output.1.arguments").Str != `{"cmd":"ls"}` {
		t.Fatalf("responses: %s", a.Raw)
	}
	s2 := start(t)
	_, _, a = post(t, s2.URL+"/v1/messages", `{"model":"agent","max_tokens":10,"system":"S","messages":[{"role":"user","content":"hi"}]}`)
	if a.Get("content.0.text").Str != "Listing." || a.Get("content.1.type").Str != "tool_use" ||
		a.Get("content.1.input.cmd").Str != "ls" || a.Get("stop_reason").Str != "tool_use" || a.Get("type").Str != "message" {
		t.Fatalf("messages: %s", a.Raw)
	}
}

// TestSummaryRequests: the summary model, or a system text whose first sentence
// says "summar", gets SummaryText with the number of turn headers, and does not
// move the cursor; an agent prompt that mentions a summary later (the compaction
// note) is an agent turn.
func TestSummaryRequests(t *testing.T) {
	s := start(t)
	user := "[#1 user]\nList.\n\n[#2 assistant → call bash]\nx\n\n[#3 tool result of bash]\na.go\n"
	body, _ := json.Marshal(map[string]any{"model": "gpt-4.1-mini", "messages": []map[string]string{
		{"role": "system", "content": "You summarize the earlier part of a long conversation."}, {"role": "user", "content": user}}})
	_, _, a := post(t, s.URL+"/v1/chat/completions", string(body))
	if got := a.Get("choices.0.message.content").Str; got != SummaryText("t1", 3) {
		t.Fatalf("summary by its template: %q", got)
	}
	body, _ = json.Marshal(map[string]any{"model": DefaultSummaryModel, "max_tokens": 5, "system": "Condense this.",
		"messages": []map[string]string{{"role": "user", "content": user}}})
	_, _, a = post(t, s.URL+"/v1/messages", string(body))
	if got := a.Get("content.0.text").Str; got != SummaryText("t1", 3) {
		t.Fatalf("summary by its model: %q", got)
	}
	body, _ = json.Marshal(map[string]any{"model": "agent", "messages": []map[string]string{
		{"role": "system", "content": "You are an agent.\n\n[Note: earlier turns of this conversation were compacted into a summary.]"},
		{"role": "user", "content": "Go on."}}})
	_, _, a = post(t, s.URL+"/v1/chat/completions", string(body))
	if a.Get("choices.0.message.content").Str != "Listing." {
		t.Fatalf("an agent turn after a compaction: %s", a.Raw)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || !reqs[0].Summary || !reqs[1].Summary || reqs[2].Summary || s.Turns() != 1 {
		t.Fatalf("recorded %+v, cursor %d", reqs, s.Turns())
	}
	if !bytes.Equal(reqs[2].Body, body) || reqs[2].Path != "/v1/chat/completions" || reqs[2].Status != 200 {
		t.Fatalf("the request is not recorded as sent: %+v", reqs[2])
	}
}

// TestFaults: an injected status with retry-after and the API's error shape, for
// Times requests; a custom body; a body that is not JSON.
func TestFaults(t *testing.T) {
	s := start(t)
	s.SetFault(Fault{Status: 429, RetryAfter: "3", Times: 2})
	for i := range 2 {
		code, h, a := post(t, s.URL+"/v1/chat/completions", `{"model":"m","messages":[]}`)
		if code != 429 || h.Get("Retry-After") != "3" || a.Get("error.type").Str != "rate_limit_error" {
			t.Fatalf("fault %d: %d %v %s", i, code, h, a.Raw)
		}
	}
	code, _, a := post(t, s.URL+"/v1/messages", `{"model":"m","messages":[]}`)
	if code != 200 || a.Get("content.0.text").Str != "Listing." {
		t.Fatalf("after Times: %d %s", code, a.Raw)
	}
	s.SetFault(Fault{Status: 500})
	for range 2 {
		if code, _, a := post(t, s.URL+"/v1/messages", `{}`); code != 500 || a.Get("type").Str != "error" || a.Get("error.type").Str != "api_error" {
			t.Fatalf("500: %d %s", code, a.Raw)
		}
	}
	s.SetFault(Fault{Status: 400, Body: `{"error":{"message":"bad","type":"invalid_request_error"}}`})
	if code, _, a := post(t, s.URL+"/v1/responses", `{}`); code != 400 || a.Get("error.message").Str != "bad" {
		t.Fatalf("400: %d %s", code, a.Raw)
	}
	s.SetFault(Fault{})
	if code, _, _ := post(t, s.URL+"/v1/responses", `{"model":`); code != 400 {
		t.Fatalf("not JSON: %d", code)
	}
	st := []int{}
	for _, r := range s.Requests() {
		st = append(st, r.Status)
	}
	if want := []int{429, 429, 200, 500, 500, 400, 400}; !slices.Equal(st, want) {
		t.Fatalf("statuses %v, want %v", st, want)
	}
}

// TestLoadTrace: an object with messages, or a bare array; the name is the file's.
func TestLoadTrace(t *testing.T) {
	tr, err := LoadTrace("../../examples/astropy-12907.json")
	if err != nil || tr.Name != "astropy-12907" || len(tr.Messages) != 130 {
		t.Fatalf("%v %q %d", err, tr.Name, len(tr.Messages))
	}
	if _, err := LoadTrace("loopback.go"); err == nil {
		t.Fatal("a Go file is no trace")
	}
}
