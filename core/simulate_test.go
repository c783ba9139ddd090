package core

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// t24 is 24 characters: ceil(24/4) = 6 tokens, plus the 4-token per-message
// overhead, so every message below made of it is exactly 10 tokens.
const t24 = "abcdefghijklmnopqrstuvwx"

func simulate(t *testing.T, msgs string, opts SimulateOptions) map[Strategy]StrategyResult {
	t.Helper()
	res, err := SimulateCache([]byte(msgs), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := map[Strategy]StrategyResult{}
	for _, s := range res.Strategies {
		out[s.Name] = s
	}
	return out
}

func checkCost(t *testing.T, what string, got StrategyResult, cost float64, read, write, uncached, hits, misses int) {
	t.Helper()
	if got.Cost != cost || got.CacheReadTokens != read || got.CacheWriteTokens != write || got.UncachedTokens != uncached || got.Hits != hits || got.Misses != misses {
		t.Errorf("%s: got cost %v read %d write %d uncached %d hits %d misses %d; want %v %d %d %d %d %d",
			what, got.Cost, got.CacheReadTokens, got.CacheWriteTokens, got.UncachedTokens, got.Hits, got.Misses,
			cost, read, write, uncached, hits, misses)
	}
}

// Six alternating 10-token messages u a u a u a: three requests, before messages 1,
// 3 and 5, with prompts of 10, 30 and 50 tokens (1, 3 and 5 blocks); none = 90.
//
// system_and_3 (no system prompt, so four rolling slots), minimum 0:
//
//	r1: breakpoint after block 1. Nothing cached: write 10 -> 10*1.25 = 12.5 (miss).
//	r2: breakpoints after blocks 1, 2, 3. Lookback from 3 finds r1's entry at 1:
//	    read 10 (1.0), write blocks 2..3 = 20 (25.0) -> 26.
//	r3: breakpoints after 2, 3, 4, 5. Lookback from 5 finds r2's entry at 3:
//	    read 30 (3.0), write 20 (25.0) -> 28.
//	total 12.5 + 26 + 28 = 66.5; savings 1 - 66.5/90 = 0.261111.
//
// With a 20-token minimum, r1's only breakpoint (10 tokens) is ignored: 10 plain.
// r2 keeps breakpoints 2 and 3 (20, 30 tokens), finds nothing: write 30 -> 37.5.
// r3 reads r2's entry at 3 (30 -> 3.0) and writes 20 (25.0) -> 28. Total 75.5.
//
// With timestamps 0s, 5s, 10s, 15s, 600s, 605s (request times: newest prompt
// timestamp = 0s, 10s, 600s) and the 5m TTL, r3 comes 590s after r2's entries were
// last used: expired, so it writes all 50 -> 62.5; total 12.5 + 26 + 62.5 = 101.
// With the 1h TTL nothing expires but writes cost 2x: r1 20, r2 1 + 40, r3 3 + 40:
// total 104.
func TestSimulateHandChecked(t *testing.T) {
	var msgs []string
	for i := 0; i < 6; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, `{"role":"`+role+`","content":"`+t24+`"}`)
	}
	plain := "[" + strings.Join(msgs, ",") + "]"

	r := simulate(t, plain, SimulateOptions{HasMinCacheable: true})
	checkCost(t, "none", r[StrategyNone], 90, 0, 0, 90, 0, 0)
	checkCost(t, "system_and_3", r[StrategySystemAnd3], 66.5, 40, 50, 0, 2, 1)
	checkCost(t, "anchored", r[StrategyAnchored], 66.5, 40, 50, 0, 2, 1)
	if s := r[StrategySystemAnd3].Savings; s != 0.261111 {
		t.Errorf("savings %v, want 0.261111", s)
	}

	r = simulate(t, plain, SimulateOptions{HasMinCacheable: true, MinCacheableTokens: 20})
	checkCost(t, "system_and_3 min 20", r[StrategySystemAnd3], 75.5, 30, 50, 10, 1, 1)

	stamped := strings.Replace(plain, `"}`, `","timestamp":"T"}`, -1)
	for _, ts := range []string{"2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z", "2026-01-01T00:00:10Z", "2026-01-01T00:00:15Z", "2026-01-01T00:10:00Z", "2026-01-01T00:10:05Z"} {
		stamped = strings.Replace(stamped, `"T"`, `"`+ts+`"`, 1)
	}
	r = simulate(t, stamped, SimulateOptions{HasMinCacheable: true, Strategies: []Strategy{StrategySystemAnd3}})
	checkCost(t, "5m with an idle gap", r[StrategySystemAnd3], 101, 10, 80, 0, 1, 2)
	r = simulate(t, stamped, SimulateOptions{HasMinCacheable: true, TTL: CacheTTL1h, Strategies: []Strategy{StrategySystemAnd3}})
	checkCost(t, "1h with an idle gap", r[StrategySystemAnd3], 104, 40, 50, 0, 2, 1)
}

