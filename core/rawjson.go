package core

import (
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Raw JSON walking without decoding. gjson decodes every string it returns; the hot
// paths (reading roles, sizing contents) only need where a value starts and ends.
// Requests are validated once on entry; on text that is not valid JSON (a tool
// call's arguments string, say) these functions stop early and never panic.

// forEachField calls fn with each key and raw value of the JSON object obj, in order,
// until fn returns false. Keys with escapes are decoded.
func forEachField(obj string, fn func(key, raw string) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return
		}
		if obj[i] == ',' {
			i++
			continue
		}
		if obj[i] != '"' {
			return // not valid JSON: stop rather than misread
		}
		kEnd := skipString(obj, i)
		if kEnd-1 <= i || obj[kEnd-1] != '"' {
			return
		}
		key := obj[i+1 : kEnd-1]
		if hasByte(key, '\\') {
			key = gjson.Parse(obj[i:kEnd]).Str
		}
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		vEnd := skipValue(obj, i)
		if vEnd <= i {
			return
		}
		if !fn(key, obj[i:vEnd]) {
			return
		}
		i = vEnd
	}
}

// forEachElement calls fn with each raw element of the JSON array arr until fn
// returns false.
func forEachElement(arr string, fn func(raw string) bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = skipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		if arr[i] == ',' {
			i++
			continue
		}
		end := skipValue(arr, i)
		if end <= i {
			return // not valid JSON
		}
		if !fn(arr[i:end]) {
			return
		}
		i = end
	}
}

// rawField returns the raw value of key in the JSON object obj, or "".
func rawField(obj, key string) string {
	var out string
	forEachField(obj, func(k, raw string) bool {
		if k == key {
			out = raw
			return false
		}
		return true
	})
	return out
}

// rawValue wraps a raw JSON value as a gjson.Result without decoding strings: Raw
// and Type are set, Str is not. Use it only where Raw is what is read.
func rawValue(raw string) gjson.Result {
	if raw == "" {
		return gjson.Result{}
	}
	switch raw[0] {
	case '"':
		return gjson.Result{Type: gjson.String, Raw: raw}
	case 'n':
		return gjson.Result{Type: gjson.Null, Raw: raw}
	case 't':
		return gjson.Result{Type: gjson.True, Raw: raw}
	case 'f':
		return gjson.Result{Type: gjson.False, Raw: raw}
	case '{', '[':
		return gjson.Result{Type: gjson.JSON, Raw: raw}
	}
	return gjson.Parse(raw)
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value that starts at s[i].
func skipValue(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i = skipString(s, i)
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

// skipString returns the index just past the JSON string that starts at s[i].
// It jumps from quote to quote (IndexByte is vectorized) and counts the backslashes
// before each to tell an escaped quote from the closing one.
func skipString(s string, i int) int {
	for i++; ; {
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

func hasByte(s string, b byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return true
		}
	}
	return false
}

// jsonStringChars counts the characters of a raw JSON string without decoding it:
// an escape counts as the one character it stands for (a surrogate pair as one).
func jsonStringChars(raw string) int {
	n, _ := jsonCharOffset(raw, -1)
	return n
}

// jsonCharOffset walks the raw JSON string raw and returns the number of characters
// it holds and, when limit >= 0, the byte offset in raw where character number
// limit starts (len(raw)-1, the closing quote, if there are fewer).
func jsonCharOffset(raw string, limit int) (count, offset int) {
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
		if j := plainRun(raw, i, stop); j > i {
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
				hexValue(raw[i+2:i+6]) >= 0xD800 && hexValue(raw[i+2:i+6]) < 0xDC00:
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

// excerptJSONString returns the text of the raw JSON string raw, or when it holds
// more than headC+tailC+40 characters, its first headC and last tailC characters
// around a note of how many were left out. Only the kept parts are decoded.
func excerptJSONString(raw string, headC, tailC int) string {
	n := jsonStringChars(raw)
	if n <= headC+tailC+40 {
		return decodeString(raw)
	}
	_, head := jsonCharOffset(raw, headC)
	_, tail := jsonCharOffset(raw, n-tailC)
	return decodeString(raw[:head]+`"`) + "\n…[" + formatCount(n-headC-tailC) + " characters omitted]…\n" + decodeString(`"`+raw[tail:])
}

// plainRun returns the index of the first byte in s[i:end] that is a backslash or
// not ASCII (end if none), eight bytes at a time: most text is plain ASCII.
func plainRun(s string, i, end int) int {
	const (
		lo8 = 0x0101010101010101
		hi8 = 0x8080808080808080
		bs8 = 0x5c5c5c5c5c5c5c5c // '\\' in every byte
	)
	for i+8 <= end {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		x := w ^ bs8 // a zero byte where w has a backslash
		if (w|((x-lo8)&^x))&hi8 != 0 {
			break
		}
		i += 8
	}
	for i < end && s[i] < utf8.RuneSelf && s[i] != '\\' {
		i++
	}
	return i
}
