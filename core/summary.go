package core

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Serialization bounds for the summarizer's view of the middle.
const (
	bodyHeadChars    = 2_000 // kept from the start of a long body
	bodyTailChars    = 800   // kept from the end of a long body
	minBodyChars     = 240   // the per-body cap never shrinks below this
	summaryReserve   = 1_500 // tokens reserved for the template and instructions
	summaryOutFactor = 1.5   // max_tokens = target * 1.5: room to finish a section
)

// SummaryDelimiter separates a summary merged into a user message from that
// message's own text (DESIGN §8 phase 4).
const SummaryDelimiter = "\n\n--- END OF CONTEXT SUMMARY; THE USER'S MESSAGE FOLLOWS ---\n\n"

// summarySections is the structured template every summary follows.
var summarySections = []string{
	"Goal", "Constraints & Preferences", "Progress (Done / In Progress / Blocked)",
	"Key Decisions", "Relevant Files", "Next Steps", "Critical Context",
}

// SummaryRequest is what the host's summarizer gets: chat messages ready to send to
// an LLM, and the size asked of the answer.
type SummaryRequest struct {
	Messages     []ChatMessage `json:"messages"`
	TargetTokens int           `json:"target_tokens"`
	MaxTokens    int           `json:"max_tokens"`
	// Iterative is true when a previous summary is being updated, not replaced.
	Iterative bool `json:"iterative"`
	// Middle is the input index range [from, to) being summarized.
	Middle IndexRange `json:"middle"`
}

// ChatMessage is a plain role/content message.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// IndexRange is a half-open range [From, To) of input message indices.
type IndexRange struct {
	From int `json:"from"`
	To   int `json:"to"`
}

const summarizerSystemPrompt = `You summarize the earlier part of a long conversation between a user and an AI agent that uses tools, so the agent can continue the work without those turns. Write for the agent, not for the user. Be concrete: keep file paths, function names, commands, error messages, numbers and decisions exactly as they appear. Never invent anything that is not in the conversation. Do not address the user and do not answer any request yourself: only summarize.`

// previousSummary returns the text of the newest earlier summary in msgs[from:to]
// (without the prefix, and without the user text it was merged into), and its index.
func previousSummary(msgs []message, from, to int) (string, int) {
	for i := to - 1; i >= from; i-- {
		if !msgs[i].isSummary() {
			continue
		}
		text := strings.TrimLeft(msgs[i].text(), " \n")
		text = strings.TrimPrefix(text, SummaryPrefix)
		if cut := strings.Index(text, SummaryDelimiter); cut >= 0 {
			text = text[:cut]
		}
		if cut := strings.Index(text, summaryOpenTag); cut >= 0 {
			text = text[cut+len(summaryOpenTag):]
			if end := strings.LastIndex(text, summaryCloseTag); end >= 0 {
				text = text[:end]
			}
		}
		return strings.TrimSpace(text), i
	}
	return "", -1
}

