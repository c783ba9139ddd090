package jsonraw

import (
	"strconv"
	"unicode/utf8"
)

// namedEscapes are the control characters strconv.Quote writes by name.
var namedEscapes = [' ']string{'\a': `\a`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\v': `\v`}

// AppendGoQuote appends strconv.Quote(s) (Go syntax, not JSON: prune writes a
// call's key argument that way), written out here: strconv's per-rune calls
// cost most in wasm. Only a character that is neither ASCII nor printable asks
// strconv.IsPrint.
func AppendGoQuote(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= ' ' && c < 0x7f && c != '"' && c != '\\' { // a run of printable ASCII, copied at once
			j := i + 1
			for j < len(s) && s[j] >= ' ' && s[j] < 0x7f && s[j] != '"' && s[j] != '\\' {
				j++
			}
			buf = append(buf, s[i:j]...)
			i = j
			continue
		}
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				buf = append(buf, '\\', c)
			case c >= ' ' && c < 0x7f:
				buf = append(buf, c)
			case c < ' ' && namedEscapes[c] != "":
				buf = append(buf, namedEscapes[c]...)
			default:
				buf = append(buf, '\\', 'x', hex[c>>4], hex[c&0xF])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1: // a byte that is not UTF-8
			buf = append(buf, '\\', 'x', hex[c>>4], hex[c&0xF])
		case strconv.IsPrint(r):
			buf = append(buf, s[i:i+size]...)
		case r < 0x10000:
			buf = append(buf, '\\', 'u', hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF])
		default:
			buf = append(buf, '\\', 'U', '0', '0', hex[r>>20&0xF], hex[r>>16&0xF], hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF])
		}
		i += size
	}
	return append(buf, '"')
}
