package core

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// TestPinsAreKeptVerbatim: on a shared trace, the pinned tool groups of the
// summarized span come through byte for byte after the summary, in order, are
// neither archived as summarized nor pruned, and the summary request does not
// carry them.
func TestPinsAreKeptVerbatim(t *testing.T) {
	if testing.Short() {
		t.Skip("a shared trace; runs without -short")
	}
	msgs := traceForChunks(t)
	cfg := map[string]any{"model": map[string]any{"context_length": 64000}}
	var ids []any
	for _, i := range []int{19, 44, 83} { // calls with outputs of 2-5K characters, in the summarized span
		calls, _ := msgs[i].(map[string]any)["tool_calls"].([]any)
		require.NotEmpty(t, calls, "message %d makes a call", i)
		ids = append(ids, calls[0].(map[string]any)["id"])
	}
	require.Len(t, ids, 3)
	res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "force": true, "summarizer": "builtin", "pins": ids})
	require.Nil(t, e)
	r := gjson.ParseBytes(res)
	pinned := r.Get("report.pinned").Array()
	require.GreaterOrEqual(t, len(pinned), 6, "each call's group")
	out := map[string]bool{}
	for _, m := range r.Get("messages").Array() {
		out[m.Raw] = true
	}
	raw := func(i int) string { b, _ := marshal(msgs[i]); return string(b) }
	for _, p := range pinned {
		require.True(t, out[raw(int(p.Int()))], "pinned message %d is in the output as it was", p.Int())
	}
	for _, a := range r.Get("archived").Array() {
		for _, p := range pinned {
			require.NotEqual(t, p.Int(), a.Get("index").Int(), "pinned %d archived as %s", p.Int(), a.Get("reason").Str)
		}
	}
	ask, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "force": true, "pins": ids})
	require.Nil(t, e)
	prompt := gjson.GetBytes(ask, "summary_request.messages.1.content").Str
	for _, p := range pinned {
		if int(p.Int()) >= int(r.Get("report.head_end").Int()) && int(p.Int()) < int(r.Get("report.tail_start").Int()) {
			require.NotContains(t, prompt, "[#"+p.Raw+" ", "the summary request leaves out pinned turn %d", p.Int())
		}
	}
}

// TestPinErrors: a bad pin is invalid_request at its path; pins over half the
// threshold fail the compaction.
func TestPinErrors(t *testing.T) {
	msgs := smallSession(6)
	for _, c := range []struct {
		pins any
		path string
		msg  string
	}{
		{"t2", "/pins", "must be an array"},
		{[]any{99}, "/pins/0", "not a message index"},
		{[]any{1.5}, "/pins/0", "not a message index"},
		{[]any{"t2", "nope"}, "/pins/1", `no message makes a tool call with id "nope"`},
		{[]any{true}, "/pins/0", "a message index or a tool call id"},
		{[]any{4, 6, 8, 10, 12, 14}, "/pins", "more than half the threshold"},
	} {
		_, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": tinyWindow, "force": true, "pins": c.pins})
		require.NotNil(t, e, "%v", c.pins)
		require.Equal(t, CodeInvalidRequest, e.Code, "%v", c.pins)
		require.Equal(t, c.path, e.Path, "%v", c.pins)
		require.Contains(t, e.Message, c.msg, "%v", c.pins)
	}
	// Through a session: the error, and nothing recorded.
	state := startEngine(t, tinyWindow)
	resp := sessionCall(t, map[string]any{"event": EventCompress, "state": json.RawMessage(state), "messages": msgs, "force": true, "pins": []any{4, 6, 8, 10, 12, 14}})
	require.Equal(t, "/pins", resp["error"].(map[string]any)["path"])
}
