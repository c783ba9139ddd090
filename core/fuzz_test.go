package core

import (
	"github.com/ctxcompact/ctxcompact/internal/vectors"
	"regexp"

	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// FuzzCall: no input makes Call panic or answer anything but one well-formed
// envelope with exactly one of result or error (an error has a known code).
func FuzzCall(f *testing.F) {
	files, err := vectors.ReadDir("../testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		vs, err := file.Vectors()
		if err != nil {
			f.Fatal(err)
		}
		for i, v := range vs {
			if i > 4 || len(v.Envelope) > 50_000 {
				break
			}
			f.Add(v.Envelope)
		}
	}
	f.Add([]byte(`{"op":"compact.begin","messages":[{"role":"tool","tool_call_id":"x","content":null}],"force":true}`))
	f.Add([]byte(`{"op":"info"`))
	f.Fuzz(func(t *testing.T, env []byte) {
		out := Call(env)
		var resp map[string]json.RawMessage
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("response is not JSON: %v\n%s", err, out)
		}
		_, hasResult := resp["result"]
		e, hasError := resp["error"]
		if hasResult == hasError || len(resp) != 1 {
			t.Fatalf("want exactly one of result or error: %s", out)
		}
		if hasError {
			var ce Error
			if err := json.Unmarshal(e, &ce); err != nil || ce.Code == CodeInternal || !knownCode(ce.Code) {
				t.Fatalf("bad error envelope (internal means a recovered panic): %s", out)
			}
		}
	})
}

func knownCode(c ErrorCode) bool {
	for _, k := range ErrorCodes {
		if k == c {
			return true
		}
	}
	return false
}

// FuzzCompact: any message list that compact.begin accepts and compacts comes out
// with well-formed tool pairs (a no-op returns the input as it was).
func FuzzCompact(f *testing.F) {
	f.Add([]byte(`[{"role":"system","content":"s"},{"role":"user","content":"u"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"r"},{"role":"tool","tool_call_id":"zz","content":"orphan"},{"role":"user","content":"again"}]`), uint8(1), uint16(300))
	f.Add([]byte(`[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]},{"role":"assistant","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]`), uint8(0), uint16(50))
	f.Fuzz(func(t *testing.T, msgs []byte, lastN uint8, window uint16) {
		if !json.Valid(msgs) {
			return
		}
		cfg := map[string]any{"model": map[string]any{"context_length": int(window) + 1}, "compression": map[string]any{"protect_last_n": int(lastN % 8)}}
		env, _ := json.Marshal(map[string]any{"op": "compact.begin", "messages": json.RawMessage(msgs), "config": cfg, "force": true, "summarizer": "builtin"})
		var resp struct {
			Result *CompactResult `json:"result"`
			Error  *Error         `json:"error"`
		}
		out := Call(env)
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("not JSON: %s", out)
		}
		if resp.Error != nil {
			if resp.Error.Code == CodeInternal {
				t.Fatalf("panic: %s", out)
			}
			return
		}
		var input []json.RawMessage
		if json.Unmarshal(msgs, &input) != nil {
			t.Fatalf("accepted a non-array: %s", msgs)
		}
		r := resp.Result
		if r.Report.MessagesBefore != len(input) || len(r.Messages) != r.Report.MessagesAfter {
			t.Fatalf("counts disagree: %s", out)
		}
		if !r.Report.Compacted {
			return // returned unchanged, pre-existing problems included
		}
		v, _ := json.Marshal(map[string]any{"op": "validate", "messages": r.Messages})
		var vr struct{ Result ValidateResult }
		if err := json.Unmarshal(Call(v), &vr); err != nil {
			t.Fatal(err)
		}
		for _, p := range vr.Result.Problems {
			switch p.Code {
			case ProblemOrphanToolResult, ProblemMissingToolResult:
				t.Fatalf("compaction left %s at %s: %s", p.Code, p.Path, out)
			}
		}
	})
}

