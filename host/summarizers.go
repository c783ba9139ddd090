package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// The APIs of OpenAISummarizerOptions.API.
const (
	// OpenAIChat is POST {BaseURL}/chat/completions (OpenAI and the servers
	// compatible with it).
	OpenAIChat = "chat"
	// OpenAIResponses is POST {BaseURL}/responses (OpenAI's Responses API).
	OpenAIResponses = "responses"
)

// Default base URLs and the Anthropic API version the ready summarizers send.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	DefaultAnthropicVersion = "2023-06-01"
)

// maxAnswerBytes bounds what a ready summarizer reads of an answer.
const maxAnswerBytes = 16 << 20

// OpenAISummarizerOptions configure OpenAISummarizer.
type OpenAISummarizerOptions struct {
	// BaseURL is the API's base, with its version: DefaultOpenAIBaseURL when
	// empty; the summarizer posts to BaseURL + "/chat/completions" or
	// BaseURL + "/responses".
	BaseURL string
	// APIKey, when not empty, is sent as "Authorization: Bearer <APIKey>".
	APIKey string
	// Model is the model that writes the summary (required).
	Model string
	// API is OpenAIChat (or "") or OpenAIResponses.
	API string
	// MaxTokens, when > 0, is the summary's size in tokens instead of the
	// summary request's MaxTokens. Chat sends it as max_tokens, or as
	// max_completion_tokens for reasoning models (names starting o<digit> or
	// gpt-5), which count their reasoning in it; Responses as max_output_tokens.
	MaxTokens int
	// HTTPClient sends the requests; nil means http.DefaultClient. Whatever
	// retries it does are its own: the summarizer sends each request once.
	HTTPClient *http.Client
	// Header holds extra request headers (OpenAI-Organization, OpenAI-Project,
	// a gateway's own), set after the summarizer's own, which they replace.
	Header http.Header
}

// AnthropicSummarizerOptions configure AnthropicSummarizer.
type AnthropicSummarizerOptions struct {
	// BaseURL is the API's base: DefaultAnthropicBaseURL when empty. The
	// summarizer posts to BaseURL + "/v1/messages" (BaseURL + "/messages" when
	// BaseURL already ends in /v1).
	BaseURL string
	// APIKey, when not empty, is sent as the x-api-key header.
	APIKey string
	// Model is the model that writes the summary (required).
	Model string
	// MaxTokens, when > 0, is max_tokens instead of the summary request's
	// MaxTokens.
	MaxTokens int
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Header holds extra request headers, set after the summarizer's own: an
	// anthropic-version here replaces DefaultAnthropicVersion, an anthropic-beta
	// is sent as given.
	Header http.Header
}

// reasoningModel matches the OpenAI models that take max_completion_tokens, the
// same rule in every runtime.
var reasoningModel = regexp.MustCompile(`^(o\d|gpt-5)`)

// OpenAISummarizer is a Summarize that asks an OpenAI API (opts.API: chat
// completions or Responses) over plain HTTP, no SDK needed. It sends the summary
// request's system text in the system message (chat) or as instructions
// (Responses), its user text as the user message, and the size in the API's own
// parameter (see OpenAISummarizerOptions.MaxTokens). The summary is the answer's
// message content (chat) or its output_text parts (Responses); a blank one is
// returned as is (the compaction falls back with fallback_code "empty").
//
// The request carries the summarizer's context: at the compaction's timeout or
// cancellation the request is abandoned and the error wraps the context's error
// (fallback_code "timeout" or "cancelled"). A failed request, an HTTP status
// other than 2xx (429 and 5xx too: no retry) and an answer that is no summary
// are errors that start with "ctxcompact: openai summarizer:" and give the
// status and the API's error message or a short excerpt of the body; the
// compaction then falls back with fallback_code "error".
//
// A missing Model or an API other than chat or responses is an invalid_request
// *core.Error (at /model or /api).
func OpenAISummarizer(opts OpenAISummarizerOptions) (Summarize, error) {
	if strings.TrimSpace(opts.Model) == "" {
		return nil, optionError("/model", "OpenAISummarizer needs a model")
	}
	api := opts.API
	switch api {
	case "", OpenAIChat:
		api = OpenAIChat
	case OpenAIResponses:
	default:
		return nil, optionError("/api", fmt.Sprintf("OpenAISummarizer's API is %q or %q, not %q", OpenAIChat, OpenAIResponses, opts.API))
	}
	base := strings.TrimSuffix(opts.BaseURL, "/")
	if base == "" {
		base = DefaultOpenAIBaseURL
	} else if err := checkBaseURL("OpenAISummarizer", opts.BaseURL); err != nil {
		return nil, err
	}
	h := summarizerHTTP{who: "openai summarizer", client: opts.HTTPClient, header: http.Header{}}
	if opts.APIKey != "" {
		h.header.Set("Authorization", "Bearer "+opts.APIKey)
	}
	mergeHeader(h.header, opts.Header)
	if api == OpenAIResponses {
		h.url = base + "/responses"
		return func(ctx context.Context, req core.SummaryRequest) (string, error) {
			system, turns := splitSystem(req.Messages)
			body := responsesBody{Model: opts.Model, Instructions: system, Input: turns,
				MaxOutputTokens: sizeOf(req, opts.MaxTokens), Store: false}
			answer, err := h.post(ctx, body)
			if err != nil {
				return "", err
			}
			return h.responsesText(answer)
		}, nil
	}
	h.url = base + "/chat/completions"
	reasoning := reasoningModel.MatchString(opts.Model)
	return func(ctx context.Context, req core.SummaryRequest) (string, error) {
		body := chatBody{Model: opts.Model, Messages: req.Messages}
		if reasoning {
			body.MaxCompletionTokens = sizeOf(req, opts.MaxTokens)
		} else {
			body.MaxTokens = sizeOf(req, opts.MaxTokens)
		}
		answer, err := h.post(ctx, body)
		if err != nil {
			return "", err
		}
		return h.chatText(answer)
	}, nil
}

