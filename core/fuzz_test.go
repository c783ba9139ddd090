package core

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/ctxcompact/ctxcompact/internal/vectors"
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
	f.Add([]byte(`{"op":"cache.apply","messages":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a","prompt_cache_breakpoint":{"mode":"explicit"}}]},{"type":"function_call_output","call_id":"x","output":"o"}]}`))
	f.Add([]byte(`{"op":"tokens.count","encoding":"o200k_base","messages":[{"type":"function_call","call_id":"x","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"x","output":{"type":"text","text":"t"}}]}`))
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
	f.Add([]byte(`[{"type":"message","role":"developer","content":"s"},{"role":"user","content":"u"},{"type":"reasoning","id":"r","summary":[],"encrypted_content":"e"},{"type":"function_call","call_id":"a","name":"f","arguments":"{}"},{"type":"computer_call","call_id":"b","action":{}},{"type":"function_call_output","call_id":"a","output":"r"},{"type":"function_call_output","call_id":"zz","output":"orphan"},{"type":"compaction","encrypted_content":"x"},{"type":"compaction_trigger"},{"id":"ref"},{"type":"message","role":"user","content":[{"type":"input_text","text":"again"}]}]`), uint8(1), uint16(300))
	f.Add([]byte(`[{"role":"system","content":"s"},{"role":"user","content":"u"},{"role":"assistant","content":[{"type":"text","text":"t"},{"type":"tool-call","toolCallId":"a","toolName":"f","input":{}},{"type":"tool-call","toolCallId":"b","toolName":"g","input":{"x":1}},{"type":"tool-approval-request","approvalId":"p","toolCallId":"b"}]},{"role":"tool","content":[{"type":"tool-result","toolCallId":"a","toolName":"f","output":{"type":"json","value":[1,2]}},{"type":"tool-approval-response","approvalId":"p","approved":true},{"type":"tool-approval-response","approvalId":"q","approved":false}]},{"role":"tool","content":[{"type":"tool-result","toolCallId":"zz","toolName":"f","result":"orphan"}]},{"role":"user","content":"again"}]`), uint8(2), uint16(200))
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
		want := string(jsonraw.AppendStringBody(nil, truncateMiddle(gjson.ParseBytes(raw).Str, headC, tailC)))
		var e escapedText
		excerptJSONTo(&e, string(raw), jsonraw.CountChars(string(raw)), headC, tailC)
		if got := string(e.b); got != want {
			t.Fatalf("excerpt of %s (%d,%d):\n got %q\nwant %q", raw, headC, tailC, got, want)
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
			jsonraw.ForEachField(call.argsText(), func(k, v string) bool {
				if v[0] == '"' {
					want = append(want, k+"="+jsonraw.DecodeString(v))
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
		"ls -la  src/app.py\t\n x\u00a0y\u2003z \xff end", "Traceback (most recent call last):", "make: *** build failed", "E rror: no", "ERROR", "ctl\x00\x1f\b\f\u2029 <&> \"q\" \\ é\xc3", "cat <<'EOF'\n\ta\v\a\x7f\x1b \"q\" \\ EOF\r", "ok\n failed: x\n\tError: y \r\nerror:\nFAILED ERROR\n failed", "tag \U000E0001 shy \u00ad nbsp \u00a0 box ─→ \U0001F600 \ufffd", "a.b\u3000c/d\xe3\x80\x80e.f \xe3\xe3\x80\x80/g \x80.\x80 ..", "/", ". /"} {
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
		var dotted, found []string
		for _, w := range words {
			if strings.ContainsAny(w, "/.") {
				dotted = append(dotted, w)
			}
		}
		pathWords(s, func(w string) { found = append(found, w) })
		require.Equal(t, dotted, found, "path words of %q", s)
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
		for _, line := range strings.Split(jsonraw.DecodeString(string(text)), "\n") {
			if line = strings.TrimSpace(line); hasErrorMarker(line) {
				lines = append(lines, truncateRunes(line, fallbackErrorChars))
			}
		}
		tool := message{role: "tool", contentRaw: string(text)}
		require.Equal(t, lines, errorLines(&tool), "error lines of %q", s)
		if got, want := jsonStringLen(s), len(jsonraw.Stringify.Append(nil, s)); got != want {
			t.Fatalf("jsonStringLen(%q) = %d, the encoding is %d bytes", s, got, want)
		}
		if got, want := string(jsonraw.AppendGoQuote([]byte("x"), s)), "x"+strconv.Quote(s); got != want {
			t.Fatalf("AppendGoQuote(%q) = %s, strconv.Quote gives %s", s, got, want)
		}
		prompt := "\u2028" + s + "\xff"
		sr := SummaryRequest{Messages: []ChatMessage{{Role: "system", Content: summarizerSystemPrompt}, {Role: "user", Content: prompt}}, TargetTokens: len(s), MaxTokens: -1, Iterative: len(s)%2 == 0, Middle: IndexRange{From: 1, To: len(s)}}
		ask := summaryAsk{targetTokens: len(s), maxTokens: -1, iterative: len(s)%2 == 0, middle: IndexRange{From: 1, To: len(s)}, prompt: jsonraw.AppendStringBody(nil, prompt)}
		wantJSON, _ := marshal(CompactResult{State: s, SummaryRequest: &sr})
		require.Equal(t, string(wantJSON), string(appendPending(nil, s, &ask)), "the pending result for %q", s)
	})
}

// gjsonContentText is contentText as gjson reads a content value (of duplicate keys
// the last, with fieldOf), the definition rawContentText is held to.
func gjsonContentText(content gjson.Result) string {
	switch {
	case content.Type == gjson.String:
		return content.Str
	case content.IsArray():
		var parts []string
		content.ForEach(func(_, p gjson.Result) bool {
			var t string
			switch fieldOf(p, "type").Str {
			case "text", "input_text", "output_text":
				t = fieldOf(p, "text").Str
			case "image_url", "image", "input_image":
				t = "[image]"
			case "tool_result":
				t = gjsonContentText(fieldOf(p, "content"))
			case "":
				if !fieldOf(p, "type").Exists() {
					t = gjsonGeminiText(p)
				}
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

// gjsonGeminiText is the text of a Gemini part (one without "type"): its text when
// it is not a thought, a functionResponse's output (or its response as compact
// JSON), "[image]" or "[file]" for inlineData and fileData.
func gjsonGeminiText(p gjson.Result) string {
	switch media := fieldOf(p, "inlineData"); {
	case fieldOf(p, "text").Type == gjson.String:
		if fieldOf(p, "thought").Type == gjson.True {
			return ""
		}
		return fieldOf(p, "text").Str
	case fieldOf(p, "functionResponse").IsObject():
		r := fieldOf(fieldOf(p, "functionResponse"), "response")
		if !r.Exists() {
			return ""
		}
		if out := fieldOf(r, "output"); r.IsObject() && out.Type == gjson.String {
			return out.Str
		}
		return string(gjsonCanonical(nil, r))
	default:
		if !media.Exists() {
			media = fieldOf(p, "fileData")
		}
		if !media.IsObject() {
			return ""
		}
		if mime := fieldOf(media, "mimeType"); mime.Type == gjson.String && strings.HasPrefix(mime.Str, "image/") {
			return "[image]"
		}
		return "[file]"
	}
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
		`[{"text":"gemini"},{"text":"thinking","thought":true},{"inlineData":{"mimeType":"image/png","data":"AA=="}},{"fileData":{"mimeType":"application/pdf","fileUri":"f"}}]`,
		`[{"functionResponse":{"name":"f","response":{"output":"out"}}},{"functionResponse":{"name":"g","response":{"n":1}}},{"text":5,"thought":true}]`,
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
			if fieldOf(p, "type").Str == "text" || !fieldOf(p, "type").Exists() && fieldOf(p, "text").Type == gjson.String && fieldOf(p, "thought").Type != gjson.True {
				s = fieldOf(p, "text").Str
				return false
			}
			return true
		})
		return s
	}
	return ""
}

// gjsonCanonical is canonicalJSON as it was written over gjson's parse, the
// definition the raw walk is held to.
func gjsonCanonical(dst []byte, v gjson.Result) []byte {
	switch {
	case v.Type == gjson.String:
		return jsonraw.Stringify.Append(dst, v.Str)
	case v.IsObject():
		dst = append(dst, '{')
		first := true
		v.ForEach(func(k, e gjson.Result) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = jsonraw.Stringify.Append(dst, k.Str)
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

// FuzzRoughCounted: what the validating pass counts of a message's string content
// gives roughString's estimate of it, so a counted content is estimated as one read
// again would be; a number, boolean or null content is not counted.
func FuzzRoughCounted(f *testing.F) {
	for _, s := range []string{`"plain ascii text that is longer than eight bytes"`, `"a\nb\t\"c\"\\d\/"`, `"\u00e9\ud83d\ude00"`,
		`"\ud83d\u0041"`, `"\ud83d"`, `"中文かな한국어 mixed"`, `"\u4e2d\uac00 ｆｕｌｌ"`, `""`, ` "x"` + "\n", `0`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		// lit must be the content's whole value: one JSON text, not a fragment
		// such as `"a"},{"content":"b"` that makes the request valid with two.
		if !gjson.Valid(lit) {
			return
		}
		var members []jsonraw.Member
		if valid, _ := checkJSON([]byte(`{"messages":[{"content":`+lit+`}]}`), &members); !valid {
			return
		}
		require.Len(t, members, 1)
		switch v := gjson.Parse(lit); v.Type {
		case gjson.String:
		case gjson.JSON: // an array or object: strings deep in it are another test's
			return
		default:
			require.Empty(t, members[0].Counted, "the content %s is not a string: nothing is counted", lit)
			return
		}
		s := strings.Trim(lit, " \t\r\n") // the string itself, without JSON whitespace
		require.Len(t, members[0].Counted, 1, "the content %s is counted", lit)
		n := members[0].Counted[0]
		tokens1, chars1 := roughCounted(n)
		tokens, chars := roughString(s)
		if int(n.Size) != len(s) || tokens1 != tokens+1 || chars1 != chars+1 {
			t.Fatalf("counted %s as %d bytes, %d tokens, %d chars; roughString says %d, %d, %d", s, n.Size, tokens1-1, chars1-1, len(s), tokens, chars)
		}
	})
}

// TestCJKDenseRanges: the ranges the validating pass classes characters by are
// isCJKDense's, ascending as jsonraw.ScanOptions asks.
func TestCJKDenseRanges(t *testing.T) {
	for k := 1; k < len(cjkDense); k++ {
		require.Less(t, cjkDense[k-1].Hi, cjkDense[k].Lo, "ranges ascend")
	}
	for r := rune(0); r <= utf8.MaxRune+1; r++ {
		in := false
		for _, rg := range cjkDense {
			in = in || rg.Lo <= r && r <= rg.Hi
		}
		if in != isCJKDense(r) {
			t.Fatalf("U+%04X: in cjkDense %v, isCJKDense %v", r, in, isCJKDense(r))
		}
	}
}
