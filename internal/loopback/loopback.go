// Package loopback is an in-process HTTP "model" on 127.0.0.1 for the Go tests
// and the Go agent-loop example (examples/agent-loop/go): it speaks OpenAI's
// /v1/chat/completions and /v1/responses and Anthropic's /v1/messages, replays a
// recorded trace, and records every request it gets. The JS and Python sides
// have the same server (the behaviour is the shared spec of issue 18):
//
//   - A summary request (the model is Options.SummaryModel, or the first
//     sentence of the system text, the instructions or the system prompt, says
//     "summar") is answered with SummaryText.
//   - Any other request is an agent turn, answered with the trace's next
//     recorded assistant message (a cursor over them, in order), its content and
//     tool calls as recorded, in the API's own shape.
//   - The usage is computed from the request, since traces record none per turn:
//     prompt tokens = ceil(bytes of the request's messages as JSON / 4), with the
//     instructions or system prompt where the API keeps them apart; completion
//     tokens = ceil(bytes of the answer message as JSON / 4).
//   - SetFault makes it answer with an HTTP error (429 with retry-after, 500, a
//     400 error object) or late, for the error and timeout paths.
package loopback

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// DefaultSummaryModel is the model name a summarizer pointed at the loopback
// uses, so that its requests are told from the agent's by the model too.
const DefaultSummaryModel = "summary-model"

// Trace is a recorded conversation: Name (for the summary text) and the OpenAI
// chat messages, each as raw JSON.
type Trace struct {
	Name     string
	Messages []json.RawMessage
}

// LoadTrace reads a trace file, {"messages": [...]} or a bare array; its name is
// the file name without ".json".
func LoadTrace(path string) (Trace, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Trace{}, err
	}
	msgs := gjson.GetBytes(data, "messages")
	if !msgs.Exists() {
		msgs = gjson.ParseBytes(data)
	}
	if !gjson.ValidBytes(data) || !msgs.IsArray() {
		return Trace{}, fmt.Errorf("loopback: %s: not a trace ({\"messages\": [...]} or an array of messages)", path)
	}
	t := Trace{Name: strings.TrimSuffix(filepath.Base(path), ".json")}
	for _, m := range msgs.Array() {
		t.Messages = append(t.Messages, json.RawMessage(m.Raw))
	}
	return t, nil
}

// Options configure Start.
type Options struct {
	// Trace is replayed: its assistant messages answer the agent turns.
	Trace Trace
	// SummaryModel is the model whose requests are summary requests
	// (DefaultSummaryModel when empty).
	SummaryModel string
}

// Request is one request the server got.
type Request struct {
	// Path is the URL path, e.g. /v1/chat/completions.
	Path   string
	Header http.Header
	// Body is the request body as sent.
	Body []byte
	// Summary tells a summary request from an agent turn.
	Summary bool
	// PromptTokens is the prompt size the usage of its answer reports (also when
	// the answer was an injected error).
	PromptTokens int
	// Status is the HTTP status it was answered with (0: not yet, or never:
	// the client hung up first). A request is recorded when it arrives.
	Status int
}

// Fault makes the server answer with an error, or late.
type Fault struct {
	// Status, when not 0, is the HTTP status of the answer, with Body (default: an
	// error object in the API's own shape naming the status).
	Status int
	Body   string
	// RetryAfter, when set, is the answer's retry-after header.
	RetryAfter string
	// Delay holds the answer back this long, or until the client hangs up.
	Delay time.Duration
	// Hang holds the answer back until the client hangs up or the server closes.
	Hang bool
	// Times is how many requests the fault applies to (0: every one until the
	// next SetFault).
	Times int
}

// Server is the loopback model. Its methods are safe for concurrent use.
type Server struct {
	// URL is the server's root, http://127.0.0.1:PORT. OpenAI clients take
	// URL+"/v1" as their base URL, Anthropic clients URL.
	URL string

	opts    Options
	turns   []gjson.Result // the trace's assistant messages
	srv     *http.Server
	closing chan struct{}
	once    sync.Once

	mu        sync.Mutex
	cursor    int
	requests  []Request
	fault     Fault
	faultLeft int
}

