package core

// member is one field of a JSON object: its key and value as raw JSON, and when the
// value is an array, its elements as raw JSON.
type member struct {
	key, value string
	elements   []string
}

// checkJSON validates data as one JSON value and measures how deeply it nests, in a
// single pass without recursion. The grammar is gjson.ValidBytes's (RFC 8259; bytes
// inside strings are not checked for UTF-8), which a fuzz target holds it to;
// depth is the deepest nesting of arrays and objects seen, even past an error-free
// limit, so the caller can refuse valid but hostile input after checking validity.
// When data is an object and members is not nil, its fields are appended to
// *members on the way, with the elements of those that are arrays: no later pass
// has to skip over a large value to find a field or a message.
func checkJSON(data []byte, members *[]member) (valid bool, depth int) {
	s := bytesString(data)
	keyStart, keyEnd, valueStart, elementStart := 0, 0, 0, 0
	var elements []string
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

	i := skipSpace(s, 0)
value:
	if i >= len(s) {
		return false, depth
	}
	switch {
	case level == 1:
		valueStart, elements = i, nil
	case level == 2 && members != nil && !inObject() && stack[0]&1 == 1:
		elementStart = i // an element of an array that is a field's value
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
		if i, ok = validString(s, i); !ok {
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
	case level == 1 && members != nil && inObject():
		*members = append(*members, member{key: s[keyStart:keyEnd], value: s[valueStart:i], elements: elements})
	case level == 2 && members != nil && !inObject() && stack[0]&1 == 1:
		elements = append(elements, s[elementStart:i])
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
// index just past it.
func validString(s string, i int) (int, bool) {
	for i++; ; {
		for i+8 <= len(s) { // stringRun, inline
			if m := stringSpecials(word(s, i)); m != 0 {
				i += firstFlagged(m)
				break
			}
			i += 8
		}
		i = stringRun(s, i)
		if i >= len(s) || s[i] < 0x20 {
			return i, false
		}
		if s[i] == '"' {
			return i + 1, true
		}
		// a backslash
		if i+1 >= len(s) {
			return i, false
		}
		switch s[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if len(s)-i < 6 || !isHex(s[i+2]) || !isHex(s[i+3]) || !isHex(s[i+4]) || !isHex(s[i+5]) {
				return i, false
			}
			i += 6
		default:
			return i, false
		}
	}
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
