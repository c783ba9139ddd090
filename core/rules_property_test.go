package core

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// The property suite of the provider rules: generated sessions in each format
// holding signed thinking, redacted thinking, encrypted reasoning items, thought
// signatures, images in user messages and tool results, parallel calls and a
// model switch mid-session, compacted at 8K-200K windows and compacted again, give
// requests that break no rule of their provider (validate, rules.go). Seeded: the
// same sessions every run.

const pngData = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"

// ruleSession is a generated session: its messages, format and provider.
type ruleSession struct {
	format   Format
	provider string
	msgs     []any
}

// genOutput is a tool output of one of sizes (characters), drawn from rng.
func genOutput(rng *rand.Rand, id string, sizes []int) string {
	return code(id, sizes[rng.Intn(len(sizes))])
}

// genAnthropic: steps of [thinking (signed), redacted_thinking?, text?, tool_use
// x1-3] and their results (text, or text and an image); a turn's first step always
// thinks, a later one only half the time (interleaved thinking or not); some steps
// end the turn with an answer and a new user message (an image in it); at the
// model switch, between turns, the client drops the earlier model's thinking
// blocks and the new model signs its own.
func genAnthropic(rng *rand.Rand, turns int, sizes []int, aisdk bool) []any {
	msgs := []any{}
	user := func(k int) any {
		if aisdk {
			return aisdkUser(k)
		}
		return map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": fmt.Sprintf("Task %d: port the module.", k)},
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": pngData}}}}
	}
	msgs = append(msgs, user(0))
	switchAt := turns / 2
	model := "a"
	turnStart := true
	for k := 0; k < turns; k++ {
		if turnStart && k >= switchAt && model == "a" { // model switch, between turns: the old model's thinking blocks go
			model = "b"
			for _, m := range msgs {
				mm := m.(map[string]any)
				if mm["role"] != "assistant" {
					continue
				}
				var kept []any
				for _, b := range mm["content"].([]any) {
					t := b.(map[string]any)["type"]
					if t != "thinking" && t != "redacted_thinking" && t != "reasoning" {
						kept = append(kept, b)
					}
				}
				if len(kept) == 0 {
					kept = []any{map[string]any{"type": "text", "text": "(earlier reasoning)"}}
				}
				mm["content"] = kept
			}
		}
		var blocks, results []any
		sig := fmt.Sprintf("sig-%s-%03d", model, k)
		// thinking opens each turn; later steps of the turn think again only with
		// interleaved thinking
		thinks := turnStart || rng.Intn(2) == 0
		switch {
		case !thinks:
		case aisdk:
			blocks = append(blocks, map[string]any{"type": "reasoning", "text": "I should look at the files.",
				"providerOptions": map[string]any{"anthropic": map[string]any{"signature": sig}}})
			if rng.Intn(3) == 0 {
				blocks = append(blocks, map[string]any{"type": "reasoning", "text": "",
					"providerOptions": map[string]any{"anthropic": map[string]any{"redactedData": "EmwKAhgB" + sig}}})
			}
		default:
			blocks = append(blocks, map[string]any{"type": "thinking", "thinking": "I should look at the files.", "signature": sig})
			if rng.Intn(3) == 0 {
				blocks = append(blocks, map[string]any{"type": "redacted_thinking", "data": "EmwKAhgB" + sig})
			}
		}
		if rng.Intn(2) == 0 {
			blocks = append(blocks, map[string]any{"type": "text", "text": "Reading them."})
		}
		calls := 1 + rng.Intn(3)
		for c := 0; c < calls; c++ {
			id := fmt.Sprintf("toolu_%03d_%d", k, c)
			out := genOutput(rng, id, sizes)
			img := rng.Intn(4) == 0
			if aisdk {
				blocks = append(blocks, map[string]any{"type": "tool-call", "toolCallId": id, "toolName": "read_file", "input": map[string]any{"path": id + ".py"}})
				output := map[string]any{"type": "text", "value": out}
				if img {
					output = map[string]any{"type": "content", "value": []any{
						map[string]any{"type": "text", "text": out},
						map[string]any{"type": "media", "data": pngData, "mediaType": "image/png"}}}
				}
				results = append(results, map[string]any{"type": "tool-result", "toolCallId": id, "toolName": "read_file", "output": output})
				continue
			}
			blocks = append(blocks, map[string]any{"type": "tool_use", "id": id, "name": "read_file", "input": map[string]any{"path": id + ".py"}})
			var content any = out
			if img {
				content = []any{map[string]any{"type": "text", "text": out},
					map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": pngData}}}
			}
			results = append(results, map[string]any{"type": "tool_result", "tool_use_id": id, "content": content})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": blocks})
		if aisdk {
			msgs = append(msgs, map[string]any{"role": "tool", "content": results})
		} else {
			msgs = append(msgs, map[string]any{"role": "user", "content": results})
		}
		if k < turns-1 && rng.Intn(3) == 0 { // the turn ends: an answer, a new task
			msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("Done with step %d.", k)}}})
			msgs = append(msgs, user(k+1))
			turnStart = true
		} else {
			turnStart = false
		}
	}
	return msgs
}

