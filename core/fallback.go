package core

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
)

// Bounds of the extractive summary's sections.
const (
	fallbackGoalChars     = 600
	fallbackRequestChars  = 400
	fallbackMaxRequests   = 12
	fallbackMaxFiles      = 60
	fallbackMaxCalls      = 12
	fallbackMaxErrors     = 8
	fallbackErrorChars    = 200
	fallbackMaxNotes      = 3
	fallbackNoteChars     = 400
	fallbackPreviousShare = 0.4   // at most this share of the budget carries an LLM's sections verbatim
	fallbackMinorShare    = 0.125 // tool calls, errors and notes each take at most this share
	// fallbackErrorScan: only the newest tool outputs are searched for errors; older
	// errors were usually fixed since, and scanning every output is the slow part.
	fallbackErrorScan = 24
	// fallbackFileScan: path-looking words are taken from the newest commands only,
	// for the same reason (path arguments are taken from every call).
	fallbackFileScan = 80
)

// errorMarkers are substrings that flag a line of tool output as an error or a test
// outcome worth keeping.
var errorMarkers = []string{"Error:", "error:", "ERROR", "Traceback (most recent call last)", "Exception:", "FAILED", " failed", "panic:", "fatal:", "No such file", "command not found"}

// fallbackErrorsPerOutput bounds the lines one tool output contributes (its last ones).
const fallbackErrorsPerOutput = 5

// pathArgNames are the tool-call arguments that hold file paths.
var pathArgNames = []string{"path", "file_path", "filepath", "filename", "file", "notebook_path", "directory", "dir"}

