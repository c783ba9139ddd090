package jsonraw

import "unicode/utf8"

// Escaping names how a string is written as JSON: the choices in which the JSON
// encoders whose bytes the core reproduces differ. Every escaping escapes '"', '\\'
// and control characters (\b \f \n \r \t by name, the others as \u00xx) and
// writes hex digits in lower case. The zero Escaping is JSON.stringify's: nothing
// else is escaped, and bytes that are not UTF-8 are copied as they are.
type Escaping struct {
	// ReplaceInvalid writes each byte that is not UTF-8 as \ufffd (encoding/json).
	ReplaceInvalid bool
	// LineSeparators escapes U+2028 and U+2029 (encoding/json).
	LineSeparators bool
	// HTML escapes '<', '>' and '&' as \u003c, \u003e and \u0026 (encoding/json's
	// default, json.Marshal).
	HTML bool
	// ASCII escapes DEL and every character that is not ASCII as \uxxxx, one above
	// U+FFFF as a surrogate pair, and a byte that is not UTF-8 as \ufffd (Python's
	// json.dumps, whose ensure_ascii is on by default).
	ASCII bool
}

// The escapings of the encoders the core matches.
var (
	// GoJSON is encoding/json's with SetEscapeHTML(false): the core's responses.
	GoJSON = Escaping{ReplaceInvalid: true, LineSeparators: true}
	// GoJSONHTML is encoding/json's default, json.Marshal's (and sjson's).
	GoJSONHTML = Escaping{ReplaceInvalid: true, LineSeparators: true, HTML: true}
	// Stringify is JSON.stringify's, the canonical form tokens are counted in.
	Stringify = Escaping{}
	// PythonASCII is Python's json.dumps's with its default ensure_ascii=True.
	PythonASCII = Escaping{ASCII: true}
)

// Append appends s to dst as a JSON string escaped as e says.
func (e Escaping) Append(dst []byte, s string) []byte {
	return append(e.AppendBody(append(dst, '"'), s), '"')
}

// AppendBody is Append without the quotes: the inside of the string. Runs of plain
// ASCII are copied eight bytes at a time.
func (e Escaping) AppendBody(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	extra := e.HTML || e.ASCII // bytes to escape beyond the ones every escaping does
	start := 0                 // s[start:i] is still to be copied
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			w := Word(s, i)
			m := stringSpecials(w) | w&hi8
			if extra {
				m |= e.extraBytes(w)
			}
			if m == 0 {
				i += 8
				continue
			}
		}
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' && b < utf8.RuneSelf && (!extra || !e.escapesASCII(b)) {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := DecodeRune(s, i)
		switch {
		case r == utf8.RuneError && size == 1:
			if !e.ReplaceInvalid && !e.ASCII {
				i++ // copied as it is
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case e.ASCII:
			dst = append(dst, s[start:i]...)
			if r >= 0x10000 {
				r -= 0x10000
				hi := 0xD800 + r>>10
				dst = append(dst, '\\', 'u', hex[hi>>12&0xF], hex[hi>>8&0xF], hex[hi>>4&0xF], hex[hi&0xF])
				r = 0xDC00 + r&0x3FF
			}
			dst = append(dst, '\\', 'u', hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF])
		case e.LineSeparators && (r == '\u2028' || r == '\u2029'):
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}

// extraBytes flags the bytes of w that e escapes beyond the ones every escaping
// does (HTML's '<', '>' and '&'; ASCII's DEL).
func (e Escaping) extraBytes(w uint64) uint64 {
	var m uint64
	if e.HTML {
		m |= zeroBytes(w^(lo8*'<')) | zeroBytes(w^(lo8*'>')) | zeroBytes(w^(lo8*'&'))
	}
	if e.ASCII {
		m |= zeroBytes(w ^ (lo8 * 0x7F))
	}
	return m
}

// escapesASCII reports whether e escapes the printable ASCII byte b, which not every
// escaping does.
func (e Escaping) escapesASCII(b byte) bool {
	return e.HTML && (b == '<' || b == '>' || b == '&') || e.ASCII && b == 0x7F
}

