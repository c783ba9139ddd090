package core

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// TestRangeCompaction: a range compaction summarizes exactly [from, to): the
// messages before and after come through unchanged, nothing is pruned, and a
// range that splits a tool group or leaves the conversation is refused.
func TestRangeCompaction(t *testing.T) {
	msgs := smallSession(6) // 0 system, 1 user, 2 assistant, then (call, result) pairs from 3
	cfg := map[string]any{"model": map[string]any{"context_length": 200000}}
	res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "summarizer": "builtin", "range": map[string]any{"from": 5, "to": 11}})
	require.Nil(t, e)
	r := gjson.ParseBytes(res)
	require.Equal(t, `{"from":5,"to":11}`, r.Get("report.summarized").Raw, "below the threshold too")
	require.Equal(t, "[]", r.Get("report.pruned").Raw)
	out := r.Get("messages").Array()
	require.Len(t, out, 5+1+len(msgs)-11)
	require.Contains(t, out[0].Get("content").Str, "You are a coding agent.", "the system prompt, with the compaction note")
	for i := 1; i < 5; i++ {
		b, _ := marshal(msgs[i])
		require.JSONEq(t, string(b), out[i].Raw, "head message %d", i)
	}
	for i := 11; i < len(msgs); i++ {
		b, _ := marshal(msgs[i])
		require.JSONEq(t, string(b), out[i-11+6].Raw, "tail message %d", i)
	}
	for _, c := range []struct {
		rng  any
		path string
		msg  string
	}{
		{map[string]any{"from": 4, "to": 11}, "/range/from", "starts inside a tool group"},
		{map[string]any{"from": 5, "to": 10}, "/range/to", "ends inside a tool group"},
		{map[string]any{"from": 5, "to": 99}, "/range", "is not a span"},
		{map[string]any{"from": 7, "to": 7}, "/range", "is not a span"},
		{[]any{5, 11}, "/range", `range must be {"from": i, "to": j}`},
	} {
		_, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "config": cfg, "range": c.rng})
		require.NotNil(t, e, "%v", c.rng)
		require.Equal(t, c.path, e.Path, "%v", c.rng)
		require.Contains(t, e.Message, c.msg, "%v", c.rng)
	}
}
