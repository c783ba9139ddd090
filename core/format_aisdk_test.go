package core

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

// AI SDK ModelMessage builders (format_aisdk.go names the SDK versions followed).
func aiText(t string) map[string]any { return map[string]any{"type": "text", "text": t} }
func aiCall(id, name string, input map[string]any) map[string]any {
	return map[string]any{"type": "tool-call", "toolCallId": id, "toolName": name, "input": input}
}
func aiResult(id, name, out string) map[string]any {
	return map[string]any{"type": "tool-result", "toolCallId": id, "toolName": name, "output": map[string]any{"type": "text", "value": out}}
}
func aiMsg(role string, parts ...any) map[string]any {
	return map[string]any{"role": role, "content": parts}
}

// aiSession is a short AI SDK coding session: a request, parallel reads answered in
// one tool message, more reads, a final exchange.
func aiSession(turns, size int) []any {
	m := []any{sys("You are a coding agent."), user("Refactor the parser module."),
		aiMsg("assistant", aiText("Reading both halves."), aiCall("r0", "readFile", map[string]any{"path": "src/lexer.py"}), aiCall("r1", "readFile", map[string]any{"path": "src/grammar.py"})),
		aiMsg("tool", aiResult("r0", "readFile", code("lexer", 900)), aiResult("r1", "readFile", code("grammar", 900)))}
	for i := 2; i < turns+2; i++ {
		id := fmt.Sprintf("r%d", i)
		m = append(m, aiMsg("assistant", aiCall(id, "readFile", map[string]any{"path": fmt.Sprintf("src/part_%d.py", i)})),
			aiMsg("tool", aiResult(id, "readFile", code(fmt.Sprintf("part%d", i), size))))
	}
	return append(m, say("The parser is split into a lexer and a grammar now."), user("Now add tests for the lexer."))
}

// chatToAISDK converts OpenAI chat messages to AI SDK ModelMessages, one for one: a
// tool row becomes a tool message of one tool-result part (the SDK joins
// consecutive tool messages), an assistant's tool_calls become tool-call parts after
// its text, arguments parsed into the input object (kept as the string when they
// are not JSON, as the SDK keeps an unparsable input).
func chatToAISDK(t testing.TB, chat []json.RawMessage) []json.RawMessage {
	names := map[string]string{}
	out := make([]json.RawMessage, 0, len(chat))
	for _, raw := range chat {
		m := gjson.ParseBytes(raw)
		role := m.Get("role").Str
		var o map[string]any
		switch role {
		case "system", "developer":
			o = map[string]any{"role": "system", "content": contentText(m.Get("content"))}
		case "user":
			o = map[string]any{"role": "user", "content": aiContent(m.Get("content"))}
		case "assistant":
			calls := m.Get("tool_calls").Array()
			if len(calls) == 0 {
				o = map[string]any{"role": "assistant", "content": aiContent(m.Get("content"))}
				break
			}
			var parts []any
			if text := contentText(m.Get("content")); text != "" {
				parts = append(parts, aiText(text))
			}
			for _, c := range calls {
				id, name := c.Get("id").Str, c.Get("function.name").Str
				names[id] = name
				var input any = c.Get("function.arguments").Str
				if a := c.Get("function.arguments").Str; gjson.Valid(a) {
					input = json.RawMessage(a)
				}
				parts = append(parts, map[string]any{"type": "tool-call", "toolCallId": id, "toolName": name, "input": input})
			}
			o = map[string]any{"role": "assistant", "content": parts}
		case "tool":
			id := m.Get("tool_call_id").Str
			o = map[string]any{"role": "tool", "content": []any{aiResult(id, names[id], contentText(m.Get("content")))}}
		default:
			t.Fatalf("chatToAISDK: role %q", role)
		}
		b, err := marshal(o)
		require.NoError(t, err)
		out = append(out, compactJSON(t, b))
	}
	return out
}

// aiContent is a chat content as AI SDK content: a string as it is, parts as text
// and image parts.
func aiContent(c gjson.Result) any {
	if !c.IsArray() {
		return c.Str
	}
	var parts []any
	for _, p := range c.Array() {
		switch p.Get("type").Str {
		case "text":
			parts = append(parts, aiText(p.Get("text").Str))
		case "image_url":
			parts = append(parts, map[string]any{"type": "image", "image": p.Get("image_url.url").Str})
		}
	}
	return parts
}

func compactJSON(t testing.TB, b []byte) json.RawMessage {
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	c, err := marshal(v)
	require.NoError(t, err)
	return c
}

// chatTraces returns the shared OpenAI-chat traces' messages by name.
func chatTraces(t *testing.T) map[string][]json.RawMessage {
	out := map[string][]json.RawMessage{}
	for _, p := range testtraces.Glob(t, "*.json") {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		var f struct {
			Format   string            `json:"format"`
			Messages []json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(data, &f), p)
		require.Equal(t, "openai-chat", f.Format, p)
		out[strings.TrimSuffix(filepath.Base(p), ".json")] = f.Messages
	}
	return out
}

// checkAISDKGroups asserts, independently of validate, that every client tool-call
// of an assistant message is answered once by the tool messages right after it, and
// that every tool-result there answers one of its calls.
func checkAISDKGroups(t *testing.T, out []json.RawMessage) {
	t.Helper()
	pending := map[string]bool{}
	closeGroup := func(at int) {
		for id := range pending {
			t.Fatalf("output %d: call %q has no result in its group", at, id)
		}
	}
	for i, raw := range out {
		m := gjson.ParseBytes(raw)
		if m.Get("role").Str == "tool" {
			for _, p := range m.Get("content").Array() {
				if p.Get("type").Str == "tool-result" {
					id := p.Get("toolCallId").Str
					require.True(t, pending[id], "output %d: tool-result %q answers no pending call", i, id)
					delete(pending, id)
				}
			}
			continue
		}
		closeGroup(i)
		if m.Get("role").Str == "assistant" {
			for _, p := range m.Get("content").Array() {
				if p.Get("type").Str == "tool-call" && !p.Get("providerExecuted").Bool() {
					pending[p.Get("toolCallId").Str] = true
				}
			}
		}
	}
	closeGroup(len(out))
}

