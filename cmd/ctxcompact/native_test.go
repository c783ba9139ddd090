package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

func requireNativeOps(t *testing.T) {
	t.Helper()
	if !slices.Contains(core.Ops(), "native.policy") {
		t.Fatal("core has no native.policy op")
	}
}

// thresholdTokens is threshold.resolve's threshold for cfg.
func thresholdTokens(t *testing.T, cfg string) int {
	t.Helper()
	res, err := opResult(nativeCaller, "threshold.resolve", []byte(`{"config":`+cfg+`}`))
	if err != nil {
		t.Fatal(err)
	}
	return int(res.Get("threshold_tokens").Int())
}

// TestNativeCommand: the decision for the OpenAI, Anthropic and app-server
// routes, in text and as JSON, with a session and the flags over a config file.
func TestNativeCommand(t *testing.T) {
	requireNativeOps(t)
	const cfg = `{"model":{"name":"gpt-5.6","context_length":200000,"provider":"openai"},"compression":{"codex_responses_native":true}}`
	file := cliTempFile(t, "config.json", cfg)
	n := min(200000, thresholdTokens(t, cfg)-8192)

	code, out, errOut := cliRun(t, "", "native", "--config", file, "--base-url", "https://api.openai.com/v1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	if want := fmt.Sprintf("openai_compaction: sent (compact_threshold %s)", groupDigits(int64(n))); lines[0] != want {
		t.Fatalf("first line %q, want %q\n%s", lines[0], want, out)
	}
	if !slices.Contains(lines, "route: openai") || !slices.Contains(lines, "compact_now: false") ||
		!strings.Contains(out, `body: {"context_management":[{"compact_threshold":`+fmt.Sprint(n)+`,"type":"compaction"}]}`) {
		t.Fatalf("the decision:\n%s", out)
	}
	// --json is the op's result, the same decision.
	code, out, errOut = cliRun(t, cfg, "native", "--config", "-", "--base-url", "https://api.openai.com/v1", "--json")
	if code != 0 || !gjson.Valid(out) || gjson.Get(out, "compact_threshold").Int() != int64(n) ||
		gjson.Get(out, "mechanism").Str != "openai_compaction" || !gjson.Get(out, "session").IsObject() {
		t.Fatalf("--json: exit %d %s %s", code, out, errOut)
	}
	// The flags override the file: another model is not eligible.
	code, out, _ = cliRun(t, "", "native", "--config", file, "--model", "gpt-4.1", "--base-url", "https://api.openai.com/v1")
	if code != 0 || !strings.HasPrefix(out, "openai_compaction: model_not_eligible\n") || !strings.Contains(out, "remove: context_management\n") {
		t.Fatalf("--model gpt-4.1:\n%s", out)
	}
	// A session that recorded a rejection.
	session := cliTempFile(t, "session.json", `{"v":1,"route":"openai","disabled":["openai_compaction"],"issuers":{},"app_server":{"pending":false,"compactions":0,"boundaries":[]},"notice_shown":""}`)
	code, out, errOut = cliRun(t, "", "native", "--config", file, "--base-url", "https://api.openai.com/v1", "--session", session)
	if code != 0 || !strings.HasPrefix(out, "openai_compaction: rejected\n") {
		t.Fatalf("--session with the field disabled: exit %d\n%s%s", code, out, errOut)
	}
	// Anthropic's threshold edit, with its beta.
	code, out, errOut = cliRun(t, `{"compression":{"anthropic_native":"threshold"}}`, "native", "--config", "-",
		"--model", "claude-opus-4-6", "--provider", "anthropic")
	if code != 0 || !strings.HasPrefix(out, "anthropic_threshold: sent") || !strings.Contains(out, "anthropic-beta: compact-2026-01-12\n") ||
		!strings.Contains(out, `"type":"compact_20260112"`) {
		t.Fatalf("anthropic threshold: exit %d\n%s%s", code, out, errOut)
	}
	// The app server in mode hermes: the host starts it past the threshold.
	const hermes = `{"model":{"name":"gpt-5.3-codex","context_length":32000},"compression":{"codex_app_server_auto":"hermes"}}`
	thr := thresholdTokens(t, hermes)
	for _, c := range []struct {
		tokens int
		want   string
	}{{thr - 1, "compact_now: false"}, {thr, "compact_now: true"}} {
		code, out, errOut = cliRun(t, hermes, "native", "--config", "-", "--api-mode", "codex_app_server", "--tokens", fmt.Sprint(c.tokens))
		if code != 0 || !strings.Contains(out, "app_server: mode hermes, initiator host\n") || !strings.Contains(out, c.want+"\n") ||
			!strings.Contains(out, "rewrite false") {
			t.Fatalf("hermes at %d of %d tokens: exit %d\n%s%s", c.tokens, thr, code, out, errOut)
		}
	}
	// Mode off: only --manual starts it.
	off := strings.Replace(hermes, "hermes", "off", 1)
	code, out, _ = cliRun(t, off, "native", "--config", "-", "--api-mode", "codex_app_server", "--tokens", fmt.Sprint(thr))
	code2, out2, _ := cliRun(t, off, "native", "--config", "-", "--api-mode", "codex_app_server", "--manual", "--json")
	if code != 0 || !strings.Contains(out, "compact_now: false\n") || code2 != 0 || !gjson.Get(out2, "compact_now").Bool() {
		t.Fatalf("mode off:\n%s\nwith --manual: %s", out, out2)
	}
}

