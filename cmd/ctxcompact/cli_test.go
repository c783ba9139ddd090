package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// longConversation is a system prompt (unless system: the caller sends its own) and
// 30 long user turns, about 3,400 tokens: a forced compaction summarizes its middle
// at an 8K window, whose threshold (6,000) it is under.
func longConversation(t *testing.T, system bool) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	if !system {
		msgs = append(msgs, map[string]any{"role": "system", "content": "s"})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "Refactor."}, map[string]any{"role": "assistant", "content": "OK."})
	for i := 0; i < 30; i++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("step %d %s", i, strings.Repeat("x", 400))},
			map[string]any{"role": "assistant", "content": fmt.Sprintf("done %d", i)})
	}
	return msgs
}

func jsonFile(t *testing.T, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return cliTempFile(t, name, string(b))
}

// TestInvalidJSONHasCodeAndPosition: every command that reads a file, stdin or a
// --config file names invalid JSON with invalid_json, the line, column and byte.
func TestInvalidJSONHasCodeAndPosition(t *testing.T) {
	bad := "[{\"role\": \"user\",\n  \"content\": \"x\"},,]"
	const where = "not valid JSON at line 2, column 19 (byte 37): invalid character ',' looking for beginning of value [invalid_json]"
	file := cliTempFile(t, "bad.json", bad)
	ok := cliTempFile(t, "ok.json", cliConversation)
	for _, args := range [][]string{
		{"compact", file}, {"tokens", file}, {"cache", file}, {"simulate", file},
		{"compact", ok, "--config", file},
	} {
		code, out, errOut := cliRun(t, "", args...)
		require.Equal(t, 1, code, "%v", args)
		require.Empty(t, out)
		require.Equal(t, "ctxcompact: "+file+": "+where+"\n", errOut, "%v", args)
	}
	for _, cmd := range []string{"compact", "tokens", "cache", "simulate"} {
		code, _, errOut := cliRun(t, bad, cmd, "-")
		require.Equal(t, 1, code)
		require.Equal(t, "ctxcompact: stdin: "+where+"\n", errOut, cmd)
	}
	// An empty file and trailing data are placed too.
	_, _, errOut := cliRun(t, "", "tokens", "-")
	require.Equal(t, "ctxcompact: stdin: not valid JSON at line 1, column 1 (byte 1): unexpected end of input [invalid_json]\n", errOut)
	_, _, errOut = cliRun(t, "[]\n[]", "tokens", "-")
	require.Contains(t, errOut, "at line 2, column 1 (byte 4): invalid character '[' after top-level value [invalid_json]")
	// call prints the core's envelope, byte for byte, and says where on stderr.
	code, out, errOut := cliRun(t, bad, "call")
	require.Equal(t, 0, code)
	require.Equal(t, string(core.Call([]byte(bad))), out)
	require.Equal(t, "ctxcompact: stdin: "+where+"\n", errOut)
	// A wrong shape has a code too.
	_, _, errOut = cliRun(t, `{"messages": 3}`, "compact", "-")
	require.Contains(t, errOut, "stdin must hold {\"messages\": [...]}, {\"input\": [...]}, {\"contents\": [...]} or an array of messages [invalid_request]")
}

// TestNumericFlagsAreChecked: 0 and negative values are errors naming the flag,
// never a silent default (the API rejects context_length 0).
func TestNumericFlagsAreChecked(t *testing.T) {
	file := cliTempFile(t, "ok.json", cliConversation)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compact", file, "--context-length", "0"}, "--context-length must be a positive number of tokens, got 0"},
		{[]string{"compact", file, "--context-length=-5"}, "--context-length must be a positive number of tokens, got -5"},
		{[]string{"compact", file, "--summarizer-timeout", "0s"}, "--summarizer-timeout must be positive"},
		{[]string{"tokens", file, "--calibration", "0"}, "--calibration must be a positive factor"},
		{[]string{"simulate", file, "--min-cacheable", "-2"}, "--min-cacheable must be 0 or more tokens, got -2"},
	} {
		code, out, errOut := cliRun(t, "", c.args...)
		require.Equal(t, 1, code, "%v", c.args)
		require.Empty(t, out)
		require.Contains(t, errOut, c.want, "%v", c.args)
	}
	// A positive window is used.
	code, out, errOut := cliRun(t, "", "compact", file, "--context-length", "1000", "--if-needed")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "750", gjson.Get(out, "report.threshold_tokens").Raw, out)
}