// FuzzRawJSON: the raw walkers never panic, whatever the text, and on valid JSON
// objects they see the same keys as gjson.
func FuzzRawJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":"x\"y","c":[1,{"d":2}]}`, `{n}`, `{"a"`, `[1,2`, `{"a":}`, `{"k\u00e9":"v"}`, `[{"x":"\\"}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var keys []string
		forEachField(s, func(k, raw string) bool {
			keys = append(keys, k)
			_ = jsonStringChars(raw)
			return true
		})
		forEachElement(s, func(raw string) bool { return true })
		_ = rawField(s, "a")
		if !gjson.Valid(s) || !gjson.Parse(s).IsObject() {
			return
		}
		var want []string
		gjson.Parse(s).ForEach(func(k, _ gjson.Result) bool {
			want = append(want, k.Str)
			return true
		})
		if len(keys) != len(want) {
			t.Fatalf("keys %q, gjson sees %q", keys, want)
		}
		for i := range keys {
			if keys[i] != want[i] {
				t.Fatalf("keys %q, gjson sees %q", keys, want)
			}
		}
	})
}

// FuzzExcerpt: cutting a raw JSON string without decoding it writes what decoding
// it, cutting the text and escaping the excerpt writes.
func FuzzExcerpt(f *testing.F) {
	f.Add("hello world, this is a long line", 3, 4, false)
	f.Add(`tab\there "quoted" \u00e9 \ud83d\ude00 end`, 2, 2, true)
	f.Fuzz(func(t *testing.T, text string, headC, tailC int, ascii bool) {
		headC, tailC = int(uint(headC)%50), int(uint(tailC)%50)
		raw, _ := json.Marshal(text)
		if ascii { // as Python's json.dumps sends it: \u escapes for all non-ASCII
			raw = []byte(strconv.QuoteToASCII(text))
			if !json.Valid(raw) {
				return // Go's \x escapes for bytes that are not UTF-8
			}
		}
		want := string(appendTextBody(nil, truncateMiddle(gjson.ParseBytes(raw).Str, headC, tailC)))
		var e escapedText
		excerptJSONTo(&e, string(raw), jsonStringChars(string(raw)), headC, tailC)
		if got := string(e.b); got != want {
			t.Fatalf("excerpt of %s (%d,%d):\n got %q\nwant %q", raw, headC, tailC, got, want)
		}
	})
}

// FuzzEscapedArgs: finding a string argument in the raw, doubly escaped arguments
// text gives the value that decoding the arguments gives.
func FuzzEscapedArgs(f *testing.F) {
	f.Add("src/app.py", `x "path": "fake" \" \\`, "ls -la")
	f.Fuzz(func(t *testing.T, path, content, command string) {
		args, _ := json.Marshal(map[string]string{"content": content, "path": path, "command": command})
		raw, _ := json.Marshal(string(args))
		for key, want := range map[string]string{"path": path, "command": command, "content": content} {
			want = gjson.Get(string(args), gjson.Escape(key)).Str // json.Marshal replaced invalid UTF-8
			got, ok := escapedArgString(string(raw), key)
			if !ok || got != want {
				t.Fatalf("%s in %s: got %q (%v), want %q", key, raw, got, ok, want)
			}
		}
		if _, ok := escapedArgString(string(raw), "missing"); ok {
			t.Fatalf("found a key that is not there in %s", raw)
		}
	})
}

// TestDeepNestingIsRejected: a request nested past MaxNestingDepth is refused before
// any recursive walk (a 2-million-level content array once made compaction run for
// minutes); one level less is accepted. JSON this deep cannot be a shared vector:
// Python's json module refuses to parse it.
func TestDeepNestingIsRejected(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	// The envelope is level 1, messages 2, the message 3, its content 4, then n more.
	env := func(content int) []byte {
		return []byte(`{"op":"compact.begin","force":true,"messages":[{"role":"user","content":[` + nest(content) + `]}]}`)
	}
	errorOf := func(req []byte) *Error {
		var resp struct {
			Error *Error `json:"error"`
		}
		require.NoError(t, json.Unmarshal(Call(req), &resp))
		return resp.Error
	}
	require.Nil(t, errorOf(env(MaxNestingDepth-4)), "exactly MaxNestingDepth levels is fine")
	e := errorOf(env(MaxNestingDepth - 3))
	require.NotNil(t, e)
	require.Equal(t, CodeInputTooLarge, e.Code)
	require.Equal(t, CodeInputTooLarge, errorOf(env(2_000_000)).Code)
	// Brackets inside strings do not count.
	require.Nil(t, errorOf([]byte(`{"op":"validate","messages":[{"role":"user","content":"`+nest(5000)+`"}]}`)))
}

