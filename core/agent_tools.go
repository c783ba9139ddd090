package core

import "github.com/tidwall/gjson"

// The context tools every context engine gives the agent (issue 28): context_status
// reads the meter and the last compaction, compact_now asks for a compaction before
// the next request. A lossless engine adds context_search and context_expand
// (recall.go). Both are answered from the engine state alone, by session.run's
// tool_call event, so they work the same in every runtime and engine.

// The context tools' names.
const (
	ToolContextStatus = "context_status"
	ToolCompactNow    = "compact_now"
)

var contextToolDefs = []toolDef{
	{ToolContextStatus,
		"How full the context window is: its size, the tokens the last request used, the threshold at which the conversation is compacted, how many compactions there were, whether one is requested, and what the last one summarized. Use it to decide whether to call compact_now.",
		`{"type":"object","properties":{},"additionalProperties":false}`},
	{ToolCompactNow,
		"Ask for the conversation to be compacted before the next request: its older turns are summarized (with focus, what to keep in detail) and the newest kept verbatim. Use it at a natural break (a subtask done) when context_status shows the window filling up.",
		`{"type":"object","properties":{"focus":{"type":"string","maxLength":1000,"description":"What the summary should keep in detail, e.g. the failing migration."}},"additionalProperties":false}`},
}

// CompactionRequest is a compaction the agent asked for (compact_now): the next
// should_compress says so and the next compress is forced, with its focus unless
// the compress gives one.
type CompactionRequest struct {
	Focus string `json:"focus,omitempty"`
}

// isContextTool reports whether name is one of the tools of every engine.
func isContextTool(name string) bool { return name == ToolContextStatus || name == ToolCompactNow }

// contextToolAnswer answers a call of a context tool, changing the state for
// compact_now; the answer is the tool result's JSON text.
func contextToolAnswer(s *EngineState, name string, args gjson.Result) string {
	if args.Type == gjson.String { // OpenAI sends the arguments as a JSON string
		args = gjson.Parse(args.Str)
	}
	if args.Exists() && args.Type != gjson.Null && !args.IsObject() {
		return toolError(name + ": arguments must be a JSON object")
	}
	if name == ToolContextStatus {
		if args.IsObject() && len(args.Map()) > 0 {
			return toolError(name + " takes no arguments")
		}
		st := s.Status()
		out := map[string]any{"window": st.ContextLength, "used": st.LastPromptTokens, "threshold": st.ThresholdTokens,
			"compactions": st.CompressionCount, "compaction_requested": s.Requested != nil, "last_compaction": nil}
		if c := s.LastCompaction; c != nil && c.Compacted {
			last := map[string]any{"tokens_before": c.TokensBefore, "tokens_after": c.TokensAfter, "pruned_outputs": c.Pruned}
			if c.Summarized != nil {
				last["summarized_messages"] = []int{c.Summarized.From, c.Summarized.To}
			}
			out["last_compaction"] = last
		}
		return string(mustMarshal(out))
	}
	focus := ""
	var bad string
	args.ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str != "focus":
			bad = name + ": unknown argument " + k.Raw + " (it takes focus)"
		default:
			var ok bool
			if focus, ok = readFocus(v); !ok || v.Type != gjson.String { // null too: a given focus is a string
				bad = name + ": focus must be a string of at most 1000 bytes"
			}
		}
		return bad == ""
	})
	if bad != "" {
		return toolError(bad)
	}
	s.Requested = &CompactionRequest{Focus: focus}
	msg := "Compaction requested: the conversation is compacted before the next request"
	if focus != "" {
		msg += ", keeping " + focus + " in detail"
	}
	return string(mustMarshal(map[string]any{"ok": true, "message": msg + "."}))
}

// toolError is a tool result that reports a bad call.
func toolError(msg string) string { return string(mustMarshal(map[string]string{"error": msg})) }
