package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValidateCommand: one readable line per problem and exit 1; a clean file exits 0.
func TestValidateCommand(t *testing.T) {
	broken := `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"x","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"ghost","content":"?"}]}`
	code, out, errOut := cliRun(t, broken, "validate", "-")
	require.Equal(t, 1, code, errOut)
	require.Equal(t, []string{
		`/messages/1: orphan_tool_result: tool result "ghost" does not answer a pending call of the assistant message before it`,
		`/messages/0/tool_calls/0: missing_tool_result: tool call "a" has no result right after its assistant message`,
	}, strings.Split(strings.TrimSpace(out), "\n"))
	require.Contains(t, errOut, "2 problem(s) found")

	code, out, _ = cliRun(t, broken, "validate", "-", "--json")
	require.Equal(t, 1, code)
	require.Contains(t, out, `"ok":false`)

	clean := `[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`
	code, out, errOut = cliRun(t, clean, "validate", "-")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, "no problems")

	code, _, errOut = cliRun(t, clean, "validate", "-", "--format", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "[invalid_request]")
}

// TestFormatFlagAndKeys: --format and the file's list key choose the format; the
// output keeps the input's keys for the list and the system prompt.
func TestFormatFlagAndKeys(t *testing.T) {
	dir := t.TempDir()
	anth := filepath.Join(dir, "a.json")
	require.NoError(t, os.WriteFile(anth, []byte(`{"system":"Be brief.","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`), 0o644))
	for _, f := range []string{"anthropic", "anthropic-messages"} {
		code, out, errOut := cliRun(t, "", "compact", anth, "--format", f)
		require.Equal(t, 0, code, errOut)
		require.True(t, strings.HasPrefix(out, `{"messages":`), out)
		require.Contains(t, out, `"system":"Be brief."`)
	}
	code, _, errOut := cliRun(t, "", "compact", anth, "--format", "openai")
	require.Equal(t, 1, code, "a top-level system is not the OpenAI chat format")
	require.Contains(t, errOut, "[invalid_request]")

	code, out, errOut := cliRun(t, "", "cache", anth, "--format", "anthropic-messages")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"system":[{"type":"text","text":"Be brief.","cache_control"`)
}

// TestValidateProviderRules: the provider rules through the CLI: the issue-27
// session with the summary merged before the signed thinking of the turn its
// tool_result continues is reported; AI SDK messages take --provider.
func TestValidateProviderRules(t *testing.T) {
	merged := `{"messages":[{"role":"user","content":"Port it."},` +
		`{"role":"assistant","content":[{"type":"text","text":"[CONTEXT COMPACTION] summary"},{"type":"thinking","thinking":"read a","signature":"sig"},{"type":"tool_use","id":"t1","name":"read","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`
	code, out, errOut := cliRun(t, merged, "validate", "-", "--format", "anthropic")
	require.Equal(t, 1, code, errOut)
	require.True(t, strings.HasPrefix(out, "/messages/1/content/0: thinking_not_first: "), out)

	unsigned := `[{"role":"user","content":"Port it."},{"role":"assistant","content":[{"type":"reasoning","text":"read a"},{"type":"text","text":"done"}]}]`
	code, _, errOut = cliRun(t, unsigned, "validate", "-", "--format", "ai-sdk")
	require.Equal(t, 0, code, "without a provider AI SDK messages meet no provider rule: %s", errOut)
	code, out, _ = cliRun(t, unsigned, "validate", "-", "--format", "ai-sdk", "--provider", "anthropic")
	require.Equal(t, 1, code)
	require.True(t, strings.HasPrefix(out, "/messages/1/content/0: thinking_signature_missing: "), out)
	code, _, errOut = cliRun(t, unsigned, "validate", "-", "--format", "ai-sdk", "--provider", "mistral")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "[invalid_request]")
}
