package core

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The transcript vectors of session.run (docs/SESSION.md): each transcript is a
// session's steps, each step an event with the effects the core asks for, the
// scripted answers and the end. They are generated here, natively, and replayed
// by the Go engine through wazero (host), Node and Python through their engines'
// loops. Every call of every step is also a plain case of testdata/session.run.json.
//
//	go test ./core -run TestSessionTranscriptsUpToDate -update

// scriptStep is a step to generate: an event, its fields and the answers, in
// order, to the effects it will ask for (cancel: the host stops there).
type scriptStep struct {
	event   string
	fields  map[string]any
	answers []any
}

type scriptTranscript struct {
	name, covers string
	config       map[string]any
	steps        []scriptStep
}

// cancelAnswer scripts a cancellation in place of an answer.
const cancelAnswer = "cancel"

func ok(v any) any { return map[string]any{"ok": v} }
func failAnswer(code, msg string) any {
	return map[string]any{"error": map[string]any{"code": code, "message": msg}}
}

type transcriptEffect struct {
	Effect json.RawMessage `json:"effect"`
	Answer any             `json:"answer,omitempty"`
	Cancel bool            `json:"cancel,omitempty"`
}

type transcriptStep struct {
	Event   string             `json:"event"`
	Fields  map[string]any     `json:"fields"`
	Effects []transcriptEffect `json:"effects"`
	End     map[string]any     `json:"end"`
}

type transcriptOut struct {
	Name   string           `json:"name"`
	Covers string           `json:"covers"`
	State  json.RawMessage  `json:"state"`
	Steps  []transcriptStep `json:"steps"`
}

type transcriptFile struct {
	Comment     string          `json:"_comment"`
	Transcripts []transcriptOut `json:"transcripts"`
}

// bazelSession is a short Anthropic conversation for native compaction.
func bazelSession() []any {
	return []any{
		map[string]any{"role": "user", "content": "Port the build to Bazel."},
		map[string]any{"role": "assistant", "content": []any{text("I'll read the Makefile first."), toolUse("tu1", "read_file", "Makefile")}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "tu1", "content": "all: build\nbuild:\n\tgo build ./...\n"}}},
		map[string]any{"role": "assistant", "content": []any{text("The Makefile only runs go build; a BUILD.bazel per package will do.")}},
		map[string]any{"role": "user", "content": "Go on with the cmd/ package."},
	}
}

// roomySummarizer is the summarizer window of most transcripts.
const roomySummarizer = 16000