// AnthropicSummarizer is a Summarize that asks Anthropic's Messages API over plain
// HTTP, no SDK needed: the summary request's system text as system, its user text
// as the user message, max_tokens as the summary's size; the summary is the
// answer's text blocks, joined. It sends anthropic-version DefaultAnthropicVersion
// unless opts.Header sets another. The context, the errors (starting
// "ctxcompact: anthropic summarizer:") and a blank summary are as in
// OpenAISummarizer. A missing Model is an invalid_request *core.Error at /model.
func AnthropicSummarizer(opts AnthropicSummarizerOptions) (Summarize, error) {
	if strings.TrimSpace(opts.Model) == "" {
		return nil, optionError("/model", "AnthropicSummarizer needs a model")
	}
	base := strings.TrimSuffix(opts.BaseURL, "/")
	if base == "" {
		base = DefaultAnthropicBaseURL
	} else if err := checkBaseURL("AnthropicSummarizer", opts.BaseURL); err != nil {
		return nil, err
	}
	url := base + "/v1/messages"
	if strings.HasSuffix(base, "/v1") {
		url = base + "/messages"
	}
	h := summarizerHTTP{who: "anthropic summarizer", url: url, client: opts.HTTPClient, header: http.Header{}}
	h.header.Set("anthropic-version", DefaultAnthropicVersion)
	if opts.APIKey != "" {
		h.header.Set("x-api-key", opts.APIKey)
	}
	mergeHeader(h.header, opts.Header)
	return func(ctx context.Context, req core.SummaryRequest) (string, error) {
		system, turns := splitSystem(req.Messages)
		answer, err := h.post(ctx, anthropicBody{Model: opts.Model, System: system, Messages: turns,
			MaxTokens: sizeOf(req, opts.MaxTokens)})
		if err != nil {
			return "", err
		}
		return h.anthropicText(answer)
	}, nil
}

// checkBaseURL refuses a BaseURL that is not an absolute http or https URL with a
// host (an invalid_request *core.Error at /base_url): every request would fail, and
// the compaction would fall back on each one without saying why up front.
func checkBaseURL(who, base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return optionError("/base_url", fmt.Sprintf("%s's BaseURL must be an http or https URL such as https://api.example.com/v1, not %q", who, base))
	}
	return nil
}

func optionError(path, msg string) error {
	return &core.Error{Code: core.CodeInvalidRequest, Path: path,
		Message: fmt.Sprintf("ctxcompact: %s (at %s)", msg, path)}
}

// mergeHeader sets every value of extra in h, replacing h's own.
func mergeHeader(h, extra http.Header) {
	for k, vs := range extra {
		h.Del(k)
		for _, v := range vs {
			h.Add(k, v)
		}
	}
}

// sizeOf is the summary's size in tokens: override when > 0, else the request's.
func sizeOf(req core.SummaryRequest, override int) int {
	if override > 0 {
		return override
	}
	return req.MaxTokens
}

// splitSystem is the system messages' text (joined by a blank line) and the other
// messages, for the APIs with a separate system slot.
func splitSystem(msgs []core.ChatMessage) (string, []core.ChatMessage) {
	var system []string
	turns := make([]core.ChatMessage, 0, len(msgs))
	for _, m := range msgs {
		if m.Role == "system" || m.Role == "developer" {
			system = append(system, m.Content)
		} else {
			turns = append(turns, m)
		}
	}
	return strings.Join(system, "\n\n"), turns
}

type chatBody struct {
	Model               string             `json:"model"`
	Messages            []core.ChatMessage `json:"messages"`
	MaxTokens           int                `json:"max_tokens,omitempty"`
	MaxCompletionTokens int                `json:"max_completion_tokens,omitempty"`
}

type responsesBody struct {
	Model           string             `json:"model"`
	Instructions    string             `json:"instructions,omitempty"`
	Input           []core.ChatMessage `json:"input"`
	MaxOutputTokens int                `json:"max_output_tokens,omitempty"`
	// Store is always false: a summary is not kept on the server, since nothing
	// asks for it later (and store=false keeps the call ZDR-friendly).
	Store bool `json:"store"`
}

