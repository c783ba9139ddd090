package core

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Undo (docs/STEERING.md "See and undo"): a context engine keeps, with its last
// compaction, how the compaction's result was made from its input (each output
// message's input index when returned unchanged, the archived input indexes) and
// a fingerprint of the result. The undo event takes the conversation as it is now,
// checks that it still starts with that result, and writes the compaction's input
// back: the archived originals (the host's copy in "originals", else, lossless, the
// store's, asked for with an expand effect of the range) where they were, the
// messages returned unchanged from the conversation, then what came after the
// result. It refuses when the restored conversation does not fit the window.

// EventUndo is the session event that takes the last compaction back.
const EventUndo = "undo"

// CompactionUndo is what the state keeps to take the last compaction back.
type CompactionUndo struct {
	// Before is the compaction's input length; Out holds, per output message,
	// the input index it returned unchanged, or -1 (a new or changed message).
	Before int   `json:"before"`
	Out    []int `json:"out"`
	// Output is the fingerprint of the result (outputFingerprint).
	Output string `json:"output"`
	// Archived are the input indexes whose originals were archived, in order.
	Archived []archiveRun `json:"archived"`
	// RangeID is the range a lossless engine archived them as.
	RangeID string `json:"range_id,omitempty"`
}

// compactionRecord is what a compaction records beside its report, carried in
// the resume until it is archived.
type compactionRecord struct {
	Pins    []string        `json:"pins,omitempty"`
	Summary string          `json:"summary,omitempty"`
	Undo    *CompactionUndo `json:"undo,omitempty"`
}

// recordOf is what the compaction o of r records, archived as rangeID.
func recordOf(r *compactRequest, o *compactOutcome, rangeID string) compactionRecord {
	rec := compactionRecord{Pins: sessionPins(r, o)}
	if !o.report.Compacted {
		return rec
	}
	if o.report.Summarized != nil && o.report.HeadEnd < len(o.out) {
		rec.Summary = summaryBody(o.out[o.report.HeadEnd].view.text())
	}
	u := &CompactionUndo{Before: len(r.msgs), Out: make([]int, len(o.out)), Archived: archiveRuns(o.archived), RangeID: rangeID}
	raws := make([]string, len(o.out))
	for k, m := range o.out {
		u.Out[k] = -1
		if !m.changed && m.src >= 0 {
			u.Out[k] = m.src
		}
		raws[k] = m.raw
	}
	u.Output = outputFingerprint(raws)
	rec.Undo = u
	return rec
}

// record records a compaction: its report, and rec.
func (st *sessionStep) record(rep Report, rec compactionRecord) {
	st.state.RecordCompaction(rep)
	st.state.Pins = rec.Pins
	if c := st.state.LastCompaction; c != nil {
		c.Summary = rec.Summary
	}
	st.state.Undo = rec.Undo
}

// outputFingerprint is an FNV-1a of messages as decoded (valueHash): the
// result a host sends back, however its encoder writes it (escapes, key order,
// number spelling), has the fingerprint of the result the core wrote.
func outputFingerprint(raws []string) string {
	h := fnv64a(fnvOffset64)
	for _, raw := range raws {
		h = mixHash(h, valueHash(gjson.Parse(raw)))
	}
	return "fnv64:" + strconv.FormatUint(uint64(h), 16)
}

// valueHash hashes a JSON value by what it decodes to: a string by its text, a
// number by its value, an array's elements in order, an object's members in any
// order. It walks the value in place: no decoded tree is built (half the time
// of decoding and encoding it again).
func valueHash(v gjson.Result) fnv64a {
	h := fnv64a(fnvOffset64)
	switch {
	case v.Type == gjson.String:
		return h.byte('s').string(v.Str)
	case v.Type == gjson.Number:
		return h.byte('n').string(strconv.FormatFloat(v.Num, 'g', -1, 64))
	case v.Type == gjson.True:
		return h.byte('t')
	case v.Type == gjson.False:
		return h.byte('f')
	case v.IsArray():
		h = h.byte('a')
		v.ForEach(func(_, e gjson.Result) bool {
			h = mixHash(h, valueHash(e))
			return true
		})
		return h
	case v.IsObject():
		var sum uint64 // members in any order
		v.ForEach(func(k, e gjson.Result) bool {
			key := mixHash(fnv64a(fnvOffset64), valueHash(k))
			sum += uint64(mixHash(key, valueHash(e)))
			return true
		})
		return mixHash(h.byte('o'), fnv64a(sum))
	}
	return h.byte('z') // null
}