// TestAISDKTraces compacts every shared OpenAI-chat trace converted to AI SDK
// messages at 16K-128K, and asserts: the invariants (no group split, no orphan,
// every input item returned unchanged or archived verbatim), validate clean on the
// output, and the same compaction as the chat trace (the same boundaries, pruned
// and summarized messages, estimates within 5%). Detection without "format" gives
// the same result.
func TestAISDKTraces(t *testing.T) {
	for name, chat := range chatTraces(t) {
		ai := chatToAISDK(t, chat)
		chat := compactArguments(t, chat)
		for _, window := range []int{16_000, 32_000, 64_000, 128_000} {
			t.Run(fmt.Sprintf("%s/%dk", name, window/1000), func(t *testing.T) {
				cfg := map[string]any{"model": map[string]any{"context_length": window}}
				res, e := callOp(t, "compact.begin", map[string]any{"messages": chat, "config": cfg, "force": true, "summarizer": "builtin"})
				require.Nil(t, e)
				want := decodeResult(t, res)
				res, e = callOp(t, "compact.begin", map[string]any{"messages": ai, "format": "ai-sdk", "config": cfg, "force": true, "summarizer": "builtin"})
				require.Nil(t, e)
				got := decodeResult(t, res)
				checkAISDKCompaction(t, ai, got)

				w, g := want.Report, got.Report
				require.Equal(t, w.HeadEnd, g.HeadEnd, "head_end")
				require.Equal(t, w.TailStart, g.TailStart, "tail_start")
				require.Equal(t, w.Summarized, g.Summarized, "summarized")
				require.Equal(t, w.Pruned, g.Pruned, "pruned")
				require.Equal(t, w.MessagesAfter, g.MessagesAfter, "messages_after")
				require.InEpsilon(t, w.TokensBefore, g.TokensBefore, 0.05, "tokens_before")
				require.InEpsilon(t, w.TokensAfter, g.TokensAfter, 0.05, "tokens_after")

				res, e = callOp(t, "compact.begin", map[string]any{"messages": ai, "config": cfg, "force": true, "summarizer": "builtin"})
				require.Nil(t, e)
				detected := decodeResult(t, res)
				require.Equal(t, got.Messages, detected.Messages, "detected without format")
			})
		}
	}
}

// compactArguments returns the chat messages with each tool call's arguments as
// compact JSON: the text an AI SDK input object is counted by (the SDK's providers
// send JSON.stringify(input)), where the traces' arguments were written by Python's
// json.dumps, with a space after each ':' and ','. The two lists are then the same
// conversation, to the byte of what is counted.
func compactArguments(t *testing.T, chat []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, len(chat))
	for i, raw := range chat {
		out[i] = raw
		calls := gjson.GetBytes(raw, "tool_calls")
		if !calls.IsArray() {
			continue
		}
		s := string(raw)
		for k, c := range calls.Array() {
			a := c.Get("function.arguments").Str
			if !gjson.Valid(a) {
				continue
			}
			var err error
			s, err = sjson.Set(s, fmt.Sprintf("tool_calls.%d.function.arguments", k), string(canonicalJSON(nil, gjson.Parse(a))))
			require.NoError(t, err)
		}
		out[i] = json.RawMessage(s)
	}
	return out
}

// checkAISDKCompaction asserts a compaction's invariants on AI SDK messages.
func checkAISDKCompaction(t *testing.T, input []json.RawMessage, r CompactResult) {
	t.Helper()
	require.True(t, r.Done)
	rep := r.Report
	require.Equal(t, len(r.Messages), rep.MessagesAfter)
	require.Equal(t, len(input), rep.MessagesBefore)
	v, e := callOp(t, "validate", map[string]any{"messages": r.Messages, "format": "ai-sdk"})
	require.Nil(t, e)
	var vr ValidateResult
	require.NoError(t, json.Unmarshal(v, &vr))
	require.True(t, vr.OK, "validate found problems in the output: %+v", vr.Problems)
	checkAISDKGroups(t, r.Messages)

	archived := map[int]bool{}
	for _, a := range r.Archived {
		require.JSONEq(t, string(input[a.Index]), string(a.Message), "archived message %d differs from the input", a.Index)
		archived[a.Index] = true
	}
	unchanged := map[string]int{}
	for _, m := range r.Messages {
		unchanged[string(m)]++
	}
	for i, m := range input {
		require.True(t, archived[i] || unchanged[string(m)] > 0, "input message %d is neither returned unchanged nor archived", i)
	}
	for _, i := range rep.Pruned {
		require.Contains(t, string(r.Messages[outIndex(t, r, i)]), `"output":{"type":"text","value":"`+PrunedPrefix)
	}
}

// outIndex is the output index of the input message i kept (pruned) in r: after the
// head, outputs shift by the summarized range less the summary message.
func outIndex(t *testing.T, r CompactResult, i int) int {
	rep := r.Report
	if i < rep.HeadEnd || rep.Summarized == nil {
		return i
	}
	k := i - (rep.TailStart - rep.HeadEnd)
	if rep.SummaryRole != "merged" {
		k++
	}
	require.Less(t, k, len(r.Messages))
	return k
}
