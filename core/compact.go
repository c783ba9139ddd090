package core

import (
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// Report says what a compaction did (docs/DESIGN.md §8), so hosts can log it.
type Report struct {
	Compacted bool `json:"compacted"`
	// Reason: compacted, pruned_only, below_threshold, disabled or nothing_to_compact.
	Reason          Reason `json:"reason"`
	TokensBefore    int    `json:"tokens_before"`
	TokensAfter     int    `json:"tokens_after"`
	ThresholdTokens int    `json:"threshold_tokens"`
	// Fits is false when head + summary + tail still exceed the threshold: feed
	// TokensAfter to should_compress as last_compaction_tokens so it does not loop.
	Fits           bool        `json:"fits"`
	MessagesBefore int         `json:"messages_before"`
	MessagesAfter  int         `json:"messages_after"`
	HeadEnd        int         `json:"head_end"`
	TailStart      int         `json:"tail_start"`
	Pruned         []int       `json:"pruned"`
	Summarized     *IndexRange `json:"summarized"`
	// SummaryRole is user, assistant, merged (into the first tail message), or "".
	SummaryRole       string `json:"summary_role"`
	SummaryMergedInto *int   `json:"summary_merged_into"`
	SummaryTokens     int    `json:"summary_tokens"`
	// SummaryChunks is how many requests the summary took when its turns did
	// not fit the summarizer's window in one (session.run's compress); 0: one.
	SummaryChunks int `json:"summary_chunks,omitempty"`
	// Prepared: the summary was prepared ahead of the trigger and spliced into
	// the grown conversation (a context engine's background compaction).
	Prepared bool `json:"prepared,omitempty"`
	// Pinned are the input indexes of the messages kept verbatim for a pin
	// (pins.go); absent when nothing is pinned.
	Pinned []int `json:"pinned,omitempty"`
	// Summarizer is host (the host's LLM) or builtin (the extractive summary).
	Summarizer     Summarizer `json:"summarizer"`
	FallbackUsed   bool       `json:"fallback_used"`
	FallbackReason string     `json:"fallback_reason"`
	// FallbackCode says why the fallback was used, as a code: timeout, error, empty,
	// too_long or cancelled ("" when it was not).
	FallbackCode FallbackCode `json:"fallback_code"`
	Iterative    bool         `json:"iterative"`
	// ActiveRequestInSummary is true when the newest user message did not fit in
	// the tail and the summary carries it verbatim.
	ActiveRequestInSummary bool `json:"active_request_in_summary"`
	// SummaryTruncated is true when the host's summary was longer than the
	// max_tokens it was asked for and was cut at a section boundary.
	SummaryTruncated bool `json:"summary_truncated"`
	// AnchorsAdded are the anchors of the summarized turns (file paths in tool-call
	// arguments, user requests, the last error) the host's summary left out, which
	// the core appended to it in one section.
	AnchorsAdded []Anchor `json:"anchors_added"`
	// FirstChangedIndex is the first output index that differs from the input: the
	// prompt cache breaks there. Null when nothing changed.
	FirstChangedIndex *int     `json:"first_changed_index"`
	SystemNoteAdded   bool     `json:"system_note_added"`
	OrphansRemoved    []int    `json:"orphans_removed"`
	StubsAdded        []string `json:"stubs_added"`
	// Repaired are the input indices of Anthropic messages whose tool_result blocks
	// were fixed: orphan blocks taken out, stub blocks added.
	Repaired []int `json:"repaired"`
	// Calibration is the factor the token counts were scaled by, and
	// CalibrationSource where it came from: "config", "prior:<family>" (the model
	// family's prior, docs/TOKENS.md) or "none".
	Calibration       float64 `json:"calibration"`
	CalibrationSource string  `json:"calibration_source"`
}

// ArchivedMessage is an input message not returned unchanged (docs/DESIGN.md §8.7).
type ArchivedMessage struct {
	Index int `json:"index"`
	// Reason: summarized, pruned, merged, orphan_removed, repaired or system_note.
	Reason  ArchiveReason   `json:"reason"`
	Message json.RawMessage `json:"message,omitempty"`
}

// CompactResult is the result of compact.begin and compact.finish. When Done is
// false, State and SummaryRequest are set and the host must call compact.finish.
type CompactResult struct {
	Done     bool              `json:"done"`
	Messages []json.RawMessage `json:"messages,omitempty"`
	// System is the Anthropic top-level system prompt to send with Messages (with
	// the compaction note when one was added); absent in the OpenAI layout.
	System         json.RawMessage   `json:"system,omitempty"`
	Report         *Report           `json:"report,omitempty"`
	Archived       []ArchivedMessage `json:"archived,omitempty"`
	State          string            `json:"state,omitempty"`
	SummaryRequest *SummaryRequest   `json:"summary_request,omitempty"`
}

// FallbackCode says why a compaction used the extractive summary instead of the
// host's (Report.FallbackCode; compact.finish's error.code).
type FallbackCode string

// The fallback codes.
const (
	FallbackTimeout   FallbackCode = "timeout"   // the summarizer did not answer in time
	FallbackError     FallbackCode = "error"     // the summarizer failed
	FallbackEmpty     FallbackCode = "empty"     // it answered with no summary
	FallbackTooLong   FallbackCode = "too_long"  // its input was too long for it
	FallbackCancelled FallbackCode = "cancelled" // it was cancelled, the compaction was not
)

// FallbackCodes lists every fallback code.
var FallbackCodes = []FallbackCode{FallbackTimeout, FallbackError, FallbackEmpty, FallbackTooLong, FallbackCancelled}

// Summarizer names who writes a compaction's summary.
type Summarizer string

// Summarizer choices for compact.begin.
const (
	// SummarizerHost: the host's LLM, through a summary request.
	SummarizerHost Summarizer = "host"
	// SummarizerBuiltin: the core's extractive summary, with no LLM.
	SummarizerBuiltin Summarizer = "builtin"
)

// compactRequest is a parsed compact.begin / compact.finish / prune request.
type compactRequest struct {
	msgs         []message
	msgsRaw      string
	cfg          Config
	cfgRaw       string
	thr          ThresholdResult
	tc           tokenCounter
	force        bool
	promptTokens int
	summarizer   Summarizer
	refs         bool
	// format is the messages' shape; system is its top-level system prompt, when
	// it has one and the request gives it.
	format       messageFormat
	system       gjson.Result
	systemTokens int
	// fallbackCode is compact.finish's reason code for a fallback (FallbackCodes).
	fallbackCode FallbackCode
	// archiveID is the optional archive_id (r<k>): the range a lossless engine
	// archives this compaction as, named at the end of the summary.
	archiveID string
	// focus is the optional focus param, trimmed (focus.go).
	focus string
	// hasPins is true when a message is pinned (pins.go).
	hasPins bool
	// span is a range compaction's messages to summarize (compact_range.go).
	span *IndexRange
}

// plan places the boundaries. A top-level system prompt counts as the first of
// protect_first_n head messages, as a system message does in the list.
func (r *compactRequest) plan() plan {
	if r.span != nil {
		return r.rangePlan()
	}
	cc := r.cfg.Compression
	if r.system.Exists() && cc.ProtectFirstN > 0 {
		cc.ProtectFirstN--
	}
	cc.ProtectLastN = tailCount(cc, r.thr)
	p := planCompaction(r.format, r.msgs, r.thr, cc, r.systemTokens)
	p.focus = r.focus
	return p
}

// params are a request's top-level fields, read in one pass: gjson's Get would
// scan past the (large) messages array again for every key.
type params map[string]gjson.Result

func paramsOf(req gjson.Result) params {
	p := params{}
	jsonraw.ForEachField(req.Raw, func(k, raw string) bool {
		p[k] = rawValue(raw)
		return true
	})
	return p
}

// Get returns the field key; strings are decoded.
func (p params) Get(key string) gjson.Result {
	v := p[key]
	if v.Type == gjson.String && v.Str == "" {
		v.Str = jsonraw.DecodeString(v.Raw)
	}
	return v
}

func parseCompactRequest(q gjson.Result) (*compactRequest, error) {
	return parseCompactParams(paramsOf(q), nil)
}

// parseCompactParams is parseCompactRequest of a request's fields.
func parseCompactParams(req params, known *jsonraw.ArrayParts) (*compactRequest, error) {
	r := &compactRequest{summarizer: SummarizerHost}
	var err error
	if r.cfg, err = parseConfig(req.Get("config"), "/config"); err != nil {
		return nil, err
	}
	if r.tc, err = newModelCounter(r.cfg.Tokens.Encoding, r.cfg.Model.Name, r.cfg.Tokens.Calibration, "/config/tokens/encoding"); err != nil {
		return nil, err
	}
	r.tc.images = imageRuleForProvider(r.cfg.Model.Provider)
	mv := req.Get("messages")
	if r.format, r.msgs, err = readList(req.Get("format"), mv, req.Get("system").Exists(), r.tc, known); err != nil {
		return nil, err
	}
	r.msgsRaw, r.cfgRaw = mv.Raw, req.Get("config").Raw
	r.thr = ResolveThreshold(r.cfg)
	if r.force, err = boolParam(req, "force"); err != nil {
		return nil, err
	}
	if r.promptTokens, err = intParam(req, "prompt_tokens"); err != nil {
		return nil, err
	}
	if v := req.Get("summarizer"); v.Exists() {
		if s := Summarizer(v.Str); s != SummarizerHost && s != SummarizerBuiltin {
			return nil, errorf(CodeInvalidRequest, "/summarizer", "summarizer must be %q or %q", SummarizerHost, SummarizerBuiltin)
		}
		r.summarizer = Summarizer(v.Str)
	}
	if r.refs, err = outputParam(req); err != nil {
		return nil, err
	}
	if r.archiveID, err = archiveIDParam(req); err != nil {
		return nil, err
	}
	var ok bool
	if r.focus, ok = readFocus(req.Get("focus")); !ok {
		return nil, errorf(CodeInvalidRequest, "/focus", "focus must be a string of at most %d bytes", maxFocusBytes)
	}
	if err := r.readPins(req.Get("pins")); err != nil {
		return nil, err
	}
	if err := r.readRange(req.Get("range")); err != nil {
		return nil, err
	}
	return r, r.readSystem(req)
}

// readSystem reads the top-level system prompt, which only a format that has one
// takes, and checks the views against the format.
func (r *compactRequest) readSystem(req params) error {
	if sys := req.Get("system"); sys.Exists() && sys.Type != gjson.Null {
		if !r.format.topLevelSystem() {
			return errorf(CodeInvalidRequest, "/system", "a top-level system prompt is the Anthropic layout: set format to \"anthropic\" or put it in a system message")
		}
		r.system = gjson.Parse(sys.Raw)
		tokens, err := r.format.checkSystem(r.system, r.tc)
		if err != nil {
			return err
		}
		r.systemTokens = tokens
	}
	return r.format.checkMessages(r.msgs)
}

func boolParam(req params, key string) (bool, error) {
	v := req.Get(key)
	if !v.Exists() || v.Type == gjson.Null {
		return false, nil
	}
	if !v.IsBool() {
		return false, errorf(CodeInvalidRequest, "/"+key, "%s must be true or false", key)
	}
	return v.Bool(), nil
}

func intParam(req params, key string) (int, error) {
	v := req.Get(key)
	if !v.Exists() || v.Type == gjson.Null {
		return 0, nil
	}
	if v.Type != gjson.Number || v.Num < 0 || v.Num != float64(int64(v.Num)) || v.Num > 1e12 {
		return 0, errorf(CodeInvalidRequest, "/"+key, "%s must be a non-negative integer", key)
	}
	return int(v.Num), nil
}

func outputParam(req params) (bool, error) {
	switch v := req.Get("output"); {
	case !v.Exists() || v.Str == "messages":
		return false, nil
	case v.Str == "refs":
		return true, nil
	}
	return false, errorf(CodeInvalidRequest, "/output", "output must be \"messages\" or \"refs\"")
}

func (r *compactRequest) tokensBefore() int {
	n := r.systemTokens
	for i := range r.msgs {
		n += r.msgs[i].tokens
	}
	return n
}

// stateFor fingerprints a request so compact.finish can check it got the same one.
// It hashes the parsed config and each message's role, tool-call ids and estimated
// size, not the request's bytes: the same conversation serialized by another JSON
// encoder (Python's json.dumps escapes differently from JSON.stringify) must
// finish in any runtime.
func (r *compactRequest) stateFor(p plan) string {
	h := fnv64a(fnvOffset64)
	c := r.cfg
	c.Context = ContextConfig{} // the context engine does not change a compaction
	cfg, _ := marshal(c)
	h = h.bytes(cfg)
	h = h.byte(0).byte(boolByte(r.force))
	h = h.byte(boolByte(r.cfg.Compression.protectLastNSet)).byte(boolByte(r.cfg.Compression.targetRatioSet))
	if r.focus != "" { // (without one, the states of earlier versions)
		h = h.byte(2).string(r.focus)
	}
	for i := range r.msgs {
		m := &r.msgs[i]
		h = h.string(m.role).byte(0).string(m.resultFor)
		for k := range m.calls {
			h = h.byte(1).string(m.calls[k].id)
		}
		for n, k := uint64(m.tokens), 0; k < 8; k++ {
			h = h.byte(byte(n >> (8 * k)))
		}
	}
	return "ccs1." + strconv.FormatUint(uint64(h), 16) + "." + strconv.Itoa(p.headEnd) + "." + strconv.Itoa(p.tailStart)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// unchanged is the result of a compaction that did nothing.
func (r *compactRequest) unchanged(reason Reason) *compactOutcome {
	out := make([]outMsg, len(r.msgs))
	for i := range r.msgs {
		out[i] = keptMsg(r.msgs, i)
	}
	before := r.tokensBefore()
	rep := &Report{
		Reason: reason, TokensBefore: before, TokensAfter: before, ThresholdTokens: r.thr.ThresholdTokens,
		Fits: before < r.thr.ThresholdTokens, MessagesBefore: len(r.msgs), MessagesAfter: len(r.msgs),
		HeadEnd: len(r.msgs), TailStart: len(r.msgs), Pruned: []int{}, OrphansRemoved: []int{}, StubsAdded: []string{}, Repaired: []int{},
		AnchorsAdded: []Anchor{}, Calibration: r.tc.scale, CalibrationSource: r.tc.source,
	}
	o := &compactOutcome{out: out, report: rep}
	if r.system.Exists() {
		o.system = r.system.Raw
	}
	return o
}

// repairedOnly is the result of a compaction with nothing to summarize or prune:
// the messages as given (nothing_to_compact), except that their tool pairs are
// repaired as every compaction's output is, so that what the caller sends next is
// never an orphan result or a call without one. Nothing is compacted, so the report
// says compacted false; orphans_removed, stubs_added and repaired say what changed.
func (r *compactRequest) repairedOnly() *compactOutcome {
	o := r.unchanged(ReasonNothingToCompact)
	a := assembly{out: o.out, mergedInto: -1}
	rep := o.report
	out := r.repair(&a, rep)
	if len(rep.OrphansRemoved) == 0 && len(rep.StubsAdded) == 0 && len(rep.Repaired) == 0 {
		return o // the input's own bytes
	}
	rep.MessagesAfter = len(out)
	rep.FirstChangedIndex = firstChanged(out, len(r.msgs))
	rep.TokensAfter = tokensOfOutput(r.format, r.msgs, out, r.tc)
	if r.system.Exists() {
		rep.TokensAfter += r.systemTokens
	}
	rep.Fits = rep.TokensAfter < r.thr.ThresholdTokens
	sortArchived(a.archived)
	o.out, o.archived = out, a.archived
	return o
}

// compactOutcome is a finished compaction before it is written.
type compactOutcome struct {
	out      []outMsg
	archived []archivedMsg
	report   *Report
	// system is the Anthropic top-level system prompt to send with out ("" when
	// there is none), with the compaction note when one was added.
	system string
}

// begin runs compact.begin: the trigger (unless forced), the plan, and either a
// finished result or a summary request.
func (r *compactRequest) begin() (*compactOutcome, plan, bool) {
	if !r.force {
		tokens := r.promptTokens
		if tokens == 0 {
			tokens = r.tokensBefore()
		}
		if !r.cfg.Compression.Enabled {
			return r.unchanged(ReasonDisabled), plan{}, true
		}
		if tokens < r.thr.ThresholdTokens {
			return r.unchanged(ReasonBelowThreshold), plan{}, true
		}
	}
	p := r.plan()
	if p.tailStart <= p.headEnd {
		if p.pruned.empty() {
			return r.repairedOnly(), p, true
		}
		return r.finish(p, "", ""), p, true
	}
	if r.summarizer == SummarizerBuiltin {
		return r.finish(p, "", ""), p, true
	}
	return nil, p, false
}

// finish assembles the compaction of plan p with summary, or with the extractive
// summary when summary is empty (failure says why, "" for the builtin summarizer).
func (r *compactRequest) finish(p plan, summary, failure string) *compactOutcome {
	rep := r.newReport(p)
	var a assembly
	if p.tailStart > p.headEnd {
		a = r.assembleSummarized(p, r.chooseSummary(p, summary, failure, rep), rep)
	} else {
		a = r.assemblePrunedOnly(p, rep)
	}
	rep.Pruned = p.pruned.indices()
	if r.hasPins {
		rep.Pinned = r.pinnedIndexes()
	}
	out := r.repair(&a, rep)
	rep.MessagesAfter = len(out)
	rep.FirstChangedIndex = firstChanged(out, len(r.msgs))
	rep.TokensAfter = tokensOfOutput(r.format, r.msgs, out, r.tc)
	system := r.systemAfter(p, rep)
	rep.Fits = rep.TokensAfter < r.thr.ThresholdTokens
	sortArchived(a.archived)
	return &compactOutcome{out: out, archived: a.archived, report: rep, system: system}
}

// newReport is the report of a compaction of plan p before assembly.
func (r *compactRequest) newReport(p plan) *Report {
	return &Report{
		Compacted: true, Reason: ReasonCompacted, TokensBefore: r.tokensBefore(), ThresholdTokens: r.thr.ThresholdTokens,
		MessagesBefore: len(r.msgs), HeadEnd: p.headEnd, TailStart: p.tailStart, Pruned: []int{},
		ActiveRequestInSummary: p.activeRequest >= 0, OrphansRemoved: []int{}, StubsAdded: []string{}, Repaired: []int{},
		AnchorsAdded: []Anchor{}, Calibration: r.tc.scale, CalibrationSource: r.tc.source,
	}
}

// chooseSummary returns the summary body the compaction writes: the host's (checked
// against its budget and its anchors), or the extractive one when the builtin
// summarizer was chosen or the host's failed (the report says why), with the active
// request appended when the plan carries it.
func (r *compactRequest) chooseSummary(p plan, summary, failure string, rep *Report) string {
	rep.Summarizer = r.summarizer
	summary = strings.TrimSpace(summary)
	switch {
	case summary == "" && r.summarizer == SummarizerBuiltin:
		summary = extractiveSummary(r.msgs, p, "the builtin summarizer was chosen")
	case summary == "":
		if failure == "" {
			failure = "the summarizer returned no summary"
		}
		rep.FallbackUsed, rep.FallbackReason, rep.FallbackCode = true, failure, r.fallbackCode
		if rep.FallbackCode == "" {
			rep.FallbackCode = FallbackEmpty
		}
		summary = extractiveSummary(r.msgs, p, "the summarizer failed: "+failure)
	}
	if !rep.FallbackUsed && r.summarizer == SummarizerHost {
		summary = r.checkHostSummary(p, summary, rep)
	}
	summary = r.withAnchors(p, summary, rep)
	if p.activeRequest >= 0 {
		size := func(body string) int {
			return r.tc.message(gjson.Parse(`{"content":` + string(mustMarshal(summaryText(body, IndexRange{p.headEnd, p.tailStart}))) + `}`))
		}
		if sec := activeRequestSection(r.msgs, p, summary, p.estimate-p.summaryTarget, size); sec != "" {
			summary += "\n\n" + sec
		}
	}
	return summary
}

// assembleSummarized assembles head, summary and tail, and reports the summary.
func (r *compactRequest) assembleSummarized(p plan, summary string, rep *Report) assembly {
	prev, _ := previousSummary(r.msgs, p.headEnd, p.tailStart)
	rep.Iterative = prev != ""
	closing := ""
	if r.archiveID != "" {
		closing = recallClosing(r.msgs, p, summary, r.archiveID)
	}
	a := assemble(r.format, r.msgs, p, summary, closing)
	rep.Summarized = &IndexRange{From: p.headEnd, To: p.tailStart}
	rep.SummaryRole, rep.SystemNoteAdded = a.summaryRole, a.noteAdded
	if a.mergedInto >= 0 {
		mi := a.mergedInto
		rep.SummaryMergedInto = &mi
	}
	rep.SummaryTokens = r.tc.message(gjson.Parse(`{"content":` + string(mustMarshal(withClosing(summaryText(summary, *rep.Summarized), closing))) + `}`))
	return a
}

// assemblePrunedOnly is a compaction with nothing to summarize: the pruned
// messages replaced, every other one kept.
func (r *compactRequest) assemblePrunedOnly(p plan, rep *Report) assembly {
	rep.Reason = ReasonPrunedOnly
	a := assembly{mergedInto: -1}
	for i := range r.msgs {
		if chars, ok := p.pruned.at(i); ok {
			a.out = append(a.out, newMsg(r.format, i, r.format.pruned(&r.msgs[i], p.calls, chars)))
			a.archived = append(a.archived, archivedMsg{index: i, reason: ArchivedPruned, raw: r.msgs[i].raw})
			continue
		}
		a.out = append(a.out, keptMsg(r.msgs, i))
	}
	return a
}

// repair sanitizes the assembled messages' tool pairs and archives the input
// messages it removed or repaired (once: the assembly may have archived them).
func (r *compactRequest) repair(a *assembly, rep *Report) []outMsg {
	out, removed, repaired, san := sanitizeToolPairs(r.format, a.out)
	// archivedAlready reports whether the assembly archived message i; its index is
	// built only when a message was removed or repaired (the middle can be most of
	// the conversation).
	var archived []bool
	archivedBefore := a.archived
	archivedAlready := func(i int) bool {
		if archived == nil {
			archived = make([]bool, len(r.msgs))
			for _, x := range archivedBefore {
				archived[x.index] = true
			}
		}
		return archived[i]
	}
	for _, m := range removed {
		if m.src >= 0 {
			rep.OrphansRemoved = append(rep.OrphansRemoved, m.src)
			if !archivedAlready(m.src) {
				a.archived = append(a.archived, archivedMsg{index: m.src, reason: ArchivedOrphanRemoved, raw: r.msgs[m.src].raw})
			}
		}
	}
	for _, m := range repaired {
		if m.src >= 0 {
			rep.Repaired = append(rep.Repaired, m.src)
			if !archivedAlready(m.src) {
				a.archived = append(a.archived, archivedMsg{index: m.src, reason: ArchivedRepaired, raw: r.msgs[m.src].raw})
			}
		}
	}
	sort.Ints(rep.OrphansRemoved)
	sort.Ints(rep.Repaired)
	rep.StubsAdded = san.Stubbed
	return out
}

// firstChanged is the index of the first output message that is not the input
// message at the same index (nil when there is none): where a prompt cache breaks.
func firstChanged(out []outMsg, inputs int) *int {
	for k := range out {
		if out[k].changed || out[k].src != k {
			return &k
		}
	}
	if len(out) != inputs {
		n := len(out)
		return &n
	}
	return nil
}

// systemAfter returns the top-level system prompt to send with the output ("" when
// there is none), with the compaction note when a summary was written, and counts it
// in the report's tokens after.
func (r *compactRequest) systemAfter(p plan, rep *Report) string {
	if !r.system.Exists() {
		return ""
	}
	system := r.system.Raw
	rep.TokensAfter += r.systemTokens
	if p.tailStart <= p.headEnd {
		return system
	}
	if raw, ok := r.format.systemWithNote(r.system); ok {
		system, rep.SystemNoteAdded = raw, true
		noted, _ := r.format.checkSystem(gjson.Parse(raw), r.tc) // the format's count: Gemini's is an object
		rep.TokensAfter += noted - r.systemTokens
		zero := 0 // the system prompt comes before every message
		rep.FirstChangedIndex = &zero
	}
	return system
}

func tokensOfOutput(f messageFormat, msgs []message, out []outMsg, tc tokenCounter) int {
	n := 0
	for _, m := range out {
		if !m.changed && m.src >= 0 {
			n += msgs[m.src].tokens
		} else {
			n += f.countItem(tc, m.raw)
		}
	}
	return n
}

func mustMarshal(v any) []byte {
	b, err := marshal(v)
	if err != nil {
		panic(err) // only called on strings and maps of strings
	}
	return b
}

// sortArchived orders archived entries by input index, then reason.
func sortArchived(a []archivedMsg) {
	sort.Slice(a, func(i, j int) bool {
		return a[i].index < a[j].index || a[i].index == a[j].index && a[i].reason < a[j].reason
	})
}

// appendTo appends a finished outcome as the op result.
func (o *compactOutcome) appendTo(b []byte, refs bool) []byte {
	size := 64
	for _, m := range o.out {
		size += len(m.raw) + 1
	}
	if !refs {
		for _, a := range o.archived {
			size += len(a.raw) + 40
		}
	}
	report := mustMarshal(o.report)
	b = slices.Grow(b, size+len(report)+len(o.system)+16*len(o.archived)+1) // and the envelope's '}'
	b = append(b, `{"done":true,"messages":`...)
	b = writeMessages(b, o.out, refs)
	if o.system != "" {
		b = append(b, `,"system":`...)
		b = append(b, o.system...)
	}
	b = append(b, `,"report":`...)
	b = append(b, report...)
	b = append(b, `,"archived":`...)
	b = writeArchived(b, o.archived, refs)
	return append(b, '}')
}

// writeArchived appends the archived array; with refs the original JSON is left
// out (the caller has it).
func writeArchived(b []byte, archived []archivedMsg, refs bool) []byte {
	b = append(b, '[')
	for i, a := range archived {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(a.index), 10)
		b = append(b, `,"reason":"`...)
		b = append(b, a.reason...)
		b = append(b, '"')
		if !refs {
			b = append(b, `,"message":`...)
			b = append(b, a.raw...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// writeMessages appends a messages array; with refs, unchanged input messages are
// written as their input index.
func writeMessages(b []byte, out []outMsg, refs bool) []byte {
	b = append(b, '[')
	for i, m := range out {
		if i > 0 {
			b = append(b, ',')
		}
		if refs && !m.changed && m.src >= 0 {
			b = strconv.AppendInt(b, int64(m.src), 10)
		} else {
			b = append(b, m.raw...)
		}
	}
	return append(b, ']')
}

func opCompactBegin(req opRequest, dst []byte) ([]byte, error) {
	if err := checkTicket(req.params); err != nil {
		return nil, err
	}
	r, err := parseCompactParams(req.params, req.arrays["messages"])
	if err != nil {
		return nil, err
	}
	o, p, done := r.begin()
	if done {
		return o.appendTo(dst, r.refs), nil
	}
	sr := buildSummaryRequest(r.msgs, p, r.cfg.Compression)
	state := r.stateFor(p)
	out := appendPending(dst, state, &sr)
	if req.owned {
		keepPending(req.params, len(req.Whole().Raw), state, r, p)
	}
	return out, nil
}

// maxTicketBytes bounds a compaction's ticket: it names, it does not carry.
const maxTicketBytes = 128

// checkTicket checks the optional "ticket" of compact.begin and compact.finish: a
// string the host picks, unique among the compactions it runs at once, sent with
// both. A compact.finish that carries the ticket may leave out the messages when the
// instance that began the compaction keeps it (see compact_pending.go).
func checkTicket(req params) error {
	if v := req.Get("ticket"); v.Exists() && (v.Type != gjson.String || v.Str == "" || len(v.Raw) > maxTicketBytes+2) {
		return errorf(CodeInvalidRequest, "/ticket", "ticket must be a non-empty string of at most %d bytes", maxTicketBytes)
	}
	return nil
}

// replanBegun parses and plans again the compaction a begin answered with state,
// for a finish that finds none kept (compact.finish, session.run's compress): nil
// when these messages and config do not plan to that state.
//
// pin, when not nil, pins what a context engine's session pins (pins.go).
func replanBegun(req params, known *jsonraw.ArrayParts, state string, pin func(*compactRequest) error) (*compactRequest, plan, error) {
	r, err := parseCompactParams(req, known)
	if err != nil {
		return nil, plan{}, err
	}
	if pin != nil {
		if err := pin(r); err != nil {
			return nil, plan{}, err
		}
	}
	p := r.plan()
	if r.stateFor(p) != state {
		return nil, p, nil
	}
	return r, p, nil
}

// fallbackFailure is what the report says of a summarizer's failure: its message,
// or its code when it gave none.
func fallbackFailure(code FallbackCode, message string) string {
	if m := strings.TrimSpace(message); m != "" {
		return m
	}
	return string(code)
}

func opCompactFinish(q opRequest, dst []byte) ([]byte, error) {
	req := q.params
	sv := req.Get("state")
	if err := checkTicket(req); err != nil {
		return nil, err
	}
	r, p, begun := takePending(req, sv.Str)
	if !begun && !req.Get("messages").Exists() {
		if !req.Get("ticket").Exists() {
			return nil, errorf(CodeInvalidRequest, "/ticket", "a compact.finish without messages needs the ticket that its compact.begin was sent with")
		}
		return nil, errorf(CodeInvalidState, "/messages", "no compaction begun with this ticket and state is kept on this instance (another instance began it, or it was finished or evicted): send compact.finish the messages")
	}
	if !begun {
		if sv.Type != gjson.String || !strings.HasPrefix(sv.Str, "ccs1.") {
			if _, err := parseCompactParams(req, q.arrays["messages"]); err != nil {
				return nil, err // bad messages or config first, as a replanned finish says
			}
			return nil, errorf(CodeInvalidState, "/state", "state must be the string compact.begin returned")
		}
		var err error
		if r, p, err = replanBegun(req, q.arrays["messages"], sv.Str, nil); err != nil {
			return nil, err
		} else if r == nil {
			return nil, errorf(CodeInvalidState, "/state", "state does not match these messages and config: pass compact.finish the same messages, config and force as compact.begin")
		}
	}
	summary, failure := "", ""
	if v := req.Get("summary"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.String {
			return nil, errorf(CodeInvalidRequest, "/summary", "summary must be a string")
		}
		summary = v.Str
	}
	r.fallbackCode = FallbackEmpty // a summary that is empty, if nothing else is said
	if v := req.Get("error"); v.Exists() && v.Type != gjson.Null {
		r.fallbackCode = FallbackError
		switch {
		case v.Type == gjson.String:
			failure = v.Str
		case v.IsObject():
			if c := fieldOf(v, "code"); c.Exists() && c.Type != gjson.Null {
				if c.Type != gjson.String || !slices.Contains(FallbackCodes, FallbackCode(c.Str)) {
					return nil, errorf(CodeInvalidRequest, "/error/code", "error code must be one of %s, got %s", joinNames(FallbackCodes), c.Raw)
				}
				r.fallbackCode = FallbackCode(c.Str)
			}
			if m := fieldOf(v, "message"); m.Exists() && m.Type != gjson.String && m.Type != gjson.Null {
				return nil, errorf(CodeInvalidRequest, "/error/message", "error message must be a string")
			}
			failure = fallbackFailure(r.fallbackCode, fieldOf(v, "message").Str)
		default:
			return nil, errorf(CodeInvalidRequest, "/error", "error must be a string or an object {code, message}")
		}
		if failure == "" {
			failure = "the summarizer failed"
		}
		summary = ""
	}
	return r.finish(p, summary, failure).appendTo(dst, r.refs), nil
}