func sessionScripts() []scriptTranscript {
	small := smallSession(6)
	grown := append(append([]any{}, small...), say("The lexer tests are written."), user("Run them."))
	edited := append(append([]any{}, small[:1]...), append([]any{user("Refactor the lexer module.")}, small[2:]...)...)
	// The sessions are small beside a 2,000-token window; the summarizer's own
	// window is larger, so one request holds the summarized turns (the chunk
	// transcripts set a small one).
	roomyTiny := map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 4, "summary_context_length": roomySummarizer}}
	chunky := map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 4, "summary_context_length": 2500}}
	lossless := map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 4, "summary_context_length": roomySummarizer},
		"context": map[string]any{"engine": "lossless"}}
	parted := map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 4, "summary_context_length": roomySummarizer},
		"context": map[string]any{"engine": "lossless", "archive_part": 4}}
	anthropic := map[string]any{"model": map[string]any{"name": "claude-sonnet-4-5", "provider": "anthropic", "context_length": 200000}}
	pinned, _ := compactedWithArchive(small, roomyTiny, map[string]any{"pins": []any{"t2"}})
	undoOut, undoOriginals := compactedWithArchive(small, roomyTiny, nil)
	undoLosslessOut, undoLosslessOriginals := compactedWithArchive(small, lossless, map[string]any{"archive_id": "r1"})
	var undoTexts []any
	for _, m := range undoLosslessOriginals {
		b, _ := marshal(m)
		undoTexts = append(undoTexts, string(b))
	}
	compaction := map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "compaction", "content": "The user asked to port the build to Bazel; the Makefile only runs go build."}}}
	summary := "## Goal\nRefactor the parser module into a lexer and a grammar.\n## Progress\n- Read src/parser_0.py .. src/parser_5.py"
	search := map[string]any{"hits": []any{map[string]any{"id": "r1.7", "range_id": "r1", "position": 7, "role": "tool", "text": "def parser3():\n    return 3"}}, "total": 1}
	return []scriptTranscript{
		{"compress-host-summary", "a compressor compaction: one summarize effect, the report recorded (count, estimate, breaker)", roomyTiny,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "force": true}, []any{ok(summary)}}}},
		{"compress-summarizer-timeout", "a summarizer timeout is an answer: the extractive fallback, fallback_code timeout, recorded", roomyTiny,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "force": true}, []any{failAnswer("timeout", "the summarizer did not answer within 120000 ms")}}}},
		{"compress-in-chunks", "too big already: turns beyond the summarizer's window (summary_context_length) are summarized chunk after chunk, each request updating the answer to the one before; the report counts the chunks", chunky,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "force": true}, []any{ok(summary), ok(summary + "\n- Read the handlers"), ok(summary + "\n- Read the handlers\n- Split the lexer out")}}}},
		{"compress-chunk-failure-falls-back", "a summarizer failure on a later chunk is the extractive fallback of the whole middle, as for one request", chunky,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "force": true}, []any{ok(summary), failAnswer("error", "the input is too long")}}}},
		{"compress-summary-contract", "divergence 5: the summarizer gets the SummaryRequest and answers a string; a blank one is fallback_code empty", roomyTiny,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "force": true}, []any{ok("   ")}}}},
		{"compress-focus-and-memory", "divergence 4: the focus topic and the memory context are added to the summary request by the core", roomyTiny,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "force": true, "focus": "the lexer's tokens", "memory_context": "The user prefers pytest."}, []any{ok(summary)}}}},
		{"compress-instructions-and-focus", "steering: the config's compression.instructions and the event's focus reach the summary request; the builtin summary keeps a Focus section",
			map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 4, "instructions": "Keep every file path.", "summary_context_length": roomySummarizer}},
			[]scriptStep{
				{EventCompress, map[string]any{"messages": small, "force": true, "focus": "parser_3"}, []any{ok(summary)}},
				{EventCompress, map[string]any{"messages": small, "force": true, "focus": "parser_3", "summarizer": "builtin"}, nil},
			}},
		{"compress-builtin-below-threshold", "the builtin summarizer asks for nothing; a compaction below the threshold records its report without compacting", roomyTiny,
			[]scriptStep{
				{EventCompress, map[string]any{"messages": small, "force": true, "summarizer": "builtin", "output": "refs"}, nil},
				{EventCompress, map[string]any{"messages": smallSession(1), "summarizer": "builtin", "prompt_tokens": 100}, nil},
			}},
		{"lossless-compress-then-recompress", "a lossless session: range id, summary, archive, then a re-compaction of the compacted conversation as r2", lossless,
			[]scriptStep{
				{EventCompress, map[string]any{"messages": small, "force": true}, []any{ok("r1"), ok(summary), ok(nil)}},
				{EventCompress, map[string]any{"messages": append(smallSession(6)[:0:0], compactedForTranscript(small, summary)...), "force": true}, []any{ok("r2"), ok(summary + "\n- Split the lexer out"), ok(nil)}},
			}},
		{"lossless-archive-failure-records-nothing", "divergence 2: archived before recorded; a failed archive ends the sequence, nothing recorded", lossless,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "force": true}, []any{ok("r1"), ok(summary), failAnswer("store", "database is locked")}}}},
		{"lossless-archive-in-parts", "an archive in parts (context.archive_part 4): the range and the first window's rows, then each window's rows from the messages the effect's next names, the summary's row last; recorded after the last part", parted,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "force": true}, []any{ok("r1"), ok(summary), ok(nil), ok(nil), ok(nil), ok(nil)}}}},
		{"lossless-archive-part-failure-records-nothing", "a store failure on a later part of an archive ends the sequence, nothing recorded (the host rolls the parts back)", parted,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "force": true}, []any{ok("r1"), ok(summary), ok(nil), failAnswer("store", "disk I/O error")}}}},
		{"lossless-no-range-id", "store failure before the compaction: the store gave no range id", lossless,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "force": true}, []any{failAnswer("store", "unable to open database file")}}}},
		{"compress-cancelled", "cancellation while the summarizer runs: nothing recorded", roomyTiny,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "force": true}, []any{cancelAnswer}}}},
		{"agent-asks-for-a-compaction", "steering: the context tools of every engine; context_status reads the meter, compact_now makes should_compress say requested and forces the next compress with its focus, which clears it", roomyTiny,
			[]scriptStep{
				{EventTools, map[string]any{"format": "anthropic"}, nil},
				{EventToolCall, map[string]any{"name": "context_status", "arguments": "{}"}, nil},
				{EventToolCall, map[string]any{"name": "compact_now", "arguments": map[string]any{"focus": "parser_3"}}, nil},
				{EventToolCall, map[string]any{"name": "compact_now", "arguments": map[string]any{"focus": 7}}, nil},
				{EventShouldCompress, map[string]any{"prompt_tokens": 10}, nil},
				{EventCompress, map[string]any{"messages": small}, []any{ok(summary)}},
				{EventToolCall, map[string]any{"name": "context_status"}, nil},
				{EventShouldCompress, map[string]any{"prompt_tokens": 10}, nil},
			}},
		{"tool-call-search-and-expand", "divergence 6: the search effect carries recall.query's terms; expand gives the originals back", lossless,
			[]scriptStep{
				{EventToolCall, map[string]any{"name": "context_search", "arguments": `{"query":"parser3 \"return 3\"","limit":5}`}, []any{ok(search)}},
				{EventToolCall, map[string]any{"name": "context_expand", "arguments": map[string]any{"id": "r1.7"}}, []any{ok([]any{`{"role":"tool","tool_call_id":"t3","content":"def parser3():\n    return 3"}`})}},
				{EventToolCall, map[string]any{"name": "context_expand", "arguments": map[string]any{}}, nil},
				{EventToolCall, map[string]any{"name": "context_search", "arguments": map[string]any{"query": "lexer"}}, []any{failAnswer("store", "disk I/O error")}},
			}},
		{"tool-call-compressor-has-no-tools", "a compressor engine answers every tool call with an error answer, asking nothing", roomyTiny,
			[]scriptStep{{EventToolCall, map[string]any{"name": "context_search", "arguments": map[string]any{"query": "x"}}, nil}}},
		{"background-compaction-spliced", "compaction that never blocks: at prepare_ratio of the threshold should_compress says prepare_compaction; a compress with prepare summarizes ahead and keeps it; at the trigger the compress splices it into the grown conversation, asking nothing", roomyTiny,
			[]scriptStep{
				{EventShouldCompress, map[string]any{"prompt_tokens": 1300}, nil},
				{EventCompress, map[string]any{"messages": small, "prepare": true}, []any{ok(summary)}},
				{EventShouldCompress, map[string]any{"prompt_tokens": 1400}, nil},
				{EventCompress, map[string]any{"messages": grown, "prompt_tokens": 1600}, nil},
			}},
		{"background-compaction-discarded-when-the-prefix-changed", "a prepared compaction whose messages changed is discarded: the compress at the trigger summarizes the conversation it is given", roomyTiny,
			[]scriptStep{
				{EventCompress, map[string]any{"messages": small, "prepare": true}, []any{ok(summary)}},
				{EventCompress, map[string]any{"messages": edited, "prompt_tokens": 1600}, []any{ok(summary + "\n- The request changed")}},
			}},
		{"background-compaction-lossless", "a lossless engine prepares without a range id; the splice at the trigger reserves it and archives what the prepared compaction summarized", lossless,
			[]scriptStep{
				{EventCompress, map[string]any{"messages": small, "prepare": true}, []any{ok(summary)}},
				{EventCompress, map[string]any{"messages": grown, "prompt_tokens": 1600}, []any{ok("r1"), ok(nil)}},
			}},
		{"pins-kept-across-compactions", "pins: a compaction keeps the pinned tool group (by its call id) verbatim after the summary, never summarized or pruned; the session keeps the pin by the messages' bytes, so the next compaction keeps them too, at their new indexes", roomyTiny,
			[]scriptStep{
				{EventCompress, map[string]any{"messages": small, "force": true, "summarizer": "builtin", "pins": []any{"t2"}}, nil},
				{EventCompress, map[string]any{"messages": append(pinned, say("The lexer is split out."), user("Now the grammar.")), "force": true, "summarizer": "builtin"}, nil},
			}},
		{"undo-takes-the-last-compaction-back", "see and undo: the status has the last compaction's summary; undo checks the conversation still starts with the compaction's result and writes its input back, the host's copy of the archived originals in place and what came after the result verbatim", roomyTiny,
			[]scriptStep{
				{EventCompress, map[string]any{"messages": small, "force": true, "summarizer": "builtin"}, nil},
				{EventUndo, map[string]any{"messages": append(undoOut, say("The lexer is split out."), user("Now the grammar.")), "originals": undoOriginals}, nil},
			}},
		{"undo-lossless-from-the-store", "a lossless engine's undo asks the store for the range's originals (an expand effect) when the host gives none", lossless,
			[]scriptStep{
				{EventCompress, map[string]any{"messages": small, "force": true, "summarizer": "builtin"}, []any{ok("r1"), ok(nil)}},
				{EventUndo, map[string]any{"messages": undoLosslessOut}, []any{ok(undoTexts)}},
			}},
		{"range-compaction", "a range compaction summarizes exactly the messages the event names, below the threshold too, nothing pruned", roomyTiny,
			[]scriptStep{{EventCompress, map[string]any{"messages": small, "range": map[string]any{"from": 5, "to": 11}}, []any{ok(summary)}}}},
		{"usage-trigger-model-reset", "the engine's own events: usage, the trigger, a model switch, a reset", roomyTiny,
			[]scriptStep{
				{EventUsage, map[string]any{"usage": map[string]any{"input_tokens": 1200, "cache_read_input_tokens": 400, "output_tokens": 50}}, nil},
				{EventShouldCompress, map[string]any{}, nil},
				{EventUpdateModel, map[string]any{"model": "gpt-4o-mini", "context_length": 128000, "provider": "openai", "base_url": "https://api.openai.com/v1"}, nil},
				{EventShouldCompress, map[string]any{"prompt_tokens": 1600}, nil},
				{EventReset, map[string]any{}, nil},
				{EventStatus, map[string]any{}, nil},
			}},
		{"apply-compaction-re-estimates", "divergence 1: after an Anthropic on-demand compaction the prompt size is the swapped conversation's estimate", anthropic,
			[]scriptStep{
				{EventUsage, map[string]any{"usage": map[string]any{"input_tokens": 150000, "output_tokens": 900}}, nil},
				{EventApply, map[string]any{"messages": bazelSession(), "response": compaction, "count": 4}, nil},
			}},
		{"lossless-apply-compaction-archives", "a lossless session archives what the on-demand compaction summarized before the swap is kept", withLossless(anthropic),
			[]scriptStep{{EventApply, map[string]any{"messages": bazelSession(), "response": compaction}, []any{ok("r1"), ok(nil)}}}},
		{"prepare-trims-another-issuers-item", "divergence 3: the core reads the whole body for compaction items; a lossless session archives what it trimmed", withLossless(map[string]any{"model": map[string]any{"name": "gpt-5", "provider": "openai", "context_length": 400000}}),
			[]scriptStep{
				{EventObserveResp, map[string]any{"response": map[string]any{"object": "response", "output": []any{map[string]any{"type": "compaction", "id": "cmp_1", "encrypted_content": "enc-1"}}}}, nil},
				{EventUpdateModel, map[string]any{"model": "claude-sonnet-4-5", "context_length": 200000, "provider": "anthropic"}, nil},
				{EventPrepare, map[string]any{"body": map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": []any{
					map[string]any{"role": "user", "content": "Start."},
					map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "compaction", "content": "summary by another route"}}},
					map[string]any{"role": "user", "content": "Go on."},
				}}}, []any{ok("r1"), ok(nil)}},
				{EventObserveError, map[string]any{"status": 400, "body": map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": "context_management: unknown field"}}}, nil},
			}},
	}
}

