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
		summary: "print the provider-native compaction decision for a config and route: native [--config FILE] [--model NAME] [--context-length N] [--provider NAME] [--base-url URL] [--api-mode MODE] [--session FILE] [--tokens N] [--manual] [--json]",
		run:     runNative,
	}
}

// runNative prints native.policy's decision for the config (--config, with
// --model and --context-length over it) and the route (--provider, else the
// config's model.provider, --base-url, --api-mode): a few readable lines, or with
// --json the op's result as it is.
func runNative(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("native", stderr,
		"usage: ctxcompact native [--config FILE] [--model NAME] [--context-length N] [--provider NAME] [--base-url URL] [--api-mode MODE] [--session FILE] [--tokens N] [--manual] [--json]",
		"Prints what the next request to the route carries for provider-native compaction (OpenAI's",
		"context_management, an Anthropic compaction edit or beta, or nothing), why, and who starts a",
		"Codex app-server compaction: the native.policy op (docs/OPS.md).")
	configFile := fs.String("config", "", "a JSON file with the config object (compression, model, ...); - reads stdin")
	model := fs.String("model", "", "model name (overrides config.model.name)")
	contextLength := fs.Int("context-length", 0, "the model's context window in tokens, > 0 (default: config, else 200000)")
	provider := fs.String("provider", "", "the provider (openai, openai-codex, anthropic, ...; default: config.model.provider)")
	baseURL := fs.String("base-url", "", "the base URL requests go to (https://api.openai.com/v1, https://chatgpt.com/backend-api/codex, https://api.anthropic.com, ...)")
	apiMode := fs.String("api-mode", "", "the API mode: chat_completions, codex_responses, anthropic_messages or codex_app_server")
	sessionFile := fs.String("session", "", "a JSON file with the native session a host kept (default: a fresh one); - reads stdin")
	tokens := fs.Int("tokens", 0, "the prompt's current size in tokens, >= 0, for who starts compaction")
	manual := fs.Bool("manual", false, "the user asked to compact now")
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
	if *configFile == "-" && *sessionFile == "-" {
		return fmt.Errorf("ctxcompact native: --config and --session cannot both read stdin")
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
	p, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("ctxcompact native: %w", err)
	}
	res, err := opResult(nativeCaller, "native.policy", p)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := fmt.Fprintln(stdout, res.Raw)
		return err
	}
	var d core.NativeDecision
	if err := json.Unmarshal([]byte(res.Raw), &d); err != nil {
		return fmt.Errorf("ctxcompact native: %w", err)
	}
	_, err = io.WriteString(stdout, describeDecision(d, res))
	return err
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