// Start serves on 127.0.0.1, port 0 (one the system picks), until Close.
func Start(opts Options) (*Server, error) {
	if opts.SummaryModel == "" {
		opts.SummaryModel = DefaultSummaryModel
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loopback: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), opts: opts, closing: make(chan struct{})}
	for _, m := range opts.Trace.Messages {
		if r := gjson.ParseBytes(m); r.Get("role").Str == "assistant" {
			s.turns = append(s.turns, r)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, apiChat) })
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, apiResponses) })
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, apiMessages) })
	s.srv = &http.Server{Handler: mux}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// OpenAIBaseURL is URL + "/v1", the base URL of an OpenAI client.
func (s *Server) OpenAIBaseURL() string { return s.URL + "/v1" }

// Close stops the server; requests held back by a Fault are let go first.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closing)
		_ = s.srv.Close()
	})
}

// Requests are the requests so far, in the order they came.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// SetFault applies f to the next f.Times requests (every one when 0); Fault{}
// clears it.
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault, s.faultLeft = f, f.Times
}

// Turns is how many recorded assistant turns were answered so far.
func (s *Server) Turns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursor
}

// SummaryText is the summary the server answers with, the same in every
// runtime: the trace's name and the number of turns in the summary request (its
// "[#N ..." turn headers).
func SummaryText(traceName string, turns int) string {
	return fmt.Sprintf("## Goal\nReplay of %s.\n## Progress\n%d messages summarized.", traceName, turns)
}

type api int

const (
	apiChat api = iota
	apiResponses
	apiMessages
)

// turnHeader is the header of a serialized turn in a summary request's user text.
var turnHeader = regexp.MustCompile(`(?m)^\[#\d+ `)

// parsed is what serve reads of a request.
type parsed struct {
	model, system, user string
	promptBytes         int
}

func parse(body gjson.Result, a api) parsed {
	p := parsed{model: body.Get("model").Str}
	var turns gjson.Result
	switch a {
	case apiChat:
		turns = body.Get("messages")
		for _, m := range turns.Array() {
			if role := m.Get("role").Str; role == "system" || role == "developer" {
				p.system += text(m.Get("content"))
			}
		}
	case apiResponses:
		turns = body.Get("input")
		p.system = body.Get("instructions").Str
		p.promptBytes = len(body.Get("instructions").Raw)
	case apiMessages:
		turns = body.Get("messages")
		p.system = text(body.Get("system"))
		p.promptBytes = len(body.Get("system").Raw)
	}
	p.promptBytes += len(turns.Raw)
	if turns.Type == gjson.String { // Responses: input as one string
		p.user = turns.Str
	}
	for _, m := range turns.Array() {
		if m.Get("role").Str == "user" {
			p.user += text(m.Get("content"))
		}
	}
	return p
}

// text is a content value's text: a string, or the text of its parts.
func text(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.Str
	}
	var b strings.Builder
	for _, part := range content.Array() {
		b.WriteString(part.Get("text").String())
	}
	return b.String()
}

// isSummary: the summary model, or a system text whose first sentence says
// "summar" (the summarizer template starts "You summarize ..."; the agent's
// system prompt may say "summary" later, in the compaction note).
func (s *Server) isSummary(p parsed) bool {
	if p.model == s.opts.SummaryModel {
		return true
	}
	first := p.system
	if i := strings.IndexAny(first, ".\n"); i >= 0 {
		first = first[:i]
	}
	return strings.Contains(strings.ToLower(first), "summar")
}

func ceil4(n int) int { return (n + 3) / 4 }

func (s *Server) serve(w http.ResponseWriter, r *http.Request, a api) {
	body, err := io.ReadAll(r.Body)
	rec := Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	valid := err == nil && gjson.ValidBytes(body)
	var p parsed
	if valid {
		p = parse(gjson.ParseBytes(body), a)
		rec.Summary, rec.PromptTokens = s.isSummary(p), ceil4(p.promptBytes)
	}
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, rec) // recorded on arrival; its status when answered
	f, faulty := s.fault, s.fault != (Fault{})
	if faulty && s.fault.Times > 0 {
		if s.faultLeft--; s.faultLeft <= 0 {
			s.fault = Fault{}
		}
	}
	s.mu.Unlock()
	if !valid {
		s.answered(n, http.StatusBadRequest)
		writeError(w, a, http.StatusBadRequest, "loopback: the request body is not JSON", "")
		return
	}
	if faulty && (f.Hang || f.Delay > 0) {
		var after <-chan time.Time
		if !f.Hang {
			t := time.NewTimer(f.Delay)
			defer t.Stop()
			after = t.C
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		case <-after:
		}
	}
	if faulty && f.Status != 0 {
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		s.answered(n, f.Status)
		writeError(w, a, f.Status, fmt.Sprintf("loopback: injected HTTP %d", f.Status), f.Body)
		return
	}

	var msg gjson.Result
	if !rec.Summary {
		s.mu.Lock()
		if s.cursor < len(s.turns) {
			msg = s.turns[s.cursor]
			s.cursor++
		}
		s.mu.Unlock()
		if !msg.Exists() {
			s.answered(n, http.StatusConflict)
			writeError(w, a, http.StatusConflict, "loopback: the trace has no more assistant turns", "")
			return
		}
	} else {
		summary := SummaryText(s.opts.Trace.Name, len(turnHeader.FindAllStringIndex(p.user, -1)))
		b, _ := json.Marshal(map[string]string{"role": "assistant", "content": summary})
		msg = gjson.ParseBytes(b)
	}
	s.answered(n, http.StatusOK)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer(a, p.model, msg, rec.PromptTokens, ceil4(len(msg.Raw)), n+1))
}

