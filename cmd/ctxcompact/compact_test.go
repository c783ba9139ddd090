package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

// TestCallPrintsCoreBytes: `ctxcompact call` prints exactly what core.Call returns,
// natively and through the embedded module.
func TestCallPrintsCoreBytes(t *testing.T) {
	for _, env := range []string{
		`{"op":"info"}`,
		`{"op":"threshold.resolve","config":{"model":{"context_length":200000},"compression":{"small_context_floor":0}}}`,
		`{"op":"nope"}`,
		`not json`,
	} {
		want := string(core.Call([]byte(env)))
		code, out, errOut := cliRun(t, env, "call")
		require.Equal(t, 0, code, errOut)
		require.Equal(t, want, out)
		code, out, errOut = cliRun(t, env, "call", "--wasm")
		require.Equal(t, 0, code, errOut)
		require.Equal(t, want, out, "--wasm must print the same bytes")
	}
}

// TestCompactCommand compacts a shared trace with the builtin summarizer and checks
// the stable output shape; --wasm prints the same bytes.
func TestCompactCommand(t *testing.T) {
	file := testtraces.File(t, "mini-swe-agent-deepseek-astropy-12907.json")
	code, out, errOut := cliRun(t, "", "compact", file, "--context-length", "32000")
	require.Equal(t, 0, code, errOut)
	var res struct {
		Messages []json.RawMessage `json:"messages"`
		Report   core.Report       `json:"report"`
		Archived []struct {
			Index  int             `json:"index"`
			Reason string          `json:"reason"`
			Msg    json.RawMessage `json:"message"`
		} `json:"archived"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.True(t, res.Report.Compacted)
	require.True(t, res.Report.Fits)
	require.Equal(t, 24_000, res.Report.ThresholdTokens, "32K window with the small-context floor")
	require.Len(t, res.Messages, res.Report.MessagesAfter)
	merged := 0
	if res.Report.SummaryRole == "merged" {
		merged = 1
	}
	if res.Report.SystemNoteAdded {
		merged++ // the system prompt before the note is archived too
	}
	require.Equal(t, res.Report.Summarized.To-res.Report.Summarized.From+len(res.Report.Pruned)+len(res.Report.OrphansRemoved)+merged, len(res.Archived),
		"every message not returned unchanged is archived")
	require.Contains(t, errOut, "130 → ")
	require.Contains(t, errOut, "summarized messages")

	code, wasmOut, errOut := cliRun(t, "", "compact", "--wasm", "--context-length", "32000", file)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, out, wasmOut, "--wasm must print the same bytes")
}

func TestCompactCommandFlagsAndErrors(t *testing.T) {
	conv := cliTempFile(t, "conv.json", `[{"role":"system","content":"s"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`)
	cfg := cliTempFile(t, "cfg.json", `{"compression":{"threshold":0.9,"small_context_floor":0},"model":{"context_length":1000}}`)
	code, out, errOut := cliRun(t, "", "compact", conv, "--config", cfg, "--model", "glm-5")
	require.Equal(t, 0, code, errOut)
	var res struct{ Report core.Report }
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 900, res.Report.ThresholdTokens)
	require.Contains(t, errOut, "nothing summarized")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compact"}, "want exactly one FILE"},
		{[]string{"compact", "/nonexistent.json"}, "reading /nonexistent.json"},
		{[]string{"compact", cliTempFile(t, "bad.json", `{"messages": 3}`)}, "must hold"},
		{[]string{"compact", conv, "--config", cliTempFile(t, "c.json", `{"compression":{"threshold":2}}`)}, "[invalid_config]"},
		{[]string{"compact", cliTempFile(t, "role.json", `[{"role":"robot","content":"x"}]`)}, "/messages/0/role"},
	} {
		code, out, errOut := cliRun(t, "", c.args...)
		require.Equal(t, 1, code, "%v: %s", c.args, errOut)
		require.Empty(t, out)
		require.True(t, strings.Contains(errOut, c.want), "%v: stderr %q lacks %q", c.args, errOut, c.want)
	}
}

// TestCompactWithEndpoint: --summarizer-url asks an OpenAI-compatible endpoint (a
// local test server here) for the summary; its failure gives the fallback summary.
func TestCompactWithEndpoint(t *testing.T) {
	var got struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Messages  []struct {
			Role, Content string
		} `json:"messages"`
	}
	var auth string
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/chat/completions", r.URL.Path)
		auth = r.Header.Get("Authorization")
		require.NoError(t, json.NewDecoder(r.Body).Decode(&got))
		if fail {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"## Goal\nEndpoint summary."}}]}`)
	}))
	defer srv.Close()
	t.Setenv("CTXCOMPACT_API_KEY", "test-key")

	var msgs []map[string]any
	msgs = append(msgs, map[string]any{"role": "system", "content": "s"}, map[string]any{"role": "user", "content": "Refactor."}, map[string]any{"role": "assistant", "content": "OK."})
	for i := 0; i < 30; i++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("step %d %s", i, strings.Repeat("x", 400))},
			map[string]any{"role": "assistant", "content": fmt.Sprintf("done %d", i)})
	}
	data, _ := json.Marshal(msgs)
	file := cliTempFile(t, "conv.json", string(data))
	args := []string{"compact", file, "--context-length", "4000", "--summarizer-url", srv.URL + "/v1", "--summarizer-model", "m1"}

	code, out, errOut := cliRun(t, "", args...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "m1", got.Model)
	require.Equal(t, "Bearer test-key", auth)
	require.Positive(t, got.MaxTokens)
	require.Equal(t, []string{"system", "user"}, []string{got.Messages[0].Role, got.Messages[1].Role})
	require.Contains(t, out, "Endpoint summary.")
	var res struct{ Report core.Report }
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, core.SummarizerHost, res.Report.Summarizer)
	require.False(t, res.Report.FallbackUsed)

	fail = true
	code, out, errOut = cliRun(t, "", args...)
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.True(t, res.Report.FallbackUsed, "a failing endpoint falls back, never loses the middle")
	require.Contains(t, res.Report.FallbackReason, "HTTP 503")
}

