package core

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// The facts index: the exact names a compaction takes out of the verbatim context
// (identifiers, dotted names, paths, ids, long numbers) that the kept context no
// longer holds, ranked by what predicts that the agent uses them again, listed
// within a budget after the summary. An agent that carries on after a compaction
// mostly re-uses names it has seen: a function it read, a path it edited, an id a
// tool gave it. A summary (an LLM's or the extractive one) keeps the gist; the
// index keeps the spelling. RATIONALE.md ("Why a facts index?") has the numbers.

// Bounds of the facts index.
const (
	// factsWindowFraction of the window, at most factsTokensCap tokens, is the
	// index's budget (in tokens of its text, at roughCharsPerToken).
	factsWindowFraction = 0.03
	factsTokensCap      = 3_000
	// factMinChars and factMaxChars bound a fact's length: shorter names are too
	// common to be worth a line, longer ones are blobs (base64, minified code).
	factMinChars = 6
	factMaxChars = 120
	// factsScanBytes bounds the text scanned for facts, from the newest message of
	// the range back (the newest turns predict reuse best): a range of many
	// megabytes costs no more than this.
	factsScanBytes = 4 << 20
)

// factsLinePrefix starts an index line of the anchors section, one line per source
// message: "- names #41 (bash output): a, b, c".
const factsLinePrefix = "- names #"

// factStat is what the range says of one fact.
type factStat struct {
	// used: the assistant wrote it (text or tool-call arguments), the user did, or
	// an earlier summary carried it; args: it was a tool-call argument.
	used, args bool
	count      int // messages it appears in
	last       int // the newest message it appears in
}

// factsBudgetChars is the facts index's budget in characters.
func factsBudgetChars(thr ThresholdResult) int { return factsBudgetTokens(thr) * roughCharsPerToken }

// factsBudgetTokens is the index's budget in tokens, as planning counts it.
func factsBudgetTokens(thr ThresholdResult) int {
	return min(tokensOf(thr.ContextLength, factsWindowFraction), factsTokensCap)
}

// scanFacts calls yield with each fact of s, in order: a run of letters, digits and
// the inner separators . _ / - (trimmed of separators at its ends) of factMinChars
// to factMaxChars characters that is a compound name (a separator between two
// word characters, or a lower-case letter followed by a capital), an id mixing
// letters and digits, or a number of as many digits.
func scanFacts(s string, yield func(fact string)) {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf { // ASCII, most of any text: one table load
			if !factASCII[c] {
				i++
				continue
			}
		} else if r, size := utf8.DecodeRuneInString(s[i:]); !factRune(r) {
			i += size
			continue
		}
		start := i
		for i < len(s) {
			if c := s[i]; c < utf8.RuneSelf {
				if !factASCII[c] {
					break
				}
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if !factRune(r) {
				break
			}
			i += size
		}
		if f := trimSeparators(s[start:i]); len(f) >= factMinChars && len(f) <= factMaxChars*4 && isFact(f) {
			yield(f)
		}
	}
}

// trimSeparators is strings.Trim(f, "._/-") without building the cutset each call
// (a third of scanFacts' time when it did).
func trimSeparators(f string) string {
	i, j := 0, len(f)
	for i < j && isSeparator(f[i]) {
		i++
	}
	for j > i && isSeparator(f[j-1]) {
		j--
	}
	return f[i:j]
}

func isSeparator(c byte) bool { return c == '_' || c == '.' || c == '/' || c == '-' }

// factASCII is factRune of the ASCII characters.
var factASCII = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = factRune(rune(c))
	}
	return t
}()

// factRune reports whether r can be part of a fact.
func factRune(r rune) bool {
	switch {
	case r < utf8.RuneSelf:
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '.' || r == '/' || r == '-'
	default:
		return unicode.IsLetter(r) || unicode.IsDigit(r)
	}
}

