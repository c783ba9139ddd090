package core

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// member is one field of a JSON object: its key and value as raw JSON, and when the
// value is an array, what the validating pass found in it.
type member struct {
	key, value string
	arrayParts
}

// arrayParts is what checkJSON records of an array that is a top-level field's
// value (messages): its elements, and the fields of those that are objects, so no
// later pass walks a message again to find its fields.
type arrayParts struct {
	elements []string
	// fields holds the fields of every element that is an object, in order;
	// firstField[k] is where elements[k]'s start (len(elements)+1 entries, the last
	// len(fields)), or nil when they were not recorded.
	fields     []elementField
	firstField []int32
	// counted are the strings counted as they were validated, in order: each
	// element's "content" and, deeper in it, the values of "arguments" (OpenAI tool
	// calls' function.arguments). They are most of a request's bytes, and reading
	// them once for both is what keeps the pass single.
	counted []stringCount
	size    int // the length of the array's text, which fields and counts are offsets in
}

// stringCount is roughString of the JSON string of size bytes at offset at in an
// array's text, each count plus one.
type stringCount struct {
	at, size, roughTokens1, roughChars1 int32
}

// countAt returns the counts of the string at offset at in the array's text, if it
// was counted.
func (a *arrayParts) countAt(at int) (stringCount, bool) {
	k := sort.Search(len(a.counted), func(k int) bool { return int(a.counted[k].at) >= at })
	if k < len(a.counted) && int(a.counted[k].at) == at {
		return a.counted[k], true
	}
	return stringCount{}, false
}

// elementField is one field of an array element, as offsets in the array's text:
// no pointers, so the GC neither scans these nor pays write barriers for them.
type elementField struct {
	keyStart, keyEnd, valueStart, valueEnd int32
}

// key and value return the field's raw JSON in array, the text it was recorded in.
func (f *elementField) key(array string) string   { return array[f.keyStart:f.keyEnd] }
func (f *elementField) value(array string) string { return array[f.valueStart:f.valueEnd] }

// hasFields reports whether a holds the fields of every element of array, the text
// a was recorded from (a may be nil).
func (a *arrayParts) hasFields(array string) bool {
	return a != nil && len(a.firstField) == len(a.elements)+1 && a.size == len(array)
}

// elementList returns a's elements (nil when a is).
func (a *arrayParts) elementList() []string {
	if a == nil {
		return nil
	}
	return a.elements
}

// fieldsOf returns the recorded fields of elements[k], and whether they were
// recorded (elements that are not objects have none).
func (a *arrayParts) fieldsOf(k int) ([]elementField, bool) {
	if a.firstField == nil || k+1 >= len(a.firstField) {
		return nil, false
	}
	return a.fields[a.firstField[k]:a.firstField[k+1]], true
}