// FuzzCheckJSON: the one-pass validator agrees with gjson.ValidBytes on every input;
// on valid JSON its depth is the deepest nesting of arrays and objects, and the
// members it records of an object are the fields walkObject finds, with the
// elements forEachElement finds in those that are arrays.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"path\":\"\u00e9\"}"}},{"arguments":"x","\u0061rguments":"y"}],"arguments":"top"}]}`, `{"messages":[{"role":"user","content":"h\u00e9llo \ud83d\ude00 中文"},{"content":null,"c\u006fntent":"x"},[],3]}`, `{"a":[1,2.5e-3,{"b":null}],"c":"x\"\u00e9\\"}`, `[]`, `{}`, ` [ ] `, `[1,]`, `{"a":1,}`, `{"a" 1}`,
		`-0.1E+5`, `01`, `1.`, `-`, `"\u12"`, "\"a\tb\"", `"\x"`, `[[[]]`, `[}`, `{]`, `tru`, `nulll`, `"é\ud83d"`, ``, `   `, `{"a":{"b":[{}]}} x`,
		"{\"messages\":[{\"role\":\"user\",\"content\":\"ok \xff\xfe\"}]}", "[\"\xc3\"]", "{\"k\xe9\":1}", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var members []member
		valid, depth := checkJSON(data, &members)
		if want := gjson.ValidBytes(data) && utf8.Valid(data); valid != want {
			t.Fatalf("checkJSON(%q) = %v, gjson and utf8.Valid say %v", data, valid, want)
		}
		if !valid {
			// The locator finds a problem wherever the validator refuses.
			if _, at, what := locateInvalidJSON(string(data)); at < 0 || what == "" {
				t.Fatalf("locateInvalidJSON(%q) found nothing", data)
			}
		}
		if !valid {
			return
		}
		var fields []member
		if gjson.ParseBytes(data).IsObject() {
			walkObject(string(data), skipSpace(string(data), 0), func(k, raw string) bool {
				fields = append(fields, member{key: k, value: raw})
				return true
			})
		}
		for k := range members {
			m := &members[k]
			m.key = decodeString(m.key)
			var elements []string
			if m.value[0] == '[' {
				forEachElement(m.value, func(raw string) bool {
					elements = append(elements, raw)
					return true
				})
			}
			require.Equal(t, elements, m.elements, "the elements of %s in %s", m.value, data)
			if m.value[0] == '[' {
				require.Len(t, m.firstField, len(elements)+1, "where the fields of each element of %s start", m.value)
				require.Equal(t, len(m.value), m.size, "the length of the array the fields are offsets in")
				// Counted, in order: the string value of each object element's key
				// written "content", and of every key written "arguments" deeper in it.
				var want []stringCount
				keyedValue := func(v, key string) bool {
					before := strings.TrimRight(m.value[:offsetIn(m.value, v)], " \t\r\n")
					before, colon := strings.CutSuffix(before, ":")
					before = strings.TrimRight(before, " \t\r\n")
					return colon && strings.HasSuffix(before, `"`+key+`"`) && !strings.HasSuffix(before, `\"`+key+`"`)
				}
				var walk func(v string, deep bool)
				walk = func(v string, deep bool) {
					switch {
					case v[0] == '"' && (!deep && keyedValue(v, "content") || deep && keyedValue(v, "arguments")):
						tokens, chars := roughString(v)
						want = append(want, stringCount{int32(offsetIn(m.value, v)), int32(len(v)), int32(tokens + 1), int32(chars + 1)})
					case v[0] == '{':
						walkObject(v, 0, func(_, fv string) bool { walk(fv, true); return true })
					case v[0] == '[':
						forEachElement(v, func(ev string) bool { walk(ev, true); return true })
					}
				}
				for _, raw := range elements {
					if raw[0] == '{' {
						walkObject(raw, 0, func(_, fv string) bool { walk(fv, false); return true })
					}
				}
				require.Equal(t, want, m.counted, "the counted strings of %s", m.value)
				for e, raw := range elements {
					var want, got []member
					if raw[0] == '{' {
						walkObject(raw, 0, func(k, v string) bool {
							want = append(want, member{key: k, value: v})
							return true
						})
					}
					recorded, ok := m.fieldsOf(e)
					require.True(t, ok)
					for j := range recorded {
						f := &recorded[j]
						got = append(got, member{key: decodeString(f.key(m.value)), value: f.value(m.value)})
					}
					require.Equal(t, want, got, "the fields of %s", raw)
				}
			}
			m.arrayParts = arrayParts{}
		}
		require.Equal(t, fields, members, "the fields of %s", data)
		deepest, level, text := 0, 0, string(data)
		for i := 0; i < len(data); i++ {
			switch data[i] {
			case '"':
				i = skipString(text, i) - 1
			case '[', '{':
				level++
				deepest = max(deepest, level)
			case ']', '}':
				level--
			}
		}
		if depth != deepest {
			t.Fatalf("checkJSON(%q) depth %d, want %d", data, depth, deepest)
		}
	})
}

