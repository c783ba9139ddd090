package main

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/tidwall/gjson"
)

// Needed later: the measure of ../shared/replay/needed_later.py, computed during the
// replay. A fact is a characteristic token (neededFacts) of a message; it is removed
// when a compaction takes out of the live context the message it first appeared in,
// needed when a later assistant message uses it while it is still removed, and
// recalled when the live context sent for that message holds it as text. Any later
// message that holds it brings it back: it is no longer removed.

// The parts of an assistant message that count as a use (--needed-uses).
const (
	neededUsesAll  = "all"  // the whole message: text, tool-call names and argument values
	neededUsesArgs = "args" // only the values in its tool calls' arguments
)

// neededLater follows one replay's facts.
type neededLater struct {
	uses     string
	msgs     []gjson.Result
	facts    [][]string     // the facts of each recorded message's text
	first    map[string]int // the message each fact first appears in
	at       map[*replayMsg]int
	text     map[*replayMsg]string
	removed  map[string]bool
	needed   int
	recalled int
}

// newNeededLater starts following the facts of the recorded messages msgs, whose
// first message start is the live context.
func newNeededLater(msgs []string, uses string, start *replayMsg) *neededLater {
	nl := &neededLater{
		uses: uses, msgs: make([]gjson.Result, len(msgs)), facts: make([][]string, len(msgs)),
		first: map[string]int{}, at: map[*replayMsg]int{start: 0}, text: map[*replayMsg]string{}, removed: map[string]bool{},
	}
	for i, raw := range msgs {
		nl.msgs[i] = gjson.Parse(raw)
		nl.facts[i] = neededFacts(neededText(nl.msgs[i]))
		for _, f := range nl.facts[i] {
			if _, seen := nl.first[f]; !seen {
				nl.first[f] = i
			}
		}
	}
	return nl
}

// compacted records that a compaction turned the live context before into after.
// A message of after is the recorded message of before it equals as JSON (with
// sorted keys; the last of equal ones), else new; the facts first seen in a
// recorded message of before that after no longer holds are removed.
func (nl *neededLater) compacted(before, after []*replayMsg) {
	from := make(map[string]int, len(before))
	for _, m := range before {
		from[m.sortedJSON()] = nl.at[m]
	}
	kept := map[int]bool{}
	for _, m := range after {
		j, ok := from[m.sortedJSON()]
		if !ok {
			j = -1
		}
		nl.at[m] = j
		if j >= 0 {
			kept[j] = true
		}
	}
	for _, m := range before {
		if j := nl.at[m]; j >= 0 && !kept[j] {
			for _, f := range nl.facts[j] {
				if nl.first[f] == j {
					nl.removed[f] = true
				}
			}
		}
	}
}

// next records the recorded message m (at in the trace) being appended to live: if
// it is an assistant message, each removed fact it uses is needed, and recalled when
// live (the context its request was sent with) holds it; then every fact m holds is
// no longer removed.
func (nl *neededLater) next(m *replayMsg, at int, live []*replayMsg) {
	msg := nl.msgs[at]
	nl.at[m] = at
	if role := msg.Get("role"); role.Type == gjson.String && role.Str == "assistant" {
		used := nl.facts[at]
		if nl.uses == neededUsesArgs {
			used = neededFacts(neededArgsText(msg))
		}
		var hits []string
		for _, f := range used {
			if nl.removed[f] {
				hits = append(hits, f)
			}
		}
		if len(hits) > 0 {
			texts := make([]string, len(live))
			for i, x := range live {
				texts[i] = nl.textOf(x)
			}
			ctx := strings.Join(texts, "\n")
			for _, f := range hits {
				nl.needed++
				if strings.Contains(ctx, f) {
					nl.recalled++
				}
				delete(nl.removed, f)
			}
		}
	}
	for _, f := range nl.facts[at] {
		delete(nl.removed, f)
	}
}

// textOf is the text of a live message, made once.
func (nl *neededLater) textOf(m *replayMsg) string {
	t, ok := nl.text[m]
	if !ok {
		t = neededText(gjson.Parse(m.raw))
		nl.text[m] = t
	}
	return t
}

