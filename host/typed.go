package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/ctxcompact/ctxcompact/core"
)

// The typed methods below run one op each (see docs/OPS.md). messages is a JSON
// array of chat messages and a Config field or cfg a JSON config object (nil for
// the defaults); both are sent as they are. What an op takes beyond its messages
// is an options struct whose zero value is the op's default, so a call names what
// it sets and a new option does not break callers. A request the core rejects
// returns its *core.Error. The cache ops are in cache.go.

// ThresholdResolve resolves the trigger threshold and the budgets of cfg.
func (e *Engine) ThresholdResolve(ctx context.Context, cfg json.RawMessage) (core.ThresholdResult, error) {
	var r core.ThresholdResult
	err := e.run(ctx, newRequest("threshold.resolve").raw("config", cfg), &r)
	return r, err
}

// MergeConfig merges over over base with the core's config.merge: section by
// section and key by key, over's key winning (an explicit null too), an object
// value below a section (compression.model_thresholds) replacing base's as a
// whole. Both are validated (invalid_config at /base/... or /config/...); nil is
// an empty config. MergeConfig(ctx, nil, cfg) validates cfg.
func (e *Engine) MergeConfig(ctx context.Context, base, over json.RawMessage) (json.RawMessage, error) {
	var r struct {
		Config json.RawMessage `json:"config"`
	}
	err := e.run(ctx, newRequest("config.merge").raw("base", base).raw("config", over), &r)
	return r.Config, err
}

// ShouldCompressOptions are the optional parameters of ShouldCompress.
type ShouldCompressOptions struct {
	// Config is a JSON config object; nil for the defaults.
	Config json.RawMessage
	// LastCompactionTokens is the tokens_after of the previous compaction when it
	// did not fit (0 for none), so that compaction does not trigger again and
	// again: the breaker.
	LastCompactionTokens int
}

// ShouldCompress reports whether promptTokens, the API-reported prompt tokens of the
// last response, reach the threshold.
func (e *Engine) ShouldCompress(ctx context.Context, promptTokens int, opts ShouldCompressOptions) (core.ShouldCompressResult, error) {
	var r core.ShouldCompressResult
	req := newRequest("should_compress").raw("config", opts.Config).
		raw("prompt_tokens", json.RawMessage(fmt.Sprint(promptTokens))).
		num("last_compaction_tokens", opts.LastCompactionTokens)
	err := e.run(ctx, req, &r)
	return r, err
}

// HygieneOptions are the optional parameters of HygieneCheck.
type HygieneOptions struct {
	// Config is a JSON config object; nil for the defaults.
	Config json.RawMessage
	// PromptTokens is the API-reported prompt tokens, preferred over the
	// estimate; 0 for unknown.
	PromptTokens int
}

// HygieneCheck is the gateway's safety net: whether messages should be compacted
// before the agent runs.
func (e *Engine) HygieneCheck(ctx context.Context, messages json.RawMessage, opts HygieneOptions) (core.HygieneResult, error) {
	var r core.HygieneResult
	req := newRequest("hygiene.check").raw("messages", messages).raw("config", opts.Config).num("prompt_tokens", opts.PromptTokens)
	err := e.run(ctx, req, &r)
	return r, err
}

// TokensCountOptions are the optional parameters of TokensCount.
type TokensCountOptions struct {
	// Encoding is the token encoding (core.Encodings, or "auto" for the model's);
	// "" for the one Config selects, else "rough".
	Encoding string
	// Config is a JSON config object; nil for the defaults.
	Config json.RawMessage
}

// TokensCount counts the tokens of messages, in all and per message.
func (e *Engine) TokensCount(ctx context.Context, messages json.RawMessage, opts TokensCountOptions) (core.CountTokensResult, error) {
	var r core.CountTokensResult
	req := newRequest("tokens.count").raw("messages", messages).str("encoding", opts.Encoding).raw("config", opts.Config)
	err := e.run(ctx, req, &r)
	return r, err
}

// Validate lists the problems of messages without changing them.
func (e *Engine) Validate(ctx context.Context, messages json.RawMessage, opts ValidateOptions) (core.ValidateResult, error) {
	var r core.ValidateResult
	err := e.run(ctx, newRequest("validate").raw("messages", messages).str("format", string(opts.Format)).str("provider", opts.Provider).raw("config", opts.Config), &r)
	return r, err
}

