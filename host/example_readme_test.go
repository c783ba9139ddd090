package host_test

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/host"
)

// The Go snippets of README.md are the parts of this file between "// README:"
// and "// README: end" lines, one tab less indented (TestReadmeGoSnippets), so
// they compile. Compiled, not run: compiling the module again would double the
// package's test time (TestCompact and the typed tests run these flows).

// The README's quick start: natively and through the embedded module.
func Example_readmeQuickStart() {
	ctx := context.Background()
	cfg := json.RawMessage(`{"model":{"context_length":200000}}`)
	messages := json.RawMessage(`[{"role":"user","content":"Fix the parser."}]`)
	anthropicMessages := json.RawMessage(`[{"role":"user","content":[{"type":"text","text":"Fix the parser."}]}]`)
	myLLM := func(ctx context.Context, msgs []core.ChatMessage, maxTokens int) (string, error) {
		return "## Goal\nFix the parser.", nil
	}
	mySummarizer := func(req core.SummaryRequest) (string, error) { return myLLM(ctx, req.Messages, req.MaxTokens) }

	// README: quick start
	res, err := core.Compact(messages, core.CompactOptions{ // messages: a JSON array, as on the wire
		Config: cfg, Format: core.FormatOpenAI, Summarize: mySummarizer}) // nil Summarize: the extractive summary
	out := core.Call([]byte(`{"op":"tokens.count","messages":[{"role":"user","content":"hi"}]}`)) // the ABI: any op, JSON in and out

	eng, _ := host.New(ctx) // compiles the module once; share it
	defer eng.Close(ctx)
	compactor, err := host.NewCompactor(ctx, eng, cfg) // the config is checked here; the same types
	res, err = compactor.Compact(ctx, messages, func(ctx context.Context, req core.SummaryRequest) (string, error) {
		return myLLM(ctx, req.Messages, req.MaxTokens) // your summarizer; an error falls back to the extractive summary
	}, host.CompactOptions{Timeout: time.Minute}) // past it (2 minutes by default), the extractive summary
	// Anthropic Messages: the system prompt travels beside the messages and comes back
	// (with the compaction note) in res.System; a nil summarizer is the extractive one.
	res, err = compactor.Compact(ctx, anthropicMessages, nil, host.CompactOptions{
		Format: host.FormatAnthropic, System: json.RawMessage(`"You are a coding agent."`)})
	// README: end
	_, _, _ = res, err, out
}

// The README's ready summarizers.
func Example_readmeSummarizers() {
	// README: summarizers
	summarize, err := host.OpenAISummarizer(host.OpenAISummarizerOptions{
		Model: "gpt-4.1-mini", APIKey: os.Getenv("OPENAI_API_KEY"), // BaseURL: https://api.openai.com/v1 by default
		API: host.OpenAIChat, // or host.OpenAIResponses: POST {BaseURL}/responses
	})
	summarize, err = host.AnthropicSummarizer(host.AnthropicSummarizerOptions{
		Model: "claude-haiku-4-5", APIKey: os.Getenv("ANTHROPIC_API_KEY")}) // POST https://api.anthropic.com/v1/messages
	// README: end
	_, _ = summarize, err
}
