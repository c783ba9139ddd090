package jsonraw

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Raw JSON walking without decoding. gjson decodes every string it returns; the hot
// paths (reading roles, sizing contents) only need where a value starts and ends.
// Requests are validated once on entry; on text that is not valid JSON (a tool
// call's arguments string, say) these functions stop early and never panic.

// ForEachField calls fn with each key and raw value of the JSON object obj, in order,
// until fn returns false. Keys with escapes are decoded.
func ForEachField(obj string, fn func(key, raw string) bool) {
	WalkObject(obj, SkipSpace(obj, 0), fn)
}

// WalkObject is ForEachField over the object that starts at s[i]. It returns the
// index just past the object's closing brace, or -1 if the object is not valid JSON
// or fn stopped the walk.
func WalkObject(s string, i int, fn func(key, raw string) bool) int {
	return WalkFields(s, i, func(key string, v int) int {
		end := SkipValue(s, v)
		if end <= v || !fn(key, s[v:end]) {
			return -1
		}
		return end
	})
}

// WalkFields walks the object that starts at s[i] as WalkObject does, but hands fn
// the index where each value starts and lets it read the value: fn returns the index
// just past it, or -1 to stop. A value fn parses is then read once, not first
// skipped and then read again (a tool call's long arguments were skipped three
// times). It returns the index just past the closing brace, or -1.
func WalkFields(s string, i int, fn func(key string, v int) int) int {
	if i >= len(s) || s[i] != '{' {
		return -1
	}
	i++
	for {
		i = SkipSpace(s, i)
		if i >= len(s) {
			return -1
		}
		switch s[i] {
		case '}':
			return i + 1
		case ',':
			i++
			continue
		case '"':
		default:
			return -1 // not valid JSON: stop rather than misread
		}
		kEnd := SkipString(s, i)
		if kEnd-1 <= i || s[kEnd-1] != '"' {
			return -1
		}
		key := s[i+1 : kEnd-1]
		if HasByte(key, '\\') {
			key = DecodeString(s[i:kEnd])
		}
		i = SkipSpace(s, kEnd)
		if i >= len(s) || s[i] != ':' {
			return -1
		}
		i = SkipSpace(s, i+1)
		if i >= len(s) {
			return -1
		}
		vEnd := fn(key, i)
		if vEnd <= i {
			return -1
		}
		i = vEnd
	}
}

// ForEachElement calls fn with each raw element of the JSON array arr until fn
// returns false.
func ForEachElement(arr string, fn func(raw string) bool) {
	i := SkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = SkipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		if arr[i] == ',' {
			i++
			continue
		}
		end := SkipValue(arr, i)
		if end <= i {
			return // not valid JSON
		}
		if !fn(arr[i:end]) {
			return
		}
		i = end
	}
}

// FindField returns the raw value of key in the JSON object obj, or "". Of
// duplicate keys it returns the last, as JSON.parse and json.loads read them.
func FindField(obj, key string) string {
	var out string
	ForEachField(obj, func(k, raw string) bool {
		if k == key {
			out = raw
		}
		return true
	})
	return out
}

// SkipSpace returns the index of the first byte at or after s[i] that is not JSON
// whitespace (len(s) if none).
func SkipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

// SkipValue returns the index just past the JSON value that starts at s[i].
func SkipValue(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '"':
		return SkipString(s, i)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i = SkipString(s, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(s) && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\n' && s[i] != '\r' && s[i] != '\t' {
		i++
	}
	return i
}

// SkipString returns the index just past the JSON string that starts at s[i].
// It jumps from quote to quote (IndexByte is vectorized natively, a word-at-a-time
// memchr in wasm) and counts the backslashes before each to tell an escaped quote
// from the closing one.
func SkipString(s string, i int) int {
	i++
	if i+8 <= len(s) { // most strings (keys, roles, ids) end within eight bytes: no call
		if m := zeroBytes(Word(s, i) ^ (lo8 * '"')); m != 0 {
			if q := i + FirstFlagged(m); s[q-1] != '\\' {
				return q + 1
			}
		}
	}
	for {
		q := strings.IndexByte(s[i:], '"')
		if q < 0 {
			return len(s)
		}
		i += q
		bs := 0
		for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
			bs++
		}
		i++
		if bs%2 == 0 {
			return i
		}
	}
}

// HasByte reports whether s holds b: a byte loop, which in wasm costs less than
// the call strings.IndexByte makes for the short keys it is asked about.
func HasByte(s string, b byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return true
		}
	}
	return false
}

// CountChars counts the characters of a raw JSON string without decoding it:
// an escape counts as the one character it stands for (a surrogate pair as one).
func CountChars(raw string) int {
	n, _ := LocateChar(raw, -1)
	return n
}