// TestCompactReadsTheLastOfRepeatedKeys: a file whose top-level keys repeat is read
// as every op reads a request, the last of each key winning (JSON.parse, json.loads):
// {"messages": [], "messages": [...]} compacts the second list, not an empty one, and
// the last "format" and "config" hold.
func TestCompactReadsTheLastOfRepeatedKeys(t *testing.T) {
	b, err := os.ReadFile(testtraces.File(t, "mini-swe-agent-deepseek-astropy-12907.json"))
	require.NoError(t, err)
	msgs := gjson.GetBytes(b, "messages").Raw
	file := filepath.Join(t.TempDir(), "dup.json")
	doc := `{"messages":[],"format":"anthropic","config":{"model":{"context_length":200000}},` +
		`"messages":` + msgs + `,"format":"openai","config":{"model":{"context_length":32000}}}`
	require.NoError(t, os.WriteFile(file, []byte(doc), 0o644))
	code, out, errOut := cliRun(t, "", "compact", file)
	require.Equal(t, 0, code, errOut)
	var res struct {
		Report core.Report `json:"report"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 130, res.Report.MessagesBefore, "the last messages key holds the conversation")
	require.True(t, res.Report.Compacted, "the last config's 32K window: %s", errOut)
	require.Equal(t, 24_000, res.Report.ThresholdTokens)
}

// TestCompactFocusAndInstructions: --focus reaches compact.begin (the built-in
// summary keeps a Focus section, natively and with --wasm alike) and
// --instructions sets compression.instructions, checked by the core.
func TestCompactFocusAndInstructions(t *testing.T) {
	var msgs []map[string]any
	msgs = append(msgs, map[string]any{"role": "system", "content": "You are a coding agent."}, map[string]any{"role": "user", "content": "Fix the failing tests."})
	for i, topic := range []string{"parser", "ledger", "cache", "router", "auth"} {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": "Reading " + topic + ".", "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "read_file", "arguments": `{"path":"src/` + topic + `.py"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": strings.Repeat("# "+topic+" code\n", 80)})
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": "Done reading."}, map[string]any{"role": "user", "content": "Fix it."})
	b, err := json.Marshal(msgs)
	require.NoError(t, err)
	conv := cliTempFile(t, "conv.json", string(b))
	code, native, errOut := cliRun(t, "", "compact", conv, "--context-length", "3000", "--focus", "the ledger", "--instructions", "Keep every path.")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, native, `## Focus: the ledger\n- #`)
	require.Contains(t, native, `src/ledger.py`)
	code, wasm, errOut := cliRun(t, "", "compact", conv, "--context-length", "3000", "--focus", "the ledger", "--instructions", "Keep every path.", "--wasm")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, native, wasm)
	code, _, errOut = cliRun(t, "", "compact", conv, "--instructions", strings.Repeat("x", 8001))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "/config/compression/instructions")

	// --pin keeps a tool group verbatim after the summary: by call id or index.
	code, out, errOut := cliRun(t, "", "compact", conv, "--context-length", "3000", "--pin", "c1", "--pin", "8")
	require.Equal(t, 0, code, errOut)
	var res struct {
		Messages []map[string]any `json:"messages"`
		Report   struct {
			Pinned  []int `json:"pinned"`
			HeadEnd int   `json:"head_end"`
		} `json:"report"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, []int{4, 5, 8, 9}, res.Report.Pinned)
	require.Equal(t, msgs[4]["content"], res.Messages[res.Report.HeadEnd+1]["content"])
	code, _, errOut = cliRun(t, "", "compact", conv, "--pin", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no message makes a tool call with id "nope" (at /pins/0)`)

	// --range summarizes exactly those messages.
	code, out, errOut = cliRun(t, "", "compact", conv, "--range", "4:8")
	require.Equal(t, 0, code, errOut)
	var ranged struct {
		Report struct {
			Summarized core.IndexRange `json:"summarized"`
		} `json:"report"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &ranged), out)
	require.Equal(t, core.IndexRange{From: 4, To: 8}, ranged.Report.Summarized)
	code, _, errOut = cliRun(t, "", "compact", conv, "--range", "5:8")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "starts inside a tool group")
	code, _, errOut = cliRun(t, "", "compact", conv, "--range", "four")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--range must be FROM:TO")
}
