package core

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxcompact/ctxcompact/internal/testtraces"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// cacheVectorFiles are the hand-written vectors of the cache ops (the wants were
// checked case by case; the simulator's numbers are derived in simulate_test.go).
var cacheVectorFiles = []string{"../testdata/cache.apply.json", "../testdata/cache.policy.json", "../testdata/cache.simulate.json"}

func TestCacheVectors(t *testing.T) {
	for _, path := range cacheVectorFiles {
		f := readVectorFile(t, path)
		file := strings.TrimSuffix(strings.TrimPrefix(path, "../testdata/"), ".json")
		if _, ok := ops[f.Op]; !ok || f.Op != file {
			t.Errorf("%s: op %q is not a known op named like the file", path, f.Op)
		}
		if f.Comment == "" || len(f.Cases) == 0 {
			t.Errorf("%s: needs a _comment and cases", path)
		}
		names := map[string]bool{}
		for _, c := range f.Cases {
			if names[c.Name] {
				t.Errorf("%s: duplicate case name %q", path, c.Name)
			}
			names[c.Name] = true
			if (c.Want.Error == nil) == (c.Want.Result == nil) {
				t.Errorf("%s/%s: want must hold exactly one of result and error", path, c.Name)
			}
			t.Run(f.Op+"/"+file+"/"+c.Name, func(t *testing.T) { checkVector(t, f.Op, c) })
		}
	}
}

func applyRaw(t *testing.T, req string) gjson.Result {
	t.Helper()
	out := Dispatch("cache.apply", []byte(req))
	r := gjson.ParseBytes(out)
	if r.Get("error").Exists() {
		t.Fatalf("cache.apply: %s", out)
	}
	return r.Get("result")
}

// reapply sends a result's messages (and system) back through cache.apply.
func reapply(t *testing.T, res gjson.Result, layout string) gjson.Result {
	t.Helper()
	req := `{"layout":"` + layout + `","messages":` + res.Get("messages").Raw
	if s := res.Get("system"); s.Exists() {
		req += `,"system":` + s.Raw
	}
	return applyRaw(t, req+"}")
}

// TestCacheApplyIdempotentBytes: applying to an output gives the same bytes, with
// never more than four markers, for hand-made inputs with stale markers and
// irregular whitespace and for the shared traces.
func TestCacheApplyIdempotentBytes(t *testing.T) {
	inputs := map[string]string{
		"openai-whitespace-and-stale": `{"messages":[ {"role":"system", "content": [ {"type":"text" , "text":"s", "cache_control":{"type":"ephemeral"}} ]},
			{"role":"user","content":"a", "cache_control":{"type":"ephemeral"}}, {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c","content":[ {"type":"text","text":"out"} , {"type":"image_url","image_url":{"url":"x"}} ]}, {"role":"user","content":"b"}, {"role":"assistant","content":"c"} ]}`,
		"native-nested": `{"layout":"anthropic","system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]},{"role":"assistant","content":[{"type":"text","text":"y"},{"type":"thinking","thinking":"z","signature":"q"}]},{"role":"tool","tool_call_id":"t2","content":"r"}]}`,
	}
	for _, p := range sharedTraceFiles(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		layout := LayoutOpenAI
		if strings.Contains(p, "anthropic-format") {
			layout = LayoutAnthropic
		}
		inputs[filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p)] = `{"layout":"` + layout + `","messages":` + gjson.GetBytes(b, "messages").Raw + `}`
	}
	for name, req := range inputs {
		layout := gjson.Get(req, "layout").Str
		if layout == "" {
			layout = LayoutOpenAI
		}
		first := applyRaw(t, req)
		second := reapply(t, first, layout)
		if first.Raw != second.Raw {
			t.Errorf("%s: second application changed the bytes\nfirst:  %.400s\nsecond: %.400s", name, first.Raw, second.Raw)
		}
		n := strings.Count(first.Get("messages").Raw, `"cache_control"`) + strings.Count(first.Get("system").Raw, `"cache_control"`)
		if n > MaxCacheBreakpoints || n != int(first.Get("markers").Int()) {
			t.Errorf("%s: %d markers in the output, result says %d", name, n, first.Get("markers").Int())
		}
	}
}

