// Command agent-loop is an agent loop with ctxcompact's ContextEngine, replayed
// against a loopback "model": it answers each request with the next assistant
// turn of a recorded trace and reports usage computed from the request, so the
// loop runs offline, in about the time it takes to compile the module.
//
//	go run ./examples/agent-loop/go [TRACE] [--window N]
//
// TRACE defaults to examples/astropy-12907.json, the window to 16000 tokens. The
// loop starts with the trace's messages up to its first user message; each turn
// sends the messages to the model (plain net/http, OpenAI chat completions),
// appends the answer and the recorded tool results and user turns that followed
// it, feeds the response's usage to the engine, and compacts when the engine says
// so, with host.OpenAISummarizer pointed at the same loopback. It prints a line
// per compaction and one at the end.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/host"
	"github.com/ctxcompact/ctxcompact/internal/loopback"
)

const (
	defaultTrace  = "examples/astropy-12907.json"
	defaultWindow = 16000
	agentModel    = "loopback-agent"
)

func main() {
	trace, window, err := parseArgs(os.Args[1:])
	if err == nil {
		_, err = runLoop(context.Background(), trace, window, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-loop:", err)
		os.Exit(1)
	}
}

// parseArgs reads [TRACE] [--window N], in either order.
func parseArgs(args []string) (string, int, error) {
	trace, window := defaultTrace, defaultWindow
	traceSet := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--window" || a == "-window":
			if i+1 == len(args) {
				return "", 0, errors.New("--window needs a number of tokens")
			}
			i++
			a = "--window=" + args[i]
			fallthrough
		case strings.HasPrefix(a, "--window=") || strings.HasPrefix(a, "-window="):
			n, err := strconv.Atoi(a[strings.Index(a, "=")+1:])
			if err != nil || n <= 0 {
				return "", 0, fmt.Errorf("--window must be a positive number of tokens, not %q", a[strings.Index(a, "=")+1:])
			}
			window = n
		case strings.HasPrefix(a, "-"):
			return "", 0, fmt.Errorf("unknown flag %s (usage: go run ./examples/agent-loop/go [TRACE] [--window N])", a)
		case traceSet:
			return "", 0, fmt.Errorf("one trace at a time, not %s and %s", trace, a)
		default:
			trace, traceSet = a, true
		}
	}
	return trace, window, nil
}

// loopResult is what a replay did, for the tests.
type loopResult struct {
	Turns, Compactions int
	// Summarizers are the reports' summarizer ("host" or "builtin"), and
	// Fallbacks their fallback_code ("" when the summary is the model's), one per
	// compaction.
	Summarizers, Fallbacks []string
	// Requests are every request the loopback model got.
	Requests []loopback.Request
}

// runLoop replays the trace at path with a window of window tokens, printing to out.
func runLoop(ctx context.Context, path string, window int, out io.Writer) (loopResult, error) {
	var res loopResult
	trace, err := loopback.LoadTrace(path)
	if err != nil {
		return res, err
	}
	model, err := loopback.Start(loopback.Options{Trace: trace})
	if err != nil {
		return res, err
	}
	defer model.Close()

	eng, err := host.New(ctx) // compiles the module: do it once per process
	if err != nil {
		return res, err
	}
	defer eng.Close(ctx)
	summarize, err := host.OpenAISummarizer(host.OpenAISummarizerOptions{
		BaseURL: model.OpenAIBaseURL(), APIKey: "loopback", Model: loopback.DefaultSummaryModel})
	if err != nil {
		return res, err
	}
	cfg, _ := json.Marshal(map[string]any{"model": map[string]any{"name": agentModel, "context_length": window}})
	engine, err := host.NewContextEngine(ctx, eng, cfg, host.ContextEngineOptions{Summarize: summarize, Timeout: time.Minute})
	if err != nil {
		return res, err
	}

	// The conversation starts with the trace up to its first user message; the
	// assistant turns are what the model will answer.
	recorded := trace.Messages
	start := 0
	for start < len(recorded) && gjson.GetBytes(recorded[start], "role").Str != "user" {
		start++
	}
	if start == len(recorded) {
		return res, fmt.Errorf("%s: no user message", path)
	}
	messages := append([]json.RawMessage(nil), recorded[:start+1]...)
	client := &http.Client{}
	for i := start + 1; i < len(recorded); i++ {
		if gjson.GetBytes(recorded[i], "role").Str != "assistant" {
			continue
		}
		answer, usage, err := chat(ctx, client, model.OpenAIBaseURL(), messages)
		if err != nil {
			return res, fmt.Errorf("turn %d: %w", res.Turns+1, err)
		}
		res.Turns++
		messages = append(messages, answer)
		// What followed the turn in the trace: tool results, user turns.
		for j := i + 1; j < len(recorded) && gjson.GetBytes(recorded[j], "role").Str != "assistant"; j++ {
			messages = append(messages, recorded[j])
		}
		if err := engine.UpdateFromResponse(ctx, usage); err != nil {
			return res, err
		}
		compress, err := engine.ShouldCompress(ctx, 0)
		if err != nil {
			return res, err
		}
		if !compress {
			continue
		}
		raw, _ := json.Marshal(messages)
		c, err := engine.Compress(ctx, raw, host.CompressOptions{})
		if err != nil {
			return res, err
		}
		r := c.Report
		res.Compactions++
		res.Summarizers = append(res.Summarizers, string(r.Summarizer))
		res.Fallbacks = append(res.Fallbacks, string(r.FallbackCode))
		fmt.Fprintf(out, "compaction %d at turn %d: %d -> %d messages, %d -> %d tokens (summarizer %s)\n",
			res.Compactions, res.Turns, r.MessagesBefore, r.MessagesAfter, r.TokensBefore, r.TokensAfter, r.Summarizer)
		if r.FallbackUsed {
			fmt.Fprintf(out, "  the summary is the extractive fallback [%s]: %s\n", r.FallbackCode, r.FallbackReason)
		}
		messages = c.Messages
	}
	res.Requests = model.Requests()
	fmt.Fprintf(out, "done: %d turns, %d compactions, %d model requests\n", res.Turns, res.Compactions, len(res.Requests))
	return res, nil
}

// chat sends messages to POST {base}/chat/completions and returns the answer's
// message and usage.
func chat(ctx context.Context, client *http.Client, base string, messages []json.RawMessage) (json.RawMessage, json.RawMessage, error) {
	body, err := json.Marshal(map[string]any{"model": agentModel, "messages": messages})
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, data)
	}
	msg := gjson.GetBytes(data, "choices.0.message")
	if !msg.IsObject() {
		return nil, nil, fmt.Errorf("not a chat completion: %.300s", data)
	}
	return json.RawMessage(msg.Raw), json.RawMessage(gjson.GetBytes(data, "usage").Raw), nil
}
