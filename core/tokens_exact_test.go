package core

import (
	"errors"
	"reflect"
	"testing"

	"github.com/tidwall/gjson"
)

// cookbookMessages is the example of OpenAI's cookbook "How to count tokens with
// tiktoken": the API reported 129 prompt tokens for it on gpt-3.5-turbo and gpt-4
// (cl100k_base) and 124 on gpt-4o and gpt-4o-mini (o200k_base).
const cookbookMessages = `[
 {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
 {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
 {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
 {"role": "system", "name": "example_user", "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
 {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less busy about how to do better."},
 {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for the client deliverable."}
]`

func TestExactCountsMatchAPIReportedCookbookExample(t *testing.T) {
	for enc, want := range map[string]int{EncodingO200k: 124, EncodingCl100k: 129} {
		r, err := CountTokens([]byte(cookbookMessages), CountTokensOptions{Encoding: enc})
		if err != nil {
			t.Fatal(err)
		}
		if r.Total != want || r.Encoding != enc {
			t.Errorf("%s: total %d, the API reported %d", enc, r.Total, want)
		}
		sum := 0
		for _, n := range r.PerMessage {
			sum += n
		}
		if sum+exactReplyTokens != r.Total {
			t.Errorf("%s: total %d is not the per-message sum %d plus the reply priming", enc, r.Total, sum)
		}
	}
}

