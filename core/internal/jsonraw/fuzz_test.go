package jsonraw

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// testScan counts as a request scan does ("content" in elements, "arguments" deeper),
// with dense ranges that hold an ASCII letter (never dense when written plainly), a
// Latin letter, CJK and emoji.
var testScan = ScanOptions{
	ElementKeys: []string{"content"},
	DeepKeys:    []string{"arguments"},
	Dense:       []RuneRange{{Lo: 'A', Hi: 'A'}, {Lo: 0xE9, Hi: 0xE9}, {Lo: 0x3000, Hi: 0x9FFF}, {Lo: 0x1F600, Hi: 0x1F64F}},
}

// countString is the count Scan makes of the raw JSON string raw, written plainly:
// each character once, an escape the one it stands for, a high-surrogate escape and
// the \u escape after it one; dense when a range holds it and it is written neither
// as ASCII nor as a two-character escape.
func countString(raw string, ranges []RuneRange) (dense, other int32) {
	class := func(r rune) {
		for _, rg := range ranges {
			if rg.Lo <= r && r <= rg.Hi {
				dense++
				return
			}
		}
		other++
	}
	body := raw[1 : len(raw)-1]
	for i := 0; i < len(body); {
		switch {
		case body[i] == '\\' && body[i+1] == 'u':
			r, _ := strconv.ParseUint(body[i+2:i+6], 16, 32)
			i += 6
			if r >= 0xD800 && r < 0xDC00 && strings.HasPrefix(body[i:], `\u`) {
				lo, _ := strconv.ParseUint(body[i+2:i+6], 16, 32)
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			}
			class(rune(r))
		case body[i] == '\\':
			other++
			i += 2
		case body[i] < utf8.RuneSelf:
			other++
			i++
		default:
			r, size := utf8.DecodeRuneInString(body[i:])
			class(r)
			i += size
		}
	}
	return dense, other
}