// ValidateOptions are the optional parameters of Validate: core.Validate's.
type ValidateOptions = core.ValidateOptions

// CalibrateOptions are the optional parameters of TokensCalibrate.
type CalibrateOptions struct {
	// Config is a JSON config object; nil for the defaults.
	Config json.RawMessage
	// Encoding is the encoding to estimate with; "" for the one Config selects.
	Encoding string
	// FixedOverhead is the part of the prompt tokens the messages do not carry
	// (a system prompt sent apart, tool schemas); 0 for none. Not with Baseline.
	FixedOverhead int
	// Baseline, when not nil, is an earlier observation of the same conversation:
	// the delta method then calibrates on the messages added since, which leaves
	// out whatever overhead both observations share (so FixedOverhead must be 0:
	// invalid_request at /fixed_overhead otherwise).
	Baseline *core.CalibrationBaseline
}

// TokensCalibrate returns the factor that scales the estimate of messages to
// promptTokens, the API-reported count (config.tokens.calibration takes it).
func (e *Engine) TokensCalibrate(ctx context.Context, messages json.RawMessage, promptTokens int, opts CalibrateOptions) (core.CalibrateResult, error) {
	var r core.CalibrateResult
	req := newRequest("tokens.calibrate").raw("messages", messages).raw("config", opts.Config).str("encoding", opts.Encoding).
		raw("prompt_tokens", json.RawMessage(fmt.Sprint(promptTokens))).num("fixed_overhead", opts.FixedOverhead)
	if b := opts.Baseline; b != nil {
		req.raw("baseline", json.RawMessage(fmt.Sprintf(`{"message_count":%d,"prompt_tokens":%d}`,
			b.MessageCount, b.PromptTokens)))
	}
	err := e.run(ctx, req, &r)
	return r, err
}

// PruneOptions are the optional parameters of Prune: core.Prune's.
type PruneOptions = core.PruneOptions

// Prune replaces old tool outputs outside the protected tail with a placeholder,
// with no summary. It is core.Prune through the module: same options, same result.
func (e *Engine) Prune(ctx context.Context, messages json.RawMessage, opts PruneOptions) (core.PruneOutput, error) {
	var r core.PruneOutput
	err := e.run(ctx, newRequest("prune").raw("messages", messages).raw("config", opts.Config).str("output", string(opts.Output)).
		str("format", string(opts.Format)).raw("system", opts.System), &r)
	return r, err
}

// SanitizeOptions are the optional parameters of Sanitize: core.Sanitize's.
type SanitizeOptions = core.SanitizeOptions

// Sanitize repairs tool pairs: orphan results are removed, calls without a result
// get a stub. It is core.Sanitize through the module.
func (e *Engine) Sanitize(ctx context.Context, messages json.RawMessage, opts SanitizeOptions) (core.SanitizeOutput, error) {
	var r core.SanitizeOutput
	err := e.run(ctx, newRequest("sanitize").raw("messages", messages).str("output", string(opts.Output)).str("format", string(opts.Format)), &r)
	return r, err
}

// run sends req and decodes the result into result, from the response where the
// instance keeps it (no copy of a large response).
func (e *Engine) run(ctx context.Context, req *request, result any) error {
	return e.use(ctx, req, func(raw json.RawMessage) error {
		if err := json.Unmarshal(raw, result); err != nil {
			return fmt.Errorf("%w: decoding the result: %w", ErrABIMismatch, err)
		}
		return nil
	})
}

// runRaw sends req and returns the raw result, or the core's error.
func (e *Engine) runRaw(ctx context.Context, req *request) (json.RawMessage, error) {
	var out json.RawMessage
	err := e.use(ctx, req, func(raw json.RawMessage) error {
		out = bytes.Clone(raw)
		return nil
	})
	return out, err
}

// use sends req and hands the raw result to f while the instance still holds it:
// f must copy what it keeps. The core's error is returned as a *core.Error.
func (e *Engine) use(ctx context.Context, req *request, f func(raw json.RawMessage) error) error {
	parts, err := req.pieces()
	if err != nil {
		return err
	}
	return e.callParts(ctx, parts, func(resp []byte) error {
		raw, err := splitResponse(resp)
		if err != nil {
			return err
		}
		return f(raw)
	})
}