// checkJSON validates data as one JSON text and measures how deeply it nests, in a
// single pass without recursion. The grammar is gjson.ValidBytes's (RFC 8259), and
// the text must be valid UTF-8 (gjson does not check strings for it; a fuzz target
// holds checkJSON to both);
// depth is the deepest nesting of arrays and objects seen, even past an error-free
// limit, so the caller can refuse valid but hostile input after checking validity.
// When data is an object and members is not nil, its fields are appended to
// *members on the way, with what arrayParts holds of those that are arrays: no
// later pass has to skip over a large value to find a field, a message or one of
// its fields, nor read a message's content again to estimate its size.
func checkJSON(data []byte, members *[]member) (valid bool, depth int) {
	s := bytesString(data)
	keyStart, keyEnd, valueStart, elementStart := 0, 0, 0, 0
	fieldKeyStart, fieldKeyEnd, fieldStart := 0, 0, 0
	deepKeyStart, deepKeyEnd := 0, 0 // the last key read deeper in an element
	var parts arrayParts
	var stack []uint64 // one bit per open container: 1 for an object
	level := 0
	push := func(object bool) {
		if level>>6 >= len(stack) {
			stack = append(stack, 0)
		}
		bit := uint64(1) << (level & 63)
		if object {
			stack[level>>6] |= bit
		} else {
			stack[level>>6] &^= bit
		}
		level++
		depth = max(depth, level)
	}
	inObject := func() bool { return stack[(level-1)>>6]>>((level-1)&63)&1 == 1 }
	// Where a value is, when members are recorded: in an element of an array that
	// is a top-level field's value (the envelope an object, the field an array), or
	// in a field of such an element that is an object.
	recording := members != nil
	inElement := func() bool { return recording && level == 2 && stack[0]&3 == 1 }
	inElementField := func() bool { return recording && level == 3 && stack[0]&7 == 5 }
	deepInElement := func() bool { return recording && level > 3 && stack[0]&7 == 5 }

	i := skipSpace(s, 0)
value:
	if i >= len(s) {
		return false, depth
	}
	switch {
	case level == 1:
		valueStart, parts = i, arrayParts{}
	case inElement():
		elementStart = i
		parts.firstField = append(parts.firstField, int32(len(parts.fields)))
	case inElementField():
		fieldStart = i
	}
	switch c := s[i]; c {
	case '{':
		push(true)
		if i = skipSpace(s, i+1); i < len(s) && s[i] == '}' {
			level--
			i++
			goto next
		}
		goto key
	case '[':
		push(false)
		if i = skipSpace(s, i+1); i < len(s) && s[i] == ']' {
			level--
			i++
			goto next
		}
		goto value
	case '"':
		var ok bool
		if inElementField() && s[fieldKeyStart:fieldKeyEnd] == `"content"` ||
			deepInElement() && inObject() && s[deepKeyStart:deepKeyEnd] == `"arguments"` {
			start := i
			var tokens, chars int
			if i, ok, tokens, chars = validRoughString(s, i); !ok {
				return false, depth
			}
			parts.counted = append(parts.counted, stringCount{at: int32(start - valueStart), size: int32(i - start),
				roughTokens1: int32(tokens + 1), roughChars1: int32(chars + 1)})
		} else if i, ok = validString(s, i); !ok {
			return false, depth
		}
	case 't':
		if !hasPrefixAt(s, i, "true") {
			return false, depth
		}
		i += 4
	case 'f':
		if !hasPrefixAt(s, i, "false") {
			return false, depth
		}
		i += 5
	case 'n':
		if !hasPrefixAt(s, i, "null") {
			return false, depth
		}
		i += 4
	default:
		var ok bool
		if i, ok = validNumber(s, i); !ok {
			return false, depth
		}
	}
next: // a value ended at i
	switch {
	case level == 1 && recording && inObject():
		if s[valueStart] == '[' {
			parts.firstField = append(parts.firstField, int32(len(parts.fields)))
			parts.size = i - valueStart
		}
		*members = append(*members, member{key: s[keyStart:keyEnd], value: s[valueStart:i], arrayParts: parts})
	case inElement():
		parts.elements = append(parts.elements, s[elementStart:i])
	case inElementField():
		at := func(k int) int32 { return int32(k - valueStart) }
		parts.fields = append(parts.fields, elementField{keyStart: at(fieldKeyStart), keyEnd: at(fieldKeyEnd),
			valueStart: at(fieldStart), valueEnd: at(i)})
	}
	i = skipSpace(s, i)
	if level == 0 {
		return i == len(s), depth
	}
	if i >= len(s) {
		return false, depth
	}
	switch s[i] {
	case ',':
		i = skipSpace(s, i+1)
		if inObject() {
			goto key
		}
		goto value
	case '}', ']':
		if (s[i] == '}') != inObject() {
			return false, depth
		}
		level--
		i++
		goto next
	}
	return false, depth
key: // a member's key is expected at i
	if i >= len(s) || s[i] != '"' {
		return false, depth
	}
	{
		start := i
		var ok bool
		if i, ok = validString(s, i); !ok {
			return false, depth
		}
		if level == 1 {
			keyStart, keyEnd = start, i
		} else if inElementField() {
			fieldKeyStart, fieldKeyEnd = start, i
		} else if deepInElement() {
			deepKeyStart, deepKeyEnd = start, i
		}
	}
	if i = skipSpace(s, i); i >= len(s) || s[i] != ':' {
		return false, depth
	}
	i = skipSpace(s, i+1)
	goto value
}

func hasPrefixAt(s string, i int, lit string) bool {
	return len(s)-i >= len(lit) && s[i:i+len(lit)] == lit
}