// FuzzRawJSON: the raw walkers never panic, whatever the text, and on valid JSON
// objects they see the same keys as gjson.
func FuzzRawJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":"x\"y","c":[1,{"d":2}]}`, `{n}`, `{"a"`, `[1,2`, `{"a":}`, `{"k\u00e9":"v"}`, `[{"x":"\\"}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var keys []string
		ForEachField(s, func(k, raw string) bool {
			keys = append(keys, k)
			_ = CountChars(raw)
			return true
		})
		ForEachElement(s, func(raw string) bool { return true })
		_ = FindField(s, "a")
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

// FuzzEscapedArgs: finding a string argument in the raw, doubly escaped arguments
// text gives the value that decoding the arguments gives.
func FuzzEscapedArgs(f *testing.F) {
	f.Add("src/app.py", `x "path": "fake" \" \\`, "ls -la")
	f.Fuzz(func(t *testing.T, path, content, command string) {
		args, _ := json.Marshal(map[string]string{"content": content, "path": path, "command": command})
		raw, _ := json.Marshal(string(args))
		for key, want := range map[string]string{"path": path, "command": command, "content": content} {
			want = gjson.Get(string(args), gjson.Escape(key)).Str // json.Marshal replaced invalid UTF-8
			got, ok := FindEscapedString(string(raw), key)
			if !ok || got != want {
				t.Fatalf("%s in %s: got %q (%v), want %q", key, raw, got, ok, want)
			}
		}
		if _, ok := FindEscapedString(string(raw), "missing"); ok {
			t.Fatalf("found a key that is not there in %s", raw)
		}
	})
}

// FuzzScan: the one-pass validator agrees with gjson.ValidBytes on every input;
// on valid JSON its depth is the deepest nesting of arrays and objects, and the
// members it records of an object are the fields WalkObject finds, with the
// elements ForEachElement finds in those that are arrays.
func FuzzScan(f *testing.F) {
	for _, s := range []string{`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"path\":\"\u00e9\"}"}},{"arguments":"x","\u0061rguments":"y"}],"arguments":"top"}]}`, `{"messages":[{"role":"user","content":"h\u00e9llo \ud83d\ude00 中文"},{"content":null,"c\u006fntent":"x"},[],3]}`, `{"a":[1,2.5e-3,{"b":null}],"c":"x\"\u00e9\\"}`, `[]`, `{}`, ` [ ] `, `[1,]`, `{"a":1,}`, `{"a" 1}`,
		`-0.1E+5`, `01`, `1.`, `-`, `"\u12"`, "\"a\tb\"", `"\x"`, `[[[]]`, `[}`, `{]`, `tru`, `nulll`, `"é\ud83d"`, ``, `   `, `{"a":{"b":[{}]}} x`,
		"{\"messages\":[{\"role\":\"user\",\"content\":\"ok \xff\xfe\"}]}", "[\"\xc3\"]", "{\"k\xe9\":1}", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var members []Member
		valid, depth := Scan(data, &testScan, &members)
		if want := gjson.ValidBytes(data) && utf8.Valid(data); valid != want {
			t.Fatalf("Scan(%q) = %v, gjson and utf8.Valid say %v", data, valid, want)
		}
		if v, d := Scan(data, nil, nil); v != valid || d != depth {
			t.Fatalf("Scan(%q) recording = %v, %d; not recording %v, %d", data, valid, depth, v, d)
		}
		if !valid {
			// The locator finds a problem wherever the validator refuses.
			if _, at, what := LocateInvalid(string(data), 1000); at < 0 || what == "" {
				t.Fatalf("LocateInvalid(%q) found nothing", data)
			}
		}
		if !valid {
			return
		}
		var fields []Member
		if gjson.ParseBytes(data).IsObject() {
			WalkObject(string(data), SkipSpace(string(data), 0), func(k, raw string) bool {
				fields = append(fields, Member{Key: k, Value: raw})
				return true
			})
		}
		for k := range members {
			m := &members[k]
			m.Key = DecodeString(m.Key)
			var elements []string
			if m.Value[0] == '[' {
				ForEachElement(m.Value, func(raw string) bool {
					elements = append(elements, raw)
					return true
				})
			}
			require.Equal(t, elements, m.Elements, "the elements of %s in %s", m.Value, data)
			if m.Value[0] == '[' {
				require.Len(t, m.FirstField, len(elements)+1, "where the fields of each element of %s start", m.Value)
				require.Equal(t, len(m.Value), m.Size, "the length of the array the fields are offsets in")
				// Counted, in order: the string value of each object element's key
				// written "content", and of every key written "arguments" deeper in it
				// (testScan's keys).
				var want []Count
				keyedValue := func(v, key string) bool {
					before := strings.TrimRight(m.Value[:OffsetOf(m.Value, v)], " \t\r\n")
					before, colon := strings.CutSuffix(before, ":")
					before = strings.TrimRight(before, " \t\r\n")
					return colon && strings.HasSuffix(before, `"`+key+`"`) && !strings.HasSuffix(before, `\"`+key+`"`)
				}
				var walk func(v string, deep bool)
				walk = func(v string, deep bool) {
					switch {
					case v[0] == '"' && (!deep && keyedValue(v, "content") || deep && keyedValue(v, "arguments")):
						dense, other := countString(v, testScan.Dense)
						want = append(want, Count{At: int32(OffsetOf(m.Value, v)), Size: int32(len(v)), Dense: dense, Other: other})
					case v[0] == '{':
						WalkObject(v, 0, func(_, fv string) bool { walk(fv, true); return true })
					case v[0] == '[':
						ForEachElement(v, func(ev string) bool { walk(ev, true); return true })
					}
				}
				for _, raw := range elements {
					if raw[0] == '{' {
						WalkObject(raw, 0, func(_, fv string) bool { walk(fv, false); return true })
					}
				}
				require.Equal(t, want, m.Counted, "the counted strings of %s", m.Value)
				for e, raw := range elements {
					var want, got []Member
					if raw[0] == '{' {
						WalkObject(raw, 0, func(k, v string) bool {
							want = append(want, Member{Key: k, Value: v})
							return true
						})
					}
					recorded, ok := m.FieldsOf(e)
					require.True(t, ok)
					for j := range recorded {
						f := &recorded[j]
						got = append(got, Member{Key: DecodeString(f.Key(m.Value)), Value: f.Value(m.Value)})
					}
					require.Equal(t, want, got, "the fields of %s", raw)
				}
			}
			m.ArrayParts = ArrayParts{}
		}
		require.Equal(t, fields, members, "the fields of %s", data)
		deepest, level, text := 0, 0, string(data)
		for i := 0; i < len(data); i++ {
			switch data[i] {
			case '"':
				i = SkipString(text, i) - 1
			case '[', '{':
				level++
				deepest = max(deepest, level)
			case ']', '}':
				level--
			}
		}
		if depth != deepest {
			t.Fatalf("Scan(%q) depth %d, want %d", data, depth, deepest)
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
			r, n := DecodeRune(raw, i)
			if wr, wn := utf8.DecodeRuneInString(raw[i:]); r != wr || n != wn {
				t.Fatalf("DecodeRune(%q, %d) = %U,%d; utf8 says %U,%d", raw, i, r, n, wr, wn)
			}
		}
		raw = strings.TrimSpace(raw) // a literal, as the walkers cut them
		if !gjson.Valid(raw) || raw[0] != '"' {
			return
		}
		n := CountChars(raw)
		for k := 0; k <= n; k += max(1, n/50) { // linear in the input, not quadratic
			got, ok := LocateTail(raw, k)
			if !ok && utf8.ValidString(raw) && !highSurrogateEscape.MatchString(raw) {
				t.Fatalf("LocateTail(%s, %d) gave up on valid UTF-8 without high-surrogate escapes", raw, k)
			}
			if ok {
				if _, want := LocateChar(raw, n-k); got != want {
					t.Fatalf("LocateTail(%s, %d) = %d; counting forward gives %d", raw, k, got, want)
				}
			}
		}
		if got, want := DecodeString(raw), gjson.Parse(raw).Str; got != want {
			t.Fatalf("DecodeString(%s) = %q, gjson says %q", raw, got, want)
		}
	})
}

// FuzzRawText: AppendRawBody writes what escaping the decoded string writes.
func FuzzRawText(f *testing.F) {
	for _, s := range []string{
		`plain text`, `tab\there \"q\" \\ \/ \u00e9 \u00E9 \ud83d\ude00 \ud83d x \udc00 \u2028 \u001b`,
		"raw \xe2\x80\xa8 \xff \xe2\x80 é 😀", `cut \u12`, `bad \x escape`, `end\`, "ctl \x01 \" quote",
		`\u0000\u0008\u000a\u0022\u005c\u002f`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		want := string(AppendStringBody(nil, DecodeString(`"`+body+`"`)))
		if got := string(AppendRawBody(nil, body)); got != want {
			t.Fatalf("AppendRawBody(%q) = %q, escaping the decoded text gives %q", body, got, want)
		}
	})
}

// FuzzValidCountedString: validating and counting a JSON string in one pass agrees
// with validString, and on valid strings with countString.
func FuzzValidCountedString(f *testing.F) {
	for _, s := range []string{`"plain ascii text that is longer than eight bytes"`, `"a\nb\t\"c\"\\d\/"`, `"\u00e9\ud83d\ude00"`,
		`"\ud83d\u0041"`, `"\ud83d\u00"`, `"\ud83d"`, `"中文かな한국어 mixed é \u00e9 \u0041 A"`, "\"\xe2\x82\"", "\"tab\there\"", `"\x"`, `"unterminated`, `""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || s[0] != '"' {
			s = `"` + s
		}
		end, ok := validString(s, 0)
		fEnd, fOK, dense, other := validCountedString(s, 0, testScan.Dense)
		if fOK != ok {
			t.Fatalf("validCountedString(%q) ok = %v, validString says %v", s, fOK, ok)
		}
		if !ok {
			return
		}
		wantDense, wantOther := countString(s[:end], testScan.Dense)
		if fEnd != end || dense != wantDense || other != wantOther {
			t.Fatalf("validCountedString(%q) = %d, %d dense, %d other; want %d, %d, %d", s, fEnd, dense, other, end, wantDense, wantOther)
		}
	})
}

