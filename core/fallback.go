package core

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of the extractive summary's sections.
const (
	fallbackGoalChars     = 600
	fallbackRequestChars  = 400
	fallbackMaxRequests   = 12
	fallbackMaxFiles      = 40
	fallbackMaxCalls      = 25
	fallbackMaxErrors     = 15
	fallbackErrorChars    = 200
	fallbackMaxNotes      = 3
	fallbackNoteChars     = 400
	fallbackPreviousShare = 0.4 // at most this share of the budget carries the previous summary
	// fallbackErrorScan: only the newest tool outputs are searched for errors; older
	// errors were usually fixed since, and scanning every output is the slow part.
	fallbackErrorScan = 24
	// fallbackFileScan: files are taken from the newest calls only, for the same reason.
	fallbackFileScan = 80
)

// errorMarkers are substrings that flag a line of tool output as an error or a test
// outcome worth keeping.
var errorMarkers = []string{"Error:", "error:", "ERROR", "Traceback (most recent call last)", "Exception:", "FAILED", " failed", "panic:", "fatal:", "No such file", "command not found"}

// fallbackErrorsPerOutput bounds the lines one tool output contributes (its last ones).
const fallbackErrorsPerOutput = 5

// pathArgNames are the tool-call arguments that hold file paths.
var pathArgNames = []string{"path", "file_path", "filepath", "filename", "file", "notebook_path", "directory", "dir"}