// genResponses: turns of [reasoning (encrypted, id), function_call x1-3 (ids)],
// their outputs, and at a turn's end [reasoning, assistant message] and a new
// user message with an image; in half the sessions a compaction item of an
// earlier compact call leads; the model switches halfway (new reasoning ids).
func genResponses(rng *rand.Rand, turns int, sizes []int) []any {
	user := func(k int) any {
		return map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "input_text", "text": fmt.Sprintf("Task %d: port the module.", k)},
			map[string]any{"type": "input_image", "image_url": "data:image/png;base64," + pngData}}}
	}
	msgs := []any{user(0)}
	if rng.Intn(2) == 0 { // the session was compacted by the compact endpoint before
		msgs = []any{map[string]any{"type": "compaction", "id": "cmp_0", "encrypted_content": "gAAAAD" + pngData}, user(0)}
	}
	model := "a"
	for k := 0; k < turns; k++ {
		if k == turns/2 {
			model = "b"
		}
		msgs = append(msgs, map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%s_%03d", model, k), "summary": []any{},
			"encrypted_content": "gAAAAB" + model + fmt.Sprint(k)})
		calls := 1 + rng.Intn(3)
		var outs []any
		for c := 0; c < calls; c++ {
			id := fmt.Sprintf("call_%03d_%d", k, c)
			msgs = append(msgs, map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": id, "name": "read_file",
				"arguments": fmt.Sprintf(`{"path":"%s.py"}`, id)})
			outs = append(outs, map[string]any{"type": "function_call_output", "call_id": id, "output": genOutput(rng, id, sizes)})
		}
		msgs = append(msgs, outs...)
		if k < turns-1 && rng.Intn(3) == 0 {
			msgs = append(msgs, map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%s_%03d_end", model, k), "summary": []any{},
				"encrypted_content": "gAAAAC" + model + fmt.Sprint(k)},
				map[string]any{"type": "message", "id": fmt.Sprintf("msg_%03d", k), "role": "assistant",
					"content": []any{map[string]any{"type": "output_text", "text": fmt.Sprintf("Done with step %d.", k)}}},
				user(k+1))
		}
	}
	return msgs
}

// genGemini: model steps of [functionCall (signed), functionCall x0-2 (parallel,
// unsigned)], their functionResponse parts, answers with a signed text part, and
// user messages with inline images.
func genGemini(rng *rand.Rand, turns int, sizes []int) []any {
	user := func(k int) any {
		return map[string]any{"role": "user", "parts": []any{
			map[string]any{"text": fmt.Sprintf("Task %d: port the module.", k)},
			map[string]any{"inlineData": map[string]any{"mimeType": "image/png", "data": pngData}}}}
	}
	msgs := []any{user(0)}
	model := "a"
	for k := 0; k < turns; k++ {
		if k == turns/2 {
			model = "b"
		}
		calls := 1 + rng.Intn(3)
		var parts, resps []any
		for c := 0; c < calls; c++ {
			name := fmt.Sprintf("read_%03d_%d", k, c)
			p := map[string]any{"functionCall": map[string]any{"name": name, "args": map[string]any{"path": name + ".py"}}}
			if c == 0 {
				p["thoughtSignature"] = fmt.Sprintf("Cs0B%s%03d", model, k)
			}
			parts = append(parts, p)
			resps = append(resps, map[string]any{"functionResponse": map[string]any{"name": name, "response": map[string]any{"content": genOutput(rng, name, sizes)}}})
		}
		msgs = append(msgs, map[string]any{"role": "model", "parts": parts}, map[string]any{"role": "user", "parts": resps})
		if k < turns-1 && rng.Intn(3) == 0 {
			msgs = append(msgs, map[string]any{"role": "model", "parts": []any{map[string]any{"text": fmt.Sprintf("Done with step %d.", k),
				"thoughtSignature": fmt.Sprintf("Ct%s%03d", model, k)}}}, user(k+1))
		}
	}
	return msgs
}

