package core

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

// chatToResponses converts an OpenAI chat message list into Responses input items
// (openai-node 7.5.0 shapes): system and user messages as message items (text parts
// as input_text, images as input_image), an assistant message as an optional
// reasoning item (withReasoning: an encrypted one before each assistant message),
// a message item of output_text parts when it has text, and one function_call
// item per tool call; a tool row as a function_call_output. first[i] is the index of
// chat message i's first item (first[len(msgs)] is the number of items).
func chatToResponses(t testing.TB, msgs []json.RawMessage, withReasoning bool) (items []json.RawMessage, first []int) {
	t.Helper()
	add := func(v any) {
		b, err := marshal(v)
		require.NoError(t, err)
		items = append(items, json.RawMessage(strings.TrimSpace(string(b))))
	}
	parts := func(c gjson.Result, textType string) any {
		if c.Type == gjson.String || !c.IsArray() {
			return c.String()
		}
		var out []any
		for _, p := range c.Array() {
			switch p.Get("type").Str {
			case "image_url":
				out = append(out, map[string]any{"type": "input_image", "image_url": p.Get("image_url.url").Str, "detail": "auto"})
			default:
				out = append(out, map[string]any{"type": textType, "text": p.Get("text").Str})
			}
		}
		return out
	}
	for i, raw := range msgs {
		first = append(first, len(items))
		m := gjson.ParseBytes(raw)
		role := m.Get("role").Str
		switch role {
		case "tool":
			add(map[string]any{"type": "function_call_output", "call_id": m.Get("tool_call_id").Str, "output": parts(m.Get("content"), "input_text")})
		case "assistant":
			if withReasoning {
				add(map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", i), "summary": []any{}, "encrypted_content": fmt.Sprintf("gAAAAB%08d==", i)})
			}
			calls := m.Get("tool_calls").Array()
			if text := contentText(m.Get("content")); text != "" || len(calls) == 0 {
				add(map[string]any{"type": "message", "role": "assistant", "id": fmt.Sprintf("msg_%d", i), "status": "completed",
					"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
			}
			for _, c := range calls {
				add(map[string]any{"type": "function_call", "call_id": c.Get("id").Str, "name": c.Get("function.name").Str, "arguments": c.Get("function.arguments").Str})
			}
		default:
			add(map[string]any{"type": "message", "role": role, "content": parts(m.Get("content"), "input_text")})
		}
	}
	first = append(first, len(items))
	return items, first
}

// checkResponsesCompaction asserts the invariants of a compaction of Responses items:
// validate is clean on the output, every input item is returned unchanged or
// archived verbatim, and no reasoning item is left without the item it precedes.
func checkResponsesCompaction(t *testing.T, input []json.RawMessage, r CompactResult) {
	t.Helper()
	require.True(t, r.Done)
	out := r.Messages
	v, e := callOp(t, "validate", map[string]any{"messages": out, "format": "responses"})
	require.Nil(t, e)
	var vr ValidateResult
	require.NoError(t, json.Unmarshal(v, &vr))
	require.True(t, vr.OK, "validate found problems in the output: %+v", vr.Problems)

	archived := map[int]bool{}
	for _, a := range r.Archived {
		require.JSONEq(t, string(input[a.Index]), string(a.Message), "archived item %d differs from the input", a.Index)
		archived[a.Index] = true
	}
	unchanged := map[string]int{}
	for _, m := range out {
		unchanged[string(m)]++
	}
	for i, m := range input {
		if !archived[i] {
			require.Positive(t, unchanged[string(m)], "input item %d is neither returned unchanged nor archived", i)
		}
	}
	for k, m := range out {
		if gjson.GetBytes(m, "type").Str != "reasoning" {
			continue
		}
		require.Less(t, k+1, len(out), "a reasoning item ends the output")
		next := gjson.ParseBytes(out[k+1])
		typ := next.Get("type").Str
		require.True(t, typ == "function_call" || typ == "reasoning" || next.Get("role").Str == "assistant",
			"reasoning item at output %d is followed by %s", k, out[k+1])
	}
}

// TestResponsesTraces converts every shared OpenAI-chat trace to Responses items
// (plain, and with a reasoning item before each assistant message), compacts each
// at 16K-128K, and checks the invariants and that it is the chat trace's compaction:
// the same chat messages summarized (head_end and tail_start mapped to items
// agree) and the tokens before and after within 5%.
func TestResponsesTraces(t *testing.T) {
	paths := testtraces.Glob(t, "*.json")
	var names []string
	traces := map[string][]json.RawMessage{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		data := gjson.ParseBytes(raw)
		if data.Get("format").Str != "openai-chat" {
			continue
		}
		var msgs []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(data.Get("messages").Raw), &msgs))
		name := strings.TrimSuffix(p[strings.LastIndexByte(p, '/')+1:], ".json")
		names = append(names, name)
		traces[name] = msgs
	}
	sort.Strings(names)
	runs, same := 0, 0
	maxDiff := 0.0
	for _, name := range names {
		msgs := traces[name]
		for _, reasoning := range []bool{false, true} {
			items, first := chatToResponses(t, msgs, reasoning)
			for _, window := range []int{16_000, 32_000, 64_000, 128_000} {
				t.Run(fmt.Sprintf("%s/reasoning=%v/%dk", name, reasoning, window/1000), func(t *testing.T) {
					cfg := map[string]any{"model": map[string]any{"context_length": window}}
					res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "force": true, "summarizer": "builtin"})
					require.Nil(t, e)
					chat := decodeResult(t, res).Report
					res, e = callOp(t, "compact.begin", map[string]any{"messages": items, "config": cfg, "force": true, "summarizer": "builtin"})
					require.Nil(t, e)
					r := decodeResult(t, res)
					checkResponsesCompaction(t, items, r)
					rep := r.Report
					runs++
					require.Equal(t, first[chat.HeadEnd], rep.HeadEnd, "head_end: chat %d", chat.HeadEnd)
					require.Equal(t, first[chat.TailStart], rep.TailStart, "tail_start: chat %d", chat.TailStart)
					same++
					for _, pair := range [][2]int{{chat.TokensBefore, rep.TokensBefore}, {chat.TokensAfter, rep.TokensAfter}} {
						d := math.Abs(float64(pair[1]-pair[0])) / float64(pair[0])
						maxDiff = max(maxDiff, d)
						require.Less(t, d, 0.05, "tokens chat %d, responses %d", pair[0], pair[1])
					}
				})
			}
		}
	}
	t.Logf("responses: %d compactions, %d the chat trace's, tokens within %.2f%%", runs, same, 100*maxDiff)
}