func withLossless(cfg map[string]any) map[string]any {
	out := map[string]any{"context": map[string]any{"engine": "lossless"}}
	for k, v := range cfg {
		out[k] = v
	}
	return out
}

// compactedForTranscript is the conversation after a builtin-free compaction of
// msgs with summary, as a host would send it next: the compaction's messages.
func compactedForTranscript(msgs []any, summary string) []any {
	req := map[string]any{"messages": msgs, "config": tinyWindow, "force": true}
	env, _ := marshal(map[string]any{"op": "compact.begin", "messages": req["messages"], "config": req["config"], "force": true})
	var begin struct {
		Result struct {
			State string `json:"state"`
		} `json:"result"`
	}
	_ = json.Unmarshal(Call(env), &begin)
	env, _ = marshal(map[string]any{"op": "compact.finish", "messages": msgs, "config": tinyWindow, "force": true, "state": begin.Result.State, "summary": summary})
	var fin struct {
		Result struct {
			Messages []any `json:"messages"`
		} `json:"result"`
	}
	_ = json.Unmarshal(Call(env), &fin)
	return fin.Result.Messages
}

// compactedWithArchive is msgs compacted (forced, builtin summary) as an engine
// with config cfg returns them, with the params extra (an archive_id, pins),
// and the originals it archived, in input order.
func compactedWithArchive(msgs []any, cfg, extra map[string]any) (out, originals []any) {
	req := map[string]any{"op": "compact.begin", "messages": msgs, "config": cfg, "force": true, "summarizer": "builtin"}
	for k, v := range extra {
		req[k] = v
	}
	env, _ := marshal(req)
	var res struct {
		Result struct {
			Messages []any `json:"messages"`
			Archived []struct {
				Message any `json:"message"`
			} `json:"archived"`
		} `json:"result"`
	}
	_ = json.Unmarshal(Call(env), &res)
	for _, a := range res.Result.Archived {
		originals = append(originals, a.Message)
	}
	return res.Result.Messages, originals
}