// neededText is a message's text as needed_later.py's text_of makes it: a string
// content, or the "text" of each part of an array content joined by newlines (a part
// that is not an object, or has no string text, is empty); then, for each tool call,
// a newline, its function's name, a space and its argument values (argValues)
// joined by spaces.
func neededText(m gjson.Result) string {
	var b strings.Builder
	c := m.Get("content")
	switch {
	case c.Type == gjson.String:
		b.WriteString(c.Str)
	case c.IsArray():
		i := 0
		c.ForEach(func(_, p gjson.Result) bool {
			if i > 0 {
				b.WriteByte('\n')
			}
			i++
			if t := p.Get("text"); p.IsObject() && t.Type == gjson.String {
				b.WriteString(t.Str)
			}
			return true
		})
	}
	if calls := m.Get("tool_calls"); calls.IsArray() {
		calls.ForEach(func(_, tc gjson.Result) bool {
			f := tc.Get("function")
			b.WriteByte('\n')
			if name := f.Get("name"); name.Type == gjson.String {
				b.WriteString(name.Str)
			}
			b.WriteByte(' ')
			b.WriteString(strings.Join(argValues(f.Get("arguments")), " "))
			return true
		})
	}
	return b.String()
}

// neededArgsText is what --needed-uses args counts of a message (needed_later.py's
// args_text): the argument values of each tool call joined by spaces, the calls
// joined by newlines.
func neededArgsText(m gjson.Result) string {
	var calls []string
	if tcs := m.Get("tool_calls"); tcs.IsArray() {
		tcs.ForEach(func(_, tc gjson.Result) bool {
			calls = append(calls, strings.Join(argValues(tc.Get("function.arguments")), " "))
			return true
		})
	}
	return strings.Join(calls, "\n")
}

// argValues are the values of a tool call's arguments as needed_later.py's values
// takes them: when the arguments are a string that Python's json.loads reads, the
// strings, numbers and booleans in it (not the keys, not null) in order, each as
// Python's str writes it; else the string itself. Arguments that are absent, null,
// false or 0 are one empty value (Python's `or ""`); other values that are not a
// string (the script stops on them) are read as the JSON they are.
func argValues(a gjson.Result) []string {
	switch {
	case a.Type == gjson.String:
		if v, ok := pyJSONValues(a.Str); ok {
			return v
		}
		return []string{a.Str}
	case a.Type == gjson.Null, a.Type == gjson.False, a.Type == gjson.Number && a.Num == 0:
		return []string{""}
	}
	if v, ok := pyJSONValues(a.Raw); ok {
		return v
	}
	return []string{a.Raw}
}

// pyJSONValues reads s as Python's json.loads does (NaN, Infinity and -Infinity are
// numbers; control characters in strings, a BOM, trailing data and integers of more
// than 4,300 digits are errors) and returns its values in walk order: an object's
// values in the order its keys first appear, each key with its last value.
func pyJSONValues(s string) ([]string, bool) {
	p := &pyJSONReader{s: s}
	p.space()
	v, ok := p.value()
	if !ok {
		return nil, false
	}
	p.space()
	if p.i != len(s) {
		return nil, false
	}
	return v, true
}

type pyJSONReader struct {
	s string
	i int
}

