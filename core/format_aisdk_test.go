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
// of an assistant message is answered by the tool messages right after it (by a
// tool-result, or by an approval response to a request for it, or both), and that
// every tool-result there answers one of its calls, once.
func checkAISDKGroups(t *testing.T, out []json.RawMessage) {
	t.Helper()
	pending := map[string]bool{}     // calls of the open group without an answer
	approved := map[string]bool{}    // calls of the open group an approval answered
	approvals := map[string]string{} // approvalId -> toolCallId
	closeGroup := func(at int) {
		for id := range pending {
			t.Fatalf("output %d: call %q has no result in its group", at, id)
		}
		approved = map[string]bool{}
	}
	for i, raw := range out {
		m := gjson.ParseBytes(raw)
		if m.Get("role").Str == "tool" {
			for _, p := range m.Get("content").Array() {
				switch p.Get("type").Str {
				case "tool-result":
					id := p.Get("toolCallId").Str
					require.True(t, pending[id] || approved[id], "output %d: tool-result %q answers no pending call", i, id)
					delete(pending, id)
					delete(approved, id)
				case "tool-approval-response":
					id, ok := approvals[p.Get("approvalId").Str]
					require.True(t, ok && pending[id], "output %d: approval response answers no pending call", i)
					delete(pending, id)
					approved[id] = true
				}
			}
			continue
		}
		closeGroup(i)
		if m.Get("role").Str == "assistant" {
			for _, p := range m.Get("content").Array() {
				switch {
				case p.Get("type").Str == "tool-call" && !p.Get("providerExecuted").Bool():
					pending[p.Get("toolCallId").Str] = true
				case p.Get("type").Str == "tool-approval-request":
					approvals[p.Get("approvalId").Str] = p.Get("toolCallId").Str
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
//
// The exact counter (o200k_base) is run at 64K: its counts of the two lists must
// agree as well.
func TestAISDKTraces(t *testing.T) {
	skipShort(t)
	type run struct {
		window   int
		encoding string
	}
	runs := []run{{16_000, ""}, {32_000, ""}, {64_000, ""}, {128_000, ""}, {64_000, EncodingO200k}}
	for name, chat := range chatTraces(t) {
		ai := chatToAISDK(t, chat)
		chat := compactArguments(t, chat)
		for _, r := range runs {
			window := r.window
			label := fmt.Sprintf("%s/%dk", name, window/1000)
			cfg := map[string]any{"model": map[string]any{"context_length": window}}
			if r.encoding != "" {
				label += "/" + r.encoding
				cfg["tokens"] = map[string]any{"encoding": r.encoding}
			}
			t.Run(label, func(t *testing.T) {
				res, e := callOp(t, "compact.begin", map[string]any{"messages": chat, "config": cfg, "force": true, "summarizer": "builtin"})
				require.Nil(t, e)
				want := decodeResult(t, res)
				res, e = callOp(t, "compact.begin", map[string]any{"messages": ai, "format": "ai-sdk", "config": cfg, "force": true, "summarizer": "builtin"})
				require.Nil(t, e)
				got := decodeResult(t, res)
				checkAISDKCompaction(t, ai, got, cfg)

				w, g := want.Report, got.Report
				require.Equal(t, w.HeadEnd, g.HeadEnd, "head_end")
				require.Equal(t, w.TailStart, g.TailStart, "tail_start")
				require.Equal(t, w.Summarized, g.Summarized, "summarized")
				require.Equal(t, w.Pruned, g.Pruned, "pruned")
				require.Equal(t, w.MessagesAfter, g.MessagesAfter, "messages_after")
				require.InEpsilon(t, w.TokensBefore, g.TokensBefore, 0.05, "tokens_before")
				require.InEpsilon(t, w.TokensAfter, g.TokensAfter, 0.05, "tokens_after")

				if r.encoding == "" { // the report's estimate is the format's count of the output
					n, f := 0, newAISDKFormat()
					for _, m := range got.Messages {
						n += f.countItem(roughCounter, string(m))
					}
					require.Equal(t, n, g.TokensAfter, "tokens_after is the output's count")
				}
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
func checkAISDKCompaction(t *testing.T, input []json.RawMessage, r CompactResult, cfg map[string]any) {
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
	c, e := callOp(t, "tokens.count", map[string]any{"messages": r.Messages, "format": "ai-sdk", "config": cfg})
	require.Nil(t, e)
	perMessage := 0 // the total less the reply priming an exact count adds
	for _, n := range gjson.GetBytes(c, "per_message").Array() {
		perMessage += int(n.Int())
	}
	require.Equal(t, rep.TokensAfter, perMessage, "tokens.count of the output is the report's estimate")
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

// Edge-case scenarios of the ai-sdk format, for the generated vectors
// (testdata/*.ai-sdk.json) and the meaning tests below.
func aiApprovalRequest(approvalID, callID string) map[string]any {
	return map[string]any{"type": "tool-approval-request", "approvalId": approvalID, "toolCallId": callID}
}
func aiApprovalResponse(approvalID string, approved bool) map[string]any {
	return map[string]any{"type": "tool-approval-response", "approvalId": approvalID, "approved": approved}
}
func aiOutput(id, name string, output map[string]any) map[string]any {
	return map[string]any{"type": "tool-result", "toolCallId": id, "toolName": name, "output": output}
}
func aiTurn(id, name, path, out string) []any {
	return []any{aiMsg("assistant", aiCall(id, name, map[string]any{"path": path})), aiMsg("tool", aiResult(id, name, out))}
}

func aiSDKScenarios() map[string][]any {
	s := aiSession(6, 800)
	parallel3 := aiMsg("assistant", aiText("Reading all three at once."),
		aiCall("p1", "readFile", map[string]any{"path": "a.toml"}), aiCall("p2", "readFile", map[string]any{"path": "b.toml"}), aiCall("p3", "readFile", map[string]any{"path": "c.toml"}))
	approvalCall := aiMsg("assistant", aiText("Deleting the build directory needs your approval."),
		aiCall("d1", "shell", map[string]any{"command": "rm -rf build"}), aiApprovalRequest("ap1", "d1"))
	return map[string][]any{
		"parallel-head": cat(sys("You are a coding agent."), user("Check the three configs."), parallel3,
			aiMsg("tool", aiResult("p1", "readFile", code("a", 300)), aiResult("p2", "readFile", code("b", 300)), aiResult("p3", "readFile", code("c", 300))),
			s[4:]),
		"parallel-head-separate-tool-messages": cat(sys("You are a coding agent."), user("Check the three configs."), parallel3,
			aiMsg("tool", aiResult("p1", "readFile", code("a", 300))), aiMsg("tool", aiResult("p2", "readFile", code("b", 300))), aiMsg("tool", aiResult("p3", "readFile", code("c", 300))),
			s[4:]),
		"parallel-tail": cat(s[:len(s)-2],
			aiMsg("assistant", aiText("Running the linters in parallel."), aiCall("q1", "shell", map[string]any{"command": "ruff check src"}), aiCall("q2", "shell", map[string]any{"command": "mypy src"})),
			aiMsg("tool", aiResult("q1", "shell", code("ruff", 500))), aiMsg("tool", aiResult("q2", "shell", code("mypy", 500))),
			say("Both linters pass."), user("Ship it.")),
		"orphans": cat(s[:len(s)-2],
			aiMsg("assistant", aiCall("x1", "readFile", map[string]any{"path": "a.py"}), aiCall("x2", "readFile", map[string]any{"path": "b.py"})),
			aiMsg("tool", aiResult("x1", "readFile", "ok"), aiResult("ghost", "readFile", "stray")),
			aiMsg("tool", aiResult("ghost2", "shell", "a result whose call was never recorded")),
			aiMsg("assistant", aiCall("y1", "shell", map[string]any{"command": "make"})), user("Did it build?")),
		"approval-pending": cat(s[:len(s)-2], user("Clean the build."), approvalCall, aiMsg("tool", aiApprovalResponse("ap1", true))),
		"approval-executed": cat(s[:len(s)-2], user("Clean the build."), approvalCall, aiMsg("tool", aiApprovalResponse("ap1", true)),
			aiMsg("tool", aiResult("d1", "shell", "removed build/")), say("Done."), user("Thanks.")),
		"approval-denied": cat(s[:len(s)-2], user("Clean the build."), approvalCall, aiMsg("tool", aiApprovalResponse("ap1", false)),
			aiMsg("tool", aiOutput("d1", "shell", map[string]any{"type": "execution-denied", "reason": "not now"})), say("Left it."), user("Thanks.")),
		"approval-orphan": cat(s[:len(s)-2], user("Clean the build."),
			aiMsg("assistant", aiCall("d2", "shell", map[string]any{"command": "ls"})),
			aiMsg("tool", aiResult("d2", "shell", "a b"), aiApprovalResponse("nobody", true)), say("Listed."), user("Thanks.")),
		"error-outputs": cat(s[:4],
			aiMsg("assistant", aiCall("e1", "shell", map[string]any{"command": "pytest"}), aiCall("e2", "http", map[string]any{"url": "https://example.test"}), aiCall("e3", "readFile", map[string]any{"path": "x.json"}), aiCall("e4", "readFile", map[string]any{"path": "y.md"})),
			aiMsg("tool", aiOutput("e1", "shell", map[string]any{"type": "error-text", "value": "FAILED tests/test_x.py::test_a - AssertionError\n" + code("err", 600)}),
				aiOutput("e2", "http", map[string]any{"type": "error-json", "value": map[string]any{"status": 500, "body": code("body", 400)}}),
				aiOutput("e3", "readFile", map[string]any{"type": "json", "value": map[string]any{"data": code("json", 500)}}),
				aiOutput("e4", "readFile", map[string]any{"type": "content", "value": []any{aiText(code("doc", 500))}})),
			s[4:]),
		"v4-shape": cat(sys("You are a coding agent."), user("Read it."),
			aiMsg("assistant", map[string]any{"type": "tool-call", "toolCallId": "v1", "toolName": "readFile", "args": map[string]any{"path": "old.py"}}),
			aiMsg("tool", map[string]any{"type": "tool-result", "toolCallId": "v1", "toolName": "readFile", "result": code("old", 900)}),
			s[4:]),
		"provider-executed": cat(sys("You are a coding agent."), user("Search the docs."),
			aiMsg("assistant", map[string]any{"type": "tool-call", "toolCallId": "ws1", "toolName": "web_search", "input": map[string]any{"query": "fastapi"}, "providerExecuted": true},
				aiOutput("ws1", "web_search", map[string]any{"type": "json", "value": map[string]any{"hits": 3}}), aiText("Found three pages.")),
			s[4:]),
	}
}

func generateAISDKSuites(t *testing.T) map[string]genSuite {
	sc := aiSDKScenarios()
	req := func(kv ...any) map[string]any {
		out := map[string]any{"format": "ai-sdk", "config": tinyWindow, "force": true, "summarizer": "builtin"}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	begin := genSuite{Op: "compact.begin", Comment: "Generated by core/format_aisdk_test.go (go test ./core -run TestAISDKVectorsUpToDate -update): the ai-sdk format (Vercel AI SDK ModelMessage) — parallel calls at the head and tail boundaries (in one tool message and in several), orphan and missing results, tool approvals (pending, executed, denied, orphan), error and JSON outputs pruned to a text output, the v4 args/result shape, provider-executed calls, detection without format, and bad input. The meaning of each case is asserted in TestAISDKScenarioMeanings."}
	for _, c := range []genCase{
		{"ai-sdk-parallel-calls-at-head-boundary", req("messages", sc["parallel-head"])},
		{"ai-sdk-parallel-results-in-separate-tool-messages", req("messages", sc["parallel-head-separate-tool-messages"])},
		{"ai-sdk-parallel-calls-at-tail-boundary", req("messages", sc["parallel-tail"])},
		{"ai-sdk-orphan-and-missing-results-repaired", req("messages", sc["orphans"])},
		{"ai-sdk-pending-approval-is-not-stubbed", req("messages", sc["approval-pending"])},
		{"ai-sdk-executed-approval-keeps-response-and-result", req("messages", sc["approval-executed"])},
		{"ai-sdk-denied-approval", req("messages", sc["approval-denied"])},
		{"ai-sdk-orphan-approval-response-taken-out", req("messages", sc["approval-orphan"])},
		{"ai-sdk-long-results-pruned-to-text-outputs", req("messages", sc["error-outputs"], "config", map[string]any{"model": map[string]any{"context_length": 4000}, "compression": map[string]any{"protect_last_n": 12}})},
		{"ai-sdk-v4-shape", req("messages", sc["v4-shape"], "config", map[string]any{"model": map[string]any{"context_length": 3000}, "compression": map[string]any{"protect_last_n": 12}})},
		{"ai-sdk-provider-executed-call-is-content", req("messages", sc["provider-executed"])},
		{"ai-sdk-detected-from-tool-parts", map[string]any{"messages": sc["parallel-tail"], "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"ai-sdk-summary-request", req("messages", aiSession(6, 800), "summarizer", "host")},
		{"ai-sdk-rejects-developer-role", req("messages", []any{user("hi"), map[string]any{"role": "developer", "content": "x"}})},
		{"ai-sdk-rejects-top-level-system", req("messages", []any{user("hi")}, "system", "s")},
	} {
		if c.request["summarizer"] == "host" {
			delete(c.request, "summarizer")
		}
		begin.Cases = append(begin.Cases, genCaseOut{c.name, c.request, want(t, "compact.begin", c.request)})
	}

	validate := genSuite{Op: "validate", Comment: "Generated like compact.begin.ai-sdk.json: validate with the ai-sdk format's rules and paths."}
	for _, c := range []genCase{
		{"ai-sdk-clean", map[string]any{"messages": aiSession(2, 300), "format": "ai-sdk"}},
		{"ai-sdk-clean-detected", map[string]any{"messages": aiSession(2, 300)}},
		{"ai-sdk-orphan-and-missing", map[string]any{"messages": sc["orphans"], "format": "ai-sdk"}},
		{"ai-sdk-approvals-clean", map[string]any{"messages": sc["approval-executed"], "format": "ai-sdk"}},
		{"ai-sdk-pending-approval-clean", map[string]any{"messages": sc["approval-pending"], "format": "ai-sdk"}},
		{"ai-sdk-orphan-approval-response", map[string]any{"messages": sc["approval-orphan"], "format": "ai-sdk"}},
		{"ai-sdk-call-needs-name-and-input", map[string]any{"format": "ai-sdk", "messages": []any{user("go"),
			aiMsg("assistant", map[string]any{"type": "tool-call", "toolCallId": "n1"}), aiMsg("tool", aiResult("n1", "", "ok"))}}},
		{"ai-sdk-tool-content-must-be-parts", map[string]any{"format": "ai-sdk", "messages": []any{user("go"),
			aiMsg("assistant", aiCall("s1", "shell", map[string]any{"command": "ls"})), map[string]any{"role": "tool", "content": "ok"}}}},
		{"ai-sdk-empty-and-duplicate-ids", map[string]any{"format": "ai-sdk", "messages": []any{user("go"),
			aiMsg("assistant", aiCall("", "shell", map[string]any{"command": "ls"}), aiCall("d", "shell", map[string]any{"command": "pwd"})), aiMsg("tool", aiResult("d", "shell", "/")),
			aiMsg("assistant", aiCall("d", "shell", map[string]any{"command": "pwd"})), aiMsg("tool", aiResult("d", "shell", "/"))}}},
		{"ai-sdk-developer-role-is-a-problem", map[string]any{"format": "ai-sdk", "messages": []any{map[string]any{"role": "developer", "content": "x"}, user("hi")}}},
	} {
		validate.Cases = append(validate.Cases, genCaseOut{c.name, c.request, want(t, "validate", c.request)})
	}

	sanitize := genSuite{Op: "sanitize", Comment: "Generated like compact.begin.ai-sdk.json: sanitize repairs ai-sdk tool pairs — orphan tool-result parts taken out of their tool message (the message removed when nothing is left), stubs as error-text tool-results in a new tool message after the group, approvals answering their calls."}
	for _, c := range []genCase{
		{"ai-sdk-well-formed-is-unchanged", map[string]any{"messages": aiSession(2, 300), "format": "ai-sdk"}},
		{"ai-sdk-orphans-out-and-stubs-in", map[string]any{"messages": sc["orphans"], "format": "ai-sdk"}},
		{"ai-sdk-duplicate-result-in-one-message", map[string]any{"format": "ai-sdk", "messages": []any{user("go"),
			aiMsg("assistant", aiCall("c1", "shell", map[string]any{"command": "ls"})), aiMsg("tool", aiResult("c1", "shell", "first"), aiResult("c1", "shell", "again"))}}},
		{"ai-sdk-pending-approval-is-unchanged", map[string]any{"messages": sc["approval-pending"], "format": "ai-sdk"}},
		{"ai-sdk-executed-approval-is-unchanged", map[string]any{"messages": sc["approval-executed"], "format": "ai-sdk"}},
		{"ai-sdk-orphan-approval-response-taken-out", map[string]any{"messages": sc["approval-orphan"], "format": "ai-sdk"}},
		{"ai-sdk-stub-at-the-end", map[string]any{"messages": cat(aiSession(1, 300), aiMsg("assistant", aiCall("z1", "shell", map[string]any{"command": "make"})))}},
	} {
		sanitize.Cases = append(sanitize.Cases, genCaseOut{c.name, c.request, want(t, "sanitize", c.request)})
	}

	prune := genSuite{Op: "prune", Comment: "Generated like compact.begin.ai-sdk.json: prune gives each long ai-sdk tool-result a text output holding the placeholder, every other byte kept."}
	for _, c := range []genCase{
		{"ai-sdk-prunes-outside-the-budgeted-tail", map[string]any{"messages": aiSession(6, 800), "format": "ai-sdk", "config": tinyWindow}},
		{"ai-sdk-prunes-error-json-and-content-outputs", map[string]any{"messages": cat(sc["error-outputs"], aiTurn("f1", "readFile", "z.py", code("z", 1400)), say("ok"), user("next")), "format": "ai-sdk", "config": tinyWindow}},
	} {
		prune.Cases = append(prune.Cases, genCaseOut{c.name, c.request, want(t, "prune", c.request)})
	}

	cache := genSuite{Op: "cache.apply", Comment: "Generated like compact.begin.ai-sdk.json: ai-sdk breakpoints are providerOptions.anthropic.cacheControl, on the message when its last part can carry one (@ai-sdk/anthropic marks a message's last part), else on its last part that can (not reasoning or approval parts); existing markers are stripped first."}
	marked := aiMsg("assistant", aiText("Thinking done."), map[string]any{"type": "reasoning", "text": "private"})
	old := map[string]any{"role": "user", "content": "old marker", "providerOptions": map[string]any{"anthropic": map[string]any{"cacheControl": map[string]any{"type": "ephemeral"}}}}
	for _, c := range []genCase{
		{"ai-sdk-system-and-3", map[string]any{"messages": aiSession(2, 300), "format": "ai-sdk"}},
		{"ai-sdk-reasoning-last-marks-a-part", map[string]any{"messages": []any{sys("s"), user("u"), marked}, "format": "ai-sdk", "ttl": "1h"}},
		{"ai-sdk-old-markers-stripped", map[string]any{"messages": []any{sys("s"), old, say("a"), user("u"), say("b"), user("c"), say("d")}, "format": "ai-sdk"}},
		{"ai-sdk-detected", map[string]any{"messages": aiSession(2, 300)}},
	} {
		cache.Cases = append(cache.Cases, genCaseOut{c.name, c.request, want(t, "cache.apply", c.request)})
	}
	return map[string]genSuite{"compact.begin.ai-sdk": begin, "validate.ai-sdk": validate, "sanitize.ai-sdk": sanitize, "prune.ai-sdk": prune, "cache.apply.ai-sdk": cache}
}

// TestAISDKVectorsUpToDate regenerates the ai-sdk vectors and fails when the
// committed files differ (or rewrites them with -update).
func TestAISDKVectorsUpToDate(t *testing.T) {
	checkGenerated(t, generateAISDKSuites(t), "TestAISDKVectorsUpToDate")
}

// TestAISDKScenarioMeanings asserts what each ai-sdk vector means, beside the
// invariants every compaction keeps.
func TestAISDKScenarioMeanings(t *testing.T) {
	sc := aiSDKScenarios()
	compact := func(t *testing.T, msgs []any, cfg map[string]any) CompactResult {
		res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "format": "ai-sdk", "config": cfg, "force": true, "summarizer": "builtin"})
		require.Nil(t, e)
		r := decodeResult(t, res)
		var input []json.RawMessage
		b, _ := marshal(msgs)
		require.NoError(t, json.Unmarshal(b, &input))
		checkAISDKCompaction(t, input, r, cfg)
		return r
	}
	sanitize := func(t *testing.T, msgs []any) (SanitizeResult, []json.RawMessage) {
		res, e := callOp(t, "sanitize", map[string]any{"messages": msgs, "format": "ai-sdk"})
		require.Nil(t, e)
		var r struct {
			SanitizeResult
			Messages []json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(res, &r))
		return r.SanitizeResult, r.Messages
	}
	problems := func(t *testing.T, msgs []any) []string {
		res, e := callOp(t, "validate", map[string]any{"messages": msgs, "format": "ai-sdk"})
		require.Nil(t, e)
		var r ValidateResult
		require.NoError(t, json.Unmarshal(res, &r))
		var out []string
		for _, p := range r.Problems {
			out = append(out, p.Code+" "+p.Path)
		}
		return out
	}
	cases := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"parallel results in one tool message end the head with their group", func(t *testing.T) {
			r := compact(t, sc["parallel-head"], tinyWindow)
			require.Equal(t, 4, r.Report.HeadEnd)
		}},
		{"parallel results in separate tool messages end the head with the last", func(t *testing.T) {
			r := compact(t, sc["parallel-head-separate-tool-messages"], tinyWindow)
			require.Equal(t, 6, r.Report.HeadEnd)
		}},
		{"the tail never starts at a tool message", func(t *testing.T) {
			msgs := sc["parallel-tail"]
			for _, w := range []int{1500, 2000, 3000, 4000} {
				r := compact(t, msgs, map[string]any{"model": map[string]any{"context_length": w}, "compression": map[string]any{"protect_last_n": 3}})
				if r.Report.Summarized != nil {
					require.NotEqual(t, "tool", msgs[r.Report.TailStart].(map[string]any)["role"], "window %d", w)
				}
			}
		}},
		{"orphan parts are taken out, a message of orphans removed, missing calls stubbed", func(t *testing.T) {
			res, out := sanitize(t, sc["orphans"])
			require.Equal(t, []int{18}, res.Removed)
			require.Equal(t, []int{17}, res.Repaired)
			require.Equal(t, []string{"x2", "y1"}, res.Stubbed)
			require.NotContains(t, string(out[17]), "ghost")
			stub := gjson.ParseBytes(out[18])
			require.Equal(t, "tool", stub.Get("role").Str)
			require.Equal(t, "x2", stub.Get("content.0.toolCallId").Str)
			require.Equal(t, "readFile", stub.Get("content.0.toolName").Str, "a stub names its call's tool")
			require.Equal(t, "error-text", stub.Get("content.0.output.type").Str)
		}},
		{"of a result given twice in one message the first stays", func(t *testing.T) {
			res, out := sanitize(t, []any{user("go"), aiMsg("assistant", aiCall("c1", "shell", map[string]any{"command": "ls"})), aiMsg("tool", aiResult("c1", "shell", "first"), aiResult("c1", "shell", "again"))})
			require.Equal(t, []int{2}, res.Repaired)
			require.Equal(t, "first", gjson.GetBytes(out[2], "content.0.output.value").Str)
			require.Equal(t, int64(1), gjson.GetBytes(out[2], "content.#").Int())
		}},
		{"an approval response answers its call: no stub while the tool waits to run", func(t *testing.T) {
			res, _ := sanitize(t, sc["approval-pending"])
			require.Empty(t, res.Stubbed)
			require.Empty(t, problems(t, sc["approval-pending"]))
			r := compact(t, sc["approval-pending"], tinyWindow)
			require.Empty(t, r.Report.StubsAdded)
		}},
		{"an approved and executed call keeps both the response and the result", func(t *testing.T) {
			for _, k := range []string{"approval-executed", "approval-denied"} {
				res, _ := sanitize(t, sc[k])
				require.Empty(t, res.Removed, k)
				require.Empty(t, res.Repaired, k)
				require.Empty(t, res.Stubbed, k)
				require.Empty(t, problems(t, sc[k]), k)
			}
		}},
		{"a response to no approval request is taken out", func(t *testing.T) {
			res, out := sanitize(t, sc["approval-orphan"])
			require.Equal(t, []int{18}, res.Repaired)
			require.NotContains(t, string(out[18]), "nobody")
			require.Equal(t, []string{"orphan_tool_result /messages/18/content/1"}, problems(t, sc["approval-orphan"]))
		}},
		{"long outputs of every kind are pruned to a text output naming the call", func(t *testing.T) {
			res, e := callOp(t, "prune", map[string]any{"messages": sc["error-outputs"], "format": "ai-sdk", "config": tinyWindow})
			require.Nil(t, e)
			var r struct {
				Messages []json.RawMessage `json:"messages"`
				Pruned   []int             `json:"pruned"`
			}
			require.NoError(t, json.Unmarshal(res, &r))
			require.Contains(t, r.Pruned, 5)
			m := gjson.ParseBytes(r.Messages[5])
			for k, what := range []string{`shell(command="pytest")`, `http(url="https://example.test")`, `readFile(path="x.json")`, `readFile(path="y.md")`} {
				out := m.Get(fmt.Sprintf("content.%d.output", k))
				require.Equal(t, "text", out.Get("type").Str)
				require.Contains(t, out.Get("value").Str, PrunedPrefix+" "+what)
			}
			in, _ := marshal(sc["error-outputs"][5])
			require.Equal(t, gjson.GetBytes(in, "content.0.toolCallId").Raw, m.Get("content.0.toolCallId").Raw, "the rest of the part is kept")
		}},
		{"the v4 shape: args are the input, result is pruned in place", func(t *testing.T) {
			r := compact(t, sc["v4-shape"], map[string]any{"model": map[string]any{"context_length": 3000}, "compression": map[string]any{"protect_last_n": 12}})
			require.Equal(t, 4, r.Report.HeadEnd)
			v := problems(t, sc["v4-shape"])
			require.Empty(t, v)
			res, e := callOp(t, "prune", map[string]any{"messages": cat(sc["v4-shape"][:2], say("more"), sc["v4-shape"][2:]), "format": "ai-sdk", "config": tinyWindow})
			require.Nil(t, e)
			require.Contains(t, gjson.GetBytes(res, "messages.4.content.0.result").Str, PrunedPrefix+` readFile(path="old.py")`)
		}},
		{"a provider-executed call is content: no group, no stub", func(t *testing.T) {
			res, _ := sanitize(t, sc["provider-executed"])
			require.Empty(t, res.Stubbed)
			require.Empty(t, problems(t, sc["provider-executed"]))
		}},
		{"detected from tool parts without format", func(t *testing.T) {
			a, e := callOp(t, "compact.begin", map[string]any{"messages": sc["parallel-tail"], "config": tinyWindow, "force": true, "summarizer": "builtin"})
			require.Nil(t, e)
			b, e := callOp(t, "compact.begin", map[string]any{"messages": sc["parallel-tail"], "format": "ai-sdk", "config": tinyWindow, "force": true, "summarizer": "builtin"})
			require.Nil(t, e)
			require.JSONEq(t, string(b), string(a))
		}},
		{"cache markers go on the message, or on its last part that can carry one", func(t *testing.T) {
			res, e := callOp(t, "cache.apply", map[string]any{"messages": []any{sys("s"), user("u"), aiMsg("assistant", aiText("Thinking done."), map[string]any{"type": "reasoning", "text": "private"})}, "format": "ai-sdk"})
			require.Nil(t, e)
			m := gjson.GetBytes(res, "messages")
			require.Equal(t, `{"type":"ephemeral"}`, m.Get("0.providerOptions.anthropic.cacheControl").Raw)
			require.Equal(t, `{"type":"ephemeral"}`, m.Get("2.content.0.providerOptions.anthropic.cacheControl").Raw)
			require.False(t, m.Get("2.providerOptions").Exists())
			again, e := callOp(t, "cache.apply", map[string]any{"messages": json.RawMessage(m.Raw), "format": "ai-sdk"})
			require.Nil(t, e)
			require.Equal(t, m.Raw, gjson.GetBytes(again, "messages").Raw, "applying to its own output gives the same bytes")
		}},
		{"the summary is a plain message and the system note ends the system message", func(t *testing.T) {
			r := compact(t, aiSession(6, 800), tinyWindow)
			require.Equal(t, "user", roleOf(t, r.Messages[r.Report.HeadEnd]))
			require.True(t, strings.HasPrefix(gjson.GetBytes(r.Messages[r.Report.HeadEnd], "content").Str, SummaryPrefix))
			require.True(t, strings.HasSuffix(gjson.GetBytes(r.Messages[0], "content").Str, SystemNote))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, c.check)
	}
}

// mergeToolMessages joins each run of consecutive tool messages into one, as the
// SDK itself sends them (one tool message answering parallel calls).
func mergeToolMessages(t testing.TB, msgs []json.RawMessage) []json.RawMessage {
	var out []json.RawMessage
	var parts []string
	flush := func() {
		if parts != nil {
			out = append(out, json.RawMessage(`{"role":"tool","content":[`+strings.Join(parts, ",")+`]}`))
			parts = nil
		}
	}
	for _, raw := range msgs {
		m := gjson.ParseBytes(raw)
		if m.Get("role").Str != "tool" {
			flush()
			out = append(out, raw)
			continue
		}
		for _, p := range m.Get("content").Array() {
			parts = append(parts, p.Raw)
		}
	}
	flush()
	return out
}

// TestAISDKTracesMergedToolMessages compacts the converted traces with parallel
// results joined into one tool message each, at 16K-128K: the invariants hold and
// validate is clean (the item counts differ from chat's, so the boundaries may).
func TestAISDKTracesMergedToolMessages(t *testing.T) {
	skipShort(t)
	merged := 0
	for name, chat := range chatTraces(t) {
		ai := chatToAISDK(t, chat)
		m := mergeToolMessages(t, ai)
		merged += len(ai) - len(m)
		for _, window := range []int{16_000, 32_000, 64_000, 128_000} {
			t.Run(fmt.Sprintf("%s/%dk", name, window/1000), func(t *testing.T) {
				cfg := map[string]any{"model": map[string]any{"context_length": window}}
				res, e := callOp(t, "compact.begin", map[string]any{"messages": m, "format": "ai-sdk", "config": cfg, "force": true, "summarizer": "builtin"})
				require.Nil(t, e)
				checkAISDKCompaction(t, m, decodeResult(t, res), cfg)
			})
		}
	}
	require.Positive(t, merged, "some trace has parallel results to join")
}

// TestAISDKDetection: AI SDK parts name the format when nothing else does; input
// that fits several formats reads as Anthropic (blocks, or a top-level system); an
// explicit format wins.
func TestAISDKDetection(t *testing.T) {
	ai := aiSession(1, 100)
	both := cat(ai, turn("assistant", toolUse("u1", "Read", "a.py")), turn("user", toolResult("u1", "ok")))
	detect := func(msgs []message, hasSystem bool) Format { return detectFormat(msgs, hasSystem) }
	read := func(list []any) []message {
		b, _ := marshal(list)
		msgs, err := parseMessages(gjson.ParseBytes(b), roughCounter, nil)
		require.NoError(t, err)
		return msgs
	}
	require.Equal(t, FormatAISDK, detect(read(ai), false))
	require.Equal(t, FormatAnthropic, detect(read(ai), true))
	require.Equal(t, FormatAnthropic, detect(read(both), false))
	require.Equal(t, FormatOpenAI, detect(read(smallSession(1)), false))

	b, _ := marshal(ai)
	f, msgs, err := readList(gjson.Result{}, gjson.ParseBytes(b), false, roughCounter, nil)
	require.NoError(t, err)
	require.Equal(t, FormatAISDK, f.name())
	require.Equal(t, []string{"r0", "r1"}, msgs[3].answers(), "read again by the AI SDK reader")
	f, _, err = readList(gjson.Parse(`"openai"`), gjson.ParseBytes(b), false, roughCounter, nil)
	require.NoError(t, err)
	require.Equal(t, FormatOpenAI, f.name(), "an explicit format wins")
	p, ok := ParseFormat("ai-sdk")
	require.True(t, ok)
	require.Equal(t, FormatAISDK, p)
	require.Contains(t, Formats(), FormatAISDK)
}
