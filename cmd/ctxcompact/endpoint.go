package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/ctxcompact/ctxcompact/core"
)

// endpointSummarizer asks an OpenAI-compatible chat-completions endpoint for the
// summary: POST {url}/chat/completions with the summary request's messages and
// max_tokens. The API key comes from CTXCOMPACT_API_KEY, else OPENAI_API_KEY.
type endpointSummarizer struct {
	url, model string
	client     *http.Client
}

func newEndpointSummarizer(url, model string, timeout time.Duration) *endpointSummarizer {
	return &endpointSummarizer{url: strings.TrimSuffix(url, "/"), model: model, client: &http.Client{Timeout: timeout}}
}

// summarize returns the summary text, or an error the core turns into its
// extractive fallback (the report then says fallback_used and why).
func (e *endpointSummarizer) summarize(ctx context.Context, req core.SummaryRequest) (string, error) {
	body, err := json.Marshal(map[string]any{"model": e.model, "messages": req.Messages, "max_tokens": req.MaxTokens})
	if err != nil {
		return "", err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("summarizer endpoint: %w", err)
	}
	httpReq.Header.Set("Content-Type", "application/json")
	key := os.Getenv("CTXCOMPACT_API_KEY")
	if key == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	if key != "" {
		httpReq.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := e.client.Do(httpReq)
	if err != nil {
		return "", fmt.Errorf("summarizer endpoint: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("summarizer endpoint: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("summarizer endpoint: HTTP %d: %.300s", resp.StatusCode, data)
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) == 0 {
		return "", fmt.Errorf("summarizer endpoint: not a chat completion: %.300s", data)
	}
	return out.Choices[0].Message.Content, nil
}