// sessionCall sends one session.run request natively.
func sessionCall(t *testing.T, req map[string]any) map[string]any {
	t.Helper()
	body := map[string]any{"op": "session.run"}
	for k, v := range req {
		body[k] = v
	}
	env, err := marshal(body)
	require.NoError(t, err)
	var resp map[string]any
	require.NoError(t, json.Unmarshal(Call(env), &resp))
	return resp
}

func generateTranscripts(t *testing.T) (transcriptFile, genSuite) {
	tf := transcriptFile{Comment: "Generated by core/session_transcripts_test.go (go test ./core -run TestSessionTranscriptsUpToDate -update): session.run transcripts (docs/SESSION.md). Each step sends its event and fields with the current state; each effect the core asks for must equal `effect`, and gets `answer` (or the host cancels); `end` is the sequence's result and state, its failure, or its cancellation. Replayed by the Go, Node and Python engines' loops."}
	steps := genSuite{Op: "session.run", Comment: "Generated with testdata/session/transcripts.json: every session.run call of every transcript step, as a plain request and response."}
	for _, sc := range sessionScripts() {
		start, e := callOp(t, "engine.start", map[string]any{"config": sc.config})
		require.Nil(t, e, sc.name)
		state := json.RawMessage(jsonField(t, start, "state"))
		out := transcriptOut{Name: sc.name, Covers: sc.covers, State: state}
		for si, s := range sc.steps {
			ts := transcriptStep{Event: s.event, Fields: s.fields, Effects: []transcriptEffect{}}
			var resume, answer any
			var held any
			var window []any // an archive part's next: the messages the next step sends
			for call := 0; ; call++ {
				req := map[string]any{"event": s.event, "state": state}
				for k, v := range s.fields {
					req[k] = v
				}
				if window != nil {
					req["messages"] = window
				}
				if resume != nil {
					req["resume"], req["answer"] = resume, answer
				}
				resp := sessionCall(t, req)
				require.Nil(t, resp["error"], "%s step %d: %v", sc.name, si, resp["error"])
				r := resp["result"].(map[string]any)
				steps.Cases = append(steps.Cases, genCaseOut{fmt.Sprintf("%s-%d-%d", sc.name, si, call), req, map[string]any{"result": r}})
				if v, has := r["result"]; has {
					held = v
				}
				if r["done"] == true {
					if f, failed := r["failed"]; failed {
						ts.End = map[string]any{"failed": f}
					} else {
						ts.End = map[string]any{"state": r["state"], "status": r["status"]}
						if held != nil {
							ts.End["result"] = held
						}
						b, err := json.Marshal(r["state"])
						require.NoError(t, err)
						state = b
					}
					break
				}
				effect, err := marshal(r["effect"])
				require.NoError(t, err)
				require.Less(t, call, len(s.answers), "%s step %d: the core asked for %s, and the script has no answer", sc.name, si, effect)
				if s.answers[call] == cancelAnswer {
					ts.Effects = append(ts.Effects, transcriptEffect{Effect: effect, Cancel: true})
					ts.End = map[string]any{"cancelled": true}
					break
				}
				ts.Effects = append(ts.Effects, transcriptEffect{Effect: effect, Answer: s.answers[call]})
				resume, answer = r["resume"], s.answers[call]
				window = nil
				if next, ok := r["effect"].(map[string]any)["next"].(map[string]any); ok {
					msgs := s.fields["messages"].([]any)
					window = msgs[int(next["from"].(float64)):int(next["to"].(float64))]
				}
			}
			require.Len(t, ts.Effects, len(s.answers), "%s step %d: effects asked vs answers scripted", sc.name, si)
			out.Steps = append(out.Steps, ts)
		}
		tf.Transcripts = append(tf.Transcripts, out)
	}
	return tf, steps
}