func (p *pyJSONReader) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyJSONReader) word(w string) bool {
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

// value reads one value and returns its values.
func (p *pyJSONReader) value() ([]string, bool) {
	if p.i >= len(p.s) {
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '"':
		s, ok := p.str()
		return []string{s}, ok
	case c == '{':
		return p.object()
	case c == '[':
		p.i++
		p.space()
		var out []string
		if p.word("]") {
			return out, true
		}
		for {
			v, ok := p.value()
			if !ok {
				return nil, false
			}
			out = append(out, v...)
			p.space()
			if p.word("]") {
				return out, true
			}
			if !p.word(",") {
				return nil, false
			}
			p.space()
		}
	case p.word("null"):
		return nil, true
	case p.word("true"):
		return []string{"True"}, true
	case p.word("false"):
		return []string{"False"}, true
	case p.word("NaN"):
		return []string{"nan"}, true
	case p.word("Infinity"):
		return []string{"inf"}, true
	case p.word("-Infinity"):
		return []string{"-inf"}, true
	}
	return p.number()
}

func (p *pyJSONReader) object() ([]string, bool) {
	p.i++ // {
	p.space()
	var keys []string
	vals := map[string][]string{}
	if !p.word("}") {
		for {
			if p.i >= len(p.s) || p.s[p.i] != '"' {
				return nil, false
			}
			k, ok := p.str()
			if !ok {
				return nil, false
			}
			p.space()
			if !p.word(":") {
				return nil, false
			}
			p.space()
			v, ok := p.value()
			if !ok {
				return nil, false
			}
			if _, dup := vals[k]; !dup {
				keys = append(keys, k)
			}
			vals[k] = v
			p.space()
			if p.word("}") {
				break
			}
			if !p.word(",") {
				return nil, false
			}
			p.space()
		}
	}
	var out []string
	for _, k := range keys {
		out = append(out, vals[k]...)
	}
	return out, true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?: an integer keeps its
// digits (-0 is 0), a float is written as Python's repr writes it.
func (p *pyJSONReader) number() ([]string, bool) {
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	start := p.i
	p.word("-")
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case p.i < len(p.s) && p.s[p.i] >= '1' && p.s[p.i] <= '9':
		digits()
	default:
		return nil, false
	}
	intEnd := p.i
	isFloat := false
	if p.i+1 < len(p.s) && p.s[p.i] == '.' && p.s[p.i+1] >= '0' && p.s[p.i+1] <= '9' {
		p.i++
		digits()
		isFloat = true
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		mark := p.i
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			p.i = mark // not an exponent: the number ends before the e
		} else {
			isFloat = true
		}
	}
	num := p.s[start:p.i]
	if !isFloat {
		mag := strings.TrimPrefix(num, "-")
		if len(mag) > 4300 { // Python's int refuses longer strings (sys.int_info)
			return nil, false
		}
		if mag == "0" {
			return []string{"0"}, true
		}
		return []string{p.s[start:intEnd]}, true
	}
	f, _ := strconv.ParseFloat(num, 64) // out of range: ±Inf or 0, as float() gives
	return []string{pyFloatStr(f)}, true
}

// str reads a string as Python's json scanner does in strict mode; a lone surrogate
// escape becomes U+FFFD.
func (p *pyJSONReader) str() (string, bool) {
	p.i++ // "
	var b strings.Builder
	hex4 := func(at int) (rune, bool) {
		if at+4 > len(p.s) {
			return 0, false
		}
		n, err := strconv.ParseUint(p.s[at:at+4], 16, 32) // [0-9a-fA-F]{4}, as Python takes
		return rune(n), err == nil
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b.WriteByte(c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			return "", false
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(p.i)
			if !ok {
				return "", false
			}
			p.i += 4
			if r >= 0xd800 && r < 0xdc00 && strings.HasPrefix(p.s[p.i:], `\u`) {
				if lo, ok := hex4(p.i + 2); ok && lo >= 0xdc00 && lo < 0xe000 {
					r = (r-0xd800)<<10 + (lo - 0xdc00) + 0x10000
					p.i += 6
				}
			}
			b.WriteRune(r) // a lone surrogate is written as U+FFFD
		default:
			return "", false
		}
	}
	return "", false
}

// pyFloatStr is Python's str of a float.
func pyFloatStr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return string(appendPyFloat(nil, f))
}

// neededStop are tokens needed_later.py does not count as facts.
var neededStop = map[string]bool{"self.assertEqual": true, "os.path": true, "e.g": true, "i.e": true}

