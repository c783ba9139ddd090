package jsonraw

import (
	"strings"

	"github.com/tidwall/gjson"
)

// ForEachEscapedField walks the JSON object held, escaped, in the raw JSON string
// raw (tool-call arguments, as OpenAI sends them) and calls fn with each top-level
// key, decoded, and value as it sits in raw (escaped once more: a string value
// starts with \"), in order. It reports false when raw is not a string holding
// exactly one object, or when the object uses an escape this walker does not read
// (\u outside a string): the caller then decodes, and must drop what fn was given.
func ForEachEscapedField(raw string, fn func(key, value string)) bool {
	if len(raw) < 2 || raw[0] != '"' {
		return false
	}
	s := raw[1 : len(raw)-1]
	i := skipEscapedSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return false
	}
	i++
	for first := true; ; first = false {
		i = skipEscapedSpace(s, i)
		if i < len(s) && s[i] == '}' && first {
			return skipEscapedSpace(s, i+1) == len(s)
		}
		if !first {
			if i >= len(s) || s[i] != ',' && s[i] != '}' {
				return false
			}
			if s[i] == '}' {
				return skipEscapedSpace(s, i+1) == len(s)
			}
			i = skipEscapedSpace(s, i+1)
		}
		kEnd := escapedStringEnd(s, i)
		if kEnd < 0 {
			return false
		}
		key := s[i+2 : kEnd-2]
		if HasByte(key, '\\') {
			key = DecodeString(DecodeBody(s[i:kEnd]))
		}
		i = skipEscapedSpace(s, kEnd)
		if i >= len(s) || s[i] != ':' {
			return false
		}
		i = skipEscapedSpace(s, i+1)
		vEnd := escapedValueEnd(s, i)
		if vEnd < 0 || s[i] != '\\' && !gjson.Valid(DecodeBody(s[i:vEnd])) {
			return false // not a valid value: the caller decodes, and refuses it
		}
		fn(key, s[i:vEnd])
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
			switch v := DecodeHex(s[j+2 : j+6]); {
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

// FindEscapedString finds `\"key\": \"value\"` in the raw JSON string raw that
// holds a JSON object, and returns value decoded. It searches the text rather than
// walking it (for arguments too big to decode, or that ForEachEscapedField refuses):
// the first such pattern outside a value is the one found.
func FindEscapedString(raw, key string) (string, bool) {
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
			once := DecodeBody(raw[start : j-1]) // undo the outer escaping
			return DecodeBody(once), true
		}
		return "", false
	}
	return "", false
}