func jsonField(t *testing.T, raw json.RawMessage, key string) []byte {
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	return m[key]
}

func TestSessionTranscriptsUpToDate(t *testing.T) {
	tf, steps := generateTranscripts(t)
	checkGeneratedFile(t, "session/transcripts", tf, "TestSessionTranscriptsUpToDate")
	checkGeneratedFile(t, "session.run", steps, "TestSessionTranscriptsUpToDate")
}

// TestSessionTranscriptsSayWhatTheyCover asserts the behaviour each divergence
// vector stands for, so a regenerated file cannot quietly change it.
func TestSessionTranscriptsSayWhatTheyCover(t *testing.T) {
	tf, _ := generateTranscripts(t)
	by := map[string]transcriptOut{}
	for _, tr := range tf.Transcripts {
		by[tr.Name] = tr
	}
	endState := func(s transcriptStep) EngineState {
		var st EngineState
		b, _ := json.Marshal(s.End["state"])
		require.NoError(t, json.Unmarshal(b, &st))
		return st
	}
	// 2: a failed archive records nothing.
	f := by["lossless-archive-failure-records-nothing"].Steps[0]
	require.Contains(t, f.End, "failed")
	require.Contains(t, f.End["failed"].(map[string]any)["message"], "the compaction is not recorded: archiving it as r1 failed: database is locked")
	// Lossless: archived, then recorded, then r2 the next time.
	l := by["lossless-compress-then-recompress"]
	require.Equal(t, 1, endState(l.Steps[0]).CompressionCount)
	require.Equal(t, 2, endState(l.Steps[1]).CompressionCount)
	require.Contains(t, string(l.Steps[1].Effects[2].Effect), `"range_id":"r2"`)
	// 4: focus and memory in the summary request.
	fm := string(by["compress-focus-and-memory"].Steps[0].Effects[0].Effect)
	require.Contains(t, fm, `Focus topic: give priority to everything about the lexer's tokens.`)
	require.Contains(t, fm, `Context from the memory provider (use it, do not repeat it verbatim):\nThe user prefers pytest.`)
	// Steering: instructions and focus in the request, a Focus section in the builtin summary.
	steer := by["compress-instructions-and-focus"]
	ask := string(steer.Steps[0].Effects[0].Effect)
	require.Contains(t, ask, `Standing instructions for every summary (follow them):\nKeep every file path.\n\nFocus topic: give priority to everything about parser_3.`)
	builtin, _ := json.Marshal(steer.Steps[1].End["result"])
	require.Contains(t, string(builtin), `## Focus: parser_3\n- #9 assistant: call read_file(path=\"src/parser_3.py\")`)
	// The agent's compaction: requested, forced with its focus, then cleared.
	ag := by["agent-asks-for-a-compaction"].Steps
	require.Len(t, ag[0].End["result"].(map[string]any)["tools"], 2, "a compressor engine gives context_status and compact_now")
	require.Contains(t, ag[1].End["result"], `"compaction_requested":false`)
	require.Contains(t, ag[2].End["result"], `"ok":true`)
	require.Equal(t, true, endState(ag[2]).Requested != nil)
	require.Contains(t, ag[3].End["result"], `focus must be a string`)
	require.Equal(t, "requested", ag[4].End["result"].(map[string]any)["reason"])
	require.Contains(t, string(ag[5].Effects[0].Effect), `Focus topic: give priority to everything about parser_3.`, "the compress is forced, with the focus asked for")
	require.Nil(t, endState(ag[5]).Requested)
	require.Contains(t, ag[6].End["result"], `"summarized_messages":[`)
	require.Equal(t, "below_threshold", ag[7].End["result"].(map[string]any)["reason"])
	// 5 and the timeout: fallbacks with their codes.
	for name, code := range map[string]string{"compress-summary-contract": "empty", "compress-summarizer-timeout": "timeout"} {
		res := by[name].Steps[0].End["result"].(map[string]any)["report"].(map[string]any)
		require.Equal(t, true, res["fallback_used"], name)
		require.Equal(t, code, res["fallback_code"], name)
	}
	// 6: the search carries the plan's terms.
	require.Contains(t, string(by["tool-call-search-and-expand"].Steps[0].Effects[0].Effect), `"terms":["parser3","return 3"]`)
	// 1: the swapped conversation's estimate, not the reported 150,000.
	a := by["apply-compaction-re-estimates"].Steps[1]
	st := endState(a)
	require.Greater(t, st.LastPromptTokens, 0)
	require.Less(t, st.LastPromptTokens, 1000)
	// 3: another route's compaction item trimmed from the body, archived as r1.
	p := by["prepare-trims-another-issuers-item"].Steps[2]
	require.Equal(t, "r1", p.End["result"].(map[string]any)["trimmed"].(map[string]any)["archived_as"])
	// Cancellation ends with nothing recorded.
	require.Equal(t, map[string]any{"cancelled": true}, by["compress-cancelled"].Steps[0].End)
	require.True(t, strings.HasPrefix(by["tool-call-search-and-expand"].Steps[3].End["failed"].(map[string]any)["message"].(string), "ctxcompact: context_search: the store failed"))
}

