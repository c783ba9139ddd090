package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

const orphanConversation = `{"messages":[
 {"role":"user","content":"hi"},
 {"role":"tool","tool_call_id":"lost","content":"an output whose call is gone"},
 {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},
 {"role":"user","content":"well?"}]}`

// compact with nothing to compact still repairs the tool pairs (the orphan result
// removed, the call without a result stubbed), and says on stderr which format it
// read the file as and why nothing was compacted.
func TestCompactNothingToCompactRepairsPairs(t *testing.T) {
	file := cliTempFile(t, "orphan.json", orphanConversation)
	code, out, stderr := cliRun(t, "", "compact", file)
	require.Equal(t, 0, code, stderr)
	r := gjson.Parse(out)
	require.Equal(t, "nothing_to_compact", r.Get("report.reason").Str, out)
	require.Equal(t, "[1]", r.Get("report.orphans_removed").Raw, out)
	require.Equal(t, `["c1"]`, r.Get("report.stubs_added").Raw, out)
	msgs := r.Get("messages").Array()
	require.Len(t, msgs, 4, out)
	require.Equal(t, "assistant", msgs[1].Get("role").Str)
	require.Equal(t, "c1", msgs[2].Get("tool_call_id").Str, "the stub answers the call")
	require.Equal(t, "orphan_removed", r.Get("archived.0.reason").Str, out)
	require.Contains(t, stderr, "ctxcompact: format openai (detected: ")
	require.Contains(t, stderr, "nothing summarized or pruned (nothing_to_compact): every message is in the protected head or tail")
	require.Contains(t, stderr, "tool pairs repaired: removed 1 orphan tool result(s) (messages 1); stubbed 1 call(s) without a result (c1)")

	// Where the format comes from is said too.
	resp := cliTempFile(t, "resp.json", `{"input":[{"type":"message","role":"user","content":"hi"}]}`)
	_, _, stderr = cliRun(t, "", "compact", resp)
	require.Contains(t, stderr, `ctxcompact: format responses (from the file's "input" key)`)
	_, _, stderr = cliRun(t, "", "compact", "--format", "openai", file)
	require.Contains(t, stderr, "ctxcompact: format openai (from --format)")
}

// sanitize repairs the tool pairs of a file in any format, natively and in the
// module alike, keeps the system prompt under the file's key, and says when there
// was nothing to repair.
func TestSanitizeCommand(t *testing.T) {
	file := cliTempFile(t, "orphan.json", orphanConversation)
	code, out, stderr := cliRun(t, "", "sanitize", file)
	require.Equal(t, 0, code, stderr)
	r := gjson.Parse(out)
	require.Equal(t, "[1]", r.Get("removed").Raw, out)
	require.Equal(t, `["c1"]`, r.Get("stubbed").Raw, out)
	require.Len(t, r.Get("messages").Array(), 4, out)
	require.Contains(t, stderr, "stubbed 1 call(s) without a result (c1)")
	code, wasmOut, stderr := cliRun(t, "", "sanitize", "--wasm", file)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, out, wasmOut)

	// Anthropic, told by its top-level system: the orphan tool_result block goes.
	native := cliTempFile(t, "native.json", `{"system":"s","messages":[
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"lost","content":"x"},{"type":"text","text":"hi"}]},
 {"role":"assistant","content":[{"type":"text","text":"hello"}]}]}`)
	code, out, stderr = cliRun(t, "", "sanitize", native)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, `"s"`, gjson.Get(out, "system").Raw, out)
	require.Equal(t, "[0]", gjson.Get(out, "repaired").Raw, out)
	require.Equal(t, `[{"type":"text","text":"hi"}]`, gjson.Get(out, "messages.0.content").Raw, out)
	require.Contains(t, stderr, "format anthropic (detected: ")

	// Responses items under "input" come back under "input", instructions kept.
	resp := cliTempFile(t, "resp.json", `{"instructions":"be brief","input":[{"type":"message","role":"user","content":"hi"},{"type":"function_call_output","call_id":"lost","output":"x"}]}`)
	code, out, stderr = cliRun(t, "", "sanitize", resp)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, `"be brief"`, gjson.Get(out, "instructions").Raw, out)
	require.Len(t, gjson.Get(out, "input").Array(), 1, out)

	clean := cliTempFile(t, "clean.json", cliConversation)
	code, out, stderr = cliRun(t, "", "sanitize", clean)
	require.Equal(t, 0, code, stderr)
	in, got := gjson.Get(cliConversation, "messages").Array(), gjson.Get(out, "messages").Array()
	require.Len(t, got, len(in), out)
	for i := range in {
		require.Equal(t, in[i].Raw, got[i].Raw, "message %d is not its input's bytes", i)
	}
	require.True(t, strings.HasSuffix(stderr, "every tool call has its result; nothing to repair\n"), stderr)

	code, _, stderr = cliRun(t, "", "sanitize")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "usage: ctxcompact sanitize FILE")
}
