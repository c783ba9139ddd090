package core

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// TestUndoRestoresTheInput: on a shared trace, undo after a compaction (with a
// pin, pruned outputs and messages appended since) gives back the compaction's
// input, byte for byte, then the messages appended; and it refuses clearly.
func TestUndoRestoresTheInput(t *testing.T) {
	if testing.Short() {
		t.Skip("a shared trace; runs without -short")
	}
	msgs := traceForChunks(t)
	cfg := map[string]any{"model": map[string]any{"context_length": 200000}}
	state := startEngine(t, cfg)
	calls, _ := msgs[44].(map[string]any)["tool_calls"].([]any)
	res, state := runEvent(t, state, EventCompress, map[string]any{"messages": msgs, "force": true, "summarizer": "builtin",
		"pins": []any{calls[0].(map[string]any)["id"]}}, noEffects(t))
	r := res.(map[string]any)
	require.NotEmpty(t, r["report"].(map[string]any)["pinned"])
	require.Contains(t, gjson.GetBytes(state, "last_compaction.summary").Str, "## Goal")
	out := r["messages"].([]any)
	var originals []any
	for _, a := range r["archived"].([]any) {
		originals = append(originals, a.(map[string]any)["message"])
	}
	extra := []any{map[string]any{"role": "assistant", "content": "Going on."}, map[string]any{"role": "user", "content": "Undo that compaction."}}
	grown := append(append([]any{}, out...), extra...)
	undone, end := runEvent(t, state, EventUndo, map[string]any{"messages": grown, "originals": originals}, noEffects(t))
	want := append(append([]any{}, msgs...), extra...)
	require.Equal(t, want, undone.(map[string]any)["messages"], "the input, then what came after")
	require.EqualValues(t, len(originals), undone.(map[string]any)["restored"])
	require.False(t, gjson.GetBytes(end, "undo").Exists(), "undone once")

	for _, c := range []struct {
		name   string
		state  json.RawMessage
		fields map[string]any
		code   ErrorCode
		path   string
		msg    string
	}{
		{"twice", end, map[string]any{"messages": want, "originals": originals}, CodeInvalidState, "/state", "no compaction to undo"},
		{"changed", state, map[string]any{"messages": append([]any{map[string]any{"role": "user", "content": "edited"}}, grown[1:]...), "originals": originals}, CodeInvalidState, "/messages", "no longer starts with the last compaction's result"},
		{"no originals", state, map[string]any{"messages": grown}, CodeInvalidRequest, "/originals", "keeps no archive"},
		{"too few originals", state, map[string]any{"messages": grown, "originals": originals[1:]}, CodeInvalidRequest, "/originals", "originals were given"},
		{"no messages", state, map[string]any{"originals": originals}, CodeInvalidRequest, "/messages", "undo takes the conversation"},
	} {
		req := map[string]any{"event": EventUndo, "state": c.state}
		for k, v := range c.fields {
			req[k] = v
		}
		resp := sessionCall(t, req)
		e, _ := resp["error"].(map[string]any)
		require.NotNil(t, e, c.name)
		require.Equal(t, string(c.code), e["code"], c.name)
		require.Equal(t, c.path, e["path"], c.name)
		require.Contains(t, e["message"], c.msg, c.name)
	}
	// A smaller window since: the originals no longer fit.
	small, e := callOp(t, "engine.update_model", map[string]any{"state": state, "model": "gpt-4o-mini", "context_length": 64000})
	require.Nil(t, e)
	resp := sessionCall(t, map[string]any{"event": EventUndo, "state": json.RawMessage(jsonField(t, small, "state")), "messages": grown, "originals": originals})
	require.Contains(t, resp["error"].(map[string]any)["message"], "the originals no longer fit")
}

// TestOutputFingerprintIsTheDecodedMessages: the same messages written by
// another encoder (escapes, key order, number spelling) have the fingerprint;
// any change to what they decode to changes it.
func TestOutputFingerprintIsTheDecodedMessages(t *testing.T) {
	msgs := []string{`{"role":"user","content":"a–b <c>\n","n":10}`, `{"role":"tool","content":[1,"x"]}`}
	same := []string{`{"n":1e1,"content":"a\u2013b \u003cc\u003e\n","role":"user"}`, `{"content":[1.0,"\u0078"],"role":"tool"}`}
	require.Equal(t, outputFingerprint(msgs), outputFingerprint(same))
	for _, other := range [][]string{
		{`{"role":"user","content":"a–b <c>","n":10}`, msgs[1]},
		{msgs[0], `{"role":"tool","content":["x",1]}`},
		{msgs[0], `{"role":"tool","content":[1,"x"],"extra":null}`},
		{`{"role":"user","content":"a–b <c>\n","n":"10"}`, msgs[1]},
		{`{"role":"user","content":"a–b <c>\n","m":10}`, msgs[1]},
		msgs[:1],
	} {
		require.NotEqual(t, outputFingerprint(msgs), outputFingerprint(other), "%v", other)
	}
}
