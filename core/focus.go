package core

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// A compaction's focus (the focus param, a compress event's focus) is what the
// caller wants kept in detail: the summary request asks for it, and the builtin
// summary and the facts index put what matches it first. Standing guidance for
// every summary is the config's compression.instructions, which only the
// summarizer LLM can follow.

// Bounds of the focus and the instructions.
const (
	maxFocusBytes        = 1000
	maxInstructionsBytes = 8000
	// fallbackMaxFocus and fallbackFocusChars bound the builtin summary's Focus
	// section: its lines and each line's length.
	fallbackMaxFocus   = 8
	fallbackFocusChars = 300
)

// readFocus reads a focus value: a string of at most maxFocusBytes, trimmed; ok is
// false for anything else. Absent or null is "".
func readFocus(v gjson.Result) (focus string, ok bool) {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return "", true
	case v.Type != gjson.String || len(v.Str) > maxFocusBytes:
		return "", false
	}
	return strings.TrimSpace(v.Str), true
}

// focusTerms are the words of focus a text must contain (ASCII case-insensitive) to
// match it: its words of 3 bytes or more, lowercased, or the whole focus when it
// has none.
func focusTerms(focus string) []string {
	var terms []string
	for _, w := range strings.FieldsFunc(strings.ToLower(focus), func(r rune) bool {
		return r == ' ' || r == ',' || r == ';' || r == '\t' || r == '\n' || r == '"' || r == '\''
	}) {
		if len(w) >= 3 {
			terms = append(terms, w)
		}
	}
	if len(terms) == 0 && strings.TrimSpace(focus) != "" {
		terms = []string{strings.ToLower(strings.TrimSpace(focus))}
	}
	return terms
}

// matchesFocus reports whether text contains one of terms (lowercased terms).
func matchesFocus(text string, terms []string) bool {
	if len(terms) == 0 {
		return false
	}
	lower := strings.ToLower(text)
	for _, t := range terms {
		if strings.Contains(lower, t) {
			return true
		}
	}
	return false
}

// focusLines are the lines of msgs[from:to] (their text and tool calls) that match
// terms, newest messages first, at most fallbackMaxFocus, returned oldest first as
// "- #i role: line".
func focusLines(msgs []message, from, to int, terms []string) []string {
	if len(terms) == 0 {
		return nil
	}
	var lines []string
	seen := map[string]bool{}
	for i := to - 1; i >= from && len(lines) < fallbackMaxFocus; i-- {
		m := &msgs[i]
		text := m.text()
		for k := range m.calls { // a call's arguments name files and commands
			text += "\ncall " + describeCall(&m.calls[k])
		}
		if !matchesFocus(text, terms) {
			continue
		}
		who := m.role
		if m.isToolResult() {
			who = "tool output"
		}
		var mine []string
		for _, l := range strings.Split(text, "\n") {
			l = collapseSpace(l)
			if l == "" || seen[l] || !matchesFocus(l, terms) {
				continue
			}
			seen[l] = true
			mine = append(mine, "- #"+strconv.Itoa(i)+" "+who+": "+truncateRunes(l, fallbackFocusChars))
			if len(lines)+len(mine) >= fallbackMaxFocus {
				break
			}
		}
		// This message's lines in their order, before the newer ones already taken.
		lines = append(mine, lines...)
	}
	return lines
}

// summaryGuidance is what the summary request adds after its prompt for the
// config's instructions and the call's focus.
func summaryGuidance(instructions, focus string) string {
	var b strings.Builder
	if instructions = strings.TrimSpace(instructions); instructions != "" {
		b.WriteString("\n\nStanding instructions for every summary (follow them):\n" + instructions)
	}
	if focus != "" {
		b.WriteString("\n\nFocus topic: give priority to everything about " + focus + ".")
	}
	return b.String()
}
