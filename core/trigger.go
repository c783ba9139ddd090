package core

// Minimum message count for the gateway hygiene check (docs/DESIGN.md §6).
const hygieneMinMessages = 4

// Reason says why a trigger fired or stayed quiet (ShouldCompressResult.Reason), or
// what a compaction did (Report.Reason).
type Reason string

// Trigger reasons.
const (
	ReasonAtThreshold    Reason = "at_or_above_threshold"
	ReasonBelowThreshold Reason = "below_threshold"
	ReasonDisabled       Reason = "disabled"
	ReasonBreakerOpen    Reason = "breaker_open"
	// ReasonRequested: the agent asked for a compaction (compact_now).
	ReasonRequested      Reason = "requested"
	ReasonTooFewMessages Reason = "too_few_messages"
)

// Compaction reasons (besides ReasonBelowThreshold and ReasonDisabled, when
// compact.begin did not compact).
const (
	// ReasonCompacted: the middle was summarized.
	ReasonCompacted Reason = "compacted"
	// ReasonPrunedOnly: nothing could be summarized, but tool outputs were pruned.
	ReasonPrunedOnly Reason = "pruned_only"
	// ReasonNothingToCompact: over the threshold, with nothing to summarize or prune.
	ReasonNothingToCompact Reason = "nothing_to_compact"
)

// ShouldCompressResult says whether the agent compressor fires.
type ShouldCompressResult struct {
	ShouldCompress  bool   `json:"should_compress"`
	PromptTokens    int    `json:"prompt_tokens"`
	ThresholdTokens int    `json:"threshold_tokens"`
	Reason          Reason `json:"reason"`
}

// ShouldCompress is the agent-side trigger: prompt_tokens (the API-reported prompt
// size of the last response) at or above threshold_tokens.
//
// lastCompactionTokens is the breaker (docs/DESIGN.md §6): pass the report's tokens_after
// when the previous compaction could not get under the threshold (fits false), else
// 0. The trigger then stays quiet until the prompt has grown by breakerGrowth since,
// because compacting again earlier cannot free anything and would loop.
func ShouldCompress(cfg Config, promptTokens, lastCompactionTokens int) ShouldCompressResult {
	t := ResolveThreshold(cfg)
	r := ShouldCompressResult{PromptTokens: promptTokens, ThresholdTokens: t.ThresholdTokens}
	switch {
	case !cfg.Compression.Enabled:
		r.Reason = ReasonDisabled
	case promptTokens < t.ThresholdTokens:
		r.Reason = ReasonBelowThreshold
	case lastCompactionTokens > 0 && promptTokens < lastCompactionTokens+breakerGrowth(t):
		r.Reason = ReasonBreakerOpen
	default:
		r.ShouldCompress, r.Reason = true, ReasonAtThreshold
	}
	return r
}

// HygieneResult says whether the gateway safety net fires before the agent runs.
type HygieneResult struct {
	ShouldCompact bool `json:"should_compact"`
	Tokens        int  `json:"tokens"`
	// Source is "reported" when the API-reported prompt tokens were used, else "estimate".
	Source          string `json:"source"`
	ThresholdTokens int    `json:"threshold_tokens"`
	Messages        int    `json:"messages"`
	Reason          Reason `json:"reason"`
}

// HygieneCheck is the gateway safety net: it fires at hygiene_threshold (85%) of the
// window, only with at least 4 messages and compression enabled. It prefers the
// API-reported prompt tokens (reported > 0) and falls back to estimated.
func HygieneCheck(cfg Config, messages, reported, estimated int) HygieneResult {
	t := ResolveThreshold(cfg)
	r := HygieneResult{Tokens: estimated, Source: "estimate", ThresholdTokens: t.HygieneTokens, Messages: messages}
	if reported > 0 {
		r.Tokens, r.Source = reported, "reported"
	}
	switch {
	case !cfg.Compression.Enabled:
		r.Reason = ReasonDisabled
	case messages < hygieneMinMessages:
		r.Reason = ReasonTooFewMessages
	case r.Tokens < t.HygieneTokens:
		r.Reason = ReasonBelowThreshold
	default:
		r.ShouldCompact, r.Reason = true, ReasonAtThreshold
	}
	return r
}

func opShouldCompress(req opRequest) ([]byte, error) {
	cfg, err := parseConfig(req.Field("config"), "/config")
	if err != nil {
		return nil, err
	}
	q := req.params
	if !q.Get("prompt_tokens").Exists() {
		return nil, errorf(CodeInvalidRequest, "/prompt_tokens", "prompt_tokens is required: the API-reported prompt tokens of the last response")
	}
	prompt, err := intParam(q, "prompt_tokens")
	if err != nil {
		return nil, err
	}
	last, err := intParam(q, "last_compaction_tokens")
	if err != nil {
		return nil, err
	}
	return marshal(ShouldCompress(cfg, prompt, last))
}

func opHygieneCheck(req opRequest) ([]byte, error) {
	r, err := parseCompactParams(req.params, req.arrays["messages"])
	if err != nil {
		return nil, err
	}
	return marshal(HygieneCheck(r.cfg, len(r.msgs), r.promptTokens, r.tokensBefore()))
}

// breakerGrowth is how much a prompt must grow past a compaction that did not fit
// before the trigger fires again: a tail budget, but at least 5% of the window. Small
// windows size their tail down to a few hundred tokens (the small-window rule), and a
// breaker that let every turn through would not stop the loop it exists to stop.
func breakerGrowth(t ThresholdResult) int {
	return max(t.TailTokenBudget, t.ContextLength/20)
}
