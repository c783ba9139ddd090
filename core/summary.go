package core

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
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
// message's own text (docs/DESIGN.md §8 phase 4).
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
		return summaryBody(msgs[i].text()), i
	}
	return "", -1
}

// summaryBody is the summary a summary message's text carries: without the prefix
// naming the compacted range, the tags, a lossless engine's closing lines after them,
// and the message's own text when the summary was merged into one.
func summaryBody(text string) string {
	text = strings.TrimPrefix(strings.TrimLeft(text, " \n"), SummaryPrefix)
	for _, d := range []string{SummaryDelimiter, assistantDelimiter} {
		if cut := strings.Index(text, d); cut >= 0 {
			text = text[:cut]
		}
	}
	if cut := strings.Index(text, summaryOpenTag); cut >= 0 {
		text = text[cut+len(summaryOpenTag):]
		if end := strings.LastIndex(text, summaryCloseTag); end >= 0 {
			text = text[:end]
		}
	}
	return strings.TrimSpace(text)
}

// summaryAsk is the summary request compact.begin answers with, its user prompt
// in the escaped form of the JSON string it goes in (jsonraw.AppendStringBody's form, no
// quotes): the prompt is mostly excerpts of the request's own strings, copied in
// their escaped form rather than decoded and escaped again.
type summaryAsk struct {
	targetTokens, maxTokens int
	iterative               bool
	middle                  IndexRange
	// writePrompt appends the escaped prompt to dst, or prompt holds it: written
	// straight into the response, the prompt (a large part of it) is neither
	// buffered nor copied.
	writePrompt func(dst []byte) []byte
	prompt      []byte
	// extra is text added after the prompt: the config's instructions, the focus,
	// and a session's memory context (session.run's compress).
	extra string
}

// escapedText is text being written in jsonraw.AppendStringBody's form.
type escapedText struct{ b []byte }

// text appends s.
func (e *escapedText) text(s string) { e.b = jsonraw.AppendStringBody(e.b, s) }

// raw appends what body, the inside of a raw JSON string, decodes to.
func (e *escapedText) raw(body string) { e.b = jsonraw.AppendRawBody(e.b, body) }

// buildSummaryRequest writes the summarizer's prompt for the middle of p: the
// template, the previous summary to update if there is one, and the serialized
// turns, bounded to fit the summarizer's window.
func buildSummaryRequest(msgs []message, p plan, cc CompressionConfig) summaryAsk {
	prev, prevIdx := previousSummary(msgs, p.headEnd, p.tailStart)
	return buildSummaryAsk(msgs, p, cc, promptSpan{from: p.headEnd, to: p.tailStart, n: 1}, prev, prevIdx)
}

// promptSpan is the turns a summary prompt covers: the whole middle (n 1), or
// chunk k of n (summary_chunks.go).
type promptSpan struct{ from, to, k, n int }

// last reports whether the span ends the middle.
func (s promptSpan) last() bool { return s.k == s.n-1 }

// buildSummaryAsk writes the prompt of span: prev is the summary it updates (the
// previous compaction's, or the chunk before's), at index prevIdx of the messages
// (-1: not one of them), left out of the turns.
func buildSummaryAsk(msgs []message, p plan, cc CompressionConfig, span promptSpan, prev string, prevIdx int) summaryAsk {
	window := summarizerWindow(p, cc)
	req := summaryAsk{iterative: prev != "", middle: IndexRange{From: span.from, To: span.to},
		extra: summaryGuidance(cc.Instructions, p.focus)}
	req.targetTokens, req.maxTokens = summaryAskSize(p, cc)
	// Characters the serialized turns may use: the window less the answer, the
	// template and the previous summary, at ~4 characters per token.
	budget := (window-req.maxTokens-summaryReserve)*roughCharsPerToken - len(prev)
	req.writePrompt = func(dst []byte) []byte {
		return appendSummaryPrompt(dst, msgs, p, span, prev, prevIdx, budget, req.targetTokens, req.maxTokens)
	}
	return req
}