// aisdkUser is an AI SDK user message: task k, and an image.
func aisdkUser(k int) any {
	return map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": fmt.Sprintf("Task %d: port the module.", k)},
		map[string]any{"type": "image", "image": pngData, "mediaType": "image/png"}}}
}

// genAISDKOpenAI: AI SDK messages as the OpenAI Responses provider returns them:
// steps of [reasoning (item id and encrypted content in providerOptions.openai; a
// second summary part of the same item half the time), tool-call x1-3 (item ids)],
// their tool results (text, or text and an image), and at a turn's end [reasoning,
// text] and a new user message with an image; new ids after the model switch.
func genAISDKOpenAI(rng *rand.Rand, turns int, sizes []int) []any {
	user := aisdkUser
	reasoning := func(id string) []any {
		part := func(text string) any {
			return map[string]any{"type": "reasoning", "text": text, "providerOptions": map[string]any{"openai": map[string]any{
				"itemId": id, "reasoningEncryptedContent": "gAAAAB" + id}}}
		}
		if rng.Intn(2) == 0 {
			return []any{part("**Looking at the files**"), part("**Choosing the order**")}
		}
		return []any{part("**Looking at the files**")}
	}
	msgs := []any{user(0)}
	model := "a"
	for k := 0; k < turns; k++ {
		if k == turns/2 {
			model = "b"
		}
		parts := reasoning(fmt.Sprintf("rs_%s_%03d", model, k))
		var results []any
		for c, calls := 0, 1+rng.Intn(3); c < calls; c++ {
			id := fmt.Sprintf("call_%03d_%d", k, c)
			parts = append(parts, map[string]any{"type": "tool-call", "toolCallId": id, "toolName": "read_file", "input": map[string]any{"path": id + ".py"},
				"providerOptions": map[string]any{"openai": map[string]any{"itemId": "fc_" + id}}})
			out := genOutput(rng, id, sizes)
			output := map[string]any{"type": "text", "value": out}
			if rng.Intn(4) == 0 {
				output = map[string]any{"type": "content", "value": []any{map[string]any{"type": "text", "text": out},
					map[string]any{"type": "media", "data": pngData, "mediaType": "image/png"}}}
			}
			results = append(results, map[string]any{"type": "tool-result", "toolCallId": id, "toolName": "read_file", "output": output})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": parts}, map[string]any{"role": "tool", "content": results})
		if k < turns-1 && rng.Intn(3) == 0 {
			end := append(reasoning(fmt.Sprintf("rs_%s_%03d_end", model, k)), map[string]any{"type": "text", "text": fmt.Sprintf("Done with step %d.", k),
				"providerOptions": map[string]any{"openai": map[string]any{"itemId": fmt.Sprintf("msg_%s_%03d", model, k)}}})
			msgs = append(msgs, map[string]any{"role": "assistant", "content": end}, user(k+1))
		}
	}
	return msgs
}

// genAISDKGemini: AI SDK messages as the Google provider returns them: steps of
// [tool-call (signed in providerOptions.google), tool-call x0-2 (parallel,
// unsigned)], their results, answers with a signed text part, user messages with
// images.
func genAISDKGemini(rng *rand.Rand, turns int, sizes []int) []any {
	user := aisdkUser
	signed := func(sig string) map[string]any {
		return map[string]any{"google": map[string]any{"thoughtSignature": sig}}
	}
	msgs := []any{user(0)}
	model := "a"
	for k := 0; k < turns; k++ {
		if k == turns/2 {
			model = "b"
		}
		var parts, results []any
		for c, calls := 0, 1+rng.Intn(3); c < calls; c++ {
			id := fmt.Sprintf("call_%03d_%d", k, c)
			p := map[string]any{"type": "tool-call", "toolCallId": id, "toolName": "read_file", "input": map[string]any{"path": id + ".py"}}
			if c == 0 {
				p["providerOptions"] = signed(fmt.Sprintf("Cs0B%s%03d", model, k))
			}
			parts = append(parts, p)
			results = append(results, map[string]any{"type": "tool-result", "toolCallId": id, "toolName": "read_file",
				"output": map[string]any{"type": "text", "value": genOutput(rng, id, sizes)}})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": parts}, map[string]any{"role": "tool", "content": results})
		if k < turns-1 && rng.Intn(3) == 0 {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("Done with step %d.", k),
				"providerOptions": signed(fmt.Sprintf("Ct%s%03d", model, k))}}}, user(k+1))
		}
	}
	return msgs
}

