package core

import (
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// Reading tool-call arguments. OpenAI sends them as a JSON string holding a JSON
// object, so every quote of the object arrives escaped (\") and every escape of its
// strings escaped twice (\\n). Placeholders and summaries need a few short string
// arguments (a path, a command) of calls whose other arguments can be a whole file.
// stringArgs reads the object in its escaped form in one pass and decodes only the
// values asked for.

// argsText returns the call's arguments as text: the decoded string (OpenAI), or
// the raw JSON of an object.
func (c toolCall) argsText() string {
	if c.args.Type == gjson.String {
		return jsonraw.DecodeString(c.args.Raw)
	}
	return c.args.Raw
}

// stringArg is one top-level string argument of a tool call.
type stringArg struct {
	key string
	// lit is the value's JSON literal; when escaped, as it sits in the arguments
	// string (escaped once more), when decoded, the value's text itself.
	lit              string
	escaped, decoded bool
}

// value returns the argument's text.
func (a stringArg) value() string {
	switch {
	case a.decoded:
		return a.lit
	case !a.escaped:
		return jsonraw.DecodeString(a.lit)
	case !jsonraw.HasByte(a.lit[2:len(a.lit)-2], '\\'):
		return a.lit[2 : len(a.lit)-2]
	}
	return jsonraw.DecodeString(jsonraw.DecodeBody(a.lit)) // a.lit is the body of the arguments string
}

// valueHead returns the argument's text, or when it is long, a prefix of it that
// holds its first n characters and more: only that much of the literal is decoded.
// A character takes at most 14 bytes of literal (a surrogate pair escaped twice),
// so the prefix decoded has at least n+1 characters; an escape the cut splits only
// spoils what follows them.
func (a stringArg) valueHead(n int) string {
	// Most text takes a byte or two per character: a short cut is tried first, and
	// is enough when it decodes to n+1 characters besides the at most 14 that a
	// split escape spoils at its end.
	if short := 2*n + 64; !a.decoded && len(a.lit) > short {
		if v := a.cut(short); utf8.RuneCountInString(v) > n+14 {
			return v
		}
	}
	if limit := 14*(n+1) + 8; !a.decoded && len(a.lit) > limit {
		return a.cut(limit)
	}
	return a.value()
}

// cut returns the value of the argument's literal cut to its first limit bytes.
func (a stringArg) cut(limit int) string {
	if a.escaped {
		a.lit = a.lit[:limit] + `\"`
	} else {
		a.lit = a.lit[:limit] + `"`
	}
	return a.value()
}

// empty reports whether the argument is the empty string.
func (a stringArg) empty() bool {
	switch {
	case a.decoded:
		return a.lit == ""
	case a.escaped:
		return len(a.lit) == 4 // \"\"
	}
	return len(a.lit) == 2
}

// bigArgs is the size above which arguments that stringArgs cannot walk are searched
// for the wanted keys instead of being decoded.
const bigArgs = 8 << 10

// stringArgs returns the top-level string arguments of the call whose keys are in
// want (every one when want is nil), in order. Arguments that are not one JSON
// object, or that escape their structure with \u, are decoded and walked; when they
// are big, the wanted keys are searched for in the raw text instead (see
// jsonraw.FindEscapedString).
func (c toolCall) stringArgs(want []string) []stringArg {
	return c.appendStringArgs(nil, want)
}

// appendStringArgs is stringArgs appending to out (a caller's buffer on its stack
// spares the allocation).
func (c *toolCall) appendStringArgs(out []stringArg, want []string) []stringArg {
	keep := func(key string) bool { return want == nil || contains(want, key) }
	if c.args.Type == gjson.String {
		if fields, ok := escapedFields(out, c.args.Raw, keep); ok {
			return fields
		}
		if len(c.args.Raw) > bigArgs {
			if !gjson.Valid(c.argsText()) {
				return out
			}
			for _, key := range want {
				if v, ok := jsonraw.FindEscapedString(c.args.Raw, key); ok {
					out = append(out, stringArg{key: key, lit: v, decoded: true})
				}
			}
			return out
		}
	}
	text := c.argsText()
	if !gjson.Valid(text) {
		return out // not JSON: no argument is read from it (see jsonraw.ForEachEscapedField)
	}
	jsonraw.ForEachField(text, func(k, v string) bool {
		if v[0] == '"' && keep(k) {
			out = append(out, stringArg{key: k, lit: v})
		}
		return true
	})
	return out
}

// escapedFields returns the top-level string fields, whose keys pass keep, of the
// JSON object held, escaped, in the raw JSON string raw, appended to out. ok is
// false when jsonraw.ForEachEscapedField cannot walk raw: the caller then decodes.
func escapedFields(out []stringArg, raw string, keep func(string) bool) ([]stringArg, bool) {
	fields := out
	if fields == nil {
		fields = make([]stringArg, 0, 4) // most calls have a few string arguments: one allocation
	}
	ok := jsonraw.ForEachEscapedField(raw, func(key, value string) {
		if value[0] == '\\' && keep(key) { // a string
			fields = append(fields, stringArg{key: key, lit: value, escaped: true})
		}
	})
	if !ok {
		return nil, false
	}
	return fields, true
}
