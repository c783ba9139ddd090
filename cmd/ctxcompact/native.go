package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

func init() {
	commands["native"] = command{
		summary: "print the provider-native compaction decision for a config and route: native [--config FILE] [--model NAME] [--context-length N] [--provider NAME] [--base-url URL] [--api-mode MODE] [--session FILE] [--tokens N] [--manual] [--body FILE] [--json]",
		run:     runNative,
	}
}

// runNative prints native.policy's decision for the config (--config, with
// --model and --context-length over it) and the route (--provider, else the
// config's model.provider, --base-url, --api-mode): a few readable lines, or with
// --json the op's result as it is. With --body it runs native.prepare on that
// request body instead and prints the body to send too.
func runNative(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("native", stderr,
		"usage: ctxcompact native [--config FILE] [--model NAME] [--context-length N] [--provider NAME] [--base-url URL] [--api-mode MODE] [--session FILE] [--tokens N] [--manual] [--body FILE] [--json]",
		"Prints what the next request to the route carries for provider-native compaction (OpenAI's",
		"context_management, an Anthropic compaction edit or beta, or nothing), why, and who starts a",
		"Codex app-server compaction: the native.policy op (docs/OPS.md). With --body, native.prepare",
		"applies it to that request body and the body to send is printed too.")
	configFile := fs.String("config", "", "a JSON file with the config object (compression, model, ...); - reads stdin")
	model := fs.String("model", "", "model name (overrides config.model.name)")
	contextLength := fs.Int("context-length", 0, "the model's context window in tokens, > 0 (default: config, else 200000)")
	provider := fs.String("provider", "", "the provider (openai, openai-codex, anthropic, ...; default: config.model.provider)")
	baseURL := fs.String("base-url", "", "the base URL requests go to (https://api.openai.com/v1, https://chatgpt.com/backend-api/codex, https://api.anthropic.com, ...)")
	apiMode := fs.String("api-mode", "", "the API mode: chat_completions, codex_responses, anthropic_messages or codex_app_server")
	sessionFile := fs.String("session", "", "a JSON file with the native session a host kept (default: a fresh one); - reads stdin")
	tokens := fs.Int("tokens", 0, "the prompt's current size in tokens, >= 0, for who starts compaction")
	manual := fs.Bool("manual", false, "the user asked to compact now")
	bodyFile := fs.String("body", "", "a JSON file with the request body about to be sent (Responses with input, Messages with messages): run native.prepare on it; - reads stdin")
	asJSON := fs.Bool("json", false, "print the op's result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("ctxcompact native: no arguments expected, got %q", fs.Args())
	}
	if isSet(fs, "context-length") && *contextLength <= 0 {
		return fmt.Errorf("ctxcompact native: --context-length must be a positive number of tokens, got %d", *contextLength)
	}
	if *tokens < 0 {
		return fmt.Errorf("ctxcompact native: --tokens must not be negative, got %d", *tokens)
	}
	stdins := 0
	for _, f := range []string{*configFile, *sessionFile, *bodyFile} {
		if f == "-" {
			stdins++
		}
	}
	if stdins > 1 {
		return fmt.Errorf("ctxcompact native: only one of --config, --session and --body can read stdin")
	}
	cfg, err := compactConfig("native", "", *configFile, stdin, *contextLength, *model)
	if err != nil {
		return err
	}
	route := core.NativeRoute{Provider: *provider, BaseURL: *baseURL, APIMode: *apiMode}
	if route.Provider == "" {
		var c struct {
			Model struct {
				Provider string `json:"provider"`
			} `json:"model"`
		}
		_ = json.Unmarshal(cfg, &c) // a config that is not an object: the op says so
		route.Provider = c.Model.Provider
	}
	params := map[string]any{"config": json.RawMessage(bytes.TrimSpace(cfg)), "route": route}
	if *sessionFile != "" {
		s, err := readJSON(*sessionFile, stdin)
		if err != nil {
			return err
		}
		params["session"] = json.RawMessage(s)
	}
	if *tokens > 0 {
		params["tokens"] = *tokens
	}
	if *manual {
		params["manual"] = true
	}
	op := "native.policy"
	if *bodyFile != "" {
		b, err := readJSON(*bodyFile, stdin)
		if err != nil {
			return err
		}
		op, params["body"] = "native.prepare", json.RawMessage(b)
	}
	p, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("ctxcompact native: %w", err)
	}
	res, err := opResult(nativeCaller, op, p)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := fmt.Fprintln(stdout, res.Raw)
		return err
	}
	decision := res
	if op == "native.prepare" {
		decision = res.Get("decision")
	}
	var d core.NativeDecision
	if err := json.Unmarshal([]byte(decision.Raw), &d); err != nil {
		return fmt.Errorf("ctxcompact native: %w", err)
	}
	text := describeDecision(d, decision)
	if op == "native.prepare" {
		text += describePrepared(res)
	}
	_, err = io.WriteString(stdout, text)
	return err
}