// genOpenAIChat: chat completions with images in user messages (the only role
// that may hold them), steps of parallel tool calls and their text results, and
// answers that end a turn.
func genOpenAIChat(rng *rand.Rand, turns int, sizes []int) []any {
	user := func(k int) any {
		return map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": fmt.Sprintf("Task %d: port the module.", k)},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + pngData}}}}
	}
	msgs := []any{map[string]any{"role": "system", "content": "You are a coding agent."}, user(0)}
	for k := 0; k < turns; k++ {
		var calls, results []any
		for c, n := 0, 1+rng.Intn(3); c < n; c++ {
			id := fmt.Sprintf("call_%03d_%d", k, c)
			calls = append(calls, map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "read_file", "arguments": fmt.Sprintf(`{"path":"%s.py"}`, id)}})
			results = append(results, map[string]any{"role": "tool", "tool_call_id": id, "content": genOutput(rng, id, sizes)})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
		msgs = append(msgs, results...)
		if k < turns-1 && rng.Intn(3) == 0 {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": fmt.Sprintf("Done with step %d.", k)}, user(k+1))
		}
	}
	return msgs
}

// Sizes of the tool outputs: from a line to ~10K tokens; small for the vectors.
var (
	ruleSizes      = []int{80, 600, 3000, 12000, 40000}
	ruleSizesSmall = []int{80, 400, 2400}
)

// ruleKind is one kind of generated session: a format and the provider it goes to.
type ruleKind struct {
	name     string
	format   Format
	provider string
}

// ruleKinds: every format, and AI SDK messages for each provider. A kind's name is
// its vectors' prefix (the format's name where one provider takes it).
var ruleKinds = []ruleKind{
	{"anthropic", FormatAnthropic, ProviderAnthropic},
	{"ai-sdk", FormatAISDK, ProviderAnthropic},
	{"ai-sdk-openai", FormatAISDK, ProviderOpenAI},
	{"ai-sdk-gemini", FormatAISDK, ProviderGemini},
	{"responses", FormatResponses, ProviderOpenAI},
	{"gemini", FormatGemini, ProviderGemini},
	{"openai", FormatOpenAI, ProviderOpenAI},
}

// genRuleSession is the session of kind for seed: 8-27 turns, or 4-6 when small.
func genRuleSession(kind ruleKind, seed int64, small bool) ruleSession {
	rng := rand.New(rand.NewSource(seed))
	turns, sizes := 8+rng.Intn(20), ruleSizes
	if small {
		turns, sizes = 4+rng.Intn(3), ruleSizesSmall
	}
	var msgs []any
	switch kind.name {
	case "anthropic":
		msgs = genAnthropic(rng, turns, sizes, false)
	case "ai-sdk":
		msgs = genAnthropic(rng, turns, sizes, true)
	case "ai-sdk-openai":
		msgs = genAISDKOpenAI(rng, turns, sizes)
	case "ai-sdk-gemini":
		msgs = genAISDKGemini(rng, turns, sizes)
	case "responses":
		msgs = genResponses(rng, turns, sizes)
	case "gemini":
		msgs = genGemini(rng, turns, sizes)
	case "openai":
		msgs = genOpenAIChat(rng, turns, sizes)
	default:
		panic("unknown rule kind " + kind.name)
	}
	return ruleSession{kind.format, kind.provider, msgs}
}

