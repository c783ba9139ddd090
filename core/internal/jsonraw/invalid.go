package jsonraw

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// pointerEscaper escapes a key for a JSON pointer (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// LocateInvalid finds where s, which Scan refused, stops being valid JSON: the JSON
// pointer of the value that holds the first problem (a string with invalid UTF-8, a
// bad escape, a missing comma, nesting deeper than maxDepth), the byte offset of the
// problem, and what it is. It runs only for an error message, so it is written
// plainly: one walk with an explicit stack (a hostile input may nest deeper than
// recursion should go). at is -1 when s is valid.
func LocateInvalid(s string, maxDepth int) (path string, at int, what string) {
	return WalkInvalid(s, maxDepth, nil)
}

// WalkInvalid is LocateInvalid, but when badUTF8 is not nil, a string that is not
// valid UTF-8 is handed to it (its path and the offset of its first bad byte) and
// the walk goes on: one walk finds every such string.
func WalkInvalid(s string, maxDepth int, badUTF8 func(path string, at int)) (path string, at int, what string) {
	type frame struct {
		object bool
		key    string // the member's key (objects), or its index (arrays)
		index  int
	}
	var stack []frame
	here := func() string {
		var b strings.Builder // one builder: a deep stack must not cost its square
		for _, f := range stack {
			b.WriteByte('/')
			if f.object {
				b.WriteString(pointerEscaper.Replace(f.key))
			} else {
				b.WriteString(strconv.Itoa(f.index))
			}
		}
		return b.String()
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
	i := SkipSpace(s, 0)
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
			if len(stack) == maxDepth {
				return fail(i, "arrays and objects nested more than %d levels deep", maxDepth)
			}
			stack = append(stack, frame{object: c == '{'})
			i = SkipSpace(s, i+1)
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
		case HasPrefixAt(s, i, "true"):
			i += 4
		case HasPrefixAt(s, i, "false"):
			i += 5
		case HasPrefixAt(s, i, "null"):
			i += 4
		default:
			end, ok := validNumber(s, i)
			if !ok {
				return fail(i, "an unexpected character %q where a value is expected", string(rune(s[i])))
			}
			i = end
		}
	next: // a value ended at i
		i = SkipSpace(s, i)
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
			i = SkipSpace(s, i+1)
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
				kEnd := max(SkipString(s, i)-1, i+1) // name the key whole, as best it reads
				stack[len(stack)-1].key = strings.ToValidUTF8(s[i+1:kEnd], "\uFFFD")
				return fail(end, "%s (in a key)", problem)
			}
			stack[len(stack)-1].key = DecodeString(s[i:end])
			i = SkipSpace(s, end)
		}
		if i >= len(s) || s[i] != ':' {
			return fail(i, "a colon is expected after the key")
		}
		i = SkipSpace(s, i+1)
	}
}