// extractiveSummary builds the deterministic summary of msgs[from:to] (docs/DESIGN.md §8.5):
// the previous summary carried forward by section, the user's requests as they wrote
// them, files and paths, tool calls, errors seen and the assistant's last notes,
// within about target tokens. It needs no LLM, so compaction never loses the middle.
//
// A previous summary is not nested: its requests, files, progress, decisions, tool
// calls and errors merge into the new lists (deduplicated), its Goal is not repeated,
// and sections this builder does not know (an LLM's) are carried verbatim within
// fallbackPreviousShare of the budget. Over budget, lines are dropped in the order
// of dropOrder, never cut blindly.
func extractiveSummary(msgs []message, p plan, why string) string {
	from, to := p.headEnd, p.tailStart
	prevText, prevIdx := previousSummary(msgs, from, to)
	prev := parseSummarySections(prevText)
	calls := p.calls
	budget := p.summaryTarget * roughCharsPerToken

	s := summaryParts{goal: prev.goal}
	var newRequests, newFiles, newErrs, newNotes, callLines []string
	seenFile, seenErr := map[string]bool{}, map[string]bool{}
	toolCount := map[string]int{}
	var toolOrder []string
	type callAt struct {
		i int
		c *toolCall
	}
	var callList []callAt
	addFile := func(f string) {
		f = strings.Trim(f, "\"'`,;:()[]")
		if f == "" || len(f) > 200 || seenFile[f] || len(newFiles) >= fallbackMaxFiles {
			return
		}
		seenFile[f] = true
		newFiles = append(newFiles, f)
	}
	for i := range msgs {
		if i < to && msgs[i].isRealUser() {
			s.goal = truncateRunes(collapseSpace(msgs[i].text()), fallbackGoalChars) // one line: a heading in it must not read as a section
			break
		}
	}
	for i := from; i < to; i++ {
		m := &msgs[i]
		if m.pinned { // kept verbatim after the summary
			continue
		}
		summary := i == prevIdx || m.isSummary()
		switch {
		case summary && m.role == "user":
			if t := mergedUserText(m); t != "" { // the user's message a summary was merged into
				newRequests = append(newRequests, requestLine(i, t))
			}
		case m.isRealUser():
			if i != p.activeRequest { // the active request is written once, in its own section
				newRequests = append(newRequests, requestLine(i, m.text()))
			}
		case m.role == "assistant":
			// A summary merged into an assistant message: its own text and calls count.
			if t := strings.TrimSpace(ownText(m, summary)); t != "" {
				newNotes = append(newNotes, "- #"+strconv.Itoa(i)+": "+truncateRunes(t, fallbackNoteChars))
			}
			for k := range m.calls {
				c := &m.calls[k]
				if toolCount[c.name] == 0 {
					toolOrder = append(toolOrder, c.name)
				}
				toolCount[c.name]++
				callList = append(callList, callAt{i, c})
			}
		}
	}
	// Errors, newest tool outputs first, listed oldest first.
	scanned := 0
	for i := to - 1; i >= from && scanned < fallbackErrorScan && len(newErrs) < fallbackMaxErrors; i-- {
		m := &msgs[i]
		if !m.isToolResult() {
			continue
		}
		scanned++
		lines := errorLines(m)
		for k := len(lines) - 1; k >= max(0, len(lines)-fallbackErrorsPerOutput) && len(newErrs) < fallbackMaxErrors; k-- {
			if line := lines[k]; !seenErr[line] {
				seenErr[line] = true
				what := "a tool"
				if a := m.answers(); len(a) > 0 {
					if c, ok := calls[a[0]]; ok {
						what = c.name
					}
				}
				newErrs = append(newErrs, "- #"+strconv.Itoa(i)+" "+what+": "+line)
			}
		}
	}
	slices.Reverse(newErrs)
	// Files, from the newest calls back, listed in the order they were first named:
	// path arguments of every call, path-looking words of the newest commands.
	for k := len(callList) - 1; k >= 0 && len(newFiles) < fallbackMaxFiles; k-- {
		for _, f := range callPaths(*callList[k].c, k >= len(callList)-fallbackFileScan) {
			addFile(f)
		}
	}
	slices.Reverse(newFiles)
	if len(callList) > fallbackMaxCalls {
		callLines = append(callLines, "- ("+strconv.Itoa(len(callList)-fallbackMaxCalls)+" earlier calls omitted)")
		callList = callList[len(callList)-fallbackMaxCalls:]
	}
	for _, ca := range callList {
		callLines = append(callLines, "- #"+strconv.Itoa(ca.i)+" "+describeCall(ca.c))
	}
	if len(newNotes) > fallbackMaxNotes {
		newNotes = newNotes[len(newNotes)-fallbackMaxNotes:]
	}
	for k := range newFiles {
		newFiles[k] = "- " + newFiles[k]
	}
	var tally []string
	for _, name := range toolOrder {
		tally = append(tally, name+" ×"+strconv.Itoa(toolCount[name]))
	}

	// Merge: the previous summary's lines first (older), then this range's.
	s.requests = mergeLines(prev.requests, newRequests, fallbackMaxRequests)
	s.files = mergeLines(prev.files, slices.DeleteFunc(newFiles, func(f string) bool {
		return slices.ContainsFunc(prev.files, func(l string) bool { return containsPath(l, f[2:]) })
	}), fallbackMaxMergedFiles)
	s.errors = mergeLines(prev.errors, newErrs, fallbackMaxErrors)
	s.decisions = mergeLines(prev.decisions, newNotes, 2*fallbackMaxNotes)
	s.calls = mergeLines(prev.calls, callLines, fallbackMaxCalls+1)
	s.progress = mergeLines(prev.progress, []string{"- Done: turns #" + strconv.Itoa(from) + "–#" + strconv.Itoa(to-1) + " were compacted; tool calls made: " + orNone(strings.Join(tally, ", "))}, fallbackMaxProgress)
	s.other = carryVerbatim(prev.other, int(float64(budget)*fallbackPreviousShare))
	if s.goal == "" {
		s.goal = "(no user request in the compacted turns)"
	}
	s.next = "- Continue from the most recent turns below."
	if p.activeRequest >= 0 {
		s.next = "- Answer the active request: the user's newest message, quoted under Active Request below."
	}
	s.critical = "This summary was extracted without an LLM (" + why + "); details of tool outputs were not kept. Re-read files or re-run commands before relying on them."
	if p.focus != "" {
		s.focusTitle = "Focus: " + truncateRunes(collapseSpace(p.focus), 120)
		s.focus = focusLines(msgs, from, to, focusTerms(p.focus))
		if len(s.focus) == 0 {
			s.focus = []string{"- (nothing in the compacted turns mentions it)"}
		}
	}
	// No list of lesser lines crowds out the others: tool calls, errors and notes
	// each keep their newest lines within a share of the budget.
	s.calls = newestWithin(s.calls, int(float64(budget)*fallbackMinorShare))
	s.errors = newestWithin(s.errors, int(float64(budget)*fallbackMinorShare))
	s.decisions = newestWithin(s.decisions, int(float64(budget)*fallbackMinorShare))
	s.fit(budget)
	return s.render()
}