// validateRules runs validate on msgs as s's provider gets them.
func validateRules(t *testing.T, s ruleSession, msgs any) ValidateResult {
	t.Helper()
	v, e := callOp(t, "validate", map[string]any{"messages": msgs, "format": s.format, "provider": s.provider})
	require.Nil(t, e)
	var vr ValidateResult
	require.NoError(t, json.Unmarshal(v, &vr))
	return vr
}

func compactRules(t *testing.T, s ruleSession, msgs any, window int) CompactResult {
	t.Helper()
	res, e := callOp(t, "compact.begin", map[string]any{"messages": msgs, "format": s.format, "force": true, "summarizer": "builtin",
		"config": map[string]any{"model": map[string]any{"context_length": window}}})
	require.Nil(t, e)
	return decodeResult(t, res)
}

var ruleWindows = []int{8_000, 16_000, 32_000, 64_000, 128_000, 200_000}

// ruleSeeds: long sessions (8-27 turns, outputs to ~10K tokens) below 100, short
// ones (4-6 turns, small outputs) from 100; 104 and 114 are AI SDK sessions whose
// cut falls inside a tool loop after a step without thinking.
var ruleSeeds = []int64{1, 2, 3, 4, 5, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114}

func TestProviderRulesHoldThroughCompaction(t *testing.T) {
	for _, kind := range ruleKinds {
		format := kind.name
		runs, summarized := 0, 0
		for k, seed := range ruleSeeds {
			if testing.Short() && k%4 != 0 {
				continue // -short: a quarter of the seeds; the whole suite runs them all
			}
			s := genRuleSession(kind, seed, seed >= 100)
			require.Empty(t, validateRules(t, s, s.msgs).Problems, "%s seed %d: the generated session itself breaks a rule", format, seed)
			for _, window := range ruleWindows {
				t.Run(fmt.Sprintf("%s/seed%d/%dk", format, seed, window/1000), func(t *testing.T) {
					raw := make([]json.RawMessage, len(s.msgs))
					for i, m := range s.msgs {
						b, err := marshal(m)
						require.NoError(t, err)
						raw[i] = b
					}
					r := compactRules(t, s, s.msgs, window)
					require.True(t, r.Done)
					checkAccountedUnder(t, kind.format, kind.provider, raw, r)
					runs++
					if r.Report.Summarized != nil {
						summarized++
					}
					vr := validateRules(t, s, r.Messages)
					require.True(t, vr.OK, "compacted at %d: %+v", window, vr.Problems)
					for _, op := range []string{"prune", "sanitize"} { // the other ops that rewrite messages
						req := map[string]any{"messages": s.msgs, "format": s.format}
						if op == "prune" {
							req["config"] = map[string]any{"model": map[string]any{"context_length": window}}
						}
						res, e := callOp(t, op, req)
						require.Nil(t, e, op)
						var out struct {
							Messages []json.RawMessage `json:"messages"`
						}
						require.NoError(t, json.Unmarshal(res, &out))
						vr := validateRules(t, s, out.Messages)
						require.True(t, vr.OK, "%s at %d: %+v", op, window, vr.Problems)
					}
					again := compactRules(t, s, r.Messages, window)
					vr = validateRules(t, s, again.Messages)
					require.True(t, vr.OK, "re-compacted at %d: %+v", window, vr.Problems)
				})
			}
		}
		// the property is about compacted requests: most runs must have compacted
		require.Greater(t, summarized, runs/2, "%s: %d of %d runs summarized", format, summarized, runs)
		t.Logf("%s: %d of %d runs summarized", format, summarized, runs)
	}
}