// summarizerWindow is the summarizer model's window: summary_context_length, or the
// main model's.
func summarizerWindow(p plan, cc CompressionConfig) int {
	if cc.SummaryContextLength > 0 {
		return cc.SummaryContextLength
	}
	return p.thr.ContextLength
}

// summaryAskSize is the target and max_tokens asked of a host's summary of p. A
// summarizer with a small window gets a proportionate ask: at most a quarter of
// its window for the answer's target.
func summaryAskSize(p plan, cc CompressionConfig) (target, maxTokens int) {
	target = p.summaryTarget
	if cap := summarizerWindow(p, cc) / 4; target > cap {
		target = max(cap, 1)
	}
	return target, int(float64(target) * summaryOutFactor)
}

// appendSummaryPrompt appends the escaped prompt of buildSummaryAsk to dst.
func appendSummaryPrompt(dst []byte, msgs []message, p plan, span promptSpan, prev string, prevIdx, budget, targetTokens, maxTokens int) []byte {
	e := escapedText{b: dst}
	if span.k > 0 {
		e.text("The turns being summarized are too many for one request, so they come in " + strconv.Itoa(span.n) + " parts. Below is the summary of the turns before part " + strconv.Itoa(span.k+1) + ", then the turns of part " + strconv.Itoa(span.k+1) + ". Update the summary: keep what is still true, move items from In Progress to Done when the turns show they were finished, add the new progress, decisions, files and errors, and drop what is obsolete. Do not start over.\n\n<previous_summary>\n")
		e.text(prev)
		e.text("\n</previous_summary>\n\n")
	} else if prev != "" {
		e.text("Below is the summary written at the previous compaction, then the conversation turns that happened after it (or that were not covered by it). Update the summary: keep what is still true, move items from In Progress to Done when the turns show they were finished, add the new progress, decisions, files and errors, and drop what is obsolete. Do not start over.\n\n<previous_summary>\n")
		e.text(prev)
		e.text("\n</previous_summary>\n\n")
	} else {
		e.text("Summarize the conversation turns below.\n\n")
	}
	e.text("<turns>\n")
	serializeTurns(&e, msgs, p.calls, span.from, span.to, prevIdx, budget)
	e.text("</turns>\n\nWrite the summary in Markdown with exactly these sections, in this order:\n")
	for _, s := range summarySections {
		e.text("## " + s + "\n")
	}
	if p.activeRequest >= 0 && span.last() {
		e.text("\nThe user's newest request (turn #" + strconv.Itoa(p.activeRequest) + ") is still open. It will be quoted after your summary as written: do not repeat it; under Next Steps, say what remains to do for it.\n")
	}
	e.text("\nAim for about " + formatCount(targetTokens) + " tokens (at most " + formatCount(maxTokens) + "). Output only the summary.")
	return e.b
}

// serializeTurns writes msgs[from:to] (skipping index skip) to e as numbered turns,
// truncating long bodies head+tail; if the result would exceed budget characters,
// the per-body cap halves until it fits or reaches minBodyChars, and then the oldest
// turns are left out. Sizes are worked out from character counts first, so the
// turns are rendered once.
func serializeTurns(e *escapedText, msgs []message, calls callIndex, from, to, skip, budget int) {
	ts := sizeTurns(msgs, from, to, skip)
	turnSize, sizes := ts.turn, ts.sizes
	total := func(h, t int) int {
		sum := 0
		for k := range sizes {
			sum += turnSize(k, h, t)
		}
		return sum
	}
	texts := ts.texts
	headC, tailC := bodyHeadChars, bodyTailChars
	for total(headC, tailC) > budget && headC+tailC > minBodyChars {
		headC, tailC = headC/2, tailC/2
	}
	// Leave out the oldest turns that still do not fit.
	first, kept := from, total(headC, tailC)
	for budget > 0 && kept > budget && first < to-1 {
		kept -= turnSize(first-from, headC, tailC)
		first++
	}
	if first > from {
		e.text("…[turns #" + strconv.Itoa(from) + "–#" + strconv.Itoa(first-1) + " omitted to fit the summarizer's window]…\n\n")
	}
	renderTurns(e, msgs, calls, texts[first-from:], first, to, skip, headC, tailC, kept)
}