// TestSessionCompressKeepsItsCompaction: the finish step of a compress event finds
// the compaction its begin step kept (so it neither reads nor plans the messages
// again), and a session.run request is never taken for a compact.finish.
func TestSessionCompressKeepsItsCompaction(t *testing.T) {
	dropPending()
	defer dropPending()
	start, e := callOp(t, "engine.start", map[string]any{"config": map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 4, "summary_context_length": roomySummarizer}}})
	require.Nil(t, e)
	msgs, err := marshal(smallSession(6))
	require.NoError(t, err)
	envelope := func(extra string) []byte {
		return []byte(`{"op":"session.run","event":"compress","state":` + string(jsonField(t, start, "state")) + `,"force":true` + extra + `,"messages":` + string(msgs) + `}`)
	}
	var first struct {
		Result struct {
			Resume json.RawMessage `json:"resume"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(Call(envelope("")), &first))
	require.NotEmpty(t, first.Result.Resume)
	pending.Lock()
	kept := len(pending.entries)
	pending.Unlock()
	require.Equal(t, 1, kept, "the begin step keeps its compaction")
	// Another begin step of the same conversation is a begin, not a finish.
	var again struct {
		Result map[string]any `json:"result"`
	}
	require.NoError(t, json.Unmarshal(Call(envelope("")), &again))
	require.Equal(t, false, again.Result["done"])
	require.Contains(t, again.Result, "effect")
	resp := Call(envelope(`,"resume":` + string(first.Result.Resume) + `,"answer":{"ok":"## Goal\nSplit the parser."}`))
	require.Contains(t, string(resp), `"done":true`)
	pending.Lock()
	left := len(pending.entries)
	pending.Unlock()
	require.Equal(t, 0, left, "the finish step took the compaction its begin kept")
}

// TestSessionArchiveStepReadsNoMessages: the step that answers an archive (its last
// part) reads only its resume, so the engines leave the messages out of it (docs/SESSION.md): every
// such call of the transcripts answers the same without them.
func TestSessionArchiveStepReadsNoMessages(t *testing.T) {
	b, err := os.ReadFile("../testdata/session.run.json")
	require.NoError(t, err)
	var file struct {
		Cases []struct {
			Name    string                     `json:"name"`
			Request map[string]json.RawMessage `json:"request"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(b, &file))
	seen := 0
	for _, c := range file.Cases {
		var resume struct {
			Step string          `json:"step"`
			Left json.RawMessage `json:"left"`
		}
		if json.Unmarshal(c.Request["resume"], &resume) != nil || resume.Step != "archive" || resume.Left != nil || c.Request["messages"] == nil {
			continue
		}
		seen++
		with, err := json.Marshal(c.Request)
		require.NoError(t, err)
		delete(c.Request, "messages")
		without, err := json.Marshal(c.Request)
		require.NoError(t, err)
		require.JSONEq(t, string(Dispatch("session.run", with)), string(Dispatch("session.run", without)), c.Name)
	}
	require.GreaterOrEqual(t, seen, 3, "the transcripts archive in compress and apply_compaction")
}
