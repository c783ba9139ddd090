package jsonraw

import (
	"sort"
	"unicode/utf8"
)

// Member is one field of a JSON object: its key and value as raw JSON (the key with
// its quotes, not decoded), and when the value is an array, what Scan recorded of it.
type Member struct {
	Key, Value string
	ArrayParts
}

// ArrayParts is what Scan records of an array that is a top-level field's value
// (messages): its elements, and the fields of those that are objects, so no later
// pass walks an element again to find its fields.
type ArrayParts struct {
	Elements []string
	// Fields holds the fields of every element that is an object, in order;
	// FirstField[k] is where Elements[k]'s start (len(Elements)+1 entries, the last
	// len(Fields)), or nil when they were not recorded.
	Fields     []ElementField
	FirstField []int32
	// Counted are the strings counted as they were validated, in order: the values
	// ScanOptions names. They can be most of a text's bytes, and reading them once
	// for both is what keeps the pass single.
	Counted []Count
	Size    int // the length of the array's text, which fields and counts are offsets in
}

// Count is what Scan counted of the JSON string of Size bytes at offset At in an
// array's text: its characters (an escape is the one it stands for) in two
// classes, those ScanOptions.Dense holds and the others.
type Count struct {
	At, Size, Dense, Other int32
}

// CountAt returns the count of the string at offset at in the array's text, if it
// was counted.
func (a *ArrayParts) CountAt(at int) (Count, bool) {
	k := sort.Search(len(a.Counted), func(k int) bool { return int(a.Counted[k].At) >= at })
	if k < len(a.Counted) && int(a.Counted[k].At) == at {
		return a.Counted[k], true
	}
	return Count{}, false
}

// ElementField is one field of an array element, as offsets in the array's text:
// no pointers, so the GC neither scans these nor pays write barriers for them.
type ElementField struct {
	KeyStart, KeyEnd, ValueStart, ValueEnd int32
}

// Key and Value return the field's raw JSON in array, the text it was recorded in.
func (f *ElementField) Key(array string) string   { return array[f.KeyStart:f.KeyEnd] }
func (f *ElementField) Value(array string) string { return array[f.ValueStart:f.ValueEnd] }

// HasFields reports whether a holds the fields of every element of array, the text
// a was recorded from (a may be nil).
func (a *ArrayParts) HasFields(array string) bool {
	return a != nil && len(a.FirstField) == len(a.Elements)+1 && a.Size == len(array)
}

// ElementList returns a's elements (nil when a is).
func (a *ArrayParts) ElementList() []string {
	if a == nil {
		return nil
	}
	return a.Elements
}

// FieldsOf returns the recorded fields of Elements[k], and whether they were
// recorded (elements that are not objects have none).
func (a *ArrayParts) FieldsOf(k int) ([]ElementField, bool) {
	if a.FirstField == nil || k+1 >= len(a.FirstField) {
		return nil, false
	}
	return a.Fields[a.FirstField[k]:a.FirstField[k+1]], true
}

// RuneRange is the characters from Lo to Hi, both included.
type RuneRange struct{ Lo, Hi rune }

// ScanOptions names the strings Scan counts while it records members: which keys,
// and how their characters are classed. Keys are compared as written (between the
// quotes, escapes not decoded).
type ScanOptions struct {
	// ElementKeys are keys of the fields of an element (an object in an array that
	// is a top-level member's value) whose string values are counted.
	ElementKeys []string
	// DeepKeys are keys of objects deeper in such an element whose string values
	// are counted.
	DeepKeys []string
	// Dense are the characters counted in Count.Dense, in ranges tried in order; a
	// character written as ASCII or as a two-character escape is never dense.
	Dense []RuneRange
}

// countsKey reports whether lit, a key's raw JSON with its quotes, is one of keys.
func countsKey(lit string, keys []string) bool {
	for _, k := range keys {
		if len(lit) == len(k)+2 && lit[1:len(lit)-1] == k {
			return true
		}
	}
	return false
}

// nesting is the containers open around a point of the text, one bit per level
// (1 for an object), so that nesting costs a bit a level and the scan no recursion.
type nesting struct {
	kinds   []uint64
	level   int // how many are open
	deepest int // the most that were open at once
}

func (n *nesting) push(object bool) {
	if n.level>>6 >= len(n.kinds) {
		n.kinds = append(n.kinds, 0)
	}
	bit := uint64(1) << (n.level & 63)
	if object {
		n.kinds[n.level>>6] |= bit
	} else {
		n.kinds[n.level>>6] &^= bit
	}
	n.level++
	n.deepest = max(n.deepest, n.level)
}

func (n *nesting) pop() { n.level-- }

// inObject reports whether the innermost open container is an object.
func (n *nesting) inObject() bool { return n.kinds[(n.level-1)>>6]>>((n.level-1)&63)&1 == 1 }

