package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/sjson"

	"github.com/ctxcompact/ctxcompact/core"
)

func init() {
	commands["compact"] = command{
		summary: "compact a conversation file (always, unless --if-needed): compact FILE [--format NAME] [--if-needed] [--context-length N] [--model NAME] [--config FILE] [--wasm] [--summarizer-url URL [--summarizer-api openai|openai-responses|anthropic]]",
		run:     runCompact,
	}
}

// runCompact compacts FILE, by default even when it is under the threshold (with
// --if-needed only when its estimate reaches it), with the built-in deterministic
// summarizer (no network) or, with --summarizer-url, an LLM API (--summarizer-api:
// OpenAI chat completions, the default, OpenAI Responses or Anthropic Messages,
// through the host package's ready summarizers), and prints one JSON object {"messages": [...], "system"?: ..., "report": {...},
// "archived": [...]} to stdout and a short human report to stderr. "system" is the
// Anthropic top-level system prompt of FILE, with the compaction note when one was
// added. This output is a stable interface.
func runCompact(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("compact", stderr,
		"usage: ctxcompact compact FILE [--format NAME] [--if-needed] [--context-length N] [--model NAME] [--config FILE] [--focus TEXT] [--instructions TEXT] [--pin INDEX|CALL_ID]... [--range FROM:TO] [--wasm [--no-cache]] [--summarizer-url URL [--summarizer-api API] [--summarizer-model NAME] [--summarizer-timeout D]]",
		"FILE holds {\"messages\": [...], \"system\"?: ..., \"config\"?: {...}} or a bare array; - reads stdin.",
		"compact always compacts (force), even under the threshold; --if-needed compacts only when the",
		"estimate reaches the threshold, as the op's trigger does, and otherwise prints FILE's messages unchanged.")
	ifNeeded := fs.Bool("if-needed", false, "compact only when the estimated tokens reach the threshold (default: always compact)")
	contextLength := fs.Int("context-length", 0, "the model's context window in tokens, > 0 (default: config, else 200000)")
	model := fs.String("model", "", "model name, for per-model thresholds and the auto encoding")
	configFile := fs.String("config", "", "a JSON file with the config object (compression, model, tokens, prompt_caching); - reads stdin")
	focus := fs.String("focus", "", "what to keep in detail (at most 1,000 bytes): the summarizer is asked for it, the built-in summary and the facts index put what matches it first")
	var pins []any
	fs.Func("pin", "keep a message verbatim, never summarized or pruned: its index in FILE's messages, or a tool call id (the message making that call, with its results); repeatable, or comma-separated", func(v string) error {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p == "" {
				return errors.New("an empty pin")
			}
			if i, err := strconv.Atoi(p); err == nil {
				pins = append(pins, i)
			} else {
				pins = append(pins, p)
			}
		}
		return nil
	})
	span := fs.String("range", "", "summarize exactly the messages FROM to TO-1 (input indexes, FROM:TO), whatever the threshold; it must not split a tool group")
	instructions := fs.String("instructions", "", "standing guidance for the summary, sets config compression.instructions (at most 8,000 bytes)")
	useWasm := fs.Bool("wasm", false, "run the embedded WebAssembly module on wazero instead of the native core (same output)")
	noCache := fs.Bool("no-cache", false, "with --wasm, compile the module without the on-disk compilation cache")
	endpoint := fs.String("summarizer-url", "", "the base URL (http or https) of an LLM API to write the summary (https://api.openai.com/v1, any OpenAI-compatible server, https://api.anthropic.com); key from CTXCOMPACT_API_KEY, else OPENAI_API_KEY or ANTHROPIC_API_KEY (default: the built-in summarizer, no network)")
	endpointAPI := fs.String("summarizer-api", apiOpenAI, "the API at --summarizer-url: openai (POST URL/chat/completions), openai-responses (POST URL/responses) or anthropic (POST URL/v1/messages)")
	endpointModel := fs.String("summarizer-model", "", "the model to ask at --summarizer-url (default gpt-4.1-mini, or claude-haiku-4-5 with --summarizer-api anthropic)")
	format := formatFlag(fs)
	timeout := fs.Duration("summarizer-timeout", 120*time.Second, "how long to wait for --summarizer-url, > 0; then the extractive summary is used")
	file, err := fileArg(fs, args)
	if err != nil {
		return err
	}
	if isSet(fs, "context-length") && *contextLength <= 0 {
		return fmt.Errorf("ctxcompact compact: --context-length must be a positive number of tokens, got %d", *contextLength)
	}
	if *timeout <= 0 {
		return fmt.Errorf("ctxcompact compact: --summarizer-timeout must be positive, got %v", *timeout)
	}
	if *endpoint != "" {
		if u, err := url.Parse(*endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("ctxcompact compact: --summarizer-url must be an http or https URL such as https://api.openai.com/v1, got %q", *endpoint)
		}
	} else {
		for _, name := range []string{"summarizer-api", "summarizer-model", "summarizer-timeout"} {
			if isSet(fs, name) {
				fmt.Fprintf(stderr, "ctxcompact: --%s has no effect without --summarizer-url: the built-in summarizer writes the summary\n", name)
			}
		}
	}
	if *endpointModel == "" {
		*endpointModel = defaultSummarizerModel(*endpointAPI)
	}
	summarize, err := endpointSummarizer(*endpointAPI, *endpoint, *endpointModel)
	if err != nil {
		return err
	}
	conv, err := readConversation(file, stdin, *format)
	if err != nil {
		return err
	}

	cfg, err := compactConfig("compact", conv.config, *configFile, stdin, *contextLength, *model)
	if err != nil {
		return err
	}
	if *instructions != "" {
		if cfg, err = sjson.SetBytes(cfg, "compression.instructions", *instructions); err != nil {
			return fmt.Errorf("ctxcompact compact: --instructions: %w", err)
		}
	}
	summarizer := "builtin"
	if *endpoint != "" {
		summarizer = "host"
	}
	params := compactParams(!*ifNeeded, summarizer, cfg, conv.format, conv.system, conv.messages)
	if *focus != "" {
		params = withParam(params, "focus", appendJSONString(nil, *focus))
	}
	if len(pins) > 0 {
		b, _ := json.Marshal(pins) // ints and strings
		params = withParam(params, "pins", b)
	}
	if *span != "" {
		from, to, ok := strings.Cut(*span, ":")
		i, err1 := strconv.Atoi(from)
		j, err2 := strconv.Atoi(to)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("ctxcompact compact: --range must be FROM:TO (input indexes), got %q", *span)
		}
		params = withParam(params, "range", []byte(fmt.Sprintf(`{"from":%d,"to":%d}`, i, j)))
	}
	call := callerFor(*useWasm, !*noCache, stderr)
	res, err := opResult(call, "compact.begin", params)
	if err != nil {
		return err
	}
	// compact.begin left a summary to write: ask the endpoint, then finish (its
	// failure: the fallback summary).
	asked := !res.Get("done").Bool()
	if asked {
		var req core.SummaryRequest
		if err := json.Unmarshal([]byte(res.Get("summary_request").Raw), &req); err != nil {
			return fmt.Errorf("ctxcompact compact: %w", err)
		}
		fmt.Fprintf(stderr, "ctxcompact: asking %s (%s, %s) to summarize messages %d–%d\n", *endpoint, *endpointAPI, *endpointModel, req.Middle.From, req.Middle.To-1)
		outcome := map[string]any{"state": res.Get("state").Str}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		summary, serr := summarize(ctx, req)
		timedOut := ctx.Err() != nil
		cancel()
		if serr != nil {
			msg := serr.Error()
			if timedOut {
				msg = fmt.Sprintf("ctxcompact: %s did not answer within --summarizer-timeout %v (%v)", *endpoint, *timeout, serr)
			}
			outcome["error"] = map[string]string{"code": failureCode(serr), "message": msg}
		} else {
			outcome["summary"] = summary // empty: the core falls back and says so
		}
		extra, _ := json.Marshal(outcome)
		finish := append(append([]byte{}, extra[:len(extra)-1]...), ',')
		finish = append(finish, params[1:]...)
		if res, err = opResult(call, "compact.finish", finish); err != nil {
			return err
		}
	}

	out := make([]byte, 0, len(res.Raw)+64)
	out = append(append(append(out, `{"`...), conv.listKey...), `":`...)
	out = append(out, res.Get("messages").Raw...)
	if sys := res.Get("system"); sys.Exists() {
		out = append(append(append(out, `,"`...), conv.systemKey...), `":`...)
		out = append(out, sys.Raw...)
	}
	out = append(out, `,"report":`...)
	out = append(out, res.Get("report").Raw...)
	out = append(out, `,"archived":`...)
	out = append(out, res.Get("archived").Raw...)
	out = append(out, "}\n"...)
	if _, err := stdout.Write(out); err != nil {
		return err
	}

	r := res.Get("report")
	if note := formatNote(conv); note != "" {
		fmt.Fprintf(stderr, "ctxcompact: %s\n", note)
	}
	if *endpoint != "" && !asked {
		fmt.Fprintf(stderr, "ctxcompact: --summarizer-url was not asked: nothing was summarized (%s)\n", r.Get("reason").Str)
	}
	if !r.Get("compacted").Bool() && *ifNeeded && r.Get("reason").Str != "nothing_to_compact" {
		fmt.Fprintf(stderr, "ctxcompact: no compaction needed (%s): an estimated %s tokens against a threshold of %s; the messages are unchanged\n",
			r.Get("reason").Str, groupDigits(r.Get("tokens_before").Int()), groupDigits(r.Get("threshold_tokens").Int()))
		return nil
	}
	fmt.Fprintf(stderr, "ctxcompact: %d → %d messages, %s → %s tokens (estimated; threshold %s, %s)\n",
		r.Get("messages_before").Int(), r.Get("messages_after").Int(),
		groupDigits(r.Get("tokens_before").Int()), groupDigits(r.Get("tokens_after").Int()),
		groupDigits(r.Get("threshold_tokens").Int()), map[bool]string{true: "fits", false: "still above it"}[r.Get("fits").Bool()])
	if s := r.Get("summarized"); s.IsObject() {
		fmt.Fprintf(stderr, "  summarized messages %d–%d (summary as %s, %s tokens); pruned %d tool outputs; prompt cache breaks at message %d\n",
			s.Get("from").Int(), s.Get("to").Int()-1, r.Get("summary_role").Str, groupDigits(r.Get("summary_tokens").Int()),
			len(r.Get("pruned").Array()), r.Get("first_changed_index").Int())
	} else if why, ok := notCompactedBecause[r.Get("reason").Str]; ok && !r.Get("compacted").Bool() {
		fmt.Fprintf(stderr, "  nothing summarized or pruned (%s): %s\n", r.Get("reason").Str, why)
	} else {
		fmt.Fprintf(stderr, "  nothing summarized (%s); pruned %d tool outputs\n", r.Get("reason").Str, len(r.Get("pruned").Array()))
	}
	writeRepairs(stderr, r.Get("orphans_removed"), r.Get("stubs_added"), r.Get("repaired"))
	if r.Get("fallback_used").Bool() {
		code := ""
		if c := r.Get("fallback_code").Str; c != "" {
			code = " [" + c + "]"
		}
		fmt.Fprintf(stderr, "ctxcompact: the summarizer failed%s, so the summary is the extractive fallback: %s\n", code, r.Get("fallback_reason").Str)
	}
	return nil
}

