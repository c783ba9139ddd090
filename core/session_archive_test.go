package core

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// runPartedCompress runs a lossless compress of msgs to its end as an engine
// would, answering every effect (r1, a fixed summary, ok) and sending each part's
// window as the next step's messages; edit, when not nil, may change a step's
// request. It returns the archive effects in order and the end.
func runPartedCompress(t *testing.T, msgs []any, part int, edit func(call int, req map[string]any)) (effects []map[string]any, end map[string]any) {
	t.Helper()
	cfg := map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 4},
		"context": map[string]any{"engine": "lossless", "archive_part": part}}
	start, e := callOp(t, "engine.start", map[string]any{"config": cfg})
	require.Nil(t, e)
	state := json.RawMessage(jsonField(t, start, "state"))
	var resume, answer any
	window := msgs
	for call := 0; call < 100; call++ {
		req := map[string]any{"event": EventCompress, "state": state, "messages": window, "force": true, "summarizer": "host"}
		if resume != nil {
			req["resume"], req["answer"] = resume, answer
		}
		if edit != nil {
			edit(call, req)
		}
		resp := sessionCall(t, req)
		if resp["error"] != nil {
			return effects, map[string]any{"error": resp["error"]}
		}
		r := resp["result"].(map[string]any)
		if r["done"] == true {
			return effects, r
		}
		effect := r["effect"].(map[string]any)
		resume, answer, window = r["resume"], ok(nil), nil
		switch effect["type"] {
		case EffectNextRangeID:
			answer, window = ok("r1"), msgs
		case EffectSummarize:
			answer, window = ok("## Goal\nSplit the parser."), msgs
		case EffectArchive:
			effects = append(effects, effect)
			if next, more := effect["next"].(map[string]any); more {
				window = msgs[int(next["from"].(float64)):int(next["to"].(float64))]
			}
		}
	}
	t.Fatal("the compress did not end")
	return nil, nil
}

// TestArchiveInPartsWritesTheSameRows: whatever the part's span, the parts'
// rows, in order, are the rows of the archive in one part, the range comes with
// the first part only, and the compaction is recorded once, after the last.
func TestArchiveInPartsWritesTheSameRows(t *testing.T) {
	msgs := smallSession(12)
	whole, end := runPartedCompress(t, msgs, DefaultArchivePart, nil)
	require.Len(t, whole, 1)
	require.NotContains(t, whole[0], "next")
	want := whole[0]["archive"].(map[string]any)["rows"].([]any)
	require.Greater(t, len(want), 20)
	wantState := withoutConfig(end["state"])
	for _, span := range []int{1, 2, 3, 5, 8, 13, 21} {
		parts, end := runPartedCompress(t, msgs, span, nil)
		require.Greater(t, len(parts), 1, "span %d", span)
		var rows []any
		for k, p := range parts {
			require.EqualValues(t, k, p["part"], "span %d", span)
			a := p["archive"].(map[string]any)
			if k == 0 {
				require.Equal(t, whole[0]["archive"].(map[string]any)["range"], a["range"], "span %d", span)
			} else {
				require.NotContains(t, a, "range", "span %d part %d", span, k)
			}
			if next, more := p["next"].(map[string]any); more {
				require.LessOrEqual(t, next["to"].(float64)-next["from"].(float64), float64(span))
			} else {
				require.Equal(t, len(parts)-1, k, "only the last part has no next")
			}
			rows = append(rows, a["rows"].([]any)...)
		}
		require.Equal(t, want, rows, "span %d", span)
		require.Equal(t, wantState, withoutConfig(end["state"]), "span %d: recorded as once", span)
	}
}

// TestArchivePartRefusesOtherMessages: a later part is made only from the window
// the last effect named, as the compaction read it.
func TestArchivePartRefusesOtherMessages(t *testing.T) {
	msgs := smallSession(12)
	cases := []struct {
		name string
		edit func(req map[string]any)
		code ErrorCode
		path string
	}{
		{"none", func(req map[string]any) { delete(req, "messages") }, CodeInvalidRequest, "/messages"},
		{"one too few", func(req map[string]any) { w := req["messages"].([]any); req["messages"] = w[:len(w)-1] }, CodeInvalidState, "/messages"},
		{"shifted", func(req map[string]any) {
			w := req["messages"].([]any)
			req["messages"] = append([]any{user("an edited message")}, w[1:]...)
		}, CodeInvalidState, "/messages"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first := -1
			_, end := runPartedCompress(t, msgs, 3, func(call int, req map[string]any) {
				resume, _ := req["resume"].(map[string]any)
				if resume["left"] != nil && first < 0 {
					first = call
					c.edit(req)
				}
			})
			require.Contains(t, end, "error")
			e := end["error"].(map[string]any)
			require.Equal(t, string(c.code), e["code"])
			require.Equal(t, c.path, e["path"])
			require.Contains(t, e["message"], "messages")
		})
	}
}

// withoutConfig is an engine state without its config (which holds the span).
func withoutConfig(state any) map[string]any {
	s := map[string]any{}
	for k, v := range state.(map[string]any) {
		if k != "config" {
			s[k] = v
		}
	}
	return s
}