// highSurrogateEscape matches a \u escape of a high surrogate (or its look-alike
// after an escaped backslash).
var highSurrogateEscape = regexp.MustCompile(`(?i)\\ud[89ab]`)

// FuzzDecodeString: decoding a raw JSON string gives gjson's text for it, and the
// inline rune decoder agrees with utf8.DecodeRuneInString at every offset.
func FuzzDecodeString(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\nb\t\"c\"\\d\/"`, `"\u00e9\ud83d\ude00"`, `"\ud83d"`, `"\ude00x"`, `"\ud83d\u0041"`, `"\u0000"`, `"\ud83d\ud83d\ude00x\u00e9"`, `"a\\u00e9\\\u00e9 \ud83d"`, `"\u2500\u2500 \u2713 done \u2026"`,
		`"é中文😀"`, "\"\xe0\x80\x80\xed\xa0\x80\xc1\xbf\xe2\x82\"", "\xef\xbf\xbd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for i := 0; i < len(raw); i++ {
			r, n := decodeRune(raw, i)
			if wr, wn := utf8.DecodeRuneInString(raw[i:]); r != wr || n != wn {
				t.Fatalf("decodeRune(%q, %d) = %U,%d; utf8 says %U,%d", raw, i, r, n, wr, wn)
			}
		}
		raw = strings.TrimSpace(raw) // a literal, as the walkers cut them
		if !gjson.Valid(raw) || raw[0] != '"' {
			return
		}
		n := jsonStringChars(raw)
		for k := 0; k <= n; k += max(1, n/50) { // linear in the input, not quadratic
			got, ok := jsonTailOffset(raw, k)
			if !ok && utf8.ValidString(raw) && !highSurrogateEscape.MatchString(raw) {
				t.Fatalf("jsonTailOffset(%s, %d) gave up on valid UTF-8 without high-surrogate escapes", raw, k)
			}
			if ok {
				if _, want := jsonCharOffset(raw, n-k); got != want {
					t.Fatalf("jsonTailOffset(%s, %d) = %d; counting forward gives %d", raw, k, got, want)
				}
			}
		}
		if got, want := decodeString(raw), gjson.Parse(raw).Str; got != want {
			t.Fatalf("decodeString(%s) = %q, gjson says %q", raw, got, want)
		}
	})
}

// FuzzStringArgs: reading tool-call arguments in their escaped form gives the string
// fields that decoding the arguments and walking them gives, for generated argument
// objects and for any arguments string the walker accepts.
func FuzzStringArgs(f *testing.F) {
	f.Add("src/app.py", "line 1\n\t\"quoted\" \\ back\\slash \u00e9 \U0001F600", `{"a":[1,"x\"]"],"b":{"c":null}}`)
	f.Add("", `\"`, `[]`)
	f.Add(strings.Repeat("\u00e9\"\\\n", 30), strings.Repeat("\U0001F600\x01", 40), `{}`)
	// Invalid inner escapes and control characters: once read as path="" or 0="".
	f.Add("", `{"0":"\00"}`, `{"path":"a\qb","n":tru}`)
	f.Add("\u00e9", "{\"a\":\"x\ty\"}", `{"a":"\u00e9\/\b","b":[1,{"c":"\x"}]}`)
	f.Fuzz(func(t *testing.T, path, content, nested string) {
		var extra any
		if json.Unmarshal([]byte(nested), &extra) != nil {
			extra = nested
		}
		args, _ := json.Marshal(map[string]any{"path": path, "content": content, "n": 1.5, "extra": extra, "flag": true})
		for _, text := range []string{string(args), nested, content, strings.ReplaceAll(string(args), ",", ",\n ")} {
			raw, _ := json.Marshal(text)
			call := toolCall{args: gjson.Result{Type: gjson.String, Raw: string(raw)}}
			got, ok := escapedFields(nil, string(raw), func(string) bool { return true })
			if text == string(args) && !ok {
				t.Fatalf("escapedFields refused %s", raw)
			}
			valid := gjson.Valid(text)
			if ok && !valid {
				t.Fatalf("escapedFields read arguments that are not JSON: %s", raw)
			}
			if !valid && len(call.stringArgs(nil)) != 0 {
				t.Fatalf("stringArgs read arguments that are not JSON: %s", raw)
			}
			if !ok {
				continue
			}
			var want []string
			forEachField(call.argsText(), func(k, v string) bool {
				if v[0] == '"' {
					want = append(want, k+"="+decodeString(v))
				}
				return true
			})
			var have []string
			for _, a := range got {
				have = append(have, a.key+"="+a.value())
				if a.empty() != (a.value() == "") {
					t.Fatalf("%s: empty() is %v for %q", raw, a.empty(), a.value())
				}
				plain := stringArg{key: a.key, lit: string(mustMarshal(a.value()))}
				for _, n := range []int{1, 3, keyArgMaxChars} {
					for _, b := range []stringArg{a, plain} {
						if h, v := truncateRunes(b.valueHead(n), n), truncateRunes(b.value(), n); h != v {
							t.Fatalf("%s: valueHead(%d) keeps %q, value %q", raw, n, h, v)
						}
					}
				}
			}
			require.Equal(t, want, have, "arguments %s", raw)
		}
	})
}