// buildSummaryRequest writes the summarizer's prompt for the middle of p: the
// template, the previous summary to update if there is one, and the serialized
// turns, bounded to fit the summarizer's window.
func buildSummaryRequest(msgs []message, p plan, cc CompressionConfig) SummaryRequest {
	prev, prevIdx := previousSummary(msgs, p.headEnd, p.tailStart)
	target := p.summaryTarget
	req := SummaryRequest{
		TargetTokens: target,
		MaxTokens:    int(float64(target) * summaryOutFactor),
		Iterative:    prev != "",
		Middle:       IndexRange{From: p.headEnd, To: p.tailStart},
	}

	window := cc.SummaryContextLength
	if window <= 0 {
		window = p.thr.ContextLength
	}
	// A summarizer with a small window gets a proportionate ask: at most a quarter
	// of its window for the answer's target.
	if cap := window / 4; req.TargetTokens > cap {
		req.TargetTokens = max(cap, 1)
		req.MaxTokens = int(float64(req.TargetTokens) * summaryOutFactor)
	}
	// Characters the serialized turns may use: the window less the answer, the
	// template and the previous summary, at ~4 characters per token.
	budget := (window-req.MaxTokens-summaryReserve)*roughCharsPerToken - len(prev)
	turns := serializeTurns(msgs, p.headEnd, p.tailStart, prevIdx, budget)

	var b strings.Builder
	if prev != "" {
		b.WriteString("Below is the summary written at the previous compaction, then the conversation turns that happened after it (or that were not covered by it). Update the summary: keep what is still true, move items from In Progress to Done when the turns show they were finished, add the new progress, decisions, files and errors, and drop what is obsolete. Do not start over.\n\n<previous_summary>\n")
		b.WriteString(prev)
		b.WriteString("\n</previous_summary>\n\n")
	} else {
		b.WriteString("Summarize the conversation turns below.\n\n")
	}
	b.WriteString("<turns>\n")
	b.WriteString(turns)
	b.WriteString("</turns>\n\nWrite the summary in Markdown with exactly these sections, in this order:\n")
	for _, s := range summarySections {
		b.WriteString("## " + s + "\n")
	}
	if p.activeRequest >= 0 {
		b.WriteString("\nThe user's newest request (turn #" + strconv.Itoa(p.activeRequest) + ") is still open: state it verbatim under Next Steps as the active request.\n")
	}
	b.WriteString("\nAim for about " + formatCount(req.TargetTokens) + " tokens (at most " + formatCount(req.MaxTokens) + "). Output only the summary.")

	req.Messages = []ChatMessage{{Role: "system", Content: summarizerSystemPrompt}, {Role: "user", Content: b.String()}}
	return req
}

// serializeTurns renders msgs[from:to] (skipping index skip) as numbered turns,
// truncating long bodies head+tail; if the result exceeds budget characters, the
// per-body cap halves until it fits or reaches minBodyChars, and then the oldest
// turns are cut.
func serializeTurns(msgs []message, from, to, skip, budget int) string {
	headC, tailC := bodyHeadChars, bodyTailChars
	for {
		s := renderTurns(msgs, from, to, skip, headC, tailC)
		if len(s) <= budget || headC+tailC <= minBodyChars {
			if len(s) > budget && budget > 0 {
				cut := len(s) - budget
				for cut < len(s) && !utf8.RuneStart(s[cut]) {
					cut++
				}
				s = "…[" + formatCount(cut) + " characters of the oldest turns omitted to fit the summarizer's window]…\n" + s[cut:]
			}
			return s
		}
		headC, tailC = headC/2, tailC/2
	}
}

func renderTurns(msgs []message, from, to, skip, headC, tailC int) string {
	calls := indexCalls(msgs)
	var b strings.Builder
	for i := from; i < to; i++ {
		if i == skip {
			continue
		}
		m := &msgs[i]
		b.WriteString("[#" + strconv.Itoa(i) + " " + m.role)
		if m.isToolResult() {
			b.WriteString(" result of ")
			if c, ok := calls[m.resultFor]; ok {
				b.WriteString(describeCall(c))
			} else {
				b.WriteString("an unknown call")
			}
		}
		b.WriteString("]\n")
		if text := m.text(); text != "" {
			b.WriteString(truncateMiddle(text, headC, tailC))
			b.WriteByte('\n')
		}
		for _, c := range m.calls {
			b.WriteString("→ call " + c.name + " ")
			args := c.argsText()
			b.WriteString(truncateMiddle(args, headC/2, tailC/2))
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// truncateMiddle keeps the first headC and last tailC characters of s and says how
// many were left out between them.
func truncateMiddle(s string, headC, tailC int) string {
	if len(s) <= headC+tailC+40 { // bytes bound runes: short enough either way
		return s
	}
	n := utf8.RuneCountInString(s)
	if n <= headC+tailC+40 {
		return s
	}
	head := 0
	for k := 0; k < headC; k++ {
		_, size := utf8.DecodeRuneInString(s[head:])
		head += size
	}
	tail := len(s)
	for k := 0; k < tailC; k++ {
		_, size := utf8.DecodeLastRuneInString(s[:tail])
		tail -= size
	}
	return s[:head] + "\n…[" + formatCount(n-headC-tailC) + " characters omitted]…\n" + s[tail:]
}
