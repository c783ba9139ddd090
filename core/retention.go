package core

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Anchor is something of the summarized turns a summary must not lose: a file
// path named in a tool call's arguments, a user's request, or the last error seen.
type Anchor struct {
	// Kind is file, request or error.
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

// Anchor kinds.
const (
	AnchorFile    = "file"
	AnchorRequest = "request"
	AnchorError   = "error"
)

// Bounds of the anchor check.
const (
	anchorRequestChars = 300 // a request is quoted up to this many characters
	anchorMatchChars   = 100 // a request counts as kept when its first ones are in the summary
	anchorMaxFiles     = 40
	anchorMaxRequests  = 12
	// anchorShare: the anchors section takes at most this share of the summary
	// target (in characters), and at least anchorMinChars.
	anchorShare    = 0.5
	anchorMinChars = 800
)

// AnchorsTitle heads the section the core appends to a summary: the anchors a
// host's summary left out, and the facts index.
const AnchorsTitle = "## Anchors (added by ctxcompact: named in the summarized turns, missing from the summary)"

// summaryAnchors returns the anchors of msgs[p.headEnd:p.tailStart], newest
// first within each kind: the paths its tool calls name, the user's requests (the
// active request aside: it has its own section), the anchors a previous summary
// carried, and the last error line of its tool outputs.
func summaryAnchors(msgs []message, p plan) []Anchor {
	from, to := p.headEnd, p.tailStart
	var files, requests []Anchor
	lastError := ""
	seen := map[string]bool{}
	add := func(list *[]Anchor, kind, v string, limit int) {
		if v == "" || seen[kind+"\x00"+v] || len(*list) >= limit {
			return
		}
		seen[kind+"\x00"+v] = true
		*list = append(*list, Anchor{kind, v})
	}
	prevText, prevIdx := previousSummary(msgs, from, to)
	for i := to - 1; i >= from; i-- {
		m := &msgs[i]
		switch {
		case m.isRealUser() && i != p.activeRequest:
			add(&requests, AnchorRequest, truncateRunes(collapseSpace(m.text()), anchorRequestChars), anchorMaxRequests)
		case (m.isSummary() || i == prevIdx) && m.role == "user":
			add(&requests, AnchorRequest, truncateRunes(collapseSpace(mergedUserText(m)), anchorRequestChars), anchorMaxRequests)
		case m.role == "assistant": // a summary merged into it aside, its calls count
			for k := len(m.calls) - 1; k >= 0; k-- {
				for _, a := range m.calls[k].stringArgs(pathArgNames) {
					if v := strings.TrimSpace(a.value()); v != "" && len(v) <= 300 {
						add(&files, AnchorFile, v, anchorMaxFiles)
					}
				}
			}
		case m.isToolResult() && lastError == "":
			if lines := errorLines(m); len(lines) > 0 {
				lastError = lines[len(lines)-1]
			}
		}
	}
	// What a previous summary carried is an anchor of this range too.
	prev := parseSummarySections(prevText)
	for k := len(prev.requests) - 1; k >= 0; k-- {
		add(&requests, AnchorRequest, truncateRunes(lineKey(prev.requests[k]), anchorRequestChars), anchorMaxRequests)
	}
	for k := len(prev.files) - 1; k >= 0; k-- {
		if f := strings.TrimPrefix(prev.files[k], "- "); looksLikePath(f) {
			add(&files, AnchorFile, f, anchorMaxFiles)
		}
	}
	out := requests
	if lastError != "" {
		out = append(out, Anchor{AnchorError, lastError})
	}
	return append(out, files...)
}

// missingAnchors returns the anchors summary leaves out, within limit characters
// of section lines (requests first, then the error, then files; newest first).
func missingAnchors(summary string, anchors []Anchor, limit int) []Anchor {
	flat := collapseSpace(summary)
	var out []Anchor
	used := len(AnchorsTitle) + 1
	for _, a := range anchors {
		var kept bool
		switch a.Kind {
		case AnchorFile:
			kept = containsPath(summary, a.Value)
		default:
			kept = strings.Contains(flat, truncateRunesPlain(collapseSpace(a.Value), anchorMatchChars))
		}
		if kept {
			continue
		}
		line := anchorLine(a)
		if used+len(line)+1 > limit {
			continue // a shorter one may still fit
		}
		used += len(line) + 1
		out = append(out, a)
	}
	return out
}

func anchorLine(a Anchor) string { return "- " + a.Kind + ": " + a.Value }

// truncateRunesPlain cuts s to at most n runes, without a mark.
func truncateRunesPlain(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	k := 0
	for i := range s {
		if k == n {
			return s[:i]
		}
		k++
	}
	return s
}

// textTokens counts s as the content of a message, without the message overhead.
func textTokens(tc tokenCounter, s string) int {
	return max(0, tc.message(gjson.Parse(`{"content":`+string(mustMarshal(s))+`}`))-messageOverheadTokens)
}

// cutSummary cuts a host summary longer than maxTokens at a section boundary (the
// last "#" heading that keeps it within maxTokens), or, when its first section is
// already too long, at a line boundary. It reports whether it cut.
func cutSummary(tc tokenCounter, summary string, maxTokens int) (string, bool) {
	t := textTokens(tc, summary)
	if maxTokens <= 0 || t <= maxTokens {
		return summary, false
	}
	allowed := int(int64(len(summary)) * int64(maxTokens) / int64(t)) // bytes, at the summary's own density
	allowed -= len(summaryCutNote)
	for allowed > 0 && !utf8.RuneStart(summary[allowed]) {
		allowed--
	}
	if allowed <= 0 {
		return strings.TrimSpace(summaryCutNote), true
	}
	head := summary[:allowed]
	cut := strings.LastIndex(head, "\n#")
	if cut <= 0 {
		cut = strings.LastIndexByte(head, '\n')
	}
	if cut <= 0 {
		cut = len(head)
	}
	return strings.TrimRight(summary[:cut], " \n") + summaryCutNote, true
}

// summaryCutNote ends a host summary cut to its max_tokens.
const summaryCutNote = "\n\n…[the rest of this summary was cut: it was longer than its max_tokens]…"

// activeRequestSection quotes the active request (the user's newest message,
// which did not fit in the tail) once, capped to the room left under the
// threshold: its head and tail kept, the cut marked. The whole message is archived
// as summarized. others is the expected size of the rest of the compaction (head,
// tail, note), size measures a summary body as the summary message costs. It
// returns "" when summary already quotes the message whole.
func activeRequestSection(msgs []message, p plan, summary string, others int, size func(string) int) string {
	m := &msgs[p.activeRequest]
	text := strings.TrimSpace(m.text())
	if text == "" || strings.Contains(collapseSpace(summary), collapseSpace(text)) {
		return ""
	}
	title := "## Active Request (the user's newest message, as written)\n"
	// Leave the room margin free for the turns that follow, so the next compaction
	// does not come at the next turn.
	limit := p.thr.ThresholdTokens - p.roomMargin - others
	chars := utf8.RuneCountInString(text)
	perToken := float64(chars) / float64(max(m.tokens, 1))
	capChars := chars
	for range 4 { // the cap is measured, not only estimated: a few rounds settle it
		sec := title + text
		if capChars < chars {
			note := "\n…[" + formatCount(chars-capChars) + " characters cut to fit the window; the whole message is archived as input message #" + strconv.Itoa(p.activeRequest) + "]…\n"
			sec = title + truncateMiddleWith(text, capChars*2/3, capChars/3, note)
		}
		over := size(summary+"\n\n"+sec) - limit
		if over <= 0 || capChars <= fallbackRequestChars {
			return sec
		}
		capChars = max(fallbackRequestChars, capChars-int(float64(over)*perToken*1.05)-1)
	}
	return title + truncateMiddleWith(text, capChars*2/3, capChars/3, "\n…["+formatCount(chars-capChars)+" characters cut to fit the window; the whole message is archived as input message #"+strconv.Itoa(p.activeRequest)+"]…\n")
}

// truncateMiddleWith keeps the first headC and last tailC runes of s around note.
func truncateMiddleWith(s string, headC, tailC int, note string) string {
	head, tail := 0, len(s)
	for k := 0; k < headC && head < len(s); k++ {
		_, size := utf8.DecodeRuneInString(s[head:])
		head += size
	}
	for k := 0; k < tailC && tail > head; k++ {
		_, size := utf8.DecodeLastRuneInString(s[:tail])
		tail -= size
	}
	return s[:head] + note + s[tail:]
}

// checkHostSummary bounds a host's summary to the max_tokens it was asked for (cut
// at a section boundary) and reports the anchors of the summarized turns it left
// out (at most anchorShare of the target), which withAnchors appends.
func (r *compactRequest) checkHostSummary(p plan, summary string, rep *Report) string {
	_, maxTokens := summaryAskSize(p, r.cfg.Compression)
	summary, rep.SummaryTruncated = cutSummary(r.tc, summary, maxTokens)
	limit := max(anchorMinChars, int(float64(p.summaryTarget*roughCharsPerToken)*anchorShare))
	if missing := missingAnchors(summary, summaryAnchors(r.msgs, p), limit); len(missing) > 0 {
		rep.AnchorsAdded = missing
	}
	return summary
}

// withAnchors appends to summary the one section the core adds to every summary:
// the anchors a host's summary left out (rep.AnchorsAdded), then the facts index
// of the compaction (facts.go), when the tail mode keeps one.
func (r *compactRequest) withAnchors(p plan, summary string, rep *Report) string {
	lines := make([]string, 0, len(rep.AnchorsAdded))
	for _, a := range rep.AnchorsAdded {
		lines = append(lines, anchorLine(a))
	}
	if r.cfg.Compression.factsIndex() {
		lines = append(lines, factsLines(r.msgs, p, summary+"\n"+strings.Join(lines, "\n"), factsBudgetChars(p.thr))...)
	}
	if len(lines) == 0 {
		return summary
	}
	return summary + "\n\n" + AnchorsTitle + "\n" + strings.Join(lines, "\n")
}