// isFact reports whether a trimmed run is a compound name, an id or a number.
func isFact(f string) bool {
	if n := utf8.RuneCountInString(f); n < factMinChars || n > factMaxChars {
		return false
	}
	var letters, digits bool
	var prev rune
	compound := false
	for _, r := range f {
		switch {
		case r == '_' || r == '.' || r == '/' || r == '-':
			if prev == '_' || prev == '.' || prev == '/' || prev == '-' {
				return false // "..", "--", "//": punctuation, not a name
			}
			compound = compound || r != '-' || letters // a hyphen joins words, not a minus sign before a number
		case unicode.IsDigit(r):
			digits = true
		default:
			if unicode.IsUpper(r) && unicode.IsLower(prev) {
				compound = true
			}
			letters = true
		}
		prev = r
	}
	return compound && letters || letters && digits || digits && !letters
}

// factsOf collects the facts of the messages for which candidate is true, in the
// order first seen from the newest message back (so the newest first), within
// factsScanBytes of text.
func factsOf(msgs []message, candidate func(i int) bool) (map[string]*factStat, []string) {
	stats := map[string]*factStat{}
	var order []string
	scanned := 0
	for i := len(msgs) - 1; i >= 0 && scanned < factsScanBytes; i-- {
		if !candidate(i) {
			continue
		}
		m := &msgs[i]
		used := m.role == "assistant" || m.isRealUser() || m.isSummary()
		seen := map[string]bool{}
		note := func(f string, args bool) {
			st := stats[f]
			if st == nil {
				st = &factStat{last: i}
				stats[f] = st
				order = append(order, f)
			}
			if !seen[f] {
				seen[f] = true
				st.count++
			}
			st.used = st.used || used
			st.args = st.args || args
		}
		text := m.text()
		if m.isSummary() { // what it summarized, and its own text (not the range's boilerplate)
			text = summaryBody(text) + "\n" + ownText(m, true)
		}
		scanned += len(text)
		scanFacts(text, func(f string) { note(f, false) })
		for k := range m.calls {
			scanned += len(m.calls[k].args.Raw)
			scanArgFacts(m.calls[k], func(f string) { note(f, true) })
		}
	}
	return stats, order
}

// scanArgFacts calls yield with the facts of a tool call's argument values (keys
// are the tool's schema, not the conversation's), decoded: OpenAI's arguments are a
// JSON string holding the object, whose escapes would glue an "n" to the word after
// a newline.
func scanArgFacts(c toolCall, yield func(fact string)) {
	args := c.args
	if args.Type == gjson.String {
		args = gjson.Parse(c.argsText())
		if !args.IsObject() && !args.IsArray() {
			scanFacts(c.argsText(), yield) // arguments that are not JSON: their text
			return
		}
	}
	var walk func(v gjson.Result)
	walk = func(v gjson.Result) {
		switch {
		case v.IsObject() || v.IsArray():
			v.ForEach(func(_, x gjson.Result) bool { walk(x); return true })
		case v.Type == gjson.String:
			scanFacts(v.String(), yield)
		case v.Type == gjson.Number:
			scanFacts(v.Raw, yield)
		}
	}
	walk(args)
}

// keptFacts returns the set of facts the compaction keeps in front of the agent:
// those of every message it neither summarizes nor prunes, and the calls of the
// pruned ones (pruning replaces a message's output, not its calls).
func keptFacts(msgs []message, summarized, pruned func(i int) bool) map[string]bool {
	held := map[string]bool{}
	for i := range msgs {
		if summarized(i) {
			continue
		}
		m := &msgs[i]
		if !pruned(i) {
			scanFacts(m.text(), func(f string) { held[f] = true })
		}
		for k := range m.calls {
			scanArgFacts(m.calls[k], func(f string) { held[f] = true })
		}
	}
	return held
}

// factScore ranks a fact: what the agent or the user wrote (or an earlier summary
// kept) before what only a tool printed, a tool-call argument higher still, then
// how many messages name it, then the newest.
func factScore(st *factStat) int {
	s := min(st.count, 4)
	if st.used {
		s += 4
	}
	if st.args {
		s += 2
	}
	return s
}