// TestNativeCommandBody: with --body, native.prepare's body to send, what it
// trimmed, and the on-demand compaction request.
func TestNativeCommandBody(t *testing.T) {
	requireNativeOps(t)
	const cfg = `{"model":{"name":"gpt-5.6","context_length":200000,"provider":"openai"},"compression":{"codex_responses_native":true}}`
	session := cliTempFile(t, "session.json", `{"v":1,"route":"codex","disabled":[],"issuers":{"cmp_9":"codex"},"app_server":{"pending":false,"compactions":0,"boundaries":[]},"notice_shown":""}`)
	body := `{"model":"gpt-5.6","input":[{"role":"user","content":"hi"},{"type":"compaction","id":"cmp_9","encrypted_content":"x"},{"role":"user","content":"more"}]}`
	code, out, errOut := cliRun(t, body, "native", "--config", cliTempFile(t, "c.json", cfg), "--session", session, "--body", "-")
	if code != 0 || !strings.HasPrefix(out, "openai_compaction: sent") || !strings.Contains(out, "drop items issued by: codex\n") ||
		!strings.Contains(out, "trimmed from input: 1 other_issuer\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	sent := out[strings.Index(out, "body to send: ")+len("body to send: "):]
	sent = sent[:strings.IndexByte(sent, '\n')]
	if !gjson.Valid(sent) || gjson.Get(sent, "input.#").Int() != 2 || strings.Contains(sent, "cmp_9") || !gjson.Get(sent, "context_management").Exists() {
		t.Fatalf("body to send: %s", sent)
	}
	// Anthropic on demand, due now: the compaction request's body.
	code, out, errOut = cliRun(t, `{"model":"claude-opus-4-7","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "native",
		"--model", "claude-opus-4-7", "--provider", "anthropic", "--manual", "--body", "-", "--config", cliTempFile(t, "a.json", `{"compression":{"anthropic_native":"on_demand"}}`))
	if code != 0 || !strings.Contains(out, `compaction request body: {"model":"claude-opus-4-7","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"compaction":{"type":"summarize"}}`) {
		t.Fatalf("on demand: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = cliRun(t, body, "native", "--body", "-", "--json")
	if code != 0 || !gjson.Get(out, "decision.session").IsObject() || !gjson.Get(out, "body").IsObject() {
		t.Fatalf("--body --json: %s", out)
	}
}

// TestNativeCommandErrors: usage errors and a config the core rejects.
func TestNativeCommandErrors(t *testing.T) {
	requireNativeOps(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"native", "extra.json"}, "no arguments expected"},
		{[]string{"native", "--context-length", "0"}, "--context-length must be a positive"},
		{[]string{"native", "--tokens", "-5"}, "--tokens must not be negative"},
		{[]string{"native", "--config", "-", "--session", "-"}, "only one of --config, --session and --body can read stdin"},
		{[]string{"native", "--body", "-"}, "[invalid_request]"},
		{[]string{"native", "--config", "-"}, "[invalid_config]"},
		{[]string{"native", "--session", "-"}, "[invalid_"},
	} {
		stdin := `{"compression":{"codex_app_server_auto":"sometimes"}}`
		switch c.args[1] {
		case "--session":
			stdin = `{"v":99}`
		case "--body":
			stdin = `[1]`
		}
		code, out, errOut := cliRun(t, stdin, c.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", c.args, code, out, errOut, c.want)
		}
	}
}