// FuzzSummaryText: the summary's text scans and writers agree with their plain
// definitions: nextWord with strings.Fields, hasErrorMarker with a strings.Contains
// per marker, errorLines with a split into trimmed lines, the byte-wise
// looksLikePath with the rule written with runes, appendQuote with strconv.Quote, and
// appendPending with encoding/json.
func FuzzSummaryText(f *testing.F) {
	for _, s := range []string{"src/app.py", "./x", "/etc/hosts", "main.go", "obj.attr", "a[1:2]", "https://x.io/a", "-rf", "../..", "\"README.md\",", "é/x", "x.PY",
		"ls -la  src/app.py\t\n x\u00a0y\u2003z \xff end", "Traceback (most recent call last):", "make: *** build failed", "E rror: no", "ERROR", "ctl\x00\x1f\b\f\u2029 <&> \"q\" \\ é\xc3", "cat <<'EOF'\n\ta\v\a\x7f\x1b \"q\" \\ EOF\r", "ok\n failed: x\n\tError: y \r\nerror:\nFAILED ERROR\n failed", "tag \U000E0001 shy \u00ad nbsp \u00a0 box ─→ \U0001F600 \ufffd"} {
		f.Add(s)
	}
	plainPath := func(w string) bool {
		w = strings.Trim(w, "\"'`;,()")
		if len(w) < 3 || len(w) > 200 || strings.HasPrefix(w, "-") || strings.Contains(w, "://") {
			return false
		}
		for _, r := range w {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._/~@+-", r)) {
				return false
			}
		}
		if strings.Contains(w, "/") {
			return strings.Trim(w, "./") != ""
		}
		dot := strings.LastIndexByte(w, '.')
		return dot > 0 && contains(fileExtensions, strings.ToLower(w[dot+1:]))
	}
	f.Fuzz(func(t *testing.T, s string) {
		var words []string
		for w, rest := nextWord(s); w != ""; w, rest = nextWord(rest) {
			words = append(words, w)
		}
		if want := strings.Fields(s); len(want) > 0 || len(words) > 0 {
			require.Equal(t, want, words, "words of %q", s)
		}
		if got, want := looksLikePath(s), plainPath(s); got != want {
			t.Fatalf("looksLikePath(%q) = %v, want %v", s, got, want)
		}
		want := false
		for _, mk := range errorMarkers {
			want = want || strings.Contains(s, mk)
		}
		if got := hasErrorMarker(s); got != want {
			t.Fatalf("hasErrorMarker(%q) = %v, want %v", s, got, want)
		}
		text, _ := marshal(s) // bytes that are not UTF-8 become U+FFFD
		var lines []string
		for _, line := range strings.Split(decodeString(string(text)), "\n") {
			if line = strings.TrimSpace(line); hasErrorMarker(line) {
				lines = append(lines, truncateRunes(line, fallbackErrorChars))
			}
		}
		tool := message{role: "tool", contentRaw: string(text)}
		require.Equal(t, lines, errorLines(&tool), "error lines of %q", s)
		if got, want := jsonStringLen(s), len(appendJSONString(nil, s)); got != want {
			t.Fatalf("jsonStringLen(%q) = %d, the encoding is %d bytes", s, got, want)
		}
		if got, want := string(appendQuote([]byte("x"), s)), "x"+strconv.Quote(s); got != want {
			t.Fatalf("appendQuote(%q) = %s, strconv.Quote gives %s", s, got, want)
		}
		prompt := "\u2028" + s + "\xff"
		sr := SummaryRequest{Messages: []ChatMessage{{Role: "system", Content: summarizerSystemPrompt}, {Role: "user", Content: prompt}}, TargetTokens: len(s), MaxTokens: -1, Iterative: len(s)%2 == 0, Middle: IndexRange{From: 1, To: len(s)}}
		ask := summaryAsk{targetTokens: len(s), maxTokens: -1, iterative: len(s)%2 == 0, middle: IndexRange{From: 1, To: len(s)}, prompt: appendTextBody(nil, prompt)}
		wantJSON, _ := marshal(CompactResult{State: s, SummaryRequest: &sr})
		require.Equal(t, string(wantJSON), string(appendPending(nil, s, &ask)), "the pending result for %q", s)
	})
}