// TestCompactForcesUnlessIfNeeded: compact always compacts (and says so in its
// help); --if-needed leaves a conversation under the threshold unchanged and says
// that nothing was needed.
func TestCompactForcesUnlessIfNeeded(t *testing.T) {
	msgs := longConversation(t, false)
	file := jsonFile(t, "conv.json", msgs)

	code, out, errOut := cliRun(t, "", "compact", file, "--context-length", "8000")
	require.Equal(t, 0, code, errOut)
	require.True(t, gjson.Get(out, "report.compacted").Bool(), "forced under the threshold: %s", errOut)
	require.Less(t, gjson.Get(out, "report.tokens_before").Int(), gjson.Get(out, "report.threshold_tokens").Int())

	code, out, errOut = cliRun(t, "", "compact", file, "--if-needed", "--context-length", "8000")
	require.Equal(t, 0, code, errOut)
	require.False(t, gjson.Get(out, "report.compacted").Bool())
	require.Equal(t, "below_threshold", gjson.Get(out, "report.reason").Str)
	var back []map[string]any
	require.NoError(t, json.Unmarshal([]byte(gjson.Get(out, "messages").Raw), &back))
	require.Equal(t, len(msgs), len(back), "the messages come back unchanged")
	require.Contains(t, errOut, "no compaction needed (below_threshold)")
	require.Contains(t, errOut, "threshold of 6,000")

	// Over the threshold --if-needed compacts.
	code, out, errOut = cliRun(t, "", "compact", file, "--if-needed", "--context-length", "4000")
	require.Equal(t, 0, code, errOut)
	require.True(t, gjson.Get(out, "report.compacted").Bool(), errOut)

	_, help, _ := cliRun(t, "", "compact", "--help")
	require.Contains(t, help, "compact always compacts (force), even under the threshold")
	require.Contains(t, help, "-if-needed")
}

// TestTokensSaysItsEncodingAndChecksLikeCompact: tokens names the encoding it used
// (auto resolved) and rejects what compact rejects, with the same error.
func TestTokensSaysItsEncodingAndChecksLikeCompact(t *testing.T) {
	conv := cliTempFile(t, "conv.json", cookbook)
	code, out, errOut := cliRun(t, "", "tokens", conv, "--encoding", "auto", "--model", "gpt-4o")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "o200k_base", gjson.Get(out, "encoding").Str)
	require.Equal(t, "ctxcompact: 124 tokens over 6 messages, encoding o200k_base (auto, from model gpt-4o)\n", errOut)
	_, out, errOut = cliRun(t, "", "tokens", conv)
	require.Equal(t, "rough", gjson.Get(out, "encoding").Str)
	require.Contains(t, errOut, "encoding rough (the default)")

	for _, bad := range []string{
		`[{"role":"robot","content":"x"}]`,
		`[{"role":"user","content":5}]`,
		`[{"content":"x"}]`,
		`{"system":"s","messages":[{"role":"system","content":"x"}]}`,
		`{"system":5,"messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"user","content":"x"}],"config":{"compression":{"threshold":2}}}`,
	} {
		f := cliTempFile(t, "bad.json", bad)
		code, out, tokErr := cliRun(t, "", "tokens", f)
		require.Equal(t, 1, code, bad)
		require.Empty(t, out)
		_, _, compactErr := cliRun(t, "", "compact", f)
		require.NotEmpty(t, compactErr)
		require.Equal(t, compactErr, tokErr, "tokens must fail as compact does on %s", bad)
	}
}

