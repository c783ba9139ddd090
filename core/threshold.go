package core

import (
	"math"
	"strings"
)

// Budget constants (docs/DESIGN.md §5).
const (
	codexAutoraiseFraction = 0.85
	tailWindowCap          = 0.20 // tail budgets never exceed 20% of the window
	leanTailFraction       = 0.025
	leanTailMin            = 10_000
	leanTailMax            = 25_000
	summaryWindowFraction  = 0.05
	summaryTokensCap       = 12_000
	summaryTokensFloor     = 2_000
	summaryContentFraction = 0.20
)

// Rules that decide the fraction, reported in ThresholdResult.Rule.
const (
	RuleThreshold         = "threshold"
	RuleModelThresholds   = "model_thresholds"
	RuleSmallContextFloor = "small_context_floor"
	RuleCodexAutoraise    = "codex_gpt55_autoraise"
)

// ThresholdResult is the resolved trigger and budgets for one model, with the rule
// that decided each value so a host can explain it.
type ThresholdResult struct {
	ContextLength int     `json:"context_length"`
	Fraction      float64 `json:"fraction"`
	// Rule is what decided Fraction: threshold, model_thresholds,
	// small_context_floor or codex_gpt55_autoraise.
	Rule string `json:"rule"`
	// OverrideKey is the model_thresholds key that matched, if any.
	OverrideKey  *string `json:"override_key"`
	FloorApplied bool    `json:"floor_applied"`
	// Autoraised is true when the Codex gpt-5.5 autoraise lifted the fraction;
	// hosts show a one-time notice.
	Autoraised      bool `json:"autoraised"`
	ThresholdTokens int  `json:"threshold_tokens"`
	TailTokenBudget int  `json:"tail_token_budget"`
	// TailRule is what decided TailTokenBudget: target_ratio (legacy), lean,
	// small_window (tiered below a 200K window with target_ratio unset), or
	// window_cap (20% of the window).
	TailRule         string `json:"tail_rule"`
	MaxSummaryTokens int    `json:"max_summary_tokens"`
	// HygieneTokens is where the gateway safety net fires (hygiene_threshold).
	HygieneTokens int `json:"hygiene_tokens"`
}

// ResolveThreshold resolves the compaction trigger and budgets for cfg.Model:
// per-model override (longest matching key), raise-only small-context floor, Codex
// gpt-5.5 autoraise, then the token budgets.
func ResolveThreshold(cfg Config) ThresholdResult {
	cc := cfg.Compression
	cl := cfg.Model.ContextLength
	if cl <= 0 {
		cl = DefaultContextLength
	}
	r := ThresholdResult{ContextLength: cl, Fraction: cc.Threshold, Rule: RuleThreshold}

	name := strings.ToLower(cfg.Model.Name)
	best := -1
	for i, mt := range cc.ModelThresholds {
		if strings.Contains(name, strings.ToLower(mt.Key)) && (best < 0 || len(mt.Key) > len(cc.ModelThresholds[best].Key)) {
			best = i
		}
	}
	if best >= 0 {
		key := cc.ModelThresholds[best].Key
		r.Fraction, r.Rule, r.OverrideKey = cc.ModelThresholds[best].Fraction, RuleModelThresholds, &key
	}
	if cc.SmallContextFloor > 0 && cl < cc.SmallContextLimit && r.Fraction < cc.SmallContextFloor {
		r.Fraction, r.Rule, r.FloorApplied = cc.SmallContextFloor, RuleSmallContextFloor, true
	}
	if cc.CodexGPT55Autoraise && strings.EqualFold(cfg.Model.Provider, "openai-codex") &&
		strings.Contains(name, "gpt-5.5") && r.Fraction < codexAutoraiseFraction {
		r.Fraction, r.Rule, r.Autoraised = codexAutoraiseFraction, RuleCodexAutoraise, true
	}

	r.ThresholdTokens = tokensOf(cl, r.Fraction)
	windowCap := tokensOf(cl, tailWindowCap)
	if cc.TailMode == TailModeLean {
		r.TailTokenBudget, r.TailRule = min(max(tokensOf(cl, leanTailFraction), leanTailMin), leanTailMax), "lean"
	} else {
		r.TailTokenBudget, r.TailRule = tokensOf(r.ThresholdTokens, cc.TargetRatio), "target_ratio"
		if cc.smallWindowTail(cl) {
			r.TailTokenBudget, r.TailRule = tokensOf(r.ThresholdTokens, cc.TargetRatio*smallWindowScale(cl)), TailRuleSmallWindow
		}
	}
	if r.TailTokenBudget > windowCap {
		r.TailTokenBudget, r.TailRule = windowCap, "window_cap"
	}
	r.MaxSummaryTokens = min(tokensOf(cl, summaryWindowFraction), summaryTokensCap)
	r.HygieneTokens = tokensOf(cl, cc.HygieneThreshold)
	return r
}