// validString checks the JSON string starting at the quote s[i] and returns the
// index just past it. The string must be valid UTF-8: written back out, invalid
// bytes would make the output invalid JSON text.
func validString(s string, i int) (int, bool) {
	for i++; ; {
		for i+8 <= len(s) { // plain ASCII eight bytes at a time, inline
			w := word(s, i)
			if m := stringSpecials(w) | w&hi8; m != 0 {
				i += firstFlagged(m)
				break
			}
			i += 8
		}
		for i < len(s) && s[i] >= 0x20 && s[i] < utf8.RuneSelf && s[i] != '"' && s[i] != '\\' {
			i++
		}
		if i >= len(s) || s[i] < 0x20 {
			return i, false
		}
		switch s[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(s) {
				return i, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if !validHex4(s, i) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default: // not ASCII
			r, size := decodeRune(s, i)
			if r == utf8.RuneError && size == 1 {
				return i, false
			}
			i += size
		}
	}
}

// validRoughString is validString and roughString in one pass: it checks the JSON
// string starting at the quote s[i], and counts its rough tokens and characters as
// roughString counts them (FuzzValidRoughString holds it to both).
func validRoughString(s string, i int) (end int, ok bool, tokens, chars int) {
	other, dense := 0, 0
	for i++; ; {
		for i+8 <= len(s) { // plain ASCII eight bytes at a time, inline (calls are dear in wasm)
			w := word(s, i)
			if m := stringSpecials(w) | w&hi8; m != 0 {
				k := firstFlagged(m)
				other += k
				i += k
				break
			}
			other += 8
			i += 8
		}
		if i >= len(s) {
			return i, false, 0, 0
		}
		switch b := s[i]; {
		case b == '"':
			return i + 1, true, dense + (other+roughCharsPerToken-1)/roughCharsPerToken, dense + other
		case b < 0x20:
			return i, false, 0, 0
		case b == '\\':
			if i+1 >= len(s) {
				return i, false, 0, 0
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				other++
				i += 2
			case 'u':
				r, ok := hex4(s, i+2)
				if !ok {
					return i, false, 0, 0
				}
				i += 6
				// As roughString: a high surrogate and the \u escape after it are one
				// character, whatever that escape holds.
				if r >= 0xD800 && r < 0xDC00 && i+5 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					lo, ok := hex4(s, i+2)
					if !ok {
						return i, false, 0, 0
					}
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
				dense, other = tally(r, dense, other)
			default:
				return i, false, 0, 0
			}
		case b < utf8.RuneSelf:
			other++
			i++
		default:
			r, size := decodeRune(s, i)
			if r == utf8.RuneError && size == 1 {
				return i, false, 0, 0 // invalid UTF-8, as in validString
			}
			dense, other = tally(r, dense, other)
			i += size
		}
	}
}

// hexDigits maps a byte to its value as a hex digit, and every other byte to 0xFF.
var hexDigits = func() (t [256]byte) {
	for c := range t {
		switch {
		case c >= '0' && c <= '9':
			t[c] = byte(c - '0')
		case c >= 'a' && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			t[c] = byte(c - 'A' + 10)
		default:
			t[c] = 0xFF
		}
	}
	return t
}()

// hex4 decodes the four hex digits at s[i:i+4] (ok is false when one is not, or s
// is shorter), with table lookups and no call.
func hex4(s string, i int) (rune, bool) {
	if len(s)-i < 4 {
		return 0, false
	}
	a, b, c, d := hexDigits[s[i]], hexDigits[s[i+1]], hexDigits[s[i+2]], hexDigits[s[i+3]]
	return rune(a)<<12 | rune(b)<<8 | rune(c)<<4 | rune(d), a|b|c|d < 16
}

// validHex4 reports whether the escape at s[i] ("\u") has four hex digits.
func validHex4(s string, i int) bool {
	return len(s)-i >= 6 && isHex(s[i+2]) && isHex(s[i+3]) && isHex(s[i+4]) && isHex(s[i+5])
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// validNumber checks the JSON number starting at s[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(s string, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s) || s[i] < '0' || s[i] > '9':
		return i, false
	case s[i] == '0':
		i++
	default:
		i = digits(i)
	}
	if i < len(s) && s[i] == '.' {
		if j := digits(i + 1); j > i+1 {
			i = j
		} else {
			return i, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if j := digits(i); j > i {
			i = j
		} else {
			return i, false
		}
	}
	return i, true
}

// locateInvalidJSON finds where s, which checkJSON refused, stops being valid JSON:
// the JSON pointer of the value that holds the first problem (a string with invalid
// UTF-8, a bad escape, a missing comma), the byte offset of the problem, and what it
// is. It runs only for an error message, so it is written plainly: one walk with an
// explicit stack (a hostile input may nest deeper than recursion should go). at is -1
// when s is valid.
func locateInvalidJSON(s string) (path string, at int, what string) {
	return walkInvalidJSON(s, nil)
}

// walkInvalidJSON is locateInvalidJSON, but when badUTF8 is not nil, a string that is
// not valid UTF-8 is handed to it (its path and the offset of its first bad byte)
// and the walk goes on: one walk finds every such string.
func walkInvalidJSON(s string, badUTF8 func(path string, at int)) (path string, at int, what string) {
	type frame struct {
		object bool
		key    string // the member's key (objects), or its index (arrays)
		index  int
	}
	var stack []frame
	here := func() string {
		p := ""
		for _, f := range stack {
			if f.object {
				p = pointer(p, f.key)
			} else {
				p = pointer(p, f.index)
			}
		}
		return p
	}
	fail := func(i int, format string, args ...any) (string, int, string) {
		return here(), i, fmt.Sprintf(format, args...)
	}
	// str checks the string at s[i] and returns the index past it, or a problem.
	str := func(i int) (end int, problem string) {
		reported := false
		for j := i + 1; j < len(s); {
			switch c := s[j]; {
			case c == '"':
				return j + 1, ""
			case c < 0x20:
				return j, "a control character (U+" + fmt.Sprintf("%04X", c) + ") in a string: it must be escaped"
			case c == '\\':
				if j+1 < len(s) && strings.IndexByte(`"\/bfnrt`, s[j+1]) >= 0 {
					j += 2
				} else if j+1 < len(s) && s[j+1] == 'u' && validHex4(s, j) {
					j += 6
				} else {
					return j, "an invalid escape in a string"
				}
			case c >= utf8.RuneSelf:
				r, size := utf8.DecodeRuneInString(s[j:])
				if r == utf8.RuneError && size == 1 {
					if badUTF8 == nil {
						return j, "invalid UTF-8 in a string"
					}
					if !reported {
						badUTF8(here(), j)
						reported = true
					}
				}
				j += size
			default:
				j++
			}
		}
		return len(s), "a string that does not end"
	}
	var top *frame
	i := skipSpace(s, 0)
	for {
		// A value is expected at i.
		if i >= len(s) {
			if len(s) == 0 || len(stack) == 0 && strings.TrimSpace(s) == "" {
				return "", 0, "no JSON value (the text is empty)"
			}
			return fail(i, "the text ends where a value is expected")
		}
		switch c := s[i]; {
		case c == '{' || c == '[':
			stack = append(stack, frame{object: c == '{'})
			i = skipSpace(s, i+1)
			if i < len(s) && (s[i] == '}' && c == '{' || s[i] == ']' && c == '[') {
				stack = stack[:len(stack)-1]
				i++
				goto next
			}
			if c == '[' {
				continue
			}
			goto key
		case c == '"':
			end, problem := str(i)
			if problem != "" {
				return fail(end, "%s", problem)
			}
			i = end
		case hasPrefixAt(s, i, "true"):
			i += 4
		case hasPrefixAt(s, i, "false"):
			i += 5
		case hasPrefixAt(s, i, "null"):
			i += 4
		default:
			end, ok := validNumber(s, i)
			if !ok {
				return fail(i, "an unexpected character %q where a value is expected", string(rune(s[i])))
			}
			i = end
		}
	next: // a value ended at i
		i = skipSpace(s, i)
		if len(stack) == 0 {
			if i != len(s) {
				return "", i, "text after the JSON value"
			}
			return "", -1, ""
		}
		top = &stack[len(stack)-1]
		if i >= len(s) {
			return fail(i, "the text ends inside an %s", map[bool]string{true: "object", false: "array"}[top.object])
		}
		switch {
		case s[i] == ',':
			i = skipSpace(s, i+1)
			if top.object {
				goto key
			}
			top.index++
			continue
		case s[i] == '}' && top.object, s[i] == ']' && !top.object:
			stack = stack[:len(stack)-1]
			i++
			goto next
		}
		return fail(i, "an unexpected character %q after a value (a comma or a closing bracket is expected)", string(rune(s[i])))
	key: // a member's key is expected at i, in the object on top of the stack
		if i >= len(s) || s[i] != '"' {
			stack = stack[:len(stack)-1] // the problem is in the object itself
			return fail(i, "a member's key (a string) is expected")
		}
		{
			end, problem := str(i)
			if problem != "" {
				kEnd := max(skipString(s, i)-1, i+1) // name the key whole, as best it reads
				stack[len(stack)-1].key = strings.ToValidUTF8(s[i+1:kEnd], "\uFFFD")
				return fail(end, "%s (in a key)", problem)
			}
			stack[len(stack)-1].key = decodeString(s[i:end])
			i = skipSpace(s, end)
		}
		if i >= len(s) || s[i] != ':' {
			return fail(i, "a colon is expected after the key")
		}
		i = skipSpace(s, i+1)
	}
}