// TestAnthropicSystemIsKept: a top-level system is sent to compact (and returned,
// with the compaction note), counted by tokens and kept by cache: nothing is lost.
func TestAnthropicSystemIsKept(t *testing.T) {
	system := []map[string]any{{"type": "text", "text": "You are the release agent."}}
	msgs := longConversation(t, true)
	file := jsonFile(t, "native.json", map[string]any{"system": system, "messages": msgs})

	code, out, errOut := cliRun(t, "", "compact", file, "--context-length", "4000")
	require.Equal(t, 0, code, errOut)
	res := gjson.Parse(out)
	require.True(t, res.Get("report.compacted").Bool())
	require.Contains(t, res.Get("system").Raw, "You are the release agent.", "the system comes back: %s", out)
	if res.Get("report.system_note_added").Bool() {
		require.Greater(t, len(res.Get("system").Raw), len(`[{"type":"text","text":"You are the release agent."}]`), "with the note")
	}
	require.Equal(t, int64(len(msgs)), res.Get("report.messages_before").Int(), "the system is not a message")
	// The same through an endpoint summarizer (compact.finish) and --wasm.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"## Goal\nShip it."}}]}`)
	}))
	defer srv.Close()
	code, out, errOut = cliRun(t, "", "compact", file, "--context-length", "4000", "--summarizer-url", srv.URL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, gjson.Get(out, "system").Raw, "You are the release agent.")
	require.Contains(t, out, "Ship it.")
	_, native, _ := cliRun(t, "", "compact", file, "--context-length", "4000")
	_, wasm, errOut := cliRun(t, "", "compact", file, "--context-length", "4000", "--wasm")
	require.Equal(t, native, wasm, errOut)

	// tokens counts it: the total is the messages' plus the system's.
	bare := jsonFile(t, "bare.json", msgs)
	_, withSys, _ := cliRun(t, "", "tokens", file)
	_, without, _ := cliRun(t, "", "tokens", bare)
	sys := gjson.Get(withSys, "system").Int()
	require.Positive(t, sys)
	require.Equal(t, gjson.Get(without, "total").Int()+sys, gjson.Get(withSys, "total").Int())
	require.Equal(t, gjson.Get(without, "per_message").Raw, gjson.Get(withSys, "per_message").Raw)
	require.False(t, gjson.Get(without, "system").Exists())

	// cache keeps it (and marks it) without --native.
	code, out, errOut = cliRun(t, "", "cache", file)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "You are the release agent.", gjson.Get(out, "system.0.text").Str)
	require.Equal(t, "ephemeral", gjson.Get(out, "system.0.cache_control.type").Str)
}

// TestCompactSaysWhenItFellBack: a failing summarizer endpoint (HTTP 500, an empty
// answer, no answer within the timeout) gives the extractive summary, and stderr
// says so with the reason.
func TestCompactSaysWhenItFellBack(t *testing.T) {
	mode := "500"
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client hang up
		switch mode {
		case "500":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "empty":
			fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"  "}}]}`)
		case "hang":
			select { // never answers; the client gives up
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	defer srv.Close()
	defer close(release) // before Close, which waits for the handlers
	file := jsonFile(t, "conv.json", longConversation(t, false))
	args := []string{"compact", file, "--context-length", "4000", "--summarizer-url", srv.URL, "--summarizer-timeout", "300ms"}
	for _, c := range []struct{ mode, reason string }{
		{"500", "HTTP 500: boom"},
		{"empty", "no summary"},
		{"hang", "timeout"},
	} {
		mode = c.mode
		code, out, errOut := cliRun(t, "", args...)
		require.Equal(t, 0, code, errOut)
		r := gjson.Get(out, "report")
		require.True(t, r.Get("fallback_used").Bool(), c.mode)
		require.Contains(t, strings.ToLower(r.Get("fallback_reason").Str), strings.ToLower(c.reason), c.mode)
		require.Contains(t, errOut, "ctxcompact: the summarizer failed", c.mode)
		require.Contains(t, errOut, "so the summary is the extractive fallback: "+r.Get("fallback_reason").Str, c.mode)
		if fc := r.Get("fallback_code").Str; fc != "" {
			require.Contains(t, errOut, "["+fc+"]")
		}
	}
	mode = "empty"
	_, _, errOut := cliRun(t, "", "compact", file, "--context-length", "4000")
	require.NotContains(t, errOut, "summarizer failed", "the builtin summarizer is no fallback")
}