// turnSizes is the size in characters of each turn of msgs[from:to] as
// serializeTurns writes it, with bodies cut to a head and a tail.
type turnSizes struct {
	from, skip int
	sizes      []turnSize
	argChars   [][]int
	texts      []string // the text of array contents, rendered later
	pinned     []bool   // kept verbatim, not summarized (pins.go)
}

type turnSize struct{ content, header int }

// sizeTurns measures msgs[from:to] (skip, a previous summary, counts nothing).
func sizeTurns(msgs []message, from, to, skip int) turnSizes {
	ts := turnSizes{from: from, skip: skip, sizes: make([]turnSize, to-from), argChars: make([][]int, to-from), texts: make([]string, to-from),
		pinned: make([]bool, to-from)}
	for i := from; i < to; i++ {
		m := &msgs[i]
		ts.pinned[i-from] = m.pinned
		sz := turnSize{header: turnHeaderEstimate}
		if len(m.contentRaw) > 0 && m.contentRaw[0] == '"' {
			sz.content = m.contentChars()
		} else if len(m.contentRaw) > 0 && m.contentRaw[0] == '[' {
			ts.texts[i-from] = m.text()
			sz.content = utf8.RuneCountInString(ts.texts[i-from])
		}
		for k := range m.calls {
			c := &m.calls[k]
			n := len(c.args.Raw)
			if c.args.Type == gjson.String {
				n = c.argsChars()
			}
			ts.argChars[i-from] = append(ts.argChars[i-from], n)
		}
		ts.sizes[i-from] = sz
	}
	return ts
}

// turn is the size of turn from+k with bodies cut to h + t characters.
func (ts turnSizes) turn(k, h, t int) int {
	if ts.from+k == ts.skip || ts.pinned[k] {
		return 0
	}
	clip := func(n, h, t int) int {
		if n <= h+t+40 {
			return n
		}
		return h + t + 40
	}
	n := ts.sizes[k].header + clip(ts.sizes[k].content, h, t)
	for _, a := range ts.argChars[k] {
		n += turnHeaderEstimate/2 + clip(a, h/2, t/2)
	}
	return n
}

// turnHeaderEstimate is the rough size of a turn's header line ("[#12 tool result
// of read_file(path=...)]") when sizing the serialization.
const turnHeaderEstimate = 60

// renderTurns writes msgs[from:to] (but skip) to e as turns with bodies cut to
// headC+tailC characters; texts[k] is the text of msgs[from+k] when its content is
// an array, sizeHint the expected size in characters.
func renderTurns(e *escapedText, msgs []message, calls callIndex, texts []string, from, to, skip, headC, tailC, sizeHint int) {
	e.b = slices.Grow(e.b, sizeHint+sizeHint/4) // characters, and a margin for escapes
	for i := from; i < to; i++ {
		if i == skip || msgs[i].pinned || msgs[i].opaque && msgs[i].contentRaw == "" { // an opaque item without text (encrypted reasoning) says nothing; a pinned one is kept
			continue
		}
		// Written piece by piece, not concatenated first: every piece ends in ASCII,
		// so escaping the pieces writes what escaping the whole would.
		m := &msgs[i]
		e.text("[#")
		e.b = strconv.AppendInt(e.b, int64(i), 10)
		e.text(" ")
		e.text(m.role)
		for k, id := range m.answers() {
			if k == 0 {
				e.text(" result of ")
			} else {
				e.text(", ")
			}
			if c, ok := calls[id]; ok {
				e.text(describeCall(c))
			} else {
				e.text("an unknown call")
			}
		}
		e.text("]\n")
		if len(m.contentRaw) > 0 && m.contentRaw[0] == '"' {
			if len(m.contentRaw) > 2 {
				excerptJSONTo(e, m.contentRaw, m.contentChars(), headC, tailC)
				e.text("\n")
			}
		} else if text := truncateMiddle(texts[i-from], headC, tailC); text != "" {
			e.text(text)
			e.text("\n")
		}
		for k := range m.calls {
			c := &m.calls[k]
			e.text("→ call ")
			e.text(c.name)
			e.text(" ")
			if c.args.Type == gjson.String {
				excerptJSONTo(e, c.args.Raw, c.argsChars(), headC/2, tailC/2)
			} else { // an Anthropic input object, in the same bytes whatever encoder sent it
				text := canonicalJSON(make([]byte, 0, len(c.args.Raw)), c.args)
				e.text(truncateMiddle(jsonraw.ViewString(text), headC/2, tailC/2)) // text is not written again
			}
			e.text("\n")
		}
		e.text("\n")
	}
}

