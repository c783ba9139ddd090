package core

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// thinkingTurn is an Anthropic assistant turn with signed thinking and a tool_use,
// and the user turn with its result.
func thinkingTurn(id, output string) []any {
	return []any{
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "thinking", "thinking": "I should read " + id + ".", "signature": "sig-" + id},
			map[string]any{"type": "tool_use", "id": id, "name": "read_file", "input": map[string]any{"path": id + ".py"}},
		}},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": id, "content": output},
		}},
	}
}

// A session whose newest assistant turn carries signed thinking before the tool
// result it waits on compacts without touching that turn: the summary is not
// merged into it (a text block before its thinking would make Anthropic refuse the
// request), it stands as its own user message after the head's.
func TestAnthropicSignedThinkingTurnIsNotMergedInto(t *testing.T) {
	msgs := []any{map[string]any{"role": "user", "content": "Port the billing service."}}
	for i := 0; i < 12; i++ {
		msgs = append(msgs, thinkingTurn(fmt.Sprintf("toolu_%02d", i), code(fmt.Sprintf("m%d", i), 4000))...)
	}
	res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "format": "anthropic", "force": true, "summarizer": "builtin",
		"config": map[string]any{"model": map[string]any{"context_length": 16_000}}})
	require.Nil(t, e)
	r := decodeResult(t, res)
	require.NotNil(t, r.Report.Summarized)
	require.NotEqual(t, "merged", r.Report.SummaryRole)
	require.Equal(t, "user", r.Report.SummaryRole)
	raw := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		raw[i] = b
	}
	checkAccounted(t, FormatAnthropic, raw, r)
	newest := string(raw[len(raw)-2])
	kept := false
	for _, m := range r.Messages {
		if strings.Contains(string(m), "sig-toolu_11") {
			require.JSONEq(t, newest, string(m), "the newest thinking turn comes back as it was written")
			kept = true
		}
	}
	require.True(t, kept)
}