// extractiveSummary builds the deterministic summary of msgs[from:to] (DESIGN §8.5):
// the previous summary carried over, the user's requests verbatim, files and paths,
// tool calls, errors seen and the assistant's last notes, within about target tokens.
// It needs no LLM, so compaction never loses the middle.
func extractiveSummary(msgs []message, p plan, why string) string {
	from, to := p.headEnd, p.tailStart
	prev, prevIdx := previousSummary(msgs, from, to)
	calls := p.calls
	budget := p.summaryTarget * roughCharsPerToken

	var goal string
	var requests, files, errs, notes []string
	type callAt struct {
		i int
		c *toolCall
	}
	var callList []callAt
	seenFile, seenErr := map[string]bool{}, map[string]bool{}
	toolCount := map[string]int{}
	var toolOrder []string
	addFile := func(f string) {
		f = strings.Trim(f, "\"'`,;:()[]")
		if f == "" || len(f) > 200 || seenFile[f] || len(files) >= fallbackMaxFiles {
			return
		}
		seenFile[f] = true
		files = append(files, f)
	}
	for i := range msgs {
		if i < to && msgs[i].isRealUser() && goal == "" {
			goal = truncateRunes(strings.TrimSpace(msgs[i].text()), fallbackGoalChars)
		}
	}
	for i := from; i < to; i++ {
		m := &msgs[i]
		if i == prevIdx {
			continue
		}
		switch {
		case m.isRealUser():
			requests = append(requests, "- #"+strconv.Itoa(i)+": "+strconv.Quote(truncateRunes(strings.TrimSpace(m.text()), fallbackRequestChars)))
		case m.role == "assistant":
			if t := strings.TrimSpace(m.text()); t != "" {
				notes = append(notes, "- #"+strconv.Itoa(i)+": "+truncateRunes(t, fallbackNoteChars))
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
	for i := to - 1; i >= from && scanned < fallbackErrorScan && len(errs) < fallbackMaxErrors; i-- {
		m := &msgs[i]
		if !m.isToolResult() {
			continue
		}
		scanned++
		lines := errorLines(m)
		for k := len(lines) - 1; k >= max(0, len(lines)-fallbackErrorsPerOutput) && len(errs) < fallbackMaxErrors; k-- {
			if line := lines[k]; !seenErr[line] {
				seenErr[line] = true
				what := "a tool"
				if c, ok := calls[m.answers()[0]]; ok {
					what = c.name
				}
				errs = append(errs, "- #"+strconv.Itoa(i)+" "+what+": "+line)
			}
		}
	}
	for l, r := 0, len(errs)-1; l < r; l, r = l+1, r-1 {
		errs[l], errs[r] = errs[r], errs[l]
	}
	// Files, from the newest calls back, listed in the order they were first named.
	for k := len(callList) - 1; k >= max(0, len(callList)-fallbackFileScan) && len(files) < fallbackMaxFiles; k-- {
		for _, f := range callPaths(*callList[k].c) {
			addFile(f)
		}
	}
	for l, r := 0, len(files)-1; l < r; l, r = l+1, r-1 {
		files[l], files[r] = files[r], files[l]
	}
	var callLines []string
	if len(callList) > fallbackMaxCalls {
		callLines = append(callLines, "- ("+strconv.Itoa(len(callList)-fallbackMaxCalls)+" earlier calls omitted)")
		callList = callList[len(callList)-fallbackMaxCalls:]
	}
	for _, ca := range callList {
		callLines = append(callLines, "- #"+strconv.Itoa(ca.i)+" "+describeCall(ca.c))
	}
	if len(requests) > fallbackMaxRequests {
		requests = append([]string{"- (" + strconv.Itoa(len(requests)-fallbackMaxRequests) + " earlier requests omitted)"}, requests[len(requests)-fallbackMaxRequests:]...)
	}
	if len(notes) > fallbackMaxNotes {
		notes = notes[len(notes)-fallbackMaxNotes:]
	}

	var b strings.Builder
	section := func(title string, lines []string, empty string) {
		b.WriteString("## " + title + "\n")
		if len(lines) == 0 {
			b.WriteString(empty + "\n\n")
			return
		}
		b.WriteString(strings.Join(lines, "\n") + "\n\n")
	}
	if goal == "" {
		goal = "(no user request in the compacted turns)"
	}
	b.WriteString("## Goal\n" + goal + "\n\n")
	if prev != "" {
		b.WriteString("## Earlier Summary (carried over)\n" + truncateMiddle(prev, int(float64(budget)*fallbackPreviousShare*0.7), int(float64(budget)*fallbackPreviousShare*0.3)) + "\n\n")
	}
	section("Constraints & Preferences (the user's requests, verbatim)", requests, "(none in the compacted turns)")
	var tally []string
	for _, name := range toolOrder {
		tally = append(tally, name+" ×"+strconv.Itoa(toolCount[name]))
	}
	progress := []string{"- Done: turns #" + strconv.Itoa(from) + "–#" + strconv.Itoa(to-1) + " were compacted; tool calls made: " + orNone(strings.Join(tally, ", "))}
	section("Progress (Done / In Progress / Blocked)", progress, "")
	section("Key Decisions (the assistant's last notes)", notes, "(none recorded)")
	for k := range files {
		files[k] = "- " + files[k]
	}
	section("Relevant Files", files, "(none named in tool calls)")
	section("Tool Calls", callLines, "(none)")
	section("Errors Seen", errs, "(none detected)")
	next := []string{"- Continue from the most recent turns below."}
	if p.activeRequest >= 0 {
		next = []string{"- Active request (the user's newest message, verbatim): " + strconv.Quote(strings.TrimSpace(msgs[p.activeRequest].text()))}
	}
	section("Next Steps", next, "")
	b.WriteString("## Critical Context\nThis summary was extracted without an LLM (" + why + "); details of tool outputs were not kept. Re-read files or re-run commands before relying on them.\n")
	return truncateMiddle(b.String(), budget*3/4, budget/4)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// callPaths returns the file paths a tool call names: path-like arguments, and
// path-looking words of a shell command.
func callPaths(c toolCall) []string {
	var out []string
	for _, a := range c.stringArgs(pathAndCommandArgs) {
		if a.key != "command" && a.key != "cmd" {
			if !a.empty() {
				out = append(out, a.value())
			}
			continue
		}
		for w, rest := nextWord(a.value()); w != ""; w, rest = nextWord(rest) {
			if looksLikePath(w) {
				out = append(out, w)
			}
		}
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

// nextWord returns the first word of s, as strings.Fields splits it, and the text
// after it; word is "" when s has no more words.
func nextWord(s string) (word, rest string) {
	start := -1
	for i := 0; i < len(s); {
		c, size := rune(s[i]), 1
		if c >= utf8.RuneSelf {
			c, size = utf8.DecodeRuneInString(s[i:])
		}
		if c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c >= utf8.RuneSelf && unicode.IsSpace(c) {
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
			if hasPrefixAt(s, i, mk) {
				return i
			}
		}
	}
	return -1
}
