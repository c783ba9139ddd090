package core

import (
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Reading tool-call arguments. OpenAI sends them as a JSON string holding a JSON
// object, so every quote of the object arrives escaped (\") and every escape of its
// strings escaped twice (\\n). Placeholders and summaries need a few short string
// arguments (a path, a command) of calls whose other arguments can be a whole file.
// stringArgs reads the object in its escaped form in one pass and decodes only the
// values asked for.

// argsText returns the call's arguments as text: the decoded string (OpenAI), or
// the raw JSON of an object.
func (c toolCall) argsText() string {
	if c.args.Type == gjson.String {
		return decodeString(c.args.Raw)
	}
	return c.args.Raw
}

// stringArg is one top-level string argument of a tool call.
type stringArg struct {
	key string
	// lit is the value's JSON literal; when escaped, as it sits in the arguments
	// string (escaped once more), when decoded, the value's text itself.
	lit              string
	escaped, decoded bool
}

// value returns the argument's text.
func (a stringArg) value() string {
	switch {
	case a.decoded:
		return a.lit
	case !a.escaped:
		return decodeString(a.lit)
	case !hasByte(a.lit[2:len(a.lit)-2], '\\'):
		return a.lit[2 : len(a.lit)-2]
	}
	return decodeString(decodeBody(a.lit)) // a.lit is the body of the arguments string
}

// valueHead returns the argument's text, or when it is long, a prefix of it that
// holds its first n characters and more: only that much of the literal is decoded.
// A character takes at most 14 bytes of literal (a surrogate pair escaped twice),
// so the prefix decoded has at least n+1 characters; an escape the cut splits only
// spoils what follows them.
func (a stringArg) valueHead(n int) string {
	// Most text takes a byte or two per character: a short cut is tried first, and
	// is enough when it decodes to n+1 characters besides the at most 14 that a
	// split escape spoils at its end.
	if short := 2*n + 64; !a.decoded && len(a.lit) > short {
		if v := a.cut(short); utf8.RuneCountInString(v) > n+14 {
			return v
		}
	}
	if limit := 14*(n+1) + 8; !a.decoded && len(a.lit) > limit {
		return a.cut(limit)
	}
	return a.value()
}

// cut returns the value of the argument's literal cut to its first limit bytes.
func (a stringArg) cut(limit int) string {
	if a.escaped {
		a.lit = a.lit[:limit] + `\"`
	} else {
		a.lit = a.lit[:limit] + `"`
	}
	return a.value()
}

// empty reports whether the argument is the empty string.
func (a stringArg) empty() bool {
	switch {
	case a.decoded:
		return a.lit == ""
	case a.escaped:
		return len(a.lit) == 4 // \"\"
	}
	return len(a.lit) == 2
}

// bigArgs is the size above which arguments that stringArgs cannot walk are searched
// for the wanted keys instead of being decoded.
const bigArgs = 8 << 10

// stringArgs returns the top-level string arguments of the call whose keys are in
// want (every one when want is nil), in order. Arguments that are not one JSON
// object, or that escape their structure with \u, are decoded and walked; when they
// are big, the wanted keys are searched for in the raw text instead (see
// escapedArgString).
func (c toolCall) stringArgs(want []string) []stringArg {
	return c.appendStringArgs(nil, want)
}

// appendStringArgs is stringArgs appending to out (a caller's buffer on its stack
// spares the allocation).
func (c *toolCall) appendStringArgs(out []stringArg, want []string) []stringArg {
	keep := func(key string) bool { return want == nil || contains(want, key) }
	if c.args.Type == gjson.String {
		if fields, ok := escapedFields(out, c.args.Raw, keep); ok {
			return fields
		}
		if len(c.args.Raw) > bigArgs {
			if !gjson.Valid(c.argsText()) {
				return out
			}
			for _, key := range want {
				if v, ok := escapedArgString(c.args.Raw, key); ok {
					out = append(out, stringArg{key: key, lit: v, decoded: true})
				}
			}
			return out
		}
	}
	text := c.argsText()
	if !gjson.Valid(text) {
		return out // not JSON: no argument is read from it (see escapedStringEnd)
	}
	forEachField(text, func(k, v string) bool {
		if v[0] == '"' && keep(k) {
			out = append(out, stringArg{key: k, lit: v})
		}
		return true
	})
	return out
}

// escapedFields walks the JSON object held, escaped, in the raw JSON string raw and
// returns its top-level string fields whose keys pass keep. ok is false when raw is
// not a string holding exactly one object, or when the object uses an escape this
// walker does not read (\u outside a string): the caller then decodes.
func escapedFields(out []stringArg, raw string, keep func(string) bool) ([]stringArg, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	i := skipEscapedSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return nil, false
	}
	if out == nil {
		out = make([]stringArg, 0, 4) // most calls have a few string arguments: one allocation
	}
	i++
	for first := true; ; first = false {
		i = skipEscapedSpace(s, i)
		if i < len(s) && s[i] == '}' && first {
			return out, skipEscapedSpace(s, i+1) == len(s)
		}
		if !first {
			if i >= len(s) || s[i] != ',' && s[i] != '}' {
				return nil, false
			}
			if s[i] == '}' {
				return out, skipEscapedSpace(s, i+1) == len(s)
			}
			i = skipEscapedSpace(s, i+1)
		}
		kEnd := escapedStringEnd(s, i)
		if kEnd < 0 {
			return nil, false
		}
		key := s[i+2 : kEnd-2]
		if hasByte(key, '\\') {
			key = stringArg{lit: s[i:kEnd], escaped: true}.value()
		}
		i = skipEscapedSpace(s, kEnd)
		if i >= len(s) || s[i] != ':' {
			return nil, false
		}
		i = skipEscapedSpace(s, i+1)
		vEnd := escapedValueEnd(s, i)
		if vEnd < 0 || s[i] != '\\' && !gjson.Valid(decodeBody(s[i:vEnd])) {
			return nil, false // not a valid value: the caller decodes, and refuses it
		}
		if s[i] == '\\' && keep(key) { // a string
			out = append(out, stringArg{key: key, lit: s[i:vEnd], escaped: true})
		}
		i = vEnd
	}
}