// gjsonContentText is contentText as gjson reads a content value, the definition
// rawContentText is held to.
func gjsonContentText(content gjson.Result) string {
	switch {
	case content.Type == gjson.String:
		return content.Str
	case content.IsArray():
		var parts []string
		content.ForEach(func(_, p gjson.Result) bool {
			var t string
			switch p.Get("type").Str {
			case "text", "input_text", "output_text":
				t = p.Get("text").Str
			case "image_url", "image", "input_image":
				t = "[image]"
			case "tool_result":
				t = gjsonContentText(p.Get("content"))
			}
			if t != "" {
				parts = append(parts, t)
			}
			return true
		})
		return strings.Join(parts, "\n")
	}
	return ""
}

// FuzzContentText holds rawContentText (a walk over raw JSON) to gjson's reading
// of the same content value.
func FuzzContentText(f *testing.F) {
	for _, s := range []string{
		`"plain"`, `"a\nb \u00e9"`, `[{"type":"text","text":"a"},{"type":"text","text":"b\"c"}]`,
		`[{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"after"}]`,
		`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"out"}]},{"type":"tool_result","content":"s"}]`,
		`[{"text":"first","type":"text","text":"second"}]`, `[{"t\u0079pe":"text","text":"escaped key"}]`,
		`[1,"x",null,{"type":7,"text":"n"},{"type":"text","text":5}]`, `[]`, `null`, `{"type":"text"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !gjson.Valid(s) {
			return
		}
		v := gjson.Parse(s)
		want := gjsonContentText(v)
		if got := rawContentText(strings.TrimSpace(s)); got != want {
			t.Fatalf("rawContentText(%q) = %q, gjson reads %q", s, got, want)
		}
		if v.IsArray() {
			if got, want := firstTextPart(strings.TrimSpace(s)), firstText(v); got != want {
				t.Fatalf("firstTextPart(%q) = %q, gjson reads %q", s, got, want)
			}
		}
	})
}

// firstText is the text of a content's first text part as gjson reads it: the
// definition firstTextPart is held to.
func firstText(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.Str
	}
	if content.IsArray() {
		var s string
		content.ForEach(func(_, p gjson.Result) bool {
			if p.Get("type").Str == "text" {
				s = p.Get("text").Str
				return false
			}
			return true
		})
		return s
	}
	return ""
}

// FuzzRawText: appendRawText writes what escaping the decoded string writes.
func FuzzRawText(f *testing.F) {
	for _, s := range []string{
		`plain text`, `tab\there \"q\" \\ \/ \u00e9 \u00E9 \ud83d\ude00 \ud83d x \udc00 \u2028 \u001b`,
		"raw \xe2\x80\xa8 \xff \xe2\x80 é 😀", `cut \u12`, `bad \x escape`, `end\`, "ctl \x01 \" quote",
		`\u0000\u0008\u000a\u0022\u005c\u002f`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		want := string(appendTextBody(nil, decodeString(`"`+body+`"`)))
		if got := string(appendRawText(nil, body)); got != want {
			t.Fatalf("appendRawText(%q) = %q, escaping the decoded text gives %q", body, got, want)
		}
	})
}

// gjsonCanonical is canonicalJSON as it was written over gjson's parse, the
// definition the raw walk is held to.
func gjsonCanonical(dst []byte, v gjson.Result) []byte {
	switch {
	case v.Type == gjson.String:
		return appendJSONString(dst, v.Str)
	case v.IsObject():
		dst = append(dst, '{')
		first := true
		v.ForEach(func(k, e gjson.Result) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, k.Str)
			dst = append(dst, ':')
			dst = gjsonCanonical(dst, e)
			return true
		})
		return append(dst, '}')
	case v.IsArray():
		dst = append(dst, '[')
		first := true
		v.ForEach(func(_, e gjson.Result) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = gjsonCanonical(dst, e)
			return true
		})
		return append(dst, ']')
	}
	return append(dst, strings.TrimSpace(v.Raw)...)
}

// FuzzCanonicalJSON holds canonicalJSON (a raw walk) to its definition over gjson,
// and canonicalLen to its length.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{"path": "a/b.py", "n": 1.50, "ok": true, "x": null}`, ` [1, "\u00e9\n\/", {"k\u0079": [ ]}, -0e5 ] `,
		`{"a":1,"a":2}`, `"\ud83d\ude00 \ud800 \" \\ \u001f"`, `{"content":"line\n\tmore \"q\""}`, `{}`, `7`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !gjson.Valid(s) {
			return
		}
		v := gjson.Parse(s)
		if got, want := string(canonicalJSON(nil, v)), string(gjsonCanonical(nil, v)); got != want {
			t.Fatalf("canonicalJSON(%s) = %s, over gjson %s", s, got, want)
		}
		if got, want := canonicalLen(strings.TrimSpace(v.Raw)), len(canonicalJSON(nil, v)); got != want {
			t.Fatalf("canonicalLen(%s) = %d, canonicalJSON is %d bytes", s, got, want)
		}
	})
}

// FuzzValidRoughString: validating and counting a JSON string in one pass agrees
// with validString, and on valid strings with roughString.
func FuzzValidRoughString(f *testing.F) {
	for _, s := range []string{`"plain ascii text that is longer than eight bytes"`, `"a\nb\t\"c\"\\d\/"`, `"\u00e9\ud83d\ude00"`,
		`"\ud83d\u0041"`, `"\ud83d\u00"`, `"\ud83d"`, `"中文かな한국어 mixed"`, "\"\xe2\x82\"", "\"tab\there\"", `"\x"`, `"unterminated`, `""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || s[0] != '"' {
			s = `"` + s
		}
		end, ok := validString(s, 0)
		fEnd, fOK, tokens, chars := validRoughString(s, 0)
		if fOK != ok {
			t.Fatalf("validRoughString(%q) ok = %v, validString says %v", s, fOK, ok)
		}
		if !ok {
			return
		}
		wantTokens, wantChars := roughString(s[:end])
		if fEnd != end || tokens != wantTokens || chars != wantChars {
			t.Fatalf("validRoughString(%q) = %d, %d tokens, %d chars; want %d, %d, %d", s, fEnd, tokens, chars, end, wantTokens, wantChars)
		}
	})
}