// A turn with twelve parallel calls adds 24 blocks, more than the ~20-block lookback.
// Messages: system (10), user (10), assistant with 12 calls (each 4 + name 1 +
// arguments "{}" 1 = 6, plus the 4-token overhead: 76 tokens, 12 blocks), 12 tool
// rows "rrrr" (1 + 4 = 5 tokens each: 60), assistant (10), user (10), assistant.
// Requests before messages 2, 15 and 17: prompts of 20, 156 and 176 tokens
// (2, 26 and 28 blocks); none = 352.
//
//	r1 (both strategies): breakpoints after block 1 (system) and 2: write 20 -> 25.
//	system_and_3 r2: breakpoints 1 (system), 24, 25, 26 (the last three tool rows).
//	    Lookback from 24 reaches block 4 only, r1's entry at 2 is out of reach; the
//	    system breakpoint finds its own entry: read 10 (1.0), write 146 (182.5) -> 183.5.
//	anchored r2: breakpoints 1, 26 and 2 (end of the previous prompt): read 20
//	    (2.0), write 136 (170.0) -> 172.
//	r3 (both): read r2's entry at 26 (156 -> 15.6), write 20 (25.0) -> 40.6.
//	system_and_3: 25 + 183.5 + 40.6 = 249.1 (savings 0.29233);
//	anchored: 25 + 172 + 40.6 = 237.6 (savings 0.325).
func TestSimulateLookbackLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString(`[{"role":"system","content":"` + t24 + `"},{"role":"user","content":"` + t24 + `"},{"role":"assistant","content":null,"tool_calls":[`)
	for i := 0; i < 12; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":"c` + string(rune('a'+i)) + `","type":"function","function":{"name":"f","arguments":"{}"}}`)
	}
	b.WriteString(`]}`)
	for i := 0; i < 12; i++ {
		b.WriteString(`,{"role":"tool","tool_call_id":"c` + string(rune('a'+i)) + `","content":"rrrr"}`)
	}
	b.WriteString(`,{"role":"assistant","content":"` + t24 + `"},{"role":"user","content":"` + t24 + `"},{"role":"assistant","content":"` + t24 + `"}]`)
	r := simulate(t, b.String(), SimulateOptions{HasMinCacheable: true})
	checkCost(t, "none", r[StrategyNone], 352, 0, 0, 352, 0, 0)
	checkCost(t, "system_and_3", r[StrategySystemAnd3], 249.1, 166, 186, 0, 2, 1)
	checkCost(t, "anchored", r[StrategyAnchored], 237.6, 176, 176, 0, 2, 1)
	if r[StrategyAnchored].Savings != 0.325 || r[StrategySystemAnd3].Savings != 0.29233 {
		t.Errorf("savings: anchored %v, system_and_3 %v", r[StrategyAnchored].Savings, r[StrategySystemAnd3].Savings)
	}
}

