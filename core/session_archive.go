package core

import (
	"encoding/json"
	"strconv"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// A lossless compress archives in parts (docs/SESSION.md "An archive in parts"):
// the rows of a compaction that archived messages far apart in the input are asked
// for a window of at most context.archive_part input messages at a time. The first
// archive effect carries the range and the first window's rows; each later step's
// request carries the input messages of the next window only (the effect names
// them), and the step after the last part reads no messages. The host writes every
// part in one transaction. So no step holds the rows of a 1.4M-message compaction
// at once, and no step but the first holds its parse.

// DefaultArchivePart is context.archive_part's default: the input messages one
// part of an archive spans.
const DefaultArchivePart = 8192

// archiveRun is a run of archived input messages: N consecutive indexes from From,
// archived for Reason.
type archiveRun struct {
	From   int           `json:"from"`
	N      int           `json:"n"`
	Reason ArchiveReason `json:"reason"`
}

// archivePart is a window of the input a part archives from: messages [From, To),
// whose texts take Bytes (each element as the input had it), so a step can tell
// that it was sent the same messages.
type archivePart struct {
	From  int `json:"from"`
	To    int `json:"to"`
	Bytes int `json:"bytes"`
}

// archiveLeft is what a parted archive has still to ask for: the part to come
// (Part, counted from 0) and those after it (Parts, the first being the window the
// next step's messages hold), their entries (Runs, in order) and the summary
// message, the last part's last row.
type archiveLeft struct {
	Part      int             `json:"part"`
	Parts     []archivePart   `json:"parts"`
	Runs      []archiveRun    `json:"runs"`
	Summary   json.RawMessage `json:"summary,omitempty"`
	SummaryAt int             `json:"summary_at,omitempty"`
}

// planArchiveParts cuts the archived entries (sorted by index) into windows of at
// most span input messages, each starting at an archived message and ending after
// the last one it holds.
func planArchiveParts(archived []archivedMsg, msgs []message, span int) []archivePart {
	var parts []archivePart
	for i := 0; i < len(archived); {
		p := archivePart{From: archived[i].index}
		for i < len(archived) && archived[i].index < p.From+span {
			p.To = archived[i].index + 1
			i++
		}
		for k := p.From; k < p.To; k++ {
			p.Bytes += len(msgs[k].raw)
		}
		parts = append(parts, p)
	}
	return parts
}

// archiveRuns encodes entries as runs.
func archiveRuns(entries []archivedMsg) []archiveRun {
	var runs []archiveRun
	for _, a := range entries {
		if n := len(runs); n > 0 && runs[n-1].Reason == a.reason && runs[n-1].From+runs[n-1].N == a.index {
			runs[n-1].N++
			continue
		}
		runs = append(runs, archiveRun{From: a.index, N: 1, Reason: a.reason})
	}
	return runs
}

// archivePartSpan reads context.archive_part from the session's config.
func (st *sessionStep) archivePartSpan() int {
	if n := gjson.GetBytes(st.state.Config, "context.archive_part").Int(); n > 0 {
		return int(n)
	}
	return DefaultArchivePart
}

// archiveFirst asks for the first part of a compaction's archive, with the range,
// or for the whole archive when one part holds it.
func (st *sessionStep) archiveFirst(rangeID string, r *compactRequest, o *compactOutcome, rec compactionRecord) ([]byte, error) {
	report := mustMarshal(o.report)
	var summary gjson.Result
	if o.report.Summarized != nil {
		summary = summaryMessageOf(gjson.ParseBytes(writeMessages(nil, o.out, true)), o.report.HeadEnd)
	}
	from, to := archiveSpan(o.archived, o.report.Summarized)
	rng := RecallRange{ID: rangeID, FromIndex: from, ToIndex: to, Summary: summaryMessageText(summary)}
	parts := planArchiveParts(o.archived, r.msgs, st.archivePartSpan())
	first, rest := o.archived, []archivedMsg(nil)
	var left *archiveLeft
	if len(parts) > 1 {
		n := 0
		for n < len(first) && first[n].index < parts[0].To {
			n++
		}
		first, rest = first[:n], first[n:]
		left = &archiveLeft{Part: 1, Parts: parts[1:], Runs: archiveRuns(rest)}
		if summary.Exists() && summary.Type != gjson.Null {
			left.Summary, left.SummaryAt = json.RawMessage(summary.Raw), from
			summary = gjson.Result{}
		}
	}
	// The rows of a large single-part archive are written after the compaction's
	// parse is let go (only the result's bytes, the first part's originals and the
	// summary are kept), so they reuse its memory instead of growing the instance.
	kept := o.appendTo(nil, r.refs)
	r, o = nil, nil
	effect := func(b []byte) []byte {
		defer releaseBeforeRows(len(first))()
		return appendArchiveEffect(b, rangeID, 0, &rng, first, summary, from, left)
	}
	return st.effectWith(effect, sessionResume{Step: "archive", RangeID: rangeID, Report: report, Left: left, Record: &rec},
		func(b []byte) []byte { return append(b, kept...) })
}

// archiveNext answers a part of an archive with the next one, from the request's
// messages: the window the last effect named.
func (st *sessionStep) archiveNext() ([]byte, error) {
	left := st.resume.Left
	if len(left.Parts) == 0 {
		return nil, errorf(CodeInvalidRequest, "/resume", "resume must be the object the last session.run step returned, unchanged")
	}
	p := left.Parts[0]
	arr := st.q.arrays["messages"]
	if arr == nil {
		return nil, errorf(CodeInvalidRequest, "/messages", "this step archives messages %d-%d of the compaction's input: send them (the archive effect's next) as messages", p.From, p.To-1)
	}
	els, size := arr.ElementList(), 0
	for _, e := range els {
		size += len(e)
	}
	if len(els) != p.To-p.From || size != p.Bytes {
		return nil, errorf(CodeInvalidState, "/messages", "these are not messages %d-%d of the compaction's input (%d messages, %d bytes; the compaction read %d, %d bytes): send the messages the archive effect's next names, as the first step had them",
			p.From, p.To-1, len(els), size, p.To-p.From, p.Bytes)
	}
	var entries []archivedMsg
	runs := left.Runs
	for len(runs) > 0 && runs[0].From < p.To {
		run := runs[0]
		end := min(run.From+run.N, p.To)
		for k := run.From; k < end; k++ {
			if k < p.From {
				return nil, errorf(CodeInvalidRequest, "/resume", "resume must be the object the last session.run step returned, unchanged")
			}
			entries = append(entries, archivedMsg{index: k, reason: run.Reason, raw: els[k-p.From]})
		}
		if end < run.From+run.N {
			runs[0] = archiveRun{From: end, N: run.From + run.N - end, Reason: run.Reason}
			break
		}
		runs = runs[1:]
	}
	var summary gjson.Result
	var next *archiveLeft
	if len(left.Parts) > 1 {
		next = &archiveLeft{Part: left.Part + 1, Parts: left.Parts[1:], Runs: runs, Summary: left.Summary, SummaryAt: left.SummaryAt}
	} else if len(left.Summary) > 0 {
		summary = gjson.ParseBytes(left.Summary)
	}
	effect := func(b []byte) []byte {
		return appendArchiveEffect(b, st.resume.RangeID, left.Part, nil, entries, summary, left.SummaryAt, next)
	}
	resume := *st.resume
	resume.Left = next
	return st.effectWith(effect, resume, nil)
}

// appendArchiveEffect appends an archive effect: part k of range rid's archive,
// with the range itself in part 0, a row per entry, the summary's row (at
// position summaryAt) when summary is a message, and, when left is not nil, the
// window of the input whose messages the next step must carry.
func appendArchiveEffect(b []byte, rid string, k int, rng *RecallRange, entries []archivedMsg, summary gjson.Result, summaryAt int, left *archiveLeft) []byte {
	b = jsonraw.AppendString(append(b, `{"type":"archive","range_id":`...), rid)
	b = strconv.AppendInt(append(b, `,"part":`...), int64(k), 10)
	if left != nil {
		b = strconv.AppendInt(append(b, `,"next":{"from":`...), int64(left.Parts[0].From), 10)
		b = strconv.AppendInt(append(b, `,"to":`...), int64(left.Parts[0].To), 10)
		b = append(b, '}')
	}
	b = append(b, `,"archive":`...)
	if rng != nil {
		b = appendArchiveRange(b, *rng)
	} else {
		b = append(b, '{')
	}
	return append(appendArchiveRows(b, rid, entries, summary, summaryAt), '}')
}