// answered sets the status of request n.
func (s *Server) answered(n, status int) {
	s.mu.Lock()
	s.requests[n].Status = status
	s.mu.Unlock()
}

// answer is the API's answer carrying the assistant message msg (content and
// tool_calls as in the chat format), with the usage; n numbers the ids.
func answer(a api, model string, msg gjson.Result, prompt, completion, n int) []byte {
	content := text(msg.Get("content"))
	calls := msg.Get("tool_calls").Array()
	var out any
	switch a {
	case apiChat:
		m := map[string]any{"role": "assistant", "content": json.RawMessage(orNull(msg.Get("content").Raw))}
		finish := "stop"
		if len(calls) > 0 {
			m["tool_calls"] = json.RawMessage(msg.Get("tool_calls").Raw)
			finish = "tool_calls"
		}
		out = map[string]any{"id": fmt.Sprintf("chatcmpl-loopback-%d", n), "object": "chat.completion", "created": 0, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": m, "finish_reason": finish, "logprobs": nil}},
			"usage":   map[string]int{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
	case apiResponses:
		items := []any{}
		if content != "" {
			items = append(items, map[string]any{"type": "message", "id": fmt.Sprintf("msg_loopback_%d", n), "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": content, "annotations": []any{}}}})
		}
		for i, c := range calls {
			items = append(items, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_loopback_%d_%d", n, i), "call_id": c.Get("id").Str,
				"name": c.Get("function.name").Str, "arguments": c.Get("function.arguments").String(), "status": "completed"})
		}
		out = map[string]any{"id": fmt.Sprintf("resp_loopback_%d", n), "object": "response", "created_at": 0, "status": "completed", "model": model,
			"output": items, "error": nil, "incomplete_details": nil,
			"usage": map[string]any{"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion,
				"input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}}}
	case apiMessages:
		blocks := []any{}
		if content != "" {
			blocks = append(blocks, map[string]any{"type": "text", "text": content})
		}
		stop := "end_turn"
		for _, c := range calls {
			input := json.RawMessage(`{}`)
			if args := c.Get("function.arguments"); args.Type == gjson.String && gjson.Valid(args.Str) && gjson.Parse(args.Str).IsObject() {
				input = json.RawMessage(args.Str)
			} else if args.IsObject() {
				input = json.RawMessage(args.Raw)
			}
			blocks = append(blocks, map[string]any{"type": "tool_use", "id": c.Get("id").Str, "name": c.Get("function.name").Str, "input": input})
			stop = "tool_use"
		}
		out = map[string]any{"id": fmt.Sprintf("msg_loopback_%d", n), "type": "message", "role": "assistant", "model": model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": prompt, "output_tokens": completion}}
	}
	b, _ := json.Marshal(out)
	return b
}

func orNull(raw string) string {
	if raw == "" {
		return "null"
	}
	return raw
}

// writeError answers with status and body, by default the API's error object.
func writeError(w http.ResponseWriter, a api, status int, message, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if body == "" {
		var b []byte
		if a == apiMessages {
			b, _ = json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": anthropicType(status), "message": message}})
		} else {
			b, _ = json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": openaiType(status), "param": nil, "code": nil}})
		}
		body = string(b)
	}
	_, _ = io.Copy(w, bytes.NewReader([]byte(body)))
}

func openaiType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func anthropicType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	default:
		return "invalid_request_error"
	}
}