// LocateChar walks the raw JSON string raw and returns the number of characters
// it holds and, when limit >= 0, the byte offset in raw where character number
// limit starts (len(raw)-1, the closing quote, if there are fewer).
func LocateChar(raw string, limit int) (count, offset int) {
	end := len(raw) - 1
	i := 1
	for i < end {
		if count == limit {
			return count, i
		}
		stop := end
		if limit >= 0 {
			stop = min(end, i+limit-count) // plain bytes are one character each
		}
		if i+8 <= stop {
			if m := NotPlain(Word(raw, i)); m == 0 {
				count += 8
				i += 8
				continue
			} else if k := FirstFlagged(m); k > 0 {
				count += k
				i += k
				continue
			}
		} else if j := plainRun(raw, i, stop); j > i {
			count += j - i
			i = j
			continue
		}
		switch b := raw[i]; {
		case b == '\\':
			switch {
			case i+1 < end && raw[i+1] != 'u':
				i += 2
			case i+12 <= end && raw[i+6] == '\\' && raw[i+7] == 'u' &&
				DecodeHex(raw[i+2:i+6]) >= 0xD800 && DecodeHex(raw[i+2:i+6]) < 0xDC00:
				i += 12 // a surrogate pair is one character
			default:
				i += 6
			}
		case b < utf8.RuneSelf:
			i++
		default:
			_, size := utf8.DecodeRuneInString(raw[i:])
			i += size
		}
		count++
	}
	return count, max(min(i, end), 0)
}

// LocateTail returns the byte offset in the raw JSON string raw where its last
// k characters start, walking back from the end instead of counting from the start
// (a long tool output's tail is near its end). A \uXXXX escape is one character,
// or half of one when a high-surrogate escape comes before it, as LocateChar
// pairs them (Python's json.dumps writes every character that is not ASCII so).
// ok is false when the walk meets bytes that are not UTF-8, or a run of
// high-surrogate escapes, whose boundaries only a forward walk settles;
// LocateChar(raw, n-k) is then the answer.
func LocateTail(raw string, k int) (offset int, ok bool) {
	// backslashes counts the backslashes that end just before raw[e].
	backslashes := func(e int) int {
		n := 0
		for e-1-n >= 1 && raw[e-1-n] == '\\' {
			n++
		}
		return n
	}
	// highEscapeAt reports whether a \u escape of a high surrogate starts at raw[st].
	highEscapeAt := func(st int) bool {
		if st < 1 || raw[st] != '\\' || raw[st+1] != 'u' || backslashes(st)%2 == 1 {
			return false
		}
		h := DecodeHex(raw[st+2 : st+6])
		return h >= 0xD800 && h < 0xDC00
	}
	e := len(raw) - 1 // the closing quote; characters end before it
	for c := 0; c < k && e > 1; c++ {
		b := raw[e-1]
		// Most characters are plain ASCII with no backslash before them and not the
		// last digit of a \u escape: one byte, decided without a call.
		if b < utf8.RuneSelf && b != '\\' && raw[e-2] != '\\' && (e < 7 || raw[e-5] != 'u') {
			e--
			continue
		}
		switch {
		case b >= utf8.RuneSelf:
			st := e - 1
			for st > e-4 && st > 1 && raw[st]&0xC0 == 0x80 {
				st--
			}
			if r, size := utf8.DecodeRuneInString(raw[st:e]); size != e-st || r == utf8.RuneError && size == 1 {
				return 0, false
			}
			e = st
		case backslashes(e-1)%2 == 1: // a two-byte escape such as \n
			if b == 'u' {
				return 0, false
			}
			e -= 2
		case b == '\\':
			return 0, false // an escape cannot end here: not valid JSON
		case e-6 >= 1 && raw[e-5] == 'u' && backslashes(e-5)%2 == 1: // a \uXXXX escape ends here
			st := e - 6
			if highEscapeAt(st - 6) {
				if highEscapeAt(st - 12) {
					return 0, false // which two pair up depends on where the run starts
				}
				st -= 6 // the second half of a pair: one character
			}
			e = st
		default:
			e--
		}
	}
	return max(e, 1), true
}

// DecodeString returns the text of a raw JSON string literal, or "" for anything
// else. It agrees with gjson on valid JSON (a lone surrogate becomes U+FFFD) but
// copies the runs between escapes whole instead of byte by byte, and keeps control
// characters that invalid JSON (doubly escaped tool arguments) may carry.
func DecodeString(raw string) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	return DecodeBody(raw[1 : len(raw)-1])
}

// DecodeBody is DecodeString of the inside of a raw JSON string (no quotes). The
// text is built in one buffer that becomes the string (no second copy).
func DecodeBody(body string) string {
	k := strings.IndexByte(body, '\\')
	if k < 0 {
		return body
	}
	buf := make([]byte, 0, len(body))
	for k >= 0 {
		buf = append(buf, body[:k]...)
		body = body[k:] // at a backslash
		if len(body) < 2 {
			body = ""
			break
		}
		n := 2
		switch body[1] {
		case 'n':
			buf = append(buf, '\n')
		case 't':
			buf = append(buf, '\t')
		case 'r':
			buf = append(buf, '\r')
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case '"', '\\', '/':
			buf = append(buf, body[1])
		case 'u':
			if len(body) < 6 {
				return ViewString(buf)
			}
			r, n6 := rune(DecodeHex(body[2:6])), 6
			if r >= 0xD800 && r < 0xDC00 && len(body) >= 12 && body[6] == '\\' && body[7] == 'u' {
				if lo := rune(DecodeHex(body[8:12])); lo >= 0xDC00 && lo < 0xE000 {
					r, n6 = utf16.DecodeRune(r, lo), 12
				}
			}
			buf, n = utf8.AppendRune(buf, r), n6
		default:
			return ViewString(buf) // not an escape: stop, as gjson does
		}
		body = body[n:]
		k = strings.IndexByte(body, '\\')
	}
	return ViewString(append(buf, body...))
}
