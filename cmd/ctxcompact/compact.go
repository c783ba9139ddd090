package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tidwall/sjson"

	"github.com/ctxcompact/ctxcompact/core"
)

func init() {
	commands["compact"] = command{
		summary: "compact a conversation file: compact FILE [--context-length N] [--model NAME] [--config FILE] [--wasm] [--summarizer-url URL]",
		run:     runCompact,
	}
}

// runCompact compacts FILE even when it is under the threshold, with the built-in
// deterministic summarizer (no network) or, with --summarizer-url, an
// OpenAI-compatible endpoint, and prints one JSON object
// {"messages": [...], "report": {...}, "archived": [...]} to stdout and a short
// human report to stderr. This output is a stable interface.
func runCompact(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("compact", stderr,
		"usage: ctxcompact compact FILE [--context-length N] [--model NAME] [--config FILE] [--wasm] [--summarizer-url URL [--summarizer-model NAME]]",
		"FILE holds {\"messages\": [...]} or a bare array; - reads stdin.")
	contextLength := fs.Int("context-length", 0, "the model's context window in tokens (default: config, else 200000)")
	model := fs.String("model", "", "model name, for per-model thresholds and the auto encoding")
	configFile := fs.String("config", "", "a JSON file with the config object (compression, model, tokens, prompt_caching)")
	useWasm := fs.Bool("wasm", false, "run the embedded WebAssembly module on wazero instead of the native core (same output)")
	endpoint := fs.String("summarizer-url", "", "an OpenAI-compatible API base URL (e.g. https://api.openai.com/v1) to write the summary; key from CTXCOMPACT_API_KEY or OPENAI_API_KEY (default: the built-in summarizer, no network)")
	endpointModel := fs.String("summarizer-model", "gpt-4.1-mini", "the model to ask at --summarizer-url")
	timeout := fs.Duration("summarizer-timeout", 120*time.Second, "how long to wait for --summarizer-url")
	file, err := fileArg(fs, args)
	if err != nil {
		return err
	}
	conv, err := readConversation(file, stdin)
	if err != nil {
		return err
	}

	cfg, err := compactConfig("compact", conv.config, *configFile, *contextLength, *model)
	if err != nil {
		return err
	}
	summarizer := "builtin"
	if *endpoint != "" {
		summarizer = "host"
	}
	params := compactParams(summarizer, cfg, conv.messages)
	call := callerFor(*useWasm)
	res, err := opResult(call, "compact.begin", params)
	if err != nil {
		return err
	}
	if !res.Get("done").Bool() { // ask the endpoint, then finish (its failure: the fallback summary)
		var req core.SummaryRequest
		if err := json.Unmarshal([]byte(res.Get("summary_request").Raw), &req); err != nil {
			return fmt.Errorf("ctxcompact compact: %w", err)
		}
		fmt.Fprintf(stderr, "ctxcompact: asking %s (%s) to summarize messages %d–%d\n", *endpoint, *endpointModel, req.Middle.From, req.Middle.To-1)
		outcome := map[string]any{"state": res.Get("state").Str}
		summary, serr := newEndpointSummarizer(*endpoint, *endpointModel, *timeout).summarize(context.Background(), req)
		if serr != nil {
			outcome["error"] = serr.Error()
		} else {
			outcome["summary"] = summary
		}
		extra, _ := json.Marshal(outcome)
		finish := append(append([]byte{}, extra[:len(extra)-1]...), ',')
		finish = append(finish, params[1:]...)
		if res, err = opResult(call, "compact.finish", finish); err != nil {
			return err
		}
	}

	out := make([]byte, 0, len(res.Raw)+64)
	out = append(out, `{"messages":`...)
	out = append(out, res.Get("messages").Raw...)
	out = append(out, `,"report":`...)
	out = append(out, res.Get("report").Raw...)
	out = append(out, `,"archived":`...)
	out = append(out, res.Get("archived").Raw...)
	out = append(out, "}\n"...)
	if _, err := stdout.Write(out); err != nil {
		return err
	}

	r := res.Get("report")
	fmt.Fprintf(stderr, "ctxcompact: %d → %d messages, %s → %s tokens (estimated; threshold %s, %s)\n",
		r.Get("messages_before").Int(), r.Get("messages_after").Int(),
		groupDigits(r.Get("tokens_before").Int()), groupDigits(r.Get("tokens_after").Int()),
		groupDigits(r.Get("threshold_tokens").Int()), map[bool]string{true: "fits", false: "still above it"}[r.Get("fits").Bool()])
	if s := r.Get("summarized"); s.IsObject() {
		fmt.Fprintf(stderr, "  summarized messages %d–%d (summary as %s, %s tokens); pruned %d tool outputs; prompt cache breaks at message %d\n",
			s.Get("from").Int(), s.Get("to").Int()-1, r.Get("summary_role").Str, groupDigits(r.Get("summary_tokens").Int()),
			len(r.Get("pruned").Array()), r.Get("first_changed_index").Int())
	} else {
		fmt.Fprintf(stderr, "  nothing summarized (%s); pruned %d tool outputs\n", r.Get("reason").Str, len(r.Get("pruned").Array()))
	}
	return nil
}

// compactConfig is the config compact sends the core: the file's own config (raw
// JSON, "" for none), replaced by configFile when given, with --context-length and
// --model set over it. name is the command, for error messages.
func compactConfig(name, fileConfig, configFile string, contextLength int, model string) ([]byte, error) {
	cfg := []byte(fileConfig)
	if len(cfg) == 0 {
		cfg = []byte("{}")
	}
	var err error
	if configFile != "" {
		if cfg, err = os.ReadFile(configFile); err != nil {
			return nil, fmt.Errorf("ctxcompact %s: %w", name, err)
		}
		if !json.Valid(cfg) {
			return nil, fmt.Errorf("ctxcompact %s: %s is not valid JSON", name, configFile)
		}
	}
	if contextLength != 0 {
		if cfg, err = sjson.SetBytes(cfg, "model.context_length", contextLength); err != nil {
			return nil, fmt.Errorf("ctxcompact %s: --context-length: %w", name, err)
		}
	}
	if model != "" {
		if cfg, err = sjson.SetBytes(cfg, "model.name", model); err != nil {
			return nil, fmt.Errorf("ctxcompact %s: --model: %w", name, err)
		}
	}
	return cfg, nil
}

// compactParams are the params of compact.begin that compact sends: forced, with
// summarizer "builtin" or "host", cfg and the raw messages array.
func compactParams(summarizer string, cfg []byte, messages string) []byte {
	params := make([]byte, 0, len(messages)+len(cfg)+64)
	params = append(params, `{"force":true,"summarizer":"`+summarizer+`","config":`...)
	params = append(params, bytes.TrimSpace(cfg)...)
	params = append(params, `,"messages":`...)
	params = append(params, messages...)
	return append(params, '}')
}