// skipEscapedSpace skips JSON whitespace as it appears escaped: spaces, \n, \r, \t.
func skipEscapedSpace(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == ' ':
			i++
		case s[i] == '\\' && i+1 < len(s) && (s[i+1] == 'n' || s[i+1] == 'r' || s[i+1] == 't'):
			i += 2
		default:
			return i
		}
	}
	return i
}

// escapedStringEnd returns the index just past the escaped JSON string that starts
// with \" at s[i], or -1. Inside it every backslash of the outer text starts an
// outer escape; inner escapes are outer \\ pairs, so the string ends at the first
// \" that no inner backslash escapes. It returns -1 too when the inner string is not
// valid JSON (an inner escape other than \" \\ \/ \b \f \n \r \t, or a control
// character), so that such arguments are decoded and refused as a whole, never read
// in part (decoding "a\qb" gave "a").
func escapedStringEnd(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\\' || s[i+1] != '"' {
		return -1
	}
	innerEscape := false
	for j := i + 2; ; {
		k := strings.IndexByte(s[j:], '\\')
		if k < 0 || j+k+1 >= len(s) {
			return -1
		}
		if k > 0 {
			if innerEscape && !innerEscapeLetter(s[j:j+k]) {
				return -1
			}
			innerEscape = false
		}
		j += k
		c := s[j+1]
		if c == 'u' {
			if j+6 > len(s) {
				return -1
			}
			switch v := hexValue(s[j+2 : j+6]); {
			case v == '"' || v == '\\' || v == '/':
				c = byte(v)
			case v < 0x20:
				return -1 // a control character in the inner string
			default:
				c = 'x'
			}
			j += 4 // the rest of the \uXXXX escape
		}
		j += 2
		switch c {
		case '"':
			if !innerEscape {
				return j
			}
			innerEscape = false
		case '\\':
			innerEscape = !innerEscape
		case '/':
			innerEscape = false
		case 'x':
			if innerEscape {
				return -1
			}
		default: // \b \f \n \r \t: a control character in the inner string
			return -1
		}
	}
}

// innerEscapeLetter reports whether run, the literal bytes after an inner
// backslash, starts as an inner JSON escape does: a one-letter escape, or u and four
// hex digits (Python writes every non-ASCII character so). Digits that are outer
// escapes themselves are refused: the caller then decodes.
func innerEscapeLetter(run string) bool {
	switch run[0] {
	case '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if len(run) < 5 {
			return false
		}
		for _, c := range []byte(run[1:5]) {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
		return true
	}
	return false
}

// escapedValueEnd returns the index just past the escaped JSON value at s[i], or -1.
func escapedValueEnd(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '\\':
		return escapedStringEnd(s, i)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			case '\\':
				switch {
				case i+1 < len(s) && s[i+1] == '"':
					if i = escapedStringEnd(s, i); i < 0 {
						return -1
					}
					continue
				case i+1 < len(s) && (s[i+1] == 'n' || s[i+1] == 'r' || s[i+1] == 't'):
					i++
				default:
					return -1
				}
			}
			i++
		}
		return -1
	}
	j := i
	for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] != ' ' && s[j] != '\\' && s[j] != '{' && s[j] != '[' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// escapedArgString finds `\"key\": \"value\"` in the raw JSON string raw that holds
// a JSON object, and returns value decoded.
func escapedArgString(raw, key string) (string, bool) {
	pat := `\"` + key + `\"`
	for off := 0; off < len(raw); {
		k := strings.Index(raw[off:], pat)
		if k < 0 {
			return "", false
		}
		at := off + k
		off = at + len(pat)
		if at > 0 && raw[at-1] == '\\' {
			continue // the quote is text inside a value, escaped twice
		}
		i := off
		for i < len(raw) && raw[i] == ' ' {
			i++
		}
		if i >= len(raw) || raw[i] != ':' {
			continue
		}
		i++
		for i < len(raw) && raw[i] == ' ' {
			i++
		}
		if !strings.HasPrefix(raw[i:], `\"`) {
			continue
		}
		start := i + 2
		for j := start; j < len(raw); j++ {
			if raw[j] != '"' || raw[j-1] != '\\' {
				continue
			}
			bs := 0
			for b := j - 1; b >= start && raw[b] == '\\'; b-- {
				bs++
			}
			if bs%4 != 1 { // 3: an escaped quote inside the value; 5: a backslash then the end
				continue
			}
			once := decodeBody(raw[start : j-1]) // undo the outer escaping
			return decodeBody(once), true
		}
		return "", false
	}
	return "", false
}
