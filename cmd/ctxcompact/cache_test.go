package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

// cacheRun runs the CLI in-process and returns exit code, stdout and stderr.
const cliConversation = `{"source":"test","messages":[
 {"role":"system","content":"You are a coding agent."},
 {"role":"user","content":"Run the tests."},
 {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"go test\"}"}}]},
 {"role":"tool","tool_call_id":"c1","content":"ok"},
 {"role":"assistant","content":"All green."},
 {"role":"user","content":"Thanks."}]}`

func TestCacheCommand(t *testing.T) {
	file := cliTempFile(t, "conv.json", cliConversation)
	code, out, stderr := cliRun(t, "", "cache", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := gjson.Parse(out)
	if !json.Valid([]byte(out)) || r.Get("marked").Raw != "[0,3,4,5]" || len(r.Get("messages").Array()) != 6 || r.Get("system").Exists() {
		t.Fatalf("unexpected output: %s", out)
	}
	if got := r.Get("messages.3.content.0.cache_control").Raw; got != `{"type":"ephemeral"}` {
		t.Errorf("tool row marker: %s", got)
	}
	if r.Get("messages.2").Raw != gjson.Get(cliConversation, "messages.2").Raw {
		t.Errorf("unmarked message changed: %s", r.Get("messages.2").Raw)
	}

	// Idempotent through the CLI too, and a bare array works; flags may follow FILE.
	again := cliTempFile(t, "again.json", r.Get("messages").Raw)
	_, out2, _ := cliRun(t, "", "cache", again)
	if out2 != out {
		t.Errorf("second application differs:\n%s\n%s", out, out2)
	}
	_, out1h, _ := cliRun(t, "", "cache", file, "--ttl", "1h")
	if strings.Count(out1h, `"ttl":"1h"`) != 4 {
		t.Errorf("--ttl 1h: %s", out1h)
	}
	_, outStdin, _ := cliRun(t, cliConversation, "cache", "-")
	if outStdin != out {
		t.Errorf("stdin differs from file")
	}
}

func TestCacheCommandNative(t *testing.T) {
	file := cliTempFile(t, "native.json", `{"system":[{"type":"text","text":"sys"}],"messages":[
 {"role":"user","content":"Read it."},
 {"role":"assistant","content":[{"type":"text","text":"Reading."},{"type":"tool_use","id":"t1","name":"Read","input":{"path":"a"}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"data"}]}]}`)
	code, out, stderr := cliRun(t, "", "cache", "--native", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := gjson.Parse(out)
	if r.Get("marked").Raw != "[0,1,2]" || r.Get("system.0.cache_control.type").Str != "ephemeral" ||
		r.Get("messages.2.content.0.cache_control.type").Str != "ephemeral" || r.Get("messages.1.content.1.cache_control.type").Str != "ephemeral" {
		t.Fatalf("unexpected output: %s", out)
	}
	// A top-level system means the native layout, as compact reads it: without
	// --native the output is the same, the system kept and marked.
	if code, out2, stderr := cliRun(t, "", "cache", file); code != 0 || out2 != out {
		t.Errorf("without --native: exit %d, %s\n%s", code, stderr, out2)
	}
	// simulate detects the native layout from a top-level system too.
	sys := cliTempFile(t, "sys.json", `{"system":"sys","messages":[{"role":"user","content":"hi"}]}`)
	if code, out, stderr := cliRun(t, "", "simulate", "--json", sys); code != 0 || gjson.Get(out, "layout").Str != "anthropic" {
		t.Errorf("simulate of a top-level system: exit %d, %s %s", code, stderr, out)
	}
}

func TestCacheCommandErrors(t *testing.T) {
	bad := cliTempFile(t, "bad.json", `{"messages": 3}`)
	for _, args := range [][]string{
		{"cache"},
		{"cache", "a.json", "b.json"},
		{"cache", filepath.Join(t.TempDir(), "missing.json")},
		{"cache", bad},
		{"cache", "--ttl", "2h", cliTempFile(t, "ok.json", cliConversation)},
		{"simulate", bad},
		{"simulate", "--strategies", "none,bogus", cliTempFile(t, "ok2.json", cliConversation)},
	} {
		if code, _, stderr := cliRun(t, "", args...); code == 0 || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

func TestSimulateCommand(t *testing.T) {
	file := cliTempFile(t, "conv.json", cliConversation)
	code, out, stderr := cliRun(t, "", "simulate", file, "--min-cacheable", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"conv.json: 2 requests", "strategy", "savings", "none", "system_and_3", "anchored", "min cacheable 0 tokens"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	code, out, stderr = cliRun(t, "", "simulate", "--json", "--per-request", file, "--min-cacheable", "0", "--strategies", "none,system_and_3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := gjson.Parse(out)
	none, s3 := r.Get("strategies.none"), r.Get("strategies.system_and_3")
	if r.Get("requests").Int() != 2 || r.Get("strategies.anchored").Exists() || len(s3.Get("requests").Array()) != 2 {
		t.Fatalf("unexpected output: %s", out)
	}
	if none.Get("cost").Float() != float64(r.Get("total_input_tokens").Int()) {
		t.Errorf("none cost %v, total %d", none.Get("cost").Float(), r.Get("total_input_tokens").Int())
	}
	if want := 1 - s3.Get("cost").Float()/none.Get("cost").Float(); cacheAbs(s3.Get("savings").Float()-want) > 1e-6 {
		t.Errorf("savings %v, cost says %v", s3.Get("savings").Float(), want)
	}
}

// TestSimulateCommandSharedTrace runs the table on one shared trace (when the traces
// are missing: internal/testtraces): savings are printed for every strategy.
func TestSimulateCommandSharedTrace(t *testing.T) {
	p := testtraces.File(t, "tau2-claude-opus-4-6-airline.json")
	code, out, stderr := cliRun(t, "", "simulate", p, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := gjson.Parse(out)
	s3, anc := r.Get("strategies.system_and_3.savings").Float(), r.Get("strategies.anchored.savings").Float()
	if s3 < 0.5 || s3 >= 1 || anc < s3 {
		t.Errorf("savings system_and_3 %v, anchored %v", s3, anc)
	}
}

func cacheAbs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// A Responses file's instructions carry no breakpoint and come back as given; a
// Gemini file, with or without its systemInstruction, is refused with the
// documented reason, by cache and by simulate alike.
func TestCacheAndSimulateOtherFormatsSystem(t *testing.T) {
	resp := cliTempFile(t, "resp.json", `{"instructions":"Be brief.","input":[
 {"type":"message","role":"user","content":"hi"},
 {"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]},
 {"type":"message","role":"user","content":"more"}]}`)
	code, out, stderr := cliRun(t, "", "cache", resp)
	if code != 0 {
		t.Fatalf("cache on Responses instructions: exit %d: %s", code, stderr)
	}
	r := gjson.Parse(out)
	if r.Get("instructions").Raw != `"Be brief."` || r.Get("marked").Raw != "[0,2]" ||
		r.Get("input.2.content.0.prompt_cache_breakpoint").Raw != `{"mode":"explicit"}` {
		t.Errorf("cache on Responses instructions: %s", out)
	}
	gem := `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"hello"}]}]`
	for _, content := range []string{gem + "}", gem + `,"systemInstruction":{"parts":[{"text":"sys"}]}}`} {
		file := cliTempFile(t, "gem.json", content)
		for _, cmd := range []string{"cache", "simulate"} {
			code, _, stderr := cliRun(t, "", cmd, file)
			if code != 1 || !strings.Contains(stderr, `format "gemini" has no prompt-cache breakpoints`) {
				t.Errorf("%s on %s: exit %d: %s", cmd, content, code, stderr)
			}
		}
	}
}

// simulate prices a Responses session's requests at the prompts tokens counts: the
// tool outputs included, one request per assistant turn (reasoning and calls are
// one turn), the same totals as the session in chat format.
func TestSimulateResponsesPricesToolOutputs(t *testing.T) {
	output := strings.Repeat("x", 8000) // 2,000 tokens
	resp := cliTempFile(t, "resp.json", `{"instructions":"Be brief.","input":[
 {"type":"message","role":"user","content":"Read it."},
 {"type":"reasoning","id":"rs_1","summary":[]},
 {"type":"function_call","call_id":"c1","name":"read","arguments":"{}"},
 {"type":"function_call_output","call_id":"c1","output":"`+output+`"},
 {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}]}`)
	code, out, stderr := cliRun(t, "", "simulate", resp, "--json", "--per-request", "--min-cacheable", "0")
	if code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, stderr)
	}
	code, tok, stderr := cliRun(t, "", "tokens", resp)
	if code != 0 {
		t.Fatalf("tokens: exit %d: %s", code, stderr)
	}
	per := gjson.Get(tok, "per_message").Array()
	prompt := func(k int) int64 {
		n := gjson.Get(tok, "system").Int()
		for _, c := range per[:k] {
			n += c.Int()
		}
		return n
	}
	reqs := gjson.Get(out, "strategies.none.requests").Array()
	if len(reqs) != 2 || reqs[0].Get("message").Int() != 1 || reqs[1].Get("message").Int() != 4 {
		t.Fatalf("want requests before items 1 and 4 (one per assistant turn): %s", out)
	}
	for _, r := range reqs {
		k := int(r.Get("message").Int())
		if got := r.Get("prompt_tokens").Int(); got != prompt(k) {
			t.Errorf("the request before item %d prices %d tokens; tokens counts %d", k, got, prompt(k))
		}
	}
	if last := reqs[1].Get("prompt_tokens").Int(); last < 2000 {
		t.Errorf("the last prompt, which holds the 2,000-token tool output, prices %d tokens", last)
	}
}