// ruleVectorSuites is the fixed sample of the property suite that every runtime
// runs: one small session per format, compacted at 8K and 32K (compact.begin), and
// validate of each compacted request under its provider's rules (ok).
func ruleVectorSuites(t *testing.T) map[string]genSuite {
	begin := genSuite{Op: "compact.begin", Comment: "Generated by core/rules_property_test.go (go test ./core -run TestRuleVectorsUpToDate -update): a fixed sample of the provider-rules property suite (docs/RULES.md): one small seeded session per format with signed and redacted thinking, encrypted reasoning items, thought signatures, images in user messages and tool results, parallel calls and a model switch, compacted at 8K and 32K windows. validate.rules-compacted.json holds that each result breaks no rule of its provider."}
	valid := genSuite{Op: "validate", Comment: "Generated by core/rules_property_test.go (go test ./core -run TestRuleVectorsUpToDate -update): the compacted requests of compact.begin.rules.json validated under their provider's rules (docs/RULES.md): no problem."}
	for _, kind := range ruleKinds {
		seed := int64(7)
		if kind.name == "ai-sdk" {
			seed = 104 // the cut falls inside a tool loop: the summary is merged (summaryEndsTurn)
		}
		s := genRuleSession(kind, seed, true)
		for _, window := range []int{8_000, 32_000} {
			name := fmt.Sprintf("%s-%dk", kind.name, window/1000)
			req := map[string]any{"messages": s.msgs, "format": s.format, "force": true, "summarizer": "builtin",
				"config": map[string]any{"model": map[string]any{"context_length": window}}}
			begin.Cases = append(begin.Cases, genCaseOut{name, req, want(t, "compact.begin", req)})
			r := compactRules(t, s, s.msgs, window)
			require.NotNil(t, r.Report.Summarized, name)
			vreq := map[string]any{"messages": r.Messages, "format": s.format, "provider": s.provider}
			w := want(t, "validate", vreq)
			require.JSONEq(t, `{"ok":true,"problems":[]}`, string(w["result"].(json.RawMessage)), name)
			valid.Cases = append(valid.Cases, genCaseOut{name, vreq, w})
		}
	}
	return map[string]genSuite{"compact.begin.rules": begin, "validate.rules-compacted": valid}
}

// TestRuleVectorsUpToDate fails when the rules' sample vectors differ from what the
// core answers, or with -update rewrites them.
func TestRuleVectorsUpToDate(t *testing.T) {
	for name, suite := range ruleVectorSuites(t) {
		checkGeneratedFile(t, name, suite, "TestRuleVectorsUpToDate")
	}
}

// An AI SDK session sent to Anthropic with thinking on, cut inside its tool loop
// after a step without thinking: the summary is merged into the tail's first
// assistant message, so Anthropic's turn still starts with the head's signed
// thinking; as a user message of its own it would start a turn without one
// (turn_starts_without_thinking), and the session would be refused.
func TestAISDKSummaryKeepsAnthropicThinkingTurn(t *testing.T) {
	call := func(id string) any {
		return map[string]any{"type": "tool-call", "toolCallId": id, "toolName": "read_file", "input": map[string]any{"path": id}}
	}
	result := func(id string) any {
		return map[string]any{"role": "tool", "content": []any{map[string]any{"type": "tool-result", "toolCallId": id, "toolName": "read_file",
			"output": map[string]any{"type": "text", "value": code(id, 6000)}}}}
	}
	msgs := []any{map[string]any{"role": "user", "content": "Port the billing service."},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "reasoning", "text": "Read the files.",
			"providerOptions": map[string]any{"anthropic": map[string]any{"signature": "sig-0"}}}, call("c0")}},
		result("c0")}
	for i := 1; i < 10; i++ { // non-interleaved: later steps do not think
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{call(id)}}, result(id))
	}
	s := ruleSession{FormatAISDK, ProviderAnthropic, msgs}
	require.True(t, validateRules(t, s, msgs).OK)
	r := compactRules(t, s, msgs, 8_000)
	require.NotNil(t, r.Report.Summarized)
	require.Equal(t, "merged", r.Report.SummaryRole)
	vr := validateRules(t, s, r.Messages)
	require.True(t, vr.OK, "%+v", vr.Problems)
	head, err := marshal(msgs[1])
	require.NoError(t, err)
	require.JSONEq(t, string(head), string(r.Messages[1]), "the head's thinking step comes back as it was")
	// without thinking in the session the summary keeps its own user message
	plain := append([]any{msgs[0], map[string]any{"role": "assistant", "content": []any{call("c0")}}}, msgs[2:]...)
	r = compactRules(t, ruleSession{FormatAISDK, ProviderAnthropic, plain}, plain, 8_000)
	require.Equal(t, "user", r.Report.SummaryRole)
}