type anthropicBody struct {
	Model     string             `json:"model"`
	System    string             `json:"system,omitempty"`
	Messages  []core.ChatMessage `json:"messages"`
	MaxTokens int                `json:"max_tokens"`
}

// summarizerHTTP is what the ready summarizers share: one POST, its errors.
type summarizerHTTP struct {
	who    string // "openai summarizer", for the errors
	url    string
	client *http.Client
	header http.Header
}

func (h *summarizerHTTP) fail(format string, args ...any) error {
	return fmt.Errorf("ctxcompact: "+h.who+": "+format, args...)
}

// post sends body as JSON, once, under ctx and returns the answer of a 2xx
// status, or the error: ctx's (wrapped), the connection's, or the status's.
func (h *summarizerHTTP) post(ctx context.Context, body any) ([]byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, h.fail("encoding the request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(data))
	if err != nil {
		return nil, h.fail("%w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, vs := range h.header {
		req.Header[k] = vs
	}
	client := h.client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, h.fail("%w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, h.fail("reading the answer (HTTP %d): %w", resp.StatusCode, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		retry := ""
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			retry = " (retry-after " + ra + ")"
		}
		return nil, h.fail("HTTP %d%s: %s", resp.StatusCode, retry, errorExcerpt(answer))
	}
	if !gjson.ValidBytes(answer) {
		return nil, h.fail("the answer is not JSON: %s", excerpt(answer))
	}
	return answer, nil
}

// errorExcerpt is the API's error message in an error answer ({"error":
// {"message"}} in both APIs, or {"error": "..."}), else an excerpt of the body.
func errorExcerpt(answer []byte) string {
	e := gjson.GetBytes(answer, "error")
	msg := e.Get("message").String()
	if msg == "" && e.Type == gjson.String {
		msg = e.Str
	}
	if msg == "" {
		return excerpt(answer)
	}
	if t := e.Get("type").String(); t != "" && !strings.Contains(msg, t) {
		msg += " [" + t + "]"
	}
	return excerpt([]byte(msg))
}

// excerpt is b on one line, cut to about 300 bytes (on a rune boundary).
func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if s == "" {
		return "(empty body)"
	}
	const limit = 300
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// chatText is the summary in a chat completion: choices[0].message.content.
func (h *summarizerHTTP) chatText(answer []byte) (string, error) {
	choice := gjson.GetBytes(answer, "choices.0")
	if !choice.Exists() {
		return "", h.fail("the answer has no choices: %s", excerpt(answer))
	}
	msg := choice.Get("message")
	content := msg.Get("content")
	if content.IsArray() { // some compatible servers answer with content parts
		var b strings.Builder
		content.ForEach(func(_, p gjson.Result) bool {
			b.WriteString(p.Get("text").String())
			return true
		})
		return b.String(), nil
	}
	if content.String() == "" {
		if r := msg.Get("refusal").String(); r != "" {
			return "", h.fail("the model refused: %s", excerpt([]byte(r)))
		}
	}
	return content.String(), nil
}

// responsesText is the summary in a Responses answer: the output_text parts of
// its message items, joined (or the output_text convenience field some servers add).
func (h *summarizerHTTP) responsesText(answer []byte) (string, error) {
	a := gjson.ParseBytes(answer)
	if e := a.Get("error"); e.Exists() && e.Type != gjson.Null {
		return "", h.fail("the response failed: %s", errorExcerpt(answer))
	}
	if !a.Get("output").IsArray() && !a.Get("output_text").Exists() {
		return "", h.fail("the answer has no output: %s", excerpt(answer))
	}
	var b strings.Builder
	for _, item := range a.Get("output").Array() {
		if item.Get("type").Str != "message" {
			continue
		}
		for _, part := range item.Get("content").Array() {
			if part.Get("type").Str == "output_text" {
				b.WriteString(part.Get("text").String())
			} else if part.Get("type").Str == "refusal" && b.Len() == 0 {
				return "", h.fail("the model refused: %s", excerpt([]byte(part.Get("refusal").String())))
			}
		}
	}
	if b.Len() == 0 {
		return a.Get("output_text").String(), nil
	}
	return b.String(), nil
}

// anthropicText is the summary in a Messages answer: its text blocks, joined.
func (h *summarizerHTTP) anthropicText(answer []byte) (string, error) {
	a := gjson.ParseBytes(answer)
	if a.Get("type").Str == "error" {
		return "", h.fail("%s", errorExcerpt(answer))
	}
	if !a.Get("content").IsArray() {
		return "", h.fail("the answer has no content: %s", excerpt(answer))
	}
	var b strings.Builder
	for _, block := range a.Get("content").Array() {
		if block.Get("type").Str == "text" {
			b.WriteString(block.Get("text").String())
		}
	}
	return b.String(), nil
}