// mixHash folds the hash x into h.
func mixHash(h, x fnv64a) fnv64a {
	for k := 0; k < 8; k++ {
		h = h.byte(byte(x >> (8 * k)))
	}
	return h
}

// undo runs the undo event.
func (st *sessionStep) undo() ([]byte, error) {
	u := st.state.Undo
	if u == nil {
		return nil, errorf(CodeInvalidState, "/state", "there is no compaction to undo: none was recorded since the session started, or the last one was undone")
	}
	arr := st.q.arrays["messages"]
	if arr == nil {
		return nil, errorf(CodeInvalidRequest, "/messages", "undo takes the conversation as it is now, which starts with the last compaction's result")
	}
	conv := arr.ElementList()
	if len(conv) < len(u.Out) || outputFingerprint(conv[:len(u.Out)]) != u.Output {
		return nil, errorf(CodeInvalidState, "/messages", "the conversation no longer starts with the last compaction's result (%d messages): it cannot be undone", len(u.Out))
	}
	var archived []int
	for _, run := range u.Archived {
		for k := run.From; k < run.From+run.N; k++ {
			archived = append(archived, k)
		}
	}
	var originals []string
	if o := st.q.params.Get("originals"); o.Exists() && o.Type != gjson.Null {
		if !o.IsArray() {
			return nil, errorf(CodeInvalidRequest, "/originals", "originals must be an array of the last compaction's archived messages, in input order")
		}
		for _, m := range o.Array() {
			originals = append(originals, m.Raw)
		}
	} else if st.resume != nil && st.resume.Step == "expand" {
		if st.answer.failed {
			return st.fail(EffectExpand, "the undo found no originals: the store failed")
		}
		for _, m := range st.answer.ok.Array() {
			originals = append(originals, m.Str)
		}
	} else if u.RangeID != "" {
		effect, err := marshal(map[string]any{"type": EffectExpand, "id": u.RangeID})
		if err != nil {
			return nil, err
		}
		return st.effect(effect, sessionResume{Step: "expand", RangeID: u.RangeID}, nil)
	} else {
		return nil, errorf(CodeInvalidRequest, "/originals", "undo needs the last compaction's archived messages (the compress result's archived, in order): this engine keeps no archive")
	}
	if len(originals) != len(archived) {
		return nil, errorf(CodeInvalidRequest, "/originals", "the last compaction archived %d messages; %d originals were given", len(archived), len(originals))
	}
	restored := make([]string, u.Before)
	for k, i := range archived {
		restored[i] = originals[k]
	}
	for pos, i := range u.Out {
		if i >= 0 {
			restored[i] = conv[pos]
		}
	}
	for i, m := range restored {
		if m == "" {
			return nil, errorf(CodeInvalidState, "/state", "the undo record does not account for input message %d", i)
		}
	}
	restored = append(restored, conv[len(u.Out):]...)
	b := []byte{'['}
	for i, m := range restored {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
	}
	b = append(b, ']')
	cfg, _ := ParseConfig(st.state.Config)
	tokens, err := CountTokens(b, CountTokensOptions{Encoding: "rough"})
	if err != nil {
		return nil, err
	}
	if window := ResolveThreshold(cfg).ContextLength; window > 0 && tokens.Total > window {
		return nil, errorf(CodeInvalidState, "/messages", "the originals no longer fit: the restored conversation is about %d tokens, the window %d; compact it instead", tokens.Total, window)
	}
	st.state.Undo, st.state.Prepared = nil, nil
	if c := st.state.LastCompaction; c != nil {
		c.Summary = ""
	}
	st.state.LastPromptTokens = tokens.Total
	return st.done(func(dst []byte) []byte {
		dst = append(dst, `{"messages":`...)
		dst = append(dst, b...)
		dst = strconv.AppendInt(append(dst, `,"restored":`...), int64(len(archived)), 10)
		return append(dst, '}')
	})
}