// factsLines chooses the facts of the compaction of plan p that neither the kept
// messages nor summary hold, best first within budget characters, and writes them
// as index lines, one per source message (newest first): "- names #41 (bash): a, b".
func factsLines(msgs []message, p plan, summary string, budget int) []string {
	if budget <= 0 || p.tailStart <= p.headEnd {
		return nil
	}
	pruned := func(i int) bool { _, ok := p.pruned.at(i); return ok }
	// The active request is quoted in its own section (and archived whole).
	summarized := func(i int) bool { return i >= p.headEnd && i < p.tailStart && i != p.activeRequest }
	// Candidates: the summarized messages and the outputs pruned.
	stats, order := factsOf(msgs, func(i int) bool { return summarized(i) || pruned(i) })
	if len(stats) == 0 {
		return nil
	}
	held := keptFacts(msgs, summarized, pruned)
	var cands []string
	for _, f := range order {
		if !held[f] {
			cands = append(cands, f)
		}
	}
	// Best first; a stable sort keeps the newest first among equals. Those the
	// summary holds are skipped below, as they are met: sorting first and filtering
	// after gives the order filtering first would, and only the candidates the
	// budget reaches are searched for in the summary (each search reads it whole).
	// With a focus, the facts that name it come first, then those of a message
	// that does.
	onFocus := map[string]int{}
	if terms := focusTerms(p.focus); len(terms) > 0 {
		srcMatches := map[int]bool{}
		for _, f := range cands {
			src := stats[f].last
			m, ok := srcMatches[src]
			if !ok {
				m = matchesFocus(msgs[src].text(), terms)
				srcMatches[src] = m
			}
			switch {
			case matchesFocus(f, terms):
				onFocus[f] = 2
			case m:
				onFocus[f] = 1
			}
		}
	}
	sort.SliceStable(cands, func(a, b int) bool {
		if fa, fb := onFocus[cands[a]], onFocus[cands[b]]; fa != fb {
			return fa > fb
		}
		return factScore(stats[cands[a]]) > factScore(stats[cands[b]])
	})
	// Choose within the budget, leaving out a fact a chosen one spells out (a
	// dotted name's prefix, a path's tail).
	bySource, labels := map[int][]string{}, map[int]string{}
	var chosen []string
	used := len(AnchorsTitle) + 1
	for _, f := range cands {
		if strings.Contains(summary, f) || slices.ContainsFunc(chosen, func(c string) bool { return strings.Contains(c, f) }) {
			continue
		}
		src := stats[f].last
		cost := len(f) + 2
		if len(bySource[src]) == 0 {
			if _, ok := labels[src]; !ok {
				labels[src] = factsLinePrefix + strconv.Itoa(src) + sourceLabel(msgs, p, src)
			}
			cost += len(labels[src]) + 2
		}
		if used+cost > budget {
			if used+len(f)+2 > budget {
				break
			}
			continue // a shorter one, or one of a listed message, may still fit
		}
		used += cost
		chosen = append(chosen, f)
		bySource[src] = append(bySource[src], f)
	}
	srcs := make([]int, 0, len(bySource))
	for s := range bySource {
		srcs = append(srcs, s)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(srcs)))
	lines := make([]string, 0, len(srcs))
	for _, s := range srcs {
		lines = append(lines, labels[s]+": "+strings.Join(bySource[s], ", "))
	}
	return lines
}

// sourceLabel says what message i was, for an index line: " (bash)" for a tool's
// output or a call, " (user)", " (summary)", or "".
func sourceLabel(msgs []message, p plan, i int) string {
	m := &msgs[i]
	switch {
	case m.isSummary():
		return " (earlier summary)"
	case m.isToolResult():
		if a := m.answers(); len(a) > 0 {
			if c, ok := p.calls[a[0]]; ok && c.name != "" {
				return " (" + truncateRunesPlain(c.name, 40) + " output)"
			}
		}
		return " (tool output)"
	case m.isRealUser():
		return " (user)"
	case len(m.calls) > 0 && m.calls[0].name != "":
		return " (" + truncateRunesPlain(m.calls[0].name, 40) + " call)"
	case m.role == "assistant":
		return " (assistant)"
	}
	return ""
}

// indexLine reports whether a line of an anchors section is a facts index line.
func indexLine(l string) bool { return strings.HasPrefix(l, factsLinePrefix) }
