package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/ctxcompact/ctxcompact/host"
)

// The values of compact's --summarizer-api: the HTTP API --summarizer-url speaks.
const (
	apiOpenAI          = "openai"           // POST {url}/chat/completions (and every compatible server)
	apiOpenAIResponses = "openai-responses" // POST {url}/responses
	apiAnthropic       = "anthropic"        // POST {url}/v1/messages
)

var summarizerAPIs = []string{apiOpenAI, apiOpenAIResponses, apiAnthropic}

// defaultSummarizerModel is the model compact asks when --summarizer-model is not
// given.
func defaultSummarizerModel(api string) string {
	if api == apiAnthropic {
		return "claude-haiku-4-5"
	}
	return "gpt-4.1-mini"
}

// summarizerKey is the API key for api: CTXCOMPACT_API_KEY, else OPENAI_API_KEY
// or ANTHROPIC_API_KEY.
func summarizerKey(api string) string {
	if k := os.Getenv("CTXCOMPACT_API_KEY"); k != "" {
		return k
	}
	if api == apiAnthropic {
		return os.Getenv("ANTHROPIC_API_KEY")
	}
	return os.Getenv("OPENAI_API_KEY")
}

// endpointSummarizer is the host's ready summarizer for --summarizer-url: an
// error from it (HTTP, connection, the context's deadline) is the summarizer
// failure compact.finish falls back from.
func endpointSummarizer(api, url, model string) (host.Summarize, error) {
	switch api {
	case apiOpenAI, apiOpenAIResponses:
		o := host.OpenAISummarizerOptions{BaseURL: url, APIKey: summarizerKey(api), Model: model, API: host.OpenAIChat}
		if api == apiOpenAIResponses {
			o.API = host.OpenAIResponses
		}
		return host.OpenAISummarizer(o)
	case apiAnthropic:
		return host.AnthropicSummarizer(host.AnthropicSummarizerOptions{BaseURL: url, APIKey: summarizerKey(api), Model: model})
	}
	return nil, fmt.Errorf("ctxcompact compact: --summarizer-api is one of %s, not %q", strings.Join(summarizerAPIs, ", "), api)
}