// TestCacheApplyPassesThroughAndDoesNotMutate: messages outside the window keep their
// exact bytes (whitespace included), and the caller's buffer is unchanged.
func TestCacheApplyPassesThroughAndDoesNotMutate(t *testing.T) {
	old := `{ "role" : "user",  "content" : "old",   "x_extra" : [1, 2] }`
	req := []byte(`{"messages":[` + old + `,{"role":"assistant","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":"c"},{"role":"user","content":"d"}]}`)
	orig := append([]byte(nil), req...)
	res, err := ApplyCache([]byte(gjson.GetBytes(req, "messages").Raw), nil, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(req, orig) {
		t.Fatal("ApplyCache modified its input")
	}
	if got := gjson.GetBytes(res.Messages, "0").Raw; got != old {
		t.Errorf("untouched message changed:\n got %s\nwant %s", got, old)
	}
	if want := []int{1, 2, 3, 4}; !equalInts(res.Marked, want) {
		t.Errorf("marked %v, want %v", res.Marked, want)
	}
	if got := gjson.GetBytes(res.Messages, "4").Raw; got != `{"role":"user","content":[{"type":"text","text":"d","cache_control":{"type":"ephemeral"}}]}` {
		t.Errorf("marked message: %s", got)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestResolveCachePolicy(t *testing.T) {
	for _, c := range []struct {
		model, provider, ttl string
		enabled              bool
		layout, status       string
	}{
		{"anthropic/claude-sonnet-4.5", "openrouter", "", true, LayoutOpenAI, "Prompt caching: ENABLED (Claude via OpenRouter, 5m TTL)"},
		{"claude-opus-4-6", "Anthropic", "1h", true, LayoutAnthropic, "Prompt caching: ENABLED (Claude via native Anthropic API, 1h TTL)"},
		{"gpt-4o", "openrouter", "", false, "", `Prompt caching: DISABLED (model "gpt-4o" is not a Claude model)`},
		{"claude-sonnet-4", "vertex", "", false, "", `Prompt caching: DISABLED (provider "vertex" does not take Anthropic cache_control markers)`},
	} {
		p := ResolveCachePolicy(c.model, c.provider, c.ttl)
		if p.Enabled != c.enabled || p.Layout != c.layout || p.Status != c.status {
			t.Errorf("%s on %s: got %+v", c.model, c.provider, p)
		}
	}
}

// sharedTraceFiles lists the shared recorded sessions (../shared/traces beside the
// repository; the rule for when it is missing: internal/testtraces).
func sharedTraceFiles(t *testing.T) []string {
	t.Helper()
	return testtraces.Glob(t, "*.json", "anthropic-format/*.json")
}

// TestCacheFormat: cache.apply and cache.simulate take the messages' format (an
// alias included) beside the layout, and refuse an unknown one at /format.
func TestCacheFormat(t *testing.T) {
	msgs := []map[string]any{{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}}
	detected, e := callOp(t, "cache.apply", map[string]any{"messages": msgs})
	require.Nil(t, e)
	named, e := callOp(t, "cache.apply", map[string]any{"messages": msgs, "format": "openai-chat"})
	require.Nil(t, e)
	require.JSONEq(t, string(detected), string(named))
	for _, op := range []string{"cache.apply", "cache.simulate"} {
		_, e = callOp(t, op, map[string]any{"messages": msgs, "format": "gemini-x"})
		require.NotNil(t, e, op)
		require.Equal(t, CodeInvalidRequest, e.Code)
		require.Equal(t, "/format", e.Path)
	}
}