// Bounds of the merged sections.
const (
	fallbackMaxMergedFiles = 100
	fallbackMaxProgress    = 8
	// fallbackRequestShortChars: over budget, requests are shortened to this before
	// any is dropped (the head of a request says what it was).
	fallbackRequestShortChars = 160
	fallbackGoalShortChars    = 200
	// fallbackCarriedLineChars bounds one line carried from a previous summary.
	fallbackCarriedLineChars = 600
)

// containsPath reports whether text names path as a whole path: not as the end of a
// longer one, nor followed by more of a name.
func containsPath(text, path string) bool {
	pathByte := func(c byte) bool {
		return c == '/' || c == '.' || c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for off := 0; ; {
		k := strings.Index(text[off:], path)
		if k < 0 || path == "" {
			return false
		}
		k += off
		end := k + len(path)
		if (k == 0 || !pathByte(text[k-1])) && (end == len(text) || !pathByte(text[end]) || text[end] == '.' && (end+1 == len(text) || !pathByte(text[end+1]))) {
			return true
		}
		off = k + 1
	}
}

// newestWithin keeps the newest lines whose total length is within limit (at least
// the newest one).
func newestWithin(lines []string, limit int) []string {
	n := 0
	for k := len(lines) - 1; k >= 0; k-- {
		n += len(lines[k]) + 1
		if n > limit && k < len(lines)-1 {
			return lines[k+1:]
		}
	}
	return lines
}

// requestLine quotes a user's request as written: whitespace collapsed, nothing
// escaped, bounded.
func requestLine(i int, text string) string {
	return "- #" + strconv.Itoa(i) + ": " + truncateRunes(collapseSpace(text), fallbackRequestChars)
}

// collapseSpace joins the words of s with single spaces.
func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// ownText is the text of m, without a summary merged into it when summary is set.
func ownText(m *message, summary bool) string {
	t := m.text()
	if !summary {
		return t
	}
	for _, d := range []string{SummaryDelimiter, assistantDelimiter} {
		if cut := strings.Index(t, d); cut >= 0 {
			return t[cut+len(d):]
		}
	}
	return ""
}

// mergedUserText is the user's own text of a message a summary was merged into
// (after SummaryDelimiter), or "".
func mergedUserText(m *message) string {
	if m.role != "user" || len(m.results) > 0 {
		return ""
	}
	t := m.text()
	if cut := strings.Index(t, SummaryDelimiter); cut >= 0 {
		return strings.TrimSpace(t[cut+len(SummaryDelimiter):])
	}
	return ""
}

// summaryParts are the sections of an extractive summary, as lines.
type summaryParts struct {
	goal                                                string
	requests, progress, decisions, files, calls, errors []string
	other                                               []string // verbatim lines of sections this builder does not know
	next, critical                                      string
	// focusTitle and focus are the Focus section: what the turns said of the
	// request's focus, which goes last when the summary is over budget.
	focusTitle                                             string
	focus                                                  []string
	droppedRequests, droppedFiles, droppedCalls, droppedEr int
}

// sectionKind classifies a summary section by its title.
func sectionKind(title string) string {
	t := strings.ToLower(strings.TrimSpace(title))
	for _, k := range [...]struct{ prefix, kind string }{
		{"goal", "goal"}, {"constraints", "requests"}, {"active request", "active"}, {"user request", "requests"},
		{"progress", "progress"}, {"key decisions", "decisions"}, {"decisions", "decisions"},
		{"relevant files", "files"}, {"files", "files"}, {"tool calls", "calls"}, {"errors", "errors"},
		{"anchors", "anchors"}, {"next steps", "next"}, {"critical context", "critical"}, {"earlier summary", "earlier"},
	} {
		if strings.HasPrefix(t, k.prefix) {
			return k.kind
		}
	}
	return ""
}

// parseSummarySections splits a previous summary (extractive or an LLM's) into the
// parts the extractive builder merges; what it does not know goes in other,
// verbatim, with its headings.
func parseSummarySections(text string) summaryParts {
	var s summaryParts
	if strings.TrimSpace(text) == "" {
		return s
	}
	kind, title := "", ""
	var body []string
	flush := func() {
		lines := body
		body = nil
		var items []string
		for _, l := range lines {
			l = strings.TrimSpace(l)
			if l == "" || placeholderLine(l) {
				continue
			}
			items = append(items, truncateRunes(l, fallbackCarriedLineChars))
		}
		switch kind {
		case "goal":
			if g := strings.Join(items, " "); g != "" && s.goal == "" {
				s.goal = truncateRunes(collapseSpace(g), fallbackGoalChars)
			}
		case "requests":
			s.requests = append(s.requests, bullets(items)...)
		case "active":
			if t := strings.Join(lines, "\n"); strings.TrimSpace(t) != "" {
				s.requests = append(s.requests, "- (earlier active request): "+truncateRunes(collapseSpace(stripCutMarks(t)), fallbackRequestChars))
			}
		case "progress":
			s.progress = append(s.progress, bullets(items)...)
		case "decisions":
			s.decisions = append(s.decisions, bullets(items)...)
		case "files":
			s.files = append(s.files, bullets(items)...)
		case "calls":
			s.calls = append(s.calls, bullets(items)...)
		case "errors":
			s.errors = append(s.errors, bullets(items)...)
		case "anchors":
			for _, l := range items {
				if indexLine(l) {
					continue // the facts index is chosen anew from the range, this summary included
				}
				l = strings.TrimPrefix(l, "- ")
				switch {
				case strings.HasPrefix(l, "file: "):
					s.files = append(s.files, "- "+strings.TrimPrefix(l, "file: "))
				case strings.HasPrefix(l, "request: "):
					s.requests = append(s.requests, "- "+strings.TrimPrefix(l, "request: "))
				case strings.HasPrefix(l, "error: "):
					s.errors = append(s.errors, "- "+strings.TrimPrefix(l, "error: "))
				default:
					s.progress = append(s.progress, "- "+l)
				}
			}
		case "next":
			for _, l := range items {
				switch {
				case strings.HasPrefix(l, "- Active request"):
					if k := strings.Index(l, "): "); k >= 0 {
						s.requests = append(s.requests, "- (earlier active request): "+truncateRunes(collapseSpace(strings.Trim(l[k+3:], `"`)), fallbackRequestChars))
					}
				case l == "- Continue from the most recent turns below." || strings.HasPrefix(l, "- Answer the active request"):
				default:
					s.other = appendOther(s.other, title, l)
				}
			}
		case "critical":
			if len(items) > 0 && !strings.HasPrefix(items[0], "This summary was extracted without an LLM") {
				for _, l := range items {
					s.other = appendOther(s.other, title, l)
				}
			}
		case "earlier":
			for _, l := range items { // an older format: carried text before its own headings
				s.other = appendOther(s.other, "", l)
			}
		default:
			for _, l := range items {
				s.other = appendOther(s.other, title, l)
			}
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if kind == "active" { // the user's text, as written, runs to the end: its headings are its own
			body = append(body, line)
			continue
		}
		if h, ok := strings.CutPrefix(strings.TrimSpace(line), "#"); ok && (strings.HasPrefix(h, " ") || strings.HasPrefix(h, "#")) {
			flush()
			title = strings.TrimSuffix(strings.TrimSpace(strings.TrimLeft(h, "#")), fromEarlier)
			kind = sectionKind(title)
			continue
		}
		body = append(body, line)
	}
	flush()
	return s
}

// fromEarlier marks the heading of a section carried verbatim.
const fromEarlier = " (from the earlier summary)"

// appendOther appends a verbatim line under its heading (written once).
func appendOther(other []string, title, line string) []string {
	if title != "" {
		head := "### " + title + fromEarlier
		if !slices.Contains(other, head) {
			other = append(other, head)
		}
	}
	return append(other, line)
}

// placeholderLine reports lines the builder writes for an empty section or a count
// of left-out lines: they are not carried.
func placeholderLine(l string) bool {
	if strings.HasPrefix(l, "…[") && strings.HasSuffix(l, "left out to fit]…") {
		return true
	}
	l = strings.TrimPrefix(l, "- ")
	return strings.HasPrefix(l, "(") && strings.HasSuffix(l, ")") &&
		(strings.HasPrefix(l, "(none") || strings.HasSuffix(l, "omitted)") || strings.HasSuffix(l, "left out)") || strings.Contains(l, " left out to fit"))
}

// bullets makes every item a "- " line.
func bullets(items []string) []string {
	out := make([]string, 0, len(items))
	for _, l := range items {
		if !strings.HasPrefix(l, "- ") && !strings.HasPrefix(l, "* ") {
			l = "- " + l
		}
		out = append(out, l)
	}
	return out
}

// stripCutMarks removes the marks a capped active request carries.
func stripCutMarks(s string) string {
	if k := strings.Index(s, "\n…["); k >= 0 {
		if e := strings.Index(s[k:], "]…\n"); e >= 0 {
			return s[:k] + " " + s[k+e+len("]…\n"):]
		}
	}
	return s
}

// lineKey is what deduplicates a line: its text without the leading "- " and a
// message index ("#12: ", "#12 ") that differs from one compaction to the next.
func lineKey(l string) string {
	l = strings.TrimPrefix(strings.TrimPrefix(l, "- "), "(earlier active request): ")
	if strings.HasPrefix(l, "#") {
		k := 1
		for k < len(l) && l[k] >= '0' && l[k] <= '9' {
			k++
		}
		if k > 1 {
			l = strings.TrimPrefix(strings.TrimPrefix(l[k:], ":"), " ")
		}
	}
	return collapseSpace(l)
}

// mergeLines returns old then new lines, deduplicated by lineKey (the newer copy
// wins its place), keeping at most limit (the newest).
func mergeLines(old, new []string, limit int) []string {
	all := append(append([]string{}, old...), new...)
	seen := map[string]bool{}
	var out []string
	for k := len(all) - 1; k >= 0; k-- {
		key := lineKey(all[k])
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, all[k])
	}
	slices.Reverse(out)
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// carryVerbatim keeps the first lines of other within limit characters, marking
// what it leaves out.
func carryVerbatim(other []string, limit int) []string {
	n := 0
	for k, l := range other {
		n += len(l) + 1
		if n > limit {
			return append(other[:k:k], "…["+strconv.Itoa(len(other)-k)+" lines of the earlier summary left out to fit]…")
		}
	}
	return other
}

// dropOrder is the order lines go when a summary is over budget: tool calls first
// (they are the least telling and the agent can see its tools), then the
// assistant's notes, the builder's own older progress lines ("Done: turns …"),
// older errors, the verbatim carry of an LLM's sections; then requests are
// shortened, then the oldest files go, the oldest requests, and last the progress
// lines an LLM wrote. The Goal, one progress line and the Next Steps stay.
func (s *summaryParts) fit(budget int) {
	over := func() bool { return len(s.render()) > budget }
	dropOldest := func(lines *[]string, keep int, dropped *int, which func(string) bool) {
		for k := 0; k < len(*lines)-keep && over(); {
			if which != nil && !which((*lines)[k]) {
				k++
				continue
			}
			*lines = slices.Delete(*lines, k, k+1)
			if dropped != nil {
				*dropped++
			}
		}
	}
	if !over() {
		return
	}
	dropOldest(&s.calls, 0, &s.droppedCalls, nil)
	dropOldest(&s.decisions, 0, nil, nil)
	dropOldest(&s.progress, 1, nil, builtProgress)
	dropOldest(&s.errors, 0, &s.droppedEr, nil)
	for len(s.other) > 0 && over() {
		s.other = s.other[:len(s.other)-1]
	}
	if over() {
		for k, l := range s.requests {
			s.requests[k] = truncateRunes(l, fallbackRequestShortChars)
		}
	}
	dropOldest(&s.files, 0, &s.droppedFiles, nil)
	dropOldest(&s.requests, 0, &s.droppedRequests, nil)
	if slices.ContainsFunc(s.progress, func(l string) bool { return !builtProgress(l) }) {
		dropOldest(&s.progress, 0, nil, builtProgress) // an LLM's progress says more than a count of turns
	}
	dropOldest(&s.progress, 1, nil, nil)
	dropOldest(&s.focus, 1, nil, nil) // what the caller asked to keep goes last
	if over() {
		s.goal = truncateRunes(s.goal, fallbackGoalShortChars)
	}
}

// builtProgress reports the progress lines the extractive builder writes.
func builtProgress(l string) bool { return strings.HasPrefix(l, "- Done: turns #") }

// render writes the summary; empty sections are left out.
func (s *summaryParts) render() string {
	var b strings.Builder
	section := func(title string, lines []string, dropped int, what string) {
		if len(lines) == 0 { // empty, or every line left out: the section would say nothing
			return
		}
		b.WriteString("## " + title + "\n")
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
		if dropped > 0 {
			b.WriteString("- (" + what + " left out to fit: " + strconv.Itoa(dropped) + ")\n")
		}
		b.WriteString("\n")
	}
	b.WriteString("## Goal\n" + s.goal + "\n\n")
	section(s.focusTitle, s.focus, 0, "")
	section("Constraints & Preferences (the user's requests, as written)", s.requests, s.droppedRequests, "older requests")
	section("Progress (Done / In Progress / Blocked)", s.progress, 0, "")
	section("Key Decisions (the assistant's last notes)", s.decisions, 0, "")
	section("Relevant Files", s.files, s.droppedFiles, "older files")
	section("Tool Calls", s.calls, s.droppedCalls, "older calls")
	section("Errors Seen", s.errors, s.droppedEr, "older errors")
	if len(s.other) > 0 {
		b.WriteString("## Earlier Summary (sections carried over)\n" + strings.Join(s.other, "\n") + "\n\n")
	}
	b.WriteString("## Next Steps\n" + s.next + "\n\n")
	b.WriteString("## Critical Context\n" + s.critical + "\n")
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// callPaths returns the file paths a tool call names: path-like arguments, and
// (with commands) path-looking words of a shell command.
func callPaths(c toolCall, commands bool) []string {
	var out []string
	want := pathArgNames
	if commands {
		want = pathAndCommandArgs
	}
	for _, a := range c.stringArgs(want) {
		if a.key != "command" && a.key != "cmd" {
			if !a.empty() {
				out = append(out, a.value())
			}
			continue
		}
		pathWords(a.value(), func(w string) {
			if looksLikePath(w) {
				out = append(out, w)
			}
		})
	}
	return out
}

var pathAndCommandArgs = append(append([]string{}, pathArgNames...), "command", "cmd")

// looksLikePath accepts words like src/app.py, ./x, /etc/hosts or main.go, and
// rejects URLs, flags, shell syntax and code such as obj.attr or a[1:2].
func looksLikePath(w string) bool {
	w = trimQuoting(w)
	if len(w) < 3 || len(w) > 200 || w[0] == '-' {
		return false
	}
	slash, onlyDotsAndSlashes := false, true
	for i := 0; i < len(w); i++ { // ':' (of a URL) and non-ASCII are refused here
		switch c := w[i]; {
		case c == '/':
			slash = true
		case c == '.':
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '~' || c == '@' || c == '+' || c == '-':
			onlyDotsAndSlashes = false
		default:
			return false
		}
	}
	if slash {
		return !onlyDotsAndSlashes
	}
	dot := strings.LastIndexByte(w, '.')
	return dot > 0 && contains(fileExtensions, strings.ToLower(w[dot+1:]))
}

// trimQuoting is strings.Trim(w, "\"'`;,()") without building a set per call.
func trimQuoting(w string) string {
	quoting := func(c byte) bool {
		return c == '"' || c == '\'' || c == '`' || c == ';' || c == ',' || c == '(' || c == ')'
	}
	for len(w) > 0 && quoting(w[0]) {
		w = w[1:]
	}
	for len(w) > 0 && quoting(w[len(w)-1]) {
		w = w[:len(w)-1]
	}
	return w
}

// pathWords calls yield with each word of s (as strings.Fields splits it) that
// holds a '/' or a '.', in order: the only words looksLikePath can accept. It
// finds them from those bytes, so a long command (a heredoc of a whole file) is
// not walked word by word; FuzzSummaryText holds it to nextWord.
func pathWords(s string, yield func(word string)) {
	for i := 0; i < len(s); {
		j := strings.IndexAny(s[i:], "/.")
		if j < 0 {
			return
		}
		start, end := i+j, i+j
		for start > i {
			r, size := utf8.DecodeLastRuneInString(s[i:start])
			if isFieldSpace(r) {
				break
			}
			start -= size
		}
		for end < len(s) {
			r, size := rune(s[end]), 1
			if r >= utf8.RuneSelf {
				r, size = utf8.DecodeRuneInString(s[end:])
			}
			if isFieldSpace(r) {
				break
			}
			end += size
		}
		yield(s[start:end])
		i = end
	}
}

// isFieldSpace is the space rule of strings.Fields.
func isFieldSpace(c rune) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c >= utf8.RuneSelf && unicode.IsSpace(c)
}

// nextWord returns the first word of s, as strings.Fields splits it, and the text
// after it; word is "" when s has no more words.
func nextWord(s string) (word, rest string) {
	start := -1
	for i := 0; i < len(s); {
		c, size := rune(s[i]), 1
		if c >= utf8.RuneSelf {
			c, size = utf8.DecodeRuneInString(s[i:])
		}
		if isFieldSpace(c) {
			if start >= 0 {
				return s[start:i], s[i:]
			}
		} else if start < 0 {
			start = i
		}
		i += size
	}
	if start >= 0 {
		return s[start:], ""
	}
	return "", ""
}

// fileExtensions are the extensions that make a word without a slash a file name.
var fileExtensions = []string{
	"py", "pyi", "ipynb", "js", "mjs", "cjs", "ts", "tsx", "jsx", "go", "rs", "java", "kt", "kts", "c", "h",
	"cc", "cpp", "hpp", "cs", "rb", "php", "swift", "scala", "sh", "bash", "zsh", "ps1", "md", "rst", "txt",
	"json", "jsonl", "yaml", "yml", "toml", "ini", "cfg", "conf", "xml", "html", "css", "scss", "sql",
	"ex", "exs", "erl", "hs", "ml", "lua", "jl", "dart", "vue", "svelte", "lock", "mod", "sum", "gradle",
	"proto", "csv", "tsv", "log", "env", "patch", "diff", "tf", "dockerfile", "mk", "cmake", "heex", "eex",
}

// errorLines returns the lines of a tool output that carry an error marker. It
// checks the raw JSON first, so outputs without any marker are never decoded.
func errorLines(m *message) []string {
	if !hasErrorMarker(m.contentRaw) {
		return nil
	}
	// Only the lines with a marker are cut out and trimmed: an output can be long.
	text := m.text()
	var out []string
	for i := 0; i < len(text); {
		k := indexErrorMarker(text[i:])
		if k < 0 {
			break
		}
		start := strings.LastIndexByte(text[:i+k], '\n') + 1
		end := strings.IndexByte(text[i+k:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += i + k
		}
		if line := strings.TrimSpace(text[start:end]); hasErrorMarker(line) { // " failed" may start the line
			out = append(out, truncateRunes(line, fallbackErrorChars))
		}
		i = end + 1
	}
	return out
}

// markersByFirstByte lists the error markers by their first byte, so that
// hasErrorMarker reads a text once instead of once per marker.
var markersByFirstByte, startsMarker = func() (t [256][]string, starts [256]bool) {
	for _, mk := range errorMarkers {
		t[mk[0]] = append(t[mk[0]], mk)
		starts[mk[0]] = true
	}
	return t, starts
}()

// hasErrorMarker reports whether s contains one of errorMarkers.
func hasErrorMarker(s string) bool { return indexErrorMarker(s) >= 0 }

// indexErrorMarker returns where the first of errorMarkers in s starts, or -1.
func indexErrorMarker(s string) int {
	for i := 0; i < len(s); i++ {
		if !startsMarker[s[i]] {
			continue
		}
		for _, mk := range markersByFirstByte[s[i]] {
			if jsonraw.HasPrefixAt(s, i, mk) {
				return i
			}
		}
	}
	return -1
}