// referenceEscape is the escaping e names, written plainly rune by rune: the
// definition Escaping.Append is held to where no library of Go's is the reference
// (JSON.stringify's, json.dumps's).
func referenceEscape(e Escaping, s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1 && (e.ReplaceInvalid || e.ASCII):
			b.WriteString(`\ufffd`)
		case r == utf8.RuneError && size == 1:
			b.WriteByte(s[i])
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
			b.WriteString(map[rune]string{'\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}[r])
		case r < 0x20,
			e.HTML && (r == '<' || r == '>' || r == '&'),
			e.LineSeparators && (r == '\u2028' || r == '\u2029'),
			e.ASCII && r >= 0x7F && r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		case e.ASCII && r >= 0x10000:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzEscaping holds the one string encoder to the encoders it stands in for:
// encoding/json with and without HTML escaping, and the plain definitions of
// JSON.stringify's and json.dumps's escaping; the body is the string without its
// quotes.
func FuzzEscaping(f *testing.F) {
	for _, s := range []string{"plain ascii, longer than eight bytes", "q\" b\\ \b\f\n\r\t \x00\x1f\x7f", "<a href='x'>&amp;</a> and more text",
		"é中文😀 \u2028\u2029 \ufffd", "bad \xff\xfe \xe2\x82 \xed\xa0\x80 end", "\U0010FFFF\U00010000", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var plain strings.Builder
		enc := json.NewEncoder(&plain)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(s))
		html, err := json.Marshal(s)
		require.NoError(t, err)
		for _, c := range []struct {
			name string
			e    Escaping
			want string
		}{
			{"GoJSON", GoJSON, strings.TrimSuffix(plain.String(), "\n")},
			{"GoJSONHTML", GoJSONHTML, string(html)},
			{"Stringify", Stringify, referenceEscape(Stringify, s)},
			{"PythonASCII", PythonASCII, referenceEscape(PythonASCII, s)},
			{"GoJSON reference", GoJSON, referenceEscape(GoJSON, s)},
			{"GoJSONHTML reference", GoJSONHTML, referenceEscape(GoJSONHTML, s)},
		} {
			got := string(c.e.Append(nil, s))
			if got != c.want {
				t.Fatalf("%s.Append(%q) = %s, want %s", c.name, s, got, c.want)
			}
			if body := string(c.e.AppendBody([]byte("x"), s)); body != "x"+got[1:len(got)-1] {
				t.Fatalf("%s.AppendBody(%q) = %s, Append gives %s", c.name, s, body, got)
			}
		}
		if s != "" && utf8.ValidString(s) {
			var back string
			require.NoError(t, json.Unmarshal(PythonASCII.Append(nil, s), &back))
			require.Equal(t, s, back, "PythonASCII decodes back")
		}
	})
}
