package main

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// The replay hands the core each live context written exactly as
// ../shared/replay/replay.py writes it (Python's json.dumps: ASCII only, ", " and ": "
// separators, keys in their order), so the core reads the same bytes in both and the
// two replays agree to the token; and it compares two requests' messages as the script
// does, by their json.dumps with sorted keys. These functions write that form from raw
// JSON (already validated) without decoding it into Go values, so key order, lone
// surrogate escapes and number spellings come out as Python's would.

// appendPyJSON appends v as Python's json.dumps(v, sort_keys=sortKeys) writes it.
func appendPyJSON(b []byte, v gjson.Result, sortKeys bool) []byte {
	switch {
	case v.IsObject():
		type field struct {
			key, raw string // decoded key, raw key
			val      gjson.Result
		}
		var fields []field
		at := map[string]int{}
		v.ForEach(func(k, val gjson.Result) bool {
			if i, dup := at[k.Str]; dup { // a dict keeps the first place and the last value
				fields[i].val = val
				return true
			}
			at[k.Str] = len(fields)
			fields = append(fields, field{k.Str, k.Raw, val})
			return true
		})
		if sortKeys {
			sort.Slice(fields, func(i, j int) bool { return fields[i].key < fields[j].key })
		}
		b = append(b, '{')
		for i, f := range fields {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendPyString(b, f.raw)
			b = append(b, ": "...)
			b = appendPyJSON(b, f.val, sortKeys)
		}
		return append(b, '}')
	case v.IsArray():
		b = append(b, '[')
		i := 0
		v.ForEach(func(_, val gjson.Result) bool {
			if i > 0 {
				b = append(b, ", "...)
			}
			i++
			b = appendPyJSON(b, val, sortKeys)
			return true
		})
		return append(b, ']')
	case v.Type == gjson.String:
		return appendPyString(b, v.Raw)
	case v.Type == gjson.Number:
		return appendPyNumber(b, v.Raw)
	case v.Type == gjson.True:
		return append(b, "true"...)
	case v.Type == gjson.False:
		return append(b, "false"...)
	}
	return append(b, "null"...)
}

// appendPyString appends the JSON string raw (with its quotes, as in the input) as
// json.dumps writes it: each UTF-16 code unit outside ' '..'~' as \uXXXX (lower-case
// hex; short escapes for \b \f \n \r \t), '"' and '\' escaped.
func appendPyString(b []byte, raw string) []byte {
	unit := func(u uint16) {
		switch u {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		default:
			if u >= ' ' && u <= '~' {
				b = append(b, byte(u))
				return
			}
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'u', hex[u>>12], hex[u>>8&15], hex[u>>4&15], hex[u&15])
		}
	}
	b = append(b, '"')
	s := raw
	if len(s) >= 2 && s[0] == '"' {
		s = s[1 : len(s)-1]
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			switch e := s[i+1]; e {
			case 'u':
				if i+6 <= len(s) {
					if n, err := strconv.ParseUint(s[i+2:i+6], 16, 16); err == nil {
						unit(uint16(n)) // a lone surrogate stays one, as in Python
						i += 6
						continue
					}
				}
				unit('u')
			case 'b':
				unit('\b')
			case 'f':
				unit('\f')
			case 'n':
				unit('\n')
			case 'r':
				unit('\r')
			case 't':
				unit('\t')
			default: // " \ /
				unit(uint16(e))
			}
			i += 2
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			unit(uint16(hi))
			unit(uint16(lo))
			continue
		}
		unit(uint16(r))
	}
	return append(b, '"')
}

// appendPyNumber appends the JSON number raw as Python reads and writes it back: an
// integer keeps its digits (-0 is 0), anything else is a float written by repr.
func appendPyNumber(b []byte, raw string) []byte {
	if !strings.ContainsAny(raw, ".eE") {
		if strings.TrimLeft(raw, "-0") == "" {
			return append(b, '0')
		}
		return append(b, raw...)
	}
	f, _ := strconv.ParseFloat(raw, 64)
	return appendPyFloat(b, f)
}

// appendPyFloat is Python's repr of a float: the shortest digits that read back the
// same, in positional notation when the decimal exponent is -4 to 15, else as
// d.ddde±XX; a whole number in positional notation ends in ".0".
func appendPyFloat(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±XX
	neg := s[0] == '-'
	s = strings.TrimPrefix(s, "-")
	e := strings.IndexByte(s, 'e')
	digits := strings.Replace(s[:e], ".", "", 1)
	exp, _ := strconv.Atoi(s[e+1:])
	if neg {
		b = append(b, '-')
	}
	decpt := exp + 1 // value = 0.digits × 10^decpt
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			b = append(b, "0."...)
			b = append(b, strings.Repeat("0", -decpt)...)
			return append(b, digits...)
		case decpt >= len(digits):
			b = append(b, digits...)
			b = append(b, strings.Repeat("0", decpt-len(digits))...)
			return append(b, ".0"...)
		default:
			b = append(b, digits[:decpt]...)
			b = append(b, '.')
			return append(b, digits[decpt:]...)
		}
	}
	b = append(b, digits[0])
	if len(digits) > 1 {
		b = append(b, '.')
		b = append(b, digits[1:]...)
	}
	b = append(b, 'e')
	if exp < 0 {
		b = append(b, '-')
		exp = -exp
	} else {
		b = append(b, '+')
	}
	if exp < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, int64(exp), 10)
}
