package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/internal/loopback"
)

// TestCompactSummarizerAPIs: --summarizer-api picks the API at --summarizer-url
// (the host's ready summarizers, against the loopback model): its path, its key
// variable, its default model, and the summary in the output.
func TestCompactSummarizerAPIs(t *testing.T) {
	srv, err := loopback.Start(loopback.Options{Trace: loopback.Trace{Name: "cli"}})
	require.NoError(t, err)
	defer srv.Close()
	file := jsonFile(t, "conv.json", longConversation(t, false))
	t.Setenv("OPENAI_API_KEY", "sk-openai")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant")
	t.Setenv("CTXCOMPACT_API_KEY", "")
	for _, c := range []struct {
		api, url, path, model, header, key string
	}{
		{"", srv.OpenAIBaseURL(), "/v1/chat/completions", "gpt-4.1-mini", "Authorization", "Bearer sk-openai"},
		{"openai", srv.OpenAIBaseURL(), "/v1/chat/completions", "gpt-4.1-mini", "Authorization", "Bearer sk-openai"},
		{"openai-responses", srv.OpenAIBaseURL(), "/v1/responses", "gpt-4.1-mini", "Authorization", "Bearer sk-openai"},
		{"anthropic", srv.URL, "/v1/messages", "claude-haiku-4-5", "X-Api-Key", "sk-ant"},
	} {
		before := len(srv.Requests())
		args := []string{"compact", file, "--context-length", "4000", "--summarizer-url", c.url}
		if c.api != "" {
			args = append(args, "--summarizer-api", c.api)
		}
		code, out, errOut := cliRun(t, "", args...)
		require.Equal(t, 0, code, errOut)
		reqs := srv.Requests()[before:]
		require.Len(t, reqs, 1, c.api)
		body := gjson.ParseBytes(reqs[0].Body)
		require.Equal(t, c.path, reqs[0].Path, c.api)
		require.True(t, reqs[0].Summary, c.api)
		require.Equal(t, c.model, body.Get("model").Str, c.api)
		require.Equal(t, c.key, reqs[0].Header.Get(c.header), c.api)
		require.False(t, gjson.Get(out, "report.fallback_used").Bool(), "%s: %s", c.api, errOut)
		require.Equal(t, "host", gjson.Get(out, "report.summarizer").Str)
		require.Contains(t, gjson.Get(out, "messages").Raw, "Replay of cli.", c.api)
		shown := c.api
		if shown == "" {
			shown = "openai" // the default
		}
		require.Contains(t, errOut, "("+shown+", "+c.model+")", "stderr names the API and model")
	}

	// CTXCOMPACT_API_KEY goes first, whatever the API; --summarizer-model is sent.
	t.Setenv("CTXCOMPACT_API_KEY", "sk-ctx")
	before := len(srv.Requests())
	code, _, errOut := cliRun(t, "", "compact", file, "--context-length", "4000", "--summarizer-url", srv.URL,
		"--summarizer-api", "anthropic", "--summarizer-model", "claude-x")
	require.Equal(t, 0, code, errOut)
	got := srv.Requests()[before]
	require.Equal(t, "sk-ctx", got.Header.Get("X-Api-Key"))
	require.Equal(t, "claude-x", gjson.GetBytes(got.Body, "model").Str)

	// An API's error status falls back, with the status in the reason.
	srv.SetFault(loopback.Fault{Status: 529})
	code, out, errOut := cliRun(t, "", "compact", file, "--context-length", "4000", "--summarizer-url", srv.URL, "--summarizer-api", "anthropic")
	srv.SetFault(loopback.Fault{})
	require.Equal(t, 0, code, errOut)
	require.True(t, gjson.Get(out, "report.fallback_used").Bool())
	require.Equal(t, "error", gjson.Get(out, "report.fallback_code").Str)
	require.Contains(t, gjson.Get(out, "report.fallback_reason").Str, "ctxcompact: anthropic summarizer: HTTP 529: loopback: injected HTTP 529 [overloaded_error]")

	// An unknown API is an error before anything is read or sent.
	before = len(srv.Requests())
	code, out, errOut = cliRun(t, "", "compact", file, "--summarizer-url", srv.URL, "--summarizer-api", "gemini")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, `--summarizer-api is one of openai, openai-responses, anthropic, not "gemini"`)
	require.Len(t, srv.Requests(), before)
}

// TestCompactSummarizerFlagsChecked: a --summarizer-url that is not an http(s) URL
// is a bad flag (exit 1, nothing read or printed), not a compaction that falls back
// on every request; summarizer flags that do nothing say so on stderr.
func TestCompactSummarizerFlagsChecked(t *testing.T) {
	file := jsonFile(t, "conv.json", longConversation(t, false))
	for _, bad := range []string{"not-a-url", "ftp://example.com/v1", "https://", "localhost:8080"} {
		code, out, errOut := cliRun(t, "", "compact", file, "--context-length", "4000", "--summarizer-url", bad)
		require.Equal(t, 1, code, "%s: %s", bad, errOut)
		require.Empty(t, out, bad)
		require.Contains(t, errOut, "--summarizer-url must be an http or https URL", bad)
	}

	// Without --summarizer-url the other summarizer flags do nothing, and say so.
	code, out, errOut := cliRun(t, "", "compact", file, "--context-length", "4000", "--summarizer-model", "gpt-5", "--summarizer-timeout", "5s")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "builtin", gjson.Get(out, "report.summarizer").Str)
	require.Contains(t, errOut, "--summarizer-model has no effect without --summarizer-url")
	require.Contains(t, errOut, "--summarizer-timeout has no effect without --summarizer-url")

	// With it, but nothing to summarize: the endpoint is not asked, and stderr says why.
	srv, err := loopback.Start(loopback.Options{Trace: loopback.Trace{Name: "cli"}})
	require.NoError(t, err)
	defer srv.Close()
	short := cliTempFile(t, "short.json", cliConversation)
	code, _, errOut = cliRun(t, "", "compact", short, "--summarizer-url", srv.OpenAIBaseURL())
	require.Equal(t, 0, code, errOut)
	require.Empty(t, srv.Requests())
	require.Contains(t, errOut, "--summarizer-url was not asked: nothing was summarized (nothing_to_compact)")
}