// The kinds of the outermost containers (low bits of kinds[0], 1 for an object)
// that put a point inside an element of a member's array: the text an object, the
// member's value an array, and for the element's fields, the element an object.
const (
	memberArray   = 0b01  // the outer two, at level 2
	elementObject = 0b101 // the outer three, at level 3 and deeper
)

// scanPlace is where a value or key lies, as what Scan records of it.
type scanPlace uint8

const (
	elsewhere     scanPlace = iota // nothing is recorded of it
	element                        // an element of an array that is a member's value
	elementField                   // a field of such an element that is an object
	deepInElement                  // inside such a field, at any depth
)

// place is where a value that starts at the current level lies (or, for a key,
// the key of the object at the current level).
func (n *nesting) place() scanPlace {
	switch {
	case n.level == 2 && n.kinds[0]&0b11 == memberArray:
		return element
	case n.level == 3 && n.kinds[0]&0b111 == elementObject:
		return elementField
	case n.level > 3 && n.kinds[0]&0b111 == elementObject:
		return deepInElement
	}
	return elsewhere
}

// scanStep is what Scan reads next at i: the states of its one pass.
type scanStep uint8

const (
	atValue    scanStep = iota // a value: at the start, after '[', ':' or a comma in an array
	afterValue                 // a value (or a container) ended just before i
	atKey                      // a member's key: after '{' or a comma in an object
)

// Scan validates data as one JSON text and measures how deeply it nests, in a
// single pass without recursion. The grammar is gjson.ValidBytes's (RFC 8259), and
// the text must be valid UTF-8 (gjson does not check strings for it; a fuzz target
// holds Scan to both); depth is the deepest nesting of arrays and objects seen,
// even past an error-free limit, so the caller can refuse valid but hostile input
// after checking validity.
//
// When data is an object and members is not nil, its fields are appended to
// *members on the way, with what ArrayParts holds of those that are arrays: no
// later pass has to skip over a large value to find a field, an element or one of
// its fields, nor read the strings opts names again to count them (opts may be nil:
// nothing is counted).
func Scan(data []byte, opts *ScanOptions, members *[]Member) (valid bool, depth int) {
	s := ViewString(data)
	keyStart, keyEnd, valueStart, elementStart := 0, 0, 0, 0
	fieldKeyStart, fieldKeyEnd, fieldStart := 0, 0, 0
	deepKeyStart, deepKeyEnd := 0, 0 // the last key read deeper in an element
	var parts ArrayParts
	var n nesting
	recording := members != nil
	var elementKeys, deepKeys []string
	var dense []RuneRange
	if recording && opts != nil {
		elementKeys, deepKeys, dense = opts.ElementKeys, opts.DeepKeys, opts.Dense
	}
	// where is n.place() when members are recorded.
	where := func() scanPlace {
		if !recording {
			return elsewhere
		}
		return n.place()
	}

	i := SkipSpace(s, 0)
	for step := atValue; ; {
		switch step {
		case atValue:
			if i >= len(s) {
				return false, n.deepest
			}
			place := where()
			switch {
			case n.level == 1:
				valueStart, parts = i, ArrayParts{}
			case place == element:
				elementStart = i
				parts.FirstField = append(parts.FirstField, int32(len(parts.Fields)))
			case place == elementField:
				fieldStart = i
			}
			step = afterValue
			switch c := s[i]; c {
			case '{':
				n.push(true)
				if i = SkipSpace(s, i+1); i < len(s) && s[i] == '}' {
					n.pop()
					i++
				} else {
					step = atKey
				}
			case '[':
				n.push(false)
				if i = SkipSpace(s, i+1); i < len(s) && s[i] == ']' {
					n.pop()
					i++
				} else {
					step = atValue
				}
			case '"':
				var ok bool
				if place == elementField && countsKey(s[fieldKeyStart:fieldKeyEnd], elementKeys) ||
					place == deepInElement && n.inObject() && countsKey(s[deepKeyStart:deepKeyEnd], deepKeys) {
					start := i
					var counted Count
					if i, ok, counted.Dense, counted.Other = validCountedString(s, i, dense); !ok {
						return false, n.deepest
					}
					counted.At, counted.Size = int32(start-valueStart), int32(i-start)
					parts.Counted = append(parts.Counted, counted)
				} else if i, ok = validString(s, i); !ok {
					return false, n.deepest
				}
			case 't':
				if !HasPrefixAt(s, i, "true") {
					return false, n.deepest
				}
				i += 4
			case 'f':
				if !HasPrefixAt(s, i, "false") {
					return false, n.deepest
				}
				i += 5
			case 'n':
				if !HasPrefixAt(s, i, "null") {
					return false, n.deepest
				}
				i += 4
			default:
				var ok bool
				if i, ok = validNumber(s, i); !ok {
					return false, n.deepest
				}
			}
		case afterValue:
			switch place := where(); {
			case n.level == 1 && recording && n.inObject():
				if s[valueStart] == '[' {
					parts.FirstField = append(parts.FirstField, int32(len(parts.Fields)))
					parts.Size = i - valueStart
				}
				*members = append(*members, Member{Key: s[keyStart:keyEnd], Value: s[valueStart:i], ArrayParts: parts})
			case place == element:
				parts.Elements = append(parts.Elements, s[elementStart:i])
			case place == elementField:
				at := func(k int) int32 { return int32(k - valueStart) }
				parts.Fields = append(parts.Fields, ElementField{KeyStart: at(fieldKeyStart), KeyEnd: at(fieldKeyEnd),
					ValueStart: at(fieldStart), ValueEnd: at(i)})
			}
			i = SkipSpace(s, i)
			if n.level == 0 {
				return i == len(s), n.deepest
			}
			if i >= len(s) {
				return false, n.deepest
			}
			switch s[i] {
			case ',':
				i = SkipSpace(s, i+1)
				if n.inObject() {
					step = atKey
				} else {
					step = atValue
				}
			case '}', ']': // the container ends: a value of the one around it
				if (s[i] == '}') != n.inObject() {
					return false, n.deepest
				}
				n.pop()
				i++
			default:
				return false, n.deepest
			}
		case atKey:
			if i >= len(s) || s[i] != '"' {
				return false, n.deepest
			}
			start := i
			var ok bool
			if i, ok = validString(s, i); !ok {
				return false, n.deepest
			}
			switch place := where(); {
			case n.level == 1:
				keyStart, keyEnd = start, i
			case place == elementField:
				fieldKeyStart, fieldKeyEnd = start, i
			case place == deepInElement:
				deepKeyStart, deepKeyEnd = start, i
			}
			if i = SkipSpace(s, i); i >= len(s) || s[i] != ':' {
				return false, n.deepest
			}
			i = SkipSpace(s, i+1)
			step = atValue
		}
	}
}