// compactConfig is the config compact sends the core: the file's own config (raw
// JSON, "" for none), replaced by configFile when given ("-": stdin), with
// --context-length and --model set over it. name is the command, for error messages.
func compactConfig(name, fileConfig, configFile string, stdin io.Reader, contextLength int, model string) ([]byte, error) {
	cfg := []byte(fileConfig)
	if len(cfg) == 0 {
		cfg = []byte("{}")
	}
	var err error
	if configFile != "" {
		if cfg, err = readJSON(configFile, stdin); err != nil {
			return nil, err
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

// compactParams are the params of compact.begin that compact sends: force, the
// summarizer "builtin" or "host", cfg, the format ("" detected), the top-level
// system prompt (raw JSON, "" for none) and the raw messages array.
func compactParams(force bool, summarizer string, cfg []byte, format string, system, messages string) []byte {
	params := make([]byte, 0, len(messages)+len(cfg)+len(system)+64)
	params = append(params, `{"force":`+strconv.FormatBool(force)+`,"summarizer":"`+summarizer+`","config":`...)
	params = append(params, bytes.TrimSpace(cfg)...)
	if format != "" {
		params = appendJSONString(append(params, `,"format":`...), format)
	}
	if system != "" { // the core reads it as the format's top-level system prompt
		params = append(params, `,"system":`...)
		params = append(params, system...)
	}
	params = append(params, `,"messages":`...)
	params = append(params, messages...)
	return append(params, '}')
}

// withParam returns params (a JSON object of at least one field, compactParams')
// with key set to the raw JSON value first.
func withParam(params []byte, key string, value []byte) []byte {
	out := appendJSONString(append(make([]byte, 0, len(params)+len(key)+len(value)+4), '{'), key)
	out = append(append(append(out, ':'), value...), ',')
	return append(out, params[1:]...)
}

// failureCode classifies a summarizer error for the report's fallback_code: a
// timeout or anything else.
func failureCode(err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return "timeout"
	}
	return "error"
}

// isSet tells whether flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