// neededFacts are the facts of s, sorted: the tokens needed_later.py's ID_RE finds,
//
//	[A-Za-z_][\w]*(?:[._/-][\w]+)+|[A-Za-z_]\w*[a-z][A-Z]\w*|[A-Za-z]\w*_\w+|\b[0-9a-f]{7,40}\b|\b\d{4,}\b
//
// (an identifier with . _ / or - inside, one with a lower-case letter before a capital,
// a lower-case hex run of 7 to 40 characters, a run of four or more digits), stripped
// of . _ / - at both ends, of six characters or more, not in the stop list, and not
// made of the letters a-f alone. The pattern is matched as Python's re matches a str
// pattern: \w, \d and \b are Unicode's (pyWord, unicode.IsDigit), with the
// backtracking's choice of match; the scanner below does what the pattern does
// without Go's regexp, whose \w, \d and \b are ASCII's.
func neededFacts(s string) []string {
	rs := []rune(s)
	set := map[string]bool{}
	for p := 0; p < len(rs); {
		e := idMatch(rs, p)
		if e < 0 {
			p++
			continue
		}
		t := strings.Trim(string(rs[p:e]), "._/-")
		p = e
		if len([]rune(t)) < 6 || neededStop[t] || onlyHexLetters(t) {
			continue
		}
		set[t] = true
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// onlyHexLetters is needed_later.py's hex filter: a token of [0-9a-f] that does not
// mix digits and letters and is not all digits (so ASCII letters a-f only; with only
// ASCII in the token, Python's Unicode \d and isdigit are [0-9]).
func onlyHexLetters(t string) bool {
	for i := 0; i < len(t); i++ {
		if t[i] < 'a' || t[i] > 'f' {
			return false
		}
	}
	return t != ""
}

// pyWord is \w in a Python 3 str pattern: a character for which str.isalnum() holds
// (Unicode letters and numbers: categories L and N), or '_'. Go's tables are Unicode
// 15.0, Python 3.12's; Python 3.11's (14.0) lack the characters 15.0 added.
func pyWord(r rune) bool {
	return r == '_' || r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') ||
		r >= 0x80 && (unicode.IsLetter(r) || unicode.IsNumber(r))
}

// idMatch is where the match of ID_RE that starts at rs[p] ends, or -1 if none does.
// The alternatives are tried in order and the first that matches is taken:
//
//   - [A-Za-z_][\w]*(?:[._/-][\w]+)+: the word run from p, then each . / or -
//     followed by a word run, as many as there are (the greedy path); with none, the
//     backtracking finds an _ inside the run (after p, before its last character) as
//     the separator, and the match is the run;
//   - [A-Za-z_]\w*[a-z][A-Z]\w*: the run from p, when it has a lower-case letter
//     (after p) followed by a capital;
//   - [A-Za-z]\w*_\w+ matches only where the first alternative's _ case does;
//   - \b[0-9a-f]{7,40}\b: 7 to 40 lower-case hex characters, no word character on
//     either side (a longer run has a hex character after any 40);
//   - \b\d{4,}\b: four or more Unicode decimal digits, no word character on either
//     side.
func idMatch(rs []rune, p int) int {
	n := len(rs)
	word := func(i int) bool { return i >= 0 && i < n && pyWord(rs[i]) }
	c := rs[p]
	run := p
	for run < n && pyWord(rs[run]) {
		run++
	}
	if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		e := run
		for e+1 < n && (rs[e] == '.' || rs[e] == '/' || rs[e] == '-') && word(e+1) {
			for e++; word(e); e++ {
			}
		}
		if e > run {
			return e
		}
		for k := p + 1; k < run-1; k++ {
			if rs[k] == '_' {
				return run
			}
		}
		for k := p + 1; k+1 < run; k++ {
			if rs[k] >= 'a' && rs[k] <= 'z' && rs[k+1] >= 'A' && rs[k+1] <= 'Z' {
				return run
			}
		}
	}
	if word(p - 1) {
		return -1
	}
	if c >= '0' && c <= '9' || c >= 'a' && c <= 'f' {
		h := p
		for h < n && h-p <= 40 && (rs[h] >= '0' && rs[h] <= '9' || rs[h] >= 'a' && rs[h] <= 'f') {
			h++
		}
		if h-p >= 7 && h-p <= 40 && !word(h) {
			return h
		}
	}
	if unicode.IsDigit(c) {
		d := p
		for d < n && unicode.IsDigit(rs[d]) {
			d++
		}
		if d-p >= 4 && !word(d) {
			return d
		}
	}
	return -1
}
