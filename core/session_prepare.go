package core

import "strconv"

// Compaction that never blocks (docs/STEERING.md): below the trigger, at
// prepare_ratio of it, should_compress says "prepare"; the host then runs a
// compress event with "prepare": true in the background while the conversation
// goes on. That compaction is summarized as any other but not applied: the state
// keeps it (EngineState.Prepared), and when the trigger comes, compress splices
// it into the grown conversation: the same head and summary, the old tail and
// everything appended since verbatim after it. The splice is taken only when the
// conversation still starts with the messages the prepared compaction planned
// over (their bytes), the config and focus are the same, the plan over those
// messages gives the same boundaries, and the result leaves the room under the
// threshold a compaction leaves for the turns that follow;
// otherwise compress compacts as it would have, and the prepared one goes.

// DefaultPrepareRatio is compression.prepare_ratio's default: preparation starts
// at 85% of the threshold (at a 32K window: 20,400 of 24,000 tokens). In the
// replay of the shared traces with a summarizer two requests slow and requests
// held up to 95% of the window while it runs, lower ratios left as few requests
// waiting and cost more (docs/STEERING.md).
const DefaultPrepareRatio = 0.85

// PreparedCompaction is a compaction summarized ahead of the trigger.
type PreparedCompaction struct {
	// Messages is the conversation's length when it was prepared; HeadEnd and
	// TailStart its plan's boundaries over them.
	Messages  int `json:"messages"`
	HeadEnd   int `json:"head_end"`
	TailStart int `json:"tail_start"`
	// Prefix is the FNV-1a of the messages before TailStart (their JSON bytes),
	// Config that of the compaction's config.
	Prefix string `json:"prefix"`
	Config string `json:"config"`
	// Summarizer wrote Summary (the host's answer; "" for the builtin one, which
	// the splice writes again from the same turns).
	Summarizer Summarizer `json:"summarizer"`
	Summary    string     `json:"summary,omitempty"`
	Focus      string     `json:"focus,omitempty"`
	// Tokens is the conversation's size when it was prepared (the event's
	// prompt_tokens, else the estimate).
	Tokens int `json:"tokens"`
	// Count is compression_count when it began: a compaction recorded since
	// makes it stale.
	Count int `json:"count"`
}

// prepareRatio is the config's prepare_ratio.
func prepareRatio(cc CompressionConfig) float64 {
	if cc.PrepareRatio > 0 {
		return cc.PrepareRatio
	}
	return DefaultPrepareRatio
}

// shouldPrepare reports whether a compaction should be prepared now: the prompt
// is at prepare_ratio of the threshold or above, but below it, and none is
// prepared, or the one prepared is older than half the way from there to the
// threshold (a fresher one leaves less to carry verbatim at the splice; the
// kept one stays usable until it lands).
func (s EngineState) shouldPrepare(r ShouldCompressResult) bool {
	if r.Reason != ReasonBelowThreshold {
		return false
	}
	cfg, _ := ParseConfig(s.Config)
	threshold := float64(r.ThresholdTokens)
	level := prepareRatio(cfg.Compression) * threshold
	if s.Prepared != nil {
		level = float64(s.Prepared.Tokens) + (threshold-level)/2
	}
	return float64(r.PromptTokens) >= level
}

// prefixHash is the FNV-1a of msgs' JSON.
func prefixHash(msgs []message) string {
	h := fnv64a(fnvOffset64)
	for i := range msgs {
		h = h.string(msgs[i].raw).byte(0)
	}
	return "fnv64:" + strconv.FormatUint(uint64(h), 16)
}

// configHash is the FNV-1a of the request's parsed config (as stateFor hashes
// it: the same config written by another encoder has the same hash).
func (r *compactRequest) configHash() string {
	c := r.cfg
	c.Context = ContextConfig{} // the context engine does not change a compaction
	b, _ := marshal(c)
	h := fnv64a(fnvOffset64).bytes(b).byte(boolByte(c.Compression.protectLastNSet)).byte(boolByte(c.Compression.targetRatioSet))
	return "fnv64:" + strconv.FormatUint(uint64(h), 16)
}

// planPrefix is the plan of the request's first n messages, as a compaction of
// those alone would place it.
func (r *compactRequest) planPrefix(n int) plan {
	all := r.msgs
	r.msgs = all[:n]
	p := r.plan()
	r.msgs = all
	return p
}

// splice is the prepared compaction applied to r's conversation, or nil when it
// does not apply (see above).
func (st *sessionStep) splice(r *compactRequest) *compactOutcome {
	pc := st.state.Prepared
	if pc == nil || pc.Count != st.state.CompressionCount || len(r.msgs) < pc.Messages || pc.TailStart > pc.Messages ||
		r.configHash() != pc.Config || r.focus != pc.Focus || prefixHash(r.msgs[:pc.TailStart]) != pc.Prefix {
		return nil
	}
	p := r.planPrefix(pc.Messages)
	if p.headEnd != pc.HeadEnd || p.tailStart != pc.TailStart || p.tailStart <= p.headEnd {
		return nil
	}
	summarizer := r.summarizer
	r.summarizer = pc.Summarizer
	o := r.finish(p, pc.Summary, "")
	r.summarizer = summarizer
	// It must leave the room a compaction leaves for the turns that follow, or
	// the next requests would compact again at once.
	if o.report.TokensAfter > r.thr.ThresholdTokens-p.roomMargin {
		return nil
	}
	o.report.Prepared = true
	return o
}

// keepPrepared ends a preparation: the compaction of plan p, summarized (summary:
// the host's answer, "" for the builtin summary), kept in the state, unless one
// was recorded since it began (count).
func (st *sessionStep) keepPrepared(r *compactRequest, p plan, summary string, count int) ([]byte, error) {
	if st.state.CompressionCount != count {
		return st.prepareEnd(nil, "a compaction was recorded while this one was prepared")
	}
	pc := &PreparedCompaction{Messages: len(r.msgs), HeadEnd: p.headEnd, TailStart: p.tailStart,
		Prefix: prefixHash(r.msgs[:p.tailStart]), Config: r.configHash(), Summarizer: r.summarizer,
		Summary: summary, Focus: r.focus, Tokens: r.tokensBefore(), Count: count}
	st.state.Prepared = pc
	return st.prepareEnd(pc, "")
}

// PrepareResult is the result of a compress event with prepare: the compaction
// kept, or null and why not.
type PrepareResult struct {
	Prepared *PreparedSpan `json:"prepared"`
	Reason   string        `json:"reason,omitempty"`
}

// PreparedSpan is what a prepared compaction covers: the conversation's first
// Messages messages, summarizing [HeadEnd, TailStart).
type PreparedSpan struct {
	Messages  int `json:"messages"`
	HeadEnd   int `json:"head_end"`
	TailStart int `json:"tail_start"`
}

// prepareEnd ends a preparation with its result.
func (st *sessionStep) prepareEnd(pc *PreparedCompaction, reason string) ([]byte, error) {
	res := PrepareResult{Reason: reason}
	if pc != nil {
		res.Prepared = &PreparedSpan{Messages: pc.Messages, HeadEnd: pc.HeadEnd, TailStart: pc.TailStart}
	}
	b := mustMarshal(res)
	return st.done(func(dst []byte) []byte { return append(dst, b...) })
}
