package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/host"
)

// Compact calls the summarizer only when the core asks for a summary: here a
// forced compaction summarizes the turns between the head and the protected tail.
func ExampleEngine_Compact() {
	ctx := context.Background()
	// One Engine per process: compiling the module is the slow part.
	eng, err := host.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)

	var msgs []map[string]string
	msgs = append(msgs, map[string]string{"role": "system", "content": "You are a coding agent."})
	for i := range 30 {
		msgs = append(msgs,
			map[string]string{"role": "user", "content": fmt.Sprintf("Step %d: change the parser.", i)},
			map[string]string{"role": "assistant", "content": strings.Repeat(fmt.Sprintf("Changed line %d. ", i), 150)})
	}
	raw, _ := json.Marshal(msgs)

	res, err := eng.Compact(ctx, raw, json.RawMessage(`{"model":{"context_length":32000}}`),
		func(ctx context.Context, req core.SummaryRequest) (string, error) {
			// Send req.Messages to an LLM with req.MaxTokens; return its text.
			return "## Goal\nChange the parser, step by step.", nil
		}, host.CompactOptions{Force: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Done, res.Report.Summarizer, res.Report.MessagesBefore > res.Report.MessagesAfter)
	// Prints: true host true (TestCompact checks this flow; the example is not run
	// because compiling the module again would double the package's test time).
}

// A ContextEngine follows an agent loop: record each response's usage, compact
// when the trigger says so, and keep the state to resume the session later.
func ExampleContextEngine() {
	ctx := context.Background()
	eng, err := host.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	ce, err := host.NewContextEngine(ctx, eng, json.RawMessage(`{"model":{"name":"gpt-4o","context_length":128000}}`),
		host.ContextEngineOptions{Summarize: func(ctx context.Context, req core.SummaryRequest) (string, error) {
			return "## Goal\n...", nil // send req.Messages to an LLM
		}})
	if err != nil {
		log.Fatal(err)
	}
	history := json.RawMessage(`[{"role":"user","content":"Fix the parser."}]`) // the conversation so far
	// After each LLM call, its usage object as the SDK returned it:
	if err := ce.UpdateFromResponse(ctx, json.RawMessage(`{"prompt_tokens":101000,"completion_tokens":800}`)); err != nil {
		log.Fatal(err)
	}
	if yes, err := ce.ShouldCompress(ctx, 0); err == nil && yes {
		res, err := ce.Compress(ctx, history, host.CompressOptions{})
		if err != nil {
			log.Fatal(err)
		}
		history, _ = json.Marshal(res.Messages)
	}
	fmt.Println(ce.Status().CompressionCount)
	saved := ce.State() // persist it; host.ContextEngineOptions{State: saved} resumes
	_ = saved
}

// An Anthropic Messages conversation compacts with its top-level system prompt
// beside the messages: the result's System is the prompt to send next, with the
// compaction note appended when the core added one.
func ExampleEngine_Compact_anthropic() {
	ctx := context.Background()
	eng, err := host.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	messages := json.RawMessage(`[{"role":"user","content":[{"type":"text","text":"Fix the parser."}]}]`)
	res, err := eng.Compact(ctx, messages, json.RawMessage(`{"model":{"context_length":200000}}`), nil,
		host.CompactOptions{Format: host.FormatAnthropic, System: json.RawMessage(`"You are a coding agent."`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Done, len(res.System) > 0)
	// Prints: true true (TestCompactFormatAndSystem checks this flow against the
	// native ops).
}

// CacheApply places Anthropic cache_control breakpoints; the result says where.
func ExampleEngine_CacheApply() {
	ctx := context.Background()
	eng, err := host.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	messages := json.RawMessage(`[{"role":"user","content":"Fix the parser."}]`)
	res, err := eng.CacheApply(ctx, messages, host.CacheApplyOptions{Layout: core.LayoutAnthropic,
		System: json.RawMessage(`"You are a coding agent."`), TTL: core.CacheTTL1h})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Markers, res.SystemMarked, res.Marked)
	// Prints: 2 true [0] (TestTypedCacheMethods checks these results against the
	// native op).
}
