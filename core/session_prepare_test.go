package core

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// runEvent runs a session event natively to its end, answering each effect
// with answer; it returns the result and the state it ended with.
func runEvent(t *testing.T, state json.RawMessage, event string, fields map[string]any, answer func(effect map[string]any) any) (any, json.RawMessage) {
	t.Helper()
	var resume, ans any
	for range 100 {
		req := map[string]any{"event": event, "state": state}
		for k, v := range fields {
			req[k] = v
		}
		if resume != nil {
			req["resume"], req["answer"] = resume, ans
		}
		resp := sessionCall(t, req)
		require.Nil(t, resp["error"], "%v", resp["error"])
		r := resp["result"].(map[string]any)
		if r["done"] == true {
			require.Nil(t, r["failed"])
			st, err := json.Marshal(r["state"])
			require.NoError(t, err)
			return r["result"], st
		}
		resume, ans = r["resume"], answer(r["effect"].(map[string]any))
	}
	t.Fatal("the event did not end")
	return nil, nil
}

func noEffects(t *testing.T) func(map[string]any) any {
	return func(e map[string]any) any { t.Fatalf("an effect: %v", e["type"]); return nil }
}

// TestSpliceIsTheCompactionOfThePrefixAndWhatFollows: on a shared trace, a
// compaction prepared at message n and spliced at n+k (both after whole tool
// groups) gives the messages a blocking compaction of the first n gives,
// followed by the k after, verbatim.
func TestSpliceIsTheCompactionOfThePrefixAndWhatFollows(t *testing.T) {
	if testing.Short() {
		t.Skip("a shared trace; runs without -short")
	}
	msgs := traceForChunks(t)
	cfg := map[string]any{"model": map[string]any{"context_length": 64000}}
	// n at an assistant message: the prefix ends after whole tool groups (else
	// the blocking compaction stubs a result the splice has).
	n, k := len(msgs)-12, 8
	role := func(i int) any { return msgs[i].(map[string]any)["role"] }
	for role(n) != "assistant" {
		n--
	}
	for role(n+k) != "assistant" {
		k--
	}
	start := startEngine(t, cfg)
	res, state := runEvent(t, start, EventCompress, map[string]any{"messages": msgs[:n], "prepare": true, "summarizer": "builtin"}, noEffects(t))
	require.EqualValues(t, n, res.(map[string]any)["prepared"].(map[string]any)["messages"])
	spliced, end := runEvent(t, state, EventCompress, map[string]any{"messages": msgs[:n+k], "force": true, "summarizer": "builtin"}, noEffects(t))
	blocking, _ := runEvent(t, start, EventCompress, map[string]any{"messages": msgs[:n], "force": true, "summarizer": "builtin"}, noEffects(t))

	rep := spliced.(map[string]any)["report"].(map[string]any)
	require.Equal(t, true, rep["prepared"])
	require.Equal(t, true, rep["fits"])
	// Every message but the summary is the blocking compaction's, then the k
	// verbatim; the summary's anchors and active request are chosen against the
	// messages the splice keeps verbatim, so they may differ.
	want := append(append([]any{}, blocking.(map[string]any)["messages"].([]any)...), msgs[n:n+k]...)
	got := spliced.(map[string]any)["messages"].([]any)
	h := int(rep["head_end"].(float64))
	require.Len(t, got, len(want))
	require.Equal(t, want[:h], got[:h])
	require.Equal(t, want[h+1:], got[h+1:])
	sum := got[h].(map[string]any)["content"].(string)
	require.Contains(t, sum, "[CONTEXT COMPACTION]")
	require.Contains(t, sum, "## Goal")
	require.False(t, gjson.GetBytes(end, "prepared").Exists(), "the splice uses it up")
	require.EqualValues(t, 1, gjson.GetBytes(end, "compression_count").Int())
}

// TestPreparedCompactionGoesStale: a preparation whose summary comes back after
// a compaction was recorded keeps nothing; a model switch drops one kept.
func TestPreparedCompactionGoesStale(t *testing.T) {
	msgs := smallSession(6)
	state := startEngine(t, map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 4, "summary_context_length": roomySummarizer}})
	first := sessionCall(t, map[string]any{"event": EventCompress, "state": state, "messages": msgs, "prepare": true, "summarizer": "host"})
	r := first["result"].(map[string]any)
	require.Equal(t, EffectSummarize, r["effect"].(map[string]any)["type"])
	_, recorded := runEvent(t, state, EventCompress, map[string]any{"messages": msgs, "force": true, "summarizer": "builtin"}, noEffects(t))
	require.EqualValues(t, 1, gjson.GetBytes(recorded, "compression_count").Int())

	late := sessionCall(t, map[string]any{"event": EventCompress, "state": recorded, "messages": msgs, "prepare": true, "summarizer": "host",
		"resume": r["resume"], "answer": ok("## Goal\nSplit the parser.")})
	end := late["result"].(map[string]any)
	require.Equal(t, true, end["done"])
	require.Nil(t, end["result"].(map[string]any)["prepared"])
	require.Equal(t, "a compaction was recorded while this one was prepared", end["result"].(map[string]any)["reason"])
	require.Nil(t, end["state"].(map[string]any)["prepared"])

	_, kept := runEvent(t, recorded, EventCompress, map[string]any{"messages": msgs, "prepare": true, "summarizer": "builtin"}, noEffects(t))
	require.True(t, gjson.GetBytes(kept, "prepared").Exists())
	res, e := callOp(t, "engine.update_model", map[string]any{"state": kept, "model": "gpt-4o", "context_length": 128000})
	require.Nil(t, e)
	require.False(t, gjson.GetBytes(jsonField(t, res, "state"), "prepared").Exists(), "prepared for another window")
}

// TestPrepareIsABoolean: the field is checked.
func TestPrepareIsABoolean(t *testing.T) {
	state := startEngine(t, tinyWindow)
	resp := sessionCall(t, map[string]any{"event": EventCompress, "state": state, "messages": smallSession(2), "prepare": "yes"})
	require.Equal(t, string(CodeInvalidRequest), resp["error"].(map[string]any)["code"])
	require.Equal(t, "/prepare", resp["error"].(map[string]any)["path"])
}