// AppendString appends s as a JSON string exactly as encoding/json writes it
// without HTML escaping: GoJSON.Append.
func AppendString(dst []byte, s string) []byte { return GoJSON.Append(dst, s) }

// AppendStringBody is AppendString without the quotes: GoJSON.AppendBody.
func AppendStringBody(dst []byte, s string) []byte { return GoJSON.AppendBody(dst, s) }

// AppendRawBody appends the text that body (the inside of a raw JSON string, or a
// run of it cut between characters) decodes to, escaped as AppendStringBody escapes
// it, without decoding what is already written that way: plain text and the
// escapes \" \\ \b \f \n \r \t are copied as they are. Other escapes (\/, \u),
// bytes that are not UTF-8, and U+2028 and U+2029 are decoded and written again.
// Like DecodeString, it stops at an escape that is not one.
func AppendRawBody(dst []byte, body string) []byte {
	start := 0 // body[start:i] is written as AppendStringBody writes it
	for i := 0; i < len(body); {
		if i+8 <= len(body) {
			if w := Word(body, i); stringSpecials(w)|w&hi8 == 0 {
				i += 8
				continue
			}
		}
		b := body[i]
		n := 1 // bytes of body decoded and written again
		switch {
		case b >= 0x20 && b != '"' && b != '\\' && b < utf8.RuneSelf:
			i++
			continue
		case b == '\\' && i+1 < len(body) && keptEscape(body[i+1]):
			i += 2
			continue
		case b == '\\' && i+1 < len(body) && body[i+1] == '/':
			n = 2
		case b == '\\' && i+5 < len(body) && body[i+1] == 'u':
			n = 6
			if r := DecodeHex(body[i+2 : i+6]); r >= 0xD800 && r < 0xDC00 && i+11 < len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
				if lo := DecodeHex(body[i+8 : i+12]); lo >= 0xDC00 && lo < 0xE000 {
					n = 12
				}
			}
		case b == '\\': // not an escape, or cut short: decoding stops here
			return append(dst, body[start:i]...)
		case b >= utf8.RuneSelf:
			r, size := DecodeRune(body, i)
			if (r != utf8.RuneError || size > 1) && r != '\u2028' && r != '\u2029' {
				i += size
				continue
			}
			n = size
		}
		dst = append(dst, body[start:i]...)
		if r := escapedRune(body[i : i+n]); r >= utf8.RuneSelf && r != '\u2028' && r != '\u2029' {
			dst = utf8.AppendRune(dst, r) // as AppendStringBody writes it; no string built
		} else if b == '\\' {
			dst = AppendStringBody(dst, DecodeBody(body[i:i+n]))
		} else {
			dst = AppendStringBody(dst, body[i:i+n])
		}
		i += n
		start = i
	}
	return append(dst, body[start:]...)
}

// escapedRune returns the character a \uXXXX escape, or a pair of them that
// encodes a surrogate pair, stands for; -1 for anything else (a lone surrogate,
// another escape, text).
func escapedRune(esc string) rune {
	// escaped decodes the \uXXXX escape at esc[i].
	escaped := func(i int) (rune, bool) {
		if esc[i] != '\\' || esc[i+1] != 'u' {
			return 0, false
		}
		return hex4(esc, i+2)
	}
	if len(esc) != 6 && len(esc) != 12 {
		return -1
	}
	r, ok := escaped(0)
	if !ok {
		return -1
	}
	if len(esc) == 12 {
		if lo, ok := escaped(6); ok && r >= 0xD800 && r < 0xDC00 && lo >= 0xDC00 && lo < 0xE000 {
			return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
		}
		return -1
	}
	if r >= 0xD800 && r < 0xE000 {
		return -1
	}
	return r
}

// keptEscape reports whether the escape \c is written as AppendStringBody writes the
// character it stands for.
func keptEscape(c byte) bool {
	switch c {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return true
	}
	return false
}
