package core

import (
	"strconv"
	"strings"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// SystemNote is appended once to the system prompt of a compacted conversation.
const SystemNote = "\n\n[Note: earlier turns of this conversation were compacted into a summary to save context space. The summary follows the first exchange; the turns after it are verbatim.]"

// systemNoteTokens is the rough cost of SystemNote, counted in plans before assembly.
const systemNoteTokens = 40

const (
	summaryOpenTag  = "<summary>\n"
	summaryCloseTag = "\n</summary>"
)

// summaryText wraps a summary body in the message text the compressor writes.
func summaryText(body string, r IndexRange) string {
	return SummaryPrefix + " Earlier turns of this conversation (messages " + strconv.Itoa(r.From) + "–" +
		strconv.Itoa(r.To-1) + " of the original) were compacted to save context space. The summary below replaces them; the turns after it are verbatim.\n\n" +
		summaryOpenTag + strings.TrimSpace(body) + summaryCloseTag
}

// withClosing appends closing (when there is one) to a summary message's text.
func withClosing(text, closing string) string {
	if closing == "" {
		return text
	}
	return text + "\n\n" + closing
}

// withSystemNote returns m with SystemNote appended to its content, or false when
// the note is already there.
func withSystemNote(m *message) (string, bool) {
	if strings.Contains(m.text(), strings.TrimSpace(SystemNote)) {
		return "", false
	}
	content := m.content()
	var out string
	var err error
	switch {
	case content.Type == gjson.String:
		// The note goes in before the closing quote: the content keeps the caller's
		// bytes, and a long system prompt is not decoded and escaped again.
		if at, ok := jsonraw.LocatePart(m.raw, m.contentRaw); ok {
			end := at + len(m.contentRaw) - 1
			b := make([]byte, 0, len(m.raw)+len(SystemNote)+8)
			b = jsonraw.AppendStringBody(append(b, m.raw[:end]...), SystemNote)
			return jsonraw.ViewString(append(b, m.raw[end:]...)), true
		}
		out, err = sjson.Set(m.raw, "content", content.Str+SystemNote)
	case content.IsArray():
		out, err = sjson.Set(m.raw, "content.-1", map[string]string{"type": "text", "text": strings.TrimPrefix(SystemNote, "\n\n")})
	default:
		out, err = sjson.Set(m.raw, "content", strings.TrimPrefix(SystemNote, "\n\n"))
	}
	return out, err == nil
}

// assembly is an assembled compaction before sanitizing.
type assembly struct {
	out         []outMsg
	archived    []archivedMsg
	summaryRole string // "user", "assistant" or "merged"
	mergedInto  int    // input index of the tail message the summary was merged into, or -1
	noteAdded   bool
}

// archivedMsg is an input message not returned unchanged, with why.
type archivedMsg struct {
	index  int
	reason ArchiveReason
	raw    string
}

// ArchiveReason says why an input message was not returned unchanged.
type ArchiveReason string

// Archive reasons.
const (
	ArchivedSummarized    ArchiveReason = "summarized"
	ArchivedPruned        ArchiveReason = "pruned"
	ArchivedMerged        ArchiveReason = "merged"
	ArchivedOrphanRemoved ArchiveReason = "orphan_removed"
	// ArchivedSystemNote: the system prompt as it was before the compaction note
	// was appended to it.
	ArchivedSystemNote ArchiveReason = "system_note"
	// ArchivedRepaired: an Anthropic message whose tool_result blocks sanitizing
	// fixed.
	ArchivedRepaired ArchiveReason = "repaired"
)

// assemble builds head (with the system note once), one summary message, and the
// tail (docs/DESIGN.md §8 phase 4). The summary takes a role that avoids two consecutive
// messages of the same role; when neither user nor assistant fits, it is merged
// into the first tail message between clear delimiters.
//
// closing, when not empty, ends the summary message's text after the summary
// (the lines naming the archived range of a lossless compaction).
func assemble(f messageFormat, msgs []message, p plan, summary, closing string) assembly {
	a := assembly{mergedInto: -1}
	noted := false
	for i := 0; i < p.headEnd; i++ {
		if !noted && msgs[i].isSystem() {
			noted = true
			if raw, ok := f.withSystemNote(&msgs[i]); ok {
				a.out = append(a.out, newMsg(f, i, raw))
				a.archived = append(a.archived, archivedMsg{index: i, reason: ArchivedSystemNote, raw: msgs[i].raw})
				a.noteAdded = true
				continue
			}
		}
		if chars, ok := p.pruned.at(i); ok { // a head tool output pruned under pressure
			a.out = append(a.out, newMsg(f, i, f.pruned(&msgs[i], p.calls, chars)))
			a.archived = append(a.archived, archivedMsg{index: i, reason: ArchivedPruned, raw: msgs[i].raw})
			continue
		}
		a.out = append(a.out, keptMsg(msgs, i))
	}
	// The pinned messages of the summarized span follow the summary, in order
	// (pins.go); the others are archived as summarized.
	tail := make([]outMsg, 0, len(msgs)-p.tailStart)
	for i := p.headEnd; i < p.tailStart; i++ {
		if msgs[i].pinned {
			tail = append(tail, keptMsg(msgs, i))
			continue
		}
		a.archived = append(a.archived, archivedMsg{index: i, reason: ArchivedSummarized, raw: msgs[i].raw})
	}
	for i := p.tailStart; i < len(msgs); i++ {
		if chars, ok := p.pruned.at(i); ok {
			tail = append(tail, newMsg(f, i, f.pruned(&msgs[i], p.calls, chars)))
			a.archived = append(a.archived, archivedMsg{index: i, reason: ArchivedPruned, raw: msgs[i].raw})
			continue
		}
		tail = append(tail, keptMsg(msgs, i))
	}

	text := withClosing(summaryText(summary, IndexRange{p.headEnd, p.tailStart}), closing)
	prev, next := "", ""
	if p.headEnd > 0 {
		prev = msgs[p.headEnd-1].role
	}
	if len(tail) > 0 {
		next = tail[0].view.role
	}
	role := "user"
	if prev == "user" {
		role = "assistant"
	}
	if role == next {
		role = map[string]string{"user": "assistant", "assistant": "user"}[role]
	}
	if cr, ok := f.(consecutiveRoles); ok && cr.allowsConsecutiveRoles() {
		prev, next = "", "" // the summary is its own item whatever is around it
	}
	if len(tail) > 0 && msgs[tail[0].src].pinned && (role == prev || role == next) {
		prev, next, role = "", "", "user" // a pinned message stays as it is (pins.go)
	}
	if mt, ok := f.(mergeTargets); ok && (role == prev || role == next) && !mt.takesMergedSummary(&msgs[tail[0].src]) {
		prev, next, role = "", "", "user" // the summary stands alone (see takesMergedSummary)
	}
	if kt, ok := f.(turnKeeper); ok && len(tail) > 0 && p.headEnd > 0 && role != next && kt.summaryEndsTurn(msgs, p.headEnd-1, tail[0].src) {
		role = next // merged into the tail's first message: the turn goes on (see summaryEndsTurn)
	}
	if role == prev || role == next {
		a.summaryRole, a.mergedInto = "merged", tail[0].src
		a.archived = append(a.archived, archivedMsg{index: tail[0].src, reason: ArchivedMerged, raw: msgs[tail[0].src].raw})
		tail[0] = newMsg(f, tail[0].src, f.mergeSummary(tail[0].raw, text, next))
	} else {
		a.summaryRole = role
		a.out = append(a.out, newMsg(f, -1, f.summaryMessage(role, text)))
	}
	a.out = append(a.out, tail...)
	return a
}

// mergeTargets is implemented by a format with messages a summary must not be
// merged into (Anthropic's signed thinking turns).
type mergeTargets interface{ takesMergedSummary(m *message) bool }

// turnKeeper is implemented by a format in which a summary message of its own
// between the head's last message (at last) and the tail's first (at first) can
// end a turn the provider needs whole (AI SDK messages sent to Anthropic with
// thinking on); the summary is then merged into the tail's first message.
type turnKeeper interface {
	summaryEndsTurn(msgs []message, last, first int) bool
}

// consecutiveRoles is implemented by a format whose API takes two items of one role
// in a row (Responses): the summary is then always its own item, never merged.
type consecutiveRoles interface{ allowsConsecutiveRoles() bool }

// assistantDelimiter is SummaryDelimiter for a summary merged into an assistant
// message.
var assistantDelimiter = strings.Replace(SummaryDelimiter, "THE USER'S", "THE ASSISTANT'S", 1)

// mergeSummary puts the summary text before the content of a tail message: in a
// string content, or as a "text" part first in a list.
func mergeSummary(raw, text, role string) string { return mergeSummaryPart(raw, text, role, "text") }

// mergeSummaryPart is mergeSummary with a part type of the format's own (the
// Responses input_text or output_text).
func mergeSummaryPart(raw, text, role, partType string) string {
	delim := SummaryDelimiter
	if role == "assistant" {
		delim = assistantDelimiter
	}
	c := fieldIn(raw, "content")
	var out string
	var err error
	switch {
	case c.Type == gjson.String:
		out, err = sjson.Set(raw, "content", text+delim+c.Str)
	case c.IsArray():
		part, _ := marshal(map[string]string{"type": partType, "text": text + delim})
		items := strings.TrimSpace(c.Raw[1 : len(c.Raw)-1])
		if items != "" {
			items = "," + items
		}
		out, err = sjson.SetRaw(raw, "content", "["+string(part)+items+"]")
	default:
		out, err = sjson.Set(raw, "content", text)
	}
	if err != nil {
		return raw
	}
	return out
}