// excerptJSONTo writes to e excerptJSONChars of the raw JSON string raw, which
// holds n characters: its text, or its first headC and last tailC characters
// around a note of how many were left out, copied without decoding.
func excerptJSONTo(e *escapedText, raw string, n, headC, tailC int) {
	if n <= headC+tailC+40 {
		e.raw(raw[1 : len(raw)-1])
		return
	}
	_, head := jsonraw.LocateChar(raw, headC)
	tail, ok := jsonraw.LocateTail(raw, tailC)
	if !ok {
		_, tail = jsonraw.LocateChar(raw, n-tailC)
	}
	e.raw(raw[1:head])
	e.text("\n…[")
	e.text(formatCount(n - headC - tailC))
	e.text(" characters omitted]…\n")
	e.raw(raw[tail : len(raw)-1])
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

// appendPending appends the compact.begin result that asks for a summary: the bytes
// marshal(CompactResult{State: state, SummaryRequest: ...}) writes for ask (a test
// holds the two equal), with the system prompt and ask's escaped user prompt.
func appendPending(dst []byte, state string, ask *summaryAsk) []byte {
	dst = slices.Grow(dst, len(ask.prompt)+len(summarizerSystemPrompt)+2*len(state)+256) // writePrompt grows it by what it writes
	dst = append(dst, `{"done":false`...)
	if state != "" { // omitempty
		dst = append(dst, `,"state":`...)
		dst = jsonraw.AppendString(dst, state)
	}
	dst = append(dst, `,"summary_request":`...)
	return append(appendSummaryRequest(dst, ask), '}')
}

// appendSummaryRequest appends the SummaryRequest object of ask.
func appendSummaryRequest(dst []byte, ask *summaryAsk) []byte {
	dst = append(dst, `{"messages":[{"role":"system","content":`...)
	dst = jsonraw.AppendString(dst, summarizerSystemPrompt)
	dst = append(dst, `},{"role":"user","content":"`...)
	if ask.writePrompt != nil {
		dst = ask.writePrompt(dst)
	} else {
		dst = append(dst, ask.prompt...)
	}
	dst = jsonraw.AppendStringBody(dst, ask.extra)
	dst = append(dst, `"}],"target_tokens":`...)
	dst = strconv.AppendInt(dst, int64(ask.targetTokens), 10)
	dst = append(dst, `,"max_tokens":`...)
	dst = strconv.AppendInt(dst, int64(ask.maxTokens), 10)
	dst = append(dst, `,"iterative":`...)
	dst = strconv.AppendBool(dst, ask.iterative)
	dst = append(dst, `,"middle":{"from":`...)
	dst = strconv.AppendInt(dst, int64(ask.middle.From), 10)
	dst = append(dst, `,"to":`...)
	dst = strconv.AppendInt(dst, int64(ask.middle.To), 10)
	return append(dst, "}}"...)
}