// The small-window tail rule (beside small_context_floor): below a 200K window the
// tail shrinks in proportion to the window, both its token budget (target_ratio)
// and its message floor (protect_last_n), so a small window compacts deeper and
// the next trigger comes later. It applies only where the config leaves both
// target_ratio and protect_last_n unset; explicit values are obeyed. The tail never
// drops below the newest tool group and the newest real user message (boundary.go).
// Chosen by measuring variants on the shared replay (RATIONALE.md).
const (
	smallWindowTailRef  = DefaultContextLength // windows from here up keep the configured tail
	smallWindowMinCount = 2                    // protect_last_n never scales below this
	smallWindowExponent = 1.5
	// TailRuleSmallWindow is the TailRule of a budget the small-window rule sized.
	TailRuleSmallWindow = "small_window"
)

// smallWindowScale is the share of the configured tail a window below
// smallWindowTailRef keeps: its size relative to that reference, to the power
// smallWindowExponent (32K keeps 6.4% of the configured tail, 64K 18%, 128K 51%).
func smallWindowScale(cl int) float64 {
	return min(1, math.Pow(float64(cl)/float64(smallWindowTailRef), smallWindowExponent))
}

// The tail modes (compression.tail_mode).
const (
	// TailModeTiered: the target_ratio tail, shrunk below a 200K window by the
	// small-window rule, and the facts index after the summary (the default).
	TailModeTiered = "tiered"
	// TailModeLegacy: Hermes Agent's compressor as designed: the target_ratio tail
	// and protect_last_n as configured at every window, no facts index.
	TailModeLegacy = "legacy"
	// TailModeLean: a tail of clamp(window × 2.5%, 10K, 25K), and the facts index.
	TailModeLean = "lean"
)

// smallWindowTail reports whether the small-window rule sizes the tail of a window
// of cl tokens: in the tiered mode below 200K, when the config sets neither
// protect_last_n nor target_ratio (either one set means the tail is the config's,
// as written).
func (cc CompressionConfig) smallWindowTail(cl int) bool {
	return cc.TailMode == TailModeTiered && cl < smallWindowTailRef && !cc.protectLastNSet && !cc.targetRatioSet
}

// factsIndex reports whether compactions append the facts index (facts.go): every
// tail mode but legacy.
func (cc CompressionConfig) factsIndex() bool { return cc.TailMode != TailModeLegacy }

// tailCount is the protect_last_n a compaction uses: the configured one, or below a
// 200K window with the tail keys unset (tiered tail mode), the small-window rule's.
func tailCount(cc CompressionConfig, thr ThresholdResult) int {
	if !cc.smallWindowTail(thr.ContextLength) {
		return cc.ProtectLastN
	}
	return max(smallWindowMinCount, int(math.Round(float64(cc.ProtectLastN)*smallWindowScale(thr.ContextLength))))
}

// summaryTargetTokens is the size asked of a summary of contentTokens tokens:
// 20% of the content, at least 2,000, at most max_summary_tokens. Where the floor
// is above the window's cap (windows under 40K), the cap wins: a summary must not
// ask for more than the window's budget (an intended departure from docs/DESIGN.md §5).
func summaryTargetTokens(contentTokens, maxSummary int) int {
	return min(max(summaryTokensFloor, tokensOf(contentTokens, summaryContentFraction)), maxSummary)
}

// tokensOf is floor(n * f), robust to float error (200_000 * 0.85 is 170_000).
func tokensOf(n int, f float64) int {
	return int(math.Floor(float64(n)*f + 1e-6))
}

func opThresholdResolve(req opRequest) ([]byte, error) {
	cfg, err := parseConfig(req.Field("config"), "/config")
	if err != nil {
		return nil, err
	}
	return marshal(ResolveThreshold(cfg))
}