// describePrepared is the readable form of what native.prepare adds to a
// decision: what it trimmed from the body's list, the body to send, and the
// on-demand compaction request's body when one is due.
func describePrepared(res gjson.Result) string {
	var b strings.Builder
	t := res.Get("trimmed")
	if n := t.Get("dropped.#").Int() + t.Get("rewritten.#").Int(); n > 0 {
		var what []string
		for _, e := range append(t.Get("dropped").Array(), t.Get("rewritten").Array()...) {
			what = append(what, fmt.Sprintf("%d %s", e.Get("index").Int(), e.Get("reason").Str))
		}
		fmt.Fprintf(&b, "trimmed from %s: %s\n", t.Get("list").Str, strings.Join(what, ", "))
	}
	fmt.Fprintf(&b, "body to send: %s\n", res.Get("body").Raw)
	if cb := res.Get("compaction_body"); cb.IsObject() {
		fmt.Fprintf(&b, "compaction request body: %s\n", cb.Raw)
	}
	return b.String()
}

// describeDecision is the readable form of a decision (raw: the op's result as
// JSON, for its body's bytes): the mechanism and its
// reason first (openai_compaction: sent (compact_threshold 191,808)), then what
// the request carries and what the host does, one line each, only what applies.
func describeDecision(d core.NativeDecision, raw gjson.Result) string {
	var b strings.Builder
	b.WriteString(d.Mechanism + ": " + d.Reason)
	if d.CompactThreshold > 0 {
		fmt.Fprintf(&b, " (compact_threshold %s)", groupDigits(int64(d.CompactThreshold)))
	}
	fmt.Fprintf(&b, "\nroute: %s\n", d.Route)
	if len(d.Body) > 0 {
		fmt.Fprintf(&b, "body: %s\n", raw.Get("body").Raw) // in the core's key order
	}
	if len(d.Remove) > 0 {
		fmt.Fprintf(&b, "remove: %s\n", strings.Join(d.Remove, ", "))
	}
	if len(d.Betas) > 0 {
		fmt.Fprintf(&b, "anthropic-beta: %s\n", strings.Join(d.Betas, ","))
	}
	if a := d.AppServer; a != nil {
		fmt.Fprintf(&b, "app_server: mode %s, initiator %s\n", a.Mode, a.Initiator)
	}
	fmt.Fprintf(&b, "compact_now: %v", d.CompactNow)
	if d.CompactionRequest != nil {
		fmt.Fprintf(&b, " (compaction request %s)", raw.Get("compaction_request").Raw)
	}
	b.WriteByte('\n')
	if len(d.DropIssuers) > 0 {
		fmt.Fprintf(&b, "drop items issued by: %s\n", strings.Join(d.DropIssuers, ", "))
	}
	fmt.Fprintf(&b, "local compressor: armed %v, rewrite %v, threshold %s\n", d.Local.Armed, d.Local.Rewrite,
		groupDigits(int64(d.Local.ThresholdTokens)))
	if n := d.Notice; n != nil {
		show := "already shown"
		if n.Show {
			show = "show it"
		}
		fmt.Fprintf(&b, "notice: %s: %s threshold raised from %v to %v (%s)\n", n.Kind, n.Model, n.From, n.To, show)
	}
	return b.String()
}
