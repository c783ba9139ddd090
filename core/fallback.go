package core

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
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
)

// errorMarkers are substrings that flag a line of tool output as an error or a test
// outcome worth keeping.
var errorMarkers = []string{"Error", "error:", "ERROR", "Traceback", "Exception", "FAILED", "failed", "panic:", "fatal:", "not found", "No such file"}

// pathArgNames are the tool-call arguments that hold file paths.
var pathArgNames = []string{"path", "file_path", "filepath", "filename", "file", "notebook_path", "directory", "dir"}

// extractiveSummary builds the deterministic summary of msgs[from:to] (DESIGN §8.5):
// the previous summary carried over, the user's requests verbatim, files and paths,
// tool calls, errors seen and the assistant's last notes, within about target tokens.
// It needs no LLM, so compaction never loses the middle.
func extractiveSummary(msgs []message, p plan, why string) string {
	from, to := p.headEnd, p.tailStart
	prev, prevIdx := previousSummary(msgs, from, to)
	calls := indexCalls(msgs)
	budget := p.summaryTarget * roughCharsPerToken

	var goal string
	var requests, files, callLines, errs, notes []string
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
			goal = truncateRunes(strings.TrimSpace(contentText(msgs[i].content)), fallbackGoalChars)
		}
	}
	for i := from; i < to; i++ {
		m := &msgs[i]
		if i == prevIdx {
			continue
		}
		switch {
		case m.isRealUser():
			requests = append(requests, "- #"+strconv.Itoa(i)+": "+strconv.Quote(truncateRunes(strings.TrimSpace(contentText(m.content)), fallbackRequestChars)))
		case m.role == "assistant":
			if t := strings.TrimSpace(contentText(m.content)); t != "" {
				notes = append(notes, "- #"+strconv.Itoa(i)+": "+truncateRunes(t, fallbackNoteChars))
			}
			for _, c := range m.calls {
				if toolCount[c.name] == 0 {
					toolOrder = append(toolOrder, c.name)
				}
				toolCount[c.name]++
				callLines = append(callLines, "- #"+strconv.Itoa(i)+" "+describeCall(c))
				for _, f := range callPaths(c) {
					addFile(f)
				}
			}
		case m.isToolResult():
			for _, line := range errorLines(m) {
				if !seenErr[line] && len(errs) < fallbackMaxErrors {
					seenErr[line] = true
					what := "a tool"
					if c, ok := calls[m.resultFor]; ok {
						what = c.name
					}
					errs = append(errs, "- #"+strconv.Itoa(i)+" "+what+": "+line)
				}
			}
		}
	}
	if len(requests) > fallbackMaxRequests {
		requests = append([]string{"- (" + strconv.Itoa(len(requests)-fallbackMaxRequests) + " earlier requests omitted)"}, requests[len(requests)-fallbackMaxRequests:]...)
	}
	if len(callLines) > fallbackMaxCalls {
		callLines = append([]string{"- (" + strconv.Itoa(len(callLines)-fallbackMaxCalls) + " earlier calls omitted)"}, callLines[len(callLines)-fallbackMaxCalls:]...)
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
	section("Relevant Files", files, "(none named in tool calls)")
	section("Tool Calls", callLines, "(none)")
	section("Errors Seen", errs, "(none detected)")
	next := []string{"- Continue from the most recent turns below."}
	if p.activeRequest >= 0 {
		next = []string{"- Active request (the user's newest message, verbatim): " + strconv.Quote(strings.TrimSpace(contentText(msgs[p.activeRequest].content)))}
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
	args := c.args
	if args.Type == gjson.String { // OpenAI: arguments are a JSON document in a string
		args = gjson.Parse(args.Str)
	}
	var out []string
	for _, k := range pathArgNames {
		if v := args.Get(k); v.Type == gjson.String && v.Str != "" {
			out = append(out, v.Str)
		}
	}
	for _, k := range []string{"command", "cmd"} {
		if v := args.Get(k); v.Type == gjson.String {
			for _, w := range strings.Fields(v.Str) {
				if looksLikePath(w) {
					out = append(out, w)
				}
			}
		}
	}
	return out
}

// looksLikePath accepts words like src/app.py, ./x, /etc/hosts or main.go, and
// rejects URLs, flags and shell syntax.
func looksLikePath(w string) bool {
	w = strings.Trim(w, "\"'`;,()")
	if len(w) < 3 || len(w) > 200 || strings.HasPrefix(w, "-") || strings.Contains(w, "://") ||
		strings.ContainsAny(w, "|&<>$*=") {
		return false
	}
	if strings.Contains(w, "/") {
		return true
	}
	dot := strings.LastIndexByte(w, '.')
	if dot <= 0 || dot >= len(w)-1 || len(w)-dot > 6 {
		return false
	}
	for _, r := range w[dot+1:] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// errorLines returns the lines of a tool output that carry an error marker. It
// checks the raw JSON first, so outputs without any marker are never decoded.
func errorLines(m *message) []string {
	raw := m.content.Raw
	hit := false
	for _, mk := range errorMarkers {
		if strings.Contains(raw, mk) {
			hit = true
			break
		}
	}
	if !hit {
		return nil
	}
	var out []string
	for _, line := range strings.Split(contentText(m.content), "\n") {
		line = strings.TrimSpace(line)
		for _, mk := range errorMarkers {
			if strings.Contains(line, mk) {
				out = append(out, truncateRunes(line, fallbackErrorChars))
				break
			}
		}
	}
	return out
}