// HasPrefixAt reports whether s[i:] starts with lit.
func HasPrefixAt(s string, i int, lit string) bool {
	return len(s)-i >= len(lit) && s[i:i+len(lit)] == lit
}

// validString checks the JSON string starting at the quote s[i] and returns the
// index just past it. The string must be valid UTF-8: written back out, invalid
// bytes would make the output invalid JSON text.
func validString(s string, i int) (int, bool) {
	for i++; ; {
		for i+8 <= len(s) { // plain ASCII eight bytes at a time, inline
			w := Word(s, i)
			if m := stringSpecials(w) | w&hi8; m != 0 {
				i += FirstFlagged(m)
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
			r, size := DecodeRune(s, i)
			if r == utf8.RuneError && size == 1 {
				return i, false
			}
			i += size
		}
	}
}

// validCountedString is validString that also counts the characters of the JSON
// string starting at the quote s[i]: those in ranges (dense) and the others. An
// escape is the one character it stands for; a high-surrogate escape and the \u
// escape after it are one, whatever that escape holds (FuzzValidCountedString holds
// it to validString and to a plain count).
func validCountedString(s string, i int, ranges []RuneRange) (end int, ok bool, dense, other int32) {
	for i++; ; {
		for i+8 <= len(s) { // plain ASCII eight bytes at a time, inline (calls are dear in wasm)
			w := Word(s, i)
			if m := stringSpecials(w) | w&hi8; m != 0 {
				k := FirstFlagged(m)
				other += int32(k)
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
			return i + 1, true, dense, other
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
				// As the count is defined: a high surrogate and the \u escape after it are one
				// character, whatever that escape holds.
				if r >= 0xD800 && r < 0xDC00 && i+5 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					lo, ok := hex4(s, i+2)
					if !ok {
						return i, false, 0, 0
					}
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
				if inRanges(r, ranges) {
					dense++
				} else {
					other++
				}
			default:
				return i, false, 0, 0
			}
		case b < utf8.RuneSelf:
			other++
			i++
		default:
			r, size := DecodeRune(s, i)
			if r == utf8.RuneError && size == 1 {
				return i, false, 0, 0 // invalid UTF-8, as in validString
			}
			if inRanges(r, ranges) {
				dense++
			} else {
				other++
			}
			i += size
		}
	}
}

// inRanges reports whether r is in one of ranges, which ascend.
func inRanges(r rune, ranges []RuneRange) bool {
	for _, rg := range ranges {
		if r < rg.Lo {
			return false
		}
		if r <= rg.Hi {
			return true
		}
	}
	return false
}

// DecodeHex returns the value of the hex digits s holds; bytes that are not hex
// digits are skipped (callers pass four bytes they have checked, or accept that).
func DecodeHex(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | int(c-'A'+10)
		}
	}
	return n
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