func TestParseTimestamp(t *testing.T) {
	for in, want := range map[string]int64{
		`"1970-01-01T00:00:00Z"`:         0,
		`"2026-01-01T00:00:00Z"`:         1767225600000,
		`"2026-01-01 01:00:00.25+01:00"`: 1767225600250,
		`"2024-02-29T23:59:59.999-0130"`: 1709251199999 + 5400000,
		`"2000-03-01T00:00:00"`:          951868800000,
		`1767225600`:                     1767225600000,
		`1767225600123`:                  1767225600123,
		`"1969-12-31T23:59:59Z"`:         -1000,
	} {
		got, ok := parseTimestamp(gjson.Parse(in))
		if !ok || got != want {
			t.Errorf("%s: got %d %v, want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{`"2026-13-01T00:00:00Z"`, `"2026-01-01"`, `"2026-01-01T00:00:00Zjunk"`, `"2026-01-01T00:00:00."`, `true`, `"yesterday"`} {
		if _, ok := parseTimestamp(gjson.Parse(in)); ok {
			t.Errorf("%s: accepted", in)
		}
	}
}

// TestSimulateSharedTraces replays every shared recorded session and checks what
// holds whatever the estimator's exact counts: savings between 0 and 1; every
// prompt token is either read, written or plain; the per-request rows add up to the
// totals; anchored is never worse than system_and_3 and, in a replay without
// timestamps, misses at most once (the first cacheable request); system_and_3 saves
// at least 75% on every session of 20 requests or more (measured: 80-89%); the 1h
// TTL saves less than 5m when nothing expires; the same session in both formats
// saves within two points; the output bytes are deterministic.
func TestSimulateSharedTraces(t *testing.T) {
	savingsByLayout := map[string]map[string]float64{}
	for _, path := range sharedTraceFiles(t) {
		name := filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		msgs := []byte(gjson.GetBytes(raw, "messages").Raw)
		res, err := SimulateCache(msgs, nil, SimulateOptions{PerRequest: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		by := map[Strategy]StrategyResult{}
		for _, s := range res.Strategies {
			by[s.Name] = s
			if s.Savings < 0 || s.Savings >= 1 {
				t.Errorf("%s %s: savings %v outside [0, 1)", name, s.Name, s.Savings)
			}
			if s.CacheReadTokens+s.CacheWriteTokens+s.UncachedTokens != res.TotalInputTokens {
				t.Errorf("%s %s: read+write+uncached = %d, total %d", name, s.Name, s.CacheReadTokens+s.CacheWriteTokens+s.UncachedTokens, res.TotalInputTokens)
			}
			var sum float64
			for _, r := range s.Requests {
				sum += r.Cost
			}
			if len(s.Requests) != res.Requests || math.Abs(sum-s.Cost) > 1e-6*s.Cost+0.01 {
				t.Errorf("%s %s: %d request rows costing %v, totals %d and %v", name, s.Name, len(s.Requests), sum, res.Requests, s.Cost)
			}
		}
		s3, anc := by[StrategySystemAnd3], by[StrategyAnchored]
		if by[StrategyNone].Cost != float64(res.TotalInputTokens) {
			t.Errorf("%s: none costs %v, total tokens %d", name, by[StrategyNone].Cost, res.TotalInputTokens)
		}
		if anc.Cost > s3.Cost {
			t.Errorf("%s: anchored %v costs more than system_and_3 %v", name, anc.Cost, s3.Cost)
		}
		if anc.Misses > 1 {
			t.Errorf("%s: anchored missed %d times", name, anc.Misses)
		}
		if res.Requests >= 20 && s3.Savings < 0.75 {
			t.Errorf("%s: system_and_3 saves %.3f over %d requests, below 0.75", name, s3.Savings, res.Requests)
		}
		long, err := SimulateCache(msgs, nil, SimulateOptions{TTL: CacheTTL1h, Strategies: []Strategy{StrategySystemAnd3}})
		if err != nil {
			t.Fatal(err)
		}
		if long.Strategies[0].Savings >= s3.Savings {
			t.Errorf("%s: 1h TTL saves %v, not less than 5m's %v without expiry", name, long.Strategies[0].Savings, s3.Savings)
		}
		if savingsByLayout[filepath.Base(path)] == nil {
			savingsByLayout[filepath.Base(path)] = map[string]float64{}
		}
		savingsByLayout[filepath.Base(path)][res.Layout] = s3.Savings

		a := Dispatch("cache.simulate", []byte(`{"messages":`+string(msgs)+`}`))
		b := Dispatch("cache.simulate", []byte(`{"messages":`+string(msgs)+`}`))
		if !bytes.Equal(a, b) || !json.Valid(a) || !gjson.GetBytes(a, "result.strategies.system_and_3.cost").Exists() {
			t.Errorf("%s: op output not deterministic or malformed: %.200s", name, a)
		}
	}
	for file, by := range savingsByLayout {
		if o, ok := by[LayoutOpenAI]; ok {
			if n, ok := by[LayoutAnthropic]; ok && math.Abs(o-n) > 0.02 {
				t.Errorf("%s: system_and_3 saves %.3f in the OpenAI form but %.3f in the Anthropic form", file, o, n)
			}
		}
	}
}

// Every format's simulated prompts are the prompts tokens.count counts: in
// testdata/cache.simulate.formats.json, request k's prompt_tokens is the system's
// count plus the counts of items 0..k-1 (tool outputs included), and a request is
// sent once per assistant turn (a Responses turn is its consecutive reasoning,
// calls and assistant messages).
func TestSimulateFormatVectorsPriceTokenCounts(t *testing.T) {
	raw, err := os.ReadFile("../testdata/cache.simulate.formats.json")
	if err != nil {
		t.Fatal(err)
	}
	formats := map[string]bool{}
	gjson.GetBytes(raw, "cases").ForEach(func(_, c gjson.Result) bool {
		res := c.Get("want.result")
		if !res.Exists() {
			return true
		}
		req := c.Get("request")
		format, msgs, sys := req.Get("format").Str, req.Get("messages"), req.Get("system")
		formats[format] = true
		count := `{"op":"tokens.count","messages":` + msgs.Raw
		if format != "" {
			count += `,"format":"` + format + `"`
		}
		chat := format == "" || format == "anthropic"
		if sys.Exists() && chat { // counted as the system message it stands for, as the CLI does
			count = `{"op":"tokens.count","format":"` + format + `","messages":[{"role":"system","content":` + sys.Raw + `},` + msgs.Raw[1:]
		} else if sys.Exists() {
			count += `,"system":` + sys.Raw
		}
		tok := gjson.ParseBytes(Call([]byte(count + "}")))
		if e := tok.Get("error"); e.Exists() {
			t.Fatalf("%s: tokens.count: %s", c.Get("name").Str, e.Raw)
		}
		per := tok.Get("result.per_message").Array()
		system := tok.Get("result.system").Int()
		if sys.Exists() && chat {
			system, per = per[0].Int(), per[1:]
		}
		items := msgs.Array()
		assistantSide := func(i int) bool {
			it := items[i]
			return it.Get("role").Str == "assistant" || it.Get("type").Str == "reasoning" || it.Get("type").Str == "function_call"
		}
		var wantAt []int64
		for i := range items {
			if assistantSide(i) && (i == 0 || !assistantSide(i-1)) {
				wantAt = append(wantAt, int64(i))
			}
		}
		var gotAt []int64
		res.Get("strategies.none.requests").ForEach(func(_, r gjson.Result) bool {
			k := r.Get("message").Int()
			gotAt = append(gotAt, k)
			want := system
			for _, n := range per[:k] {
				want += n.Int()
			}
			if got := r.Get("prompt_tokens").Int(); got != want {
				t.Errorf("%s: the request before item %d prices %d prompt tokens; tokens.count gives %d", c.Get("name").Str, k, got, want)
			}
			return true
		})
		if !slices.Equal(gotAt, wantAt) {
			t.Errorf("%s: requests before items %v, want one per assistant turn: %v", c.Get("name").Str, gotAt, wantAt)
		}
		return true
	})
	for _, f := range []string{"", "anthropic", "responses", "ai-sdk"} {
		if !formats[f] {
			t.Errorf("no simulated case of format %q", f)
		}
	}
}

// The same session priced in chat and in Responses items costs the same input:
// examples/astropy-12907.json (64 assistant turns, 916,321 tokens in chat format)
// turned into Responses items (the system prompt as instructions, each tool call a
// function_call item, each tool row a function_call_output) gives the same requests
// and the same total, where the chat block model saw none of the tool outputs and
// sent a request before every call (91 requests, 347,634 tokens).
func TestSimulateResponsesMatchesChatOnExample(t *testing.T) {
	raw, err := os.ReadFile("../examples/astropy-12907.json")
	if err != nil {
		t.Fatal(err)
	}
	chatMsgs := []byte(gjson.GetBytes(raw, "messages").Raw)
	chat, err := SimulateCache(chatMsgs, nil, SimulateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var items []any
	var instructions string
	gjson.ParseBytes(chatMsgs).ForEach(func(_, m gjson.Result) bool {
		switch m.Get("role").Str {
		case "system":
			instructions = m.Get("content").Str
		case "tool":
			items = append(items, map[string]any{"type": "function_call_output", "call_id": m.Get("tool_call_id").Str, "output": m.Get("content").Str})
		case "assistant":
			if c := m.Get("content").Str; c != "" {
				items = append(items, map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": c}}})
			}
			m.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
				items = append(items, map[string]any{"type": "function_call", "call_id": c.Get("id").Str, "name": c.Get("function.name").Str, "arguments": c.Get("function.arguments").Str})
				return true
			})
		default:
			items = append(items, map[string]any{"type": "message", "role": m.Get("role").Str, "content": m.Get("content").Str})
		}
		return true
	})
	list, _ := json.Marshal(items)
	sys, _ := json.Marshal(instructions)
	resp, err := SimulateCache(list, sys, SimulateOptions{Format: FormatResponses})
	if err != nil {
		t.Fatal(err)
	}
	if chat.Requests != 64 || resp.Requests != chat.Requests || resp.TotalInputTokens != chat.TotalInputTokens {
		t.Errorf("chat: %d requests, %d input tokens; Responses: %d requests, %d input tokens; want the same",
			chat.Requests, chat.TotalInputTokens, resp.Requests, resp.TotalInputTokens)
	}
}