func count1(t *testing.T, enc, msg string) int {
	t.Helper()
	c, err := newCounter(enc, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	return c.message(gjson.Parse(msg))
}

func TestExactMessageRule(t *testing.T) {
	e := o200k
	tok := func(s string) int { return e.count(s) }
	cases := []struct {
		name, msg string
		want      int
	}{
		{"role and content", `{"role":"user","content":"Hello there, world!"}`, 3 + tok("user") + tok("Hello there, world!")},
		{"name adds one", `{"role":"user","name":"alice","content":"hi"}`, 3 + tok("user") + tok("alice") + 1 + tok("hi")},
		{"null content and two tool calls", `{"role":"assistant","content":null,"tool_calls":[
			{"id":"a","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"a.go\"}"}},
			{"id":"b","type":"function","function":{"name":"bash","arguments":"{\"command\": \"ls\"}"}}]}`,
			3 + tok("assistant") + 3 + tok("read_file") + tok(`{"path": "a.go"}`) + 3 + tok("bash") + tok(`{"command": "ls"}`)},
		{"tool row: the call id is not counted", `{"role":"tool","tool_call_id":"call_123456789","content":"ok"}`, 3 + tok("tool") + tok("ok")},
		{"parts: text and a fixed-cost image", `{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}`,
			3 + tok("user") + tok("what is this?") + imageTokens},
		{"anthropic blocks", `{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"zz"},{"type":"tool_use","id":"t","name":"Read","input":{"file_path":"/a"}}]}`,
			3 + tok("assistant") + tok("hmm") + 3 + tok("Read") + tok(`{"file_path":"/a"}`)},
		{"tool_result block", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"file body"}]}`, 3 + tok("user") + tok("file body")},
		{"special-token text is ordinary text", `{"role":"user","content":"<|endoftext|>"}`, 3 + tok("user") + 7},
	}
	for _, c := range cases {
		if got := count1(t, EncodingO200k, c.msg); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
	if tok("<|endoftext|>") != 7 {
		t.Errorf("<|endoftext|> as text: %d tokens, want 7 (ordinary text, not the special token)", tok("<|endoftext|>"))
	}
}

// A non-string value is counted by its compact JSON, whatever spacing and escaping
// the caller's encoder used (Python's json.dumps differs from JSON.stringify).
func TestNonStringValuesCountTheSameWhateverTheSpacing(t *testing.T) {
	compact := `{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{"path":"/a/é","n":[1,2],"q":"say \"hi\"\n"}}]}`
	spaced := `{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {"path": "/a/\u00e9", "n": [1, 2], "q": "say \"hi\"\n"}}]}`
	for _, enc := range []string{EncodingRough, EncodingO200k, EncodingCl100k} {
		a, b := count1(t, enc, compact), count1(t, enc, spaced)
		if a != b {
			t.Errorf("%s: compact %d, spaced %d", enc, a, b)
		}
	}
	if got := string(canonicalJSON(nil, gjson.Parse(`{ "a" : [ 1 , "x\u0001\t" , null , true ] , "b":{} }`))); got != `{"a":[1,"x\u0001\t",null,true],"b":{}}` {
		t.Errorf("canonicalJSON: %s", got)
	}
}

// The helpers other files use on any counter (text, part, content, value) work
// for the exact encodings too.
func TestCounterHelpersWorkForEveryEncoding(t *testing.T) {
	for _, enc := range []string{EncodingRough, EncodingO200k, EncodingCl100k} {
		c, err := newCounter(enc, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		s := gjson.Parse(`"Hello, world: 你好"`)
		if c.text(s) <= 0 || c.value(s) != c.text(s) || c.content(s) != c.text(s) || c.part(s) != c.text(s) {
			t.Errorf("%s: text %d value %d content %d part %d", enc, c.text(s), c.value(s), c.content(s), c.part(s))
		}
	}
	if o200k.counter().text(gjson.Parse(`"Hello, world"`)) != 3 {
		t.Errorf("o200k text of \"Hello, world\" should be 3 tokens")
	}
}

func TestEncodingForModel(t *testing.T) {
	for model, want := range map[string]string{
		"gpt-4o": EncodingO200k, "gpt-4o-mini-2024-07-18": EncodingO200k, "chatgpt-4o-latest": EncodingO200k,
		"gpt-4.1": EncodingO200k, "gpt-4.1-nano": EncodingO200k, "gpt-5": EncodingO200k, "gpt-5.5": EncodingO200k,
		"gpt-5-mini": EncodingO200k, "o1": EncodingO200k, "o1-preview": EncodingO200k, "o3-mini": EncodingO200k,
		"o4-mini": EncodingO200k, "openai/gpt-4o": EncodingO200k, "ft:gpt-4o-mini:org::abc": EncodingO200k,
		"GPT-4O": EncodingO200k, "gpt-oss-120b": EncodingO200k,
		"gpt-4": EncodingCl100k, "gpt-4-turbo": EncodingCl100k, "gpt-4-0613": EncodingCl100k,
		"gpt-3.5-turbo": EncodingCl100k, "gpt-35-turbo": EncodingCl100k, "text-embedding-3-small": EncodingCl100k,
		"claude-opus-4-6": EncodingRough, "anthropic/claude-sonnet-4.5": EncodingRough, "deepseek-chat": EncodingRough,
		"o100": EncodingRough, "": EncodingRough, "llama-3-o1": EncodingRough,
	} {
		if got := EncodingForModel(model); got != want {
			t.Errorf("EncodingForModel(%q) = %s, want %s", model, got, want)
		}
	}
}

func TestNewModelCounter(t *testing.T) {
	c, err := newModelCounter(EncodingAuto, "gpt-4", 1.5, "")
	if err != nil || c.name != EncodingCl100k || c.scale != 1.5 {
		t.Fatalf("auto gpt-4: %+v %v", c.name, err)
	}
	if c, _ := newCounter(EncodingAuto, 0, ""); c.name != EncodingRough {
		t.Errorf("auto without a model is %s, want rough", c.name)
	}
	_, err = newCounter("p50k_base", 0, "/config/tokens/encoding")
	if !errors.Is(err, &Error{Code: CodeInvalidConfig}) || err.(*Error).Path != "/config/tokens/encoding" {
		t.Errorf("unknown encoding: %v", err)
	}
	if got := Encodings(); !reflect.DeepEqual(got, []string{"rough", "o200k_base", "cl100k_base"}) {
		t.Errorf("Encodings() = %v", got)
	}
}

func TestCalibrationScalesEachMessage(t *testing.T) {
	raw, _ := CountTokens([]byte(cookbookMessages), CountTokensOptions{Encoding: EncodingO200k})
	cal, _ := CountTokens([]byte(cookbookMessages), CountTokensOptions{Encoding: EncodingO200k, Calibration: 1.25})
	total := exactReplyTokens
	for i, n := range raw.PerMessage {
		if want := int(float64(n)*1.25 + 0.5); cal.PerMessage[i] != want {
			t.Errorf("message %d: %d calibrated, want %d", i, cal.PerMessage[i], want)
		}
		total += cal.PerMessage[i]
	}
	if cal.Total != total || cal.Calibration != 1.25 {
		t.Errorf("total %d (want %d), calibration %v", cal.Total, total, cal.Calibration)
	}
}

func TestCalibrateMethods(t *testing.T) {
	msgs := []byte(cookbookMessages)
	est, _ := CountTokens(msgs, CountTokensOptions{Encoding: EncodingO200k})
	r, err := Calibrate(msgs, CalibrateOptions{Encoding: EncodingO200k, PromptTokens: 2*est.Total + 100, FixedOverhead: 100})
	if err != nil || r.Factor != 2 || r.Method != "ratio" || r.Estimate != est.Total || r.FixedOverhead != 100 {
		t.Errorf("ratio: %+v %v", r, err)
	}
	// delta: the first two messages were sent before with an unknown overhead of 5000.
	added := 0
	for _, n := range est.PerMessage[2:] {
		added += n
	}
	first := 5000 + 3*(est.PerMessage[0]+est.PerMessage[1])
	r, err = Calibrate(msgs, CalibrateOptions{Encoding: EncodingO200k, PromptTokens: first + 3*added,
		Baseline: &CalibrationBaseline{MessageCount: 2, PromptTokens: first}})
	if err != nil || r.Factor != 3 || r.Method != "delta" || r.EstimateDelta != added || r.FixedOverhead != 5000-3*exactReplyTokens {
		t.Errorf("delta: %+v %v", r, err)
	}
	if _, err := Calibrate(msgs, CalibrateOptions{PromptTokens: 10, FixedOverhead: 10}); !errors.Is(err, &Error{Code: CodeInvalidRequest}) {
		t.Errorf("overhead >= prompt tokens: %v", err)
	}
}
