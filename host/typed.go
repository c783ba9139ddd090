package host

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ctxcompact/ctxcompact/core"
)

// The typed methods below run one op each (see docs/OPS.md). messages is a JSON
// array of chat messages and cfg a JSON config object (nil for the defaults); both
// are sent as they are. A request the core rejects returns its *core.Error.
// cache.apply and cache.simulate have no wrapper yet: use Invoke.

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

// ShouldCompress reports whether promptTokens, the API-reported prompt tokens of the
// last response, reach the threshold. lastCompactionTokens (0 for none) is the
// tokens_after of the previous compaction, so a compaction that could not fit does
// not trigger again and again.
func (e *Engine) ShouldCompress(ctx context.Context, cfg json.RawMessage, promptTokens, lastCompactionTokens int) (core.ShouldCompressResult, error) {
	var r core.ShouldCompressResult
	req := newRequest("should_compress").raw("config", cfg).
		raw("prompt_tokens", json.RawMessage(fmt.Sprint(promptTokens))).
		num("last_compaction_tokens", lastCompactionTokens)
	err := e.run(ctx, req, &r)
	return r, err
}

// HygieneCheck is the gateway's safety net: whether messages should be compacted
// before the agent runs. promptTokens (0 for unknown) is preferred over the estimate.
func (e *Engine) HygieneCheck(ctx context.Context, messages, cfg json.RawMessage, promptTokens int) (core.HygieneResult, error) {
	var r core.HygieneResult
	req := newRequest("hygiene.check").raw("messages", messages).raw("config", cfg).num("prompt_tokens", promptTokens)
	err := e.run(ctx, req, &r)
	return r, err
}

// TokensCount counts the tokens of messages with encoding ("" for the one cfg
// selects, else "rough").
func (e *Engine) TokensCount(ctx context.Context, messages json.RawMessage, encoding string, cfg json.RawMessage) (core.CountTokensResult, error) {
	var r core.CountTokensResult
	req := newRequest("tokens.count").raw("messages", messages).str("encoding", encoding).raw("config", cfg)
	err := e.run(ctx, req, &r)
	return r, err
}

// Validate lists the problems of messages without changing them.
func (e *Engine) Validate(ctx context.Context, messages json.RawMessage) (core.ValidateResult, error) {
	var r core.ValidateResult
	err := e.run(ctx, newRequest("validate").raw("messages", messages), &r)
	return r, err
}

// TokensCalibrate returns the factor that scales the estimate of messages to
// promptTokens, the API-reported count (config.tokens.calibration takes it).
// fixedOverhead (0 for none) is the part of promptTokens the messages do not carry;
// a non-nil baseline selects the delta method instead.
func (e *Engine) TokensCalibrate(ctx context.Context, messages, cfg json.RawMessage, encoding string, promptTokens, fixedOverhead int, baseline *core.CalibrationBaseline) (core.CalibrateResult, error) {
	var r core.CalibrateResult
	req := newRequest("tokens.calibrate").raw("messages", messages).raw("config", cfg).str("encoding", encoding).
		raw("prompt_tokens", json.RawMessage(fmt.Sprint(promptTokens))).num("fixed_overhead", fixedOverhead)
	if baseline != nil {
		req.raw("baseline", json.RawMessage(fmt.Sprintf(`{"message_count":%d,"prompt_tokens":%d}`,
			baseline.MessageCount, baseline.PromptTokens)))
	}
	err := e.run(ctx, req, &r)
	return r, err
}

// CachePolicy decides whether prompt-cache markers apply to the model and provider
// of cfg (model and provider, when not "", override them) and returns the status
// line a host shows.
func (e *Engine) CachePolicy(ctx context.Context, cfg json.RawMessage, model, provider string) (core.CachePolicy, error) {
	var r core.CachePolicy
	err := e.run(ctx, newRequest("cache.policy").raw("config", cfg).str("model", model).str("provider", provider), &r)
	return r, err
}

// MessagesResult is the wire result of prune and sanitize: the output messages and
// the archived originals, beside the op's own report (core.PruneResult or
// core.SanitizeResult).
type MessagesResult[R any] struct {
	Messages []json.RawMessage      `json:"messages"`
	Archived []core.ArchivedMessage `json:"archived"`
	Report   R                      `json:"-"`
}

// Prune replaces old tool outputs outside the protected tail with a placeholder,
// with no summary. output is "messages" (or "") or "refs".
func (e *Engine) Prune(ctx context.Context, messages, cfg json.RawMessage, output string) (MessagesResult[core.PruneResult], error) {
	req := newRequest("prune").raw("messages", messages).raw("config", cfg).str("output", output)
	return runMessages[core.PruneResult](ctx, e, req)
}

// Sanitize repairs tool pairs: orphan results are removed, calls without a result
// get a stub. output is "messages" (or "") or "refs".
func (e *Engine) Sanitize(ctx context.Context, messages json.RawMessage, output string) (MessagesResult[core.SanitizeResult], error) {
	req := newRequest("sanitize").raw("messages", messages).str("output", output)
	return runMessages[core.SanitizeResult](ctx, e, req)
}

// runMessages decodes a result both as MessagesResult and as its report R.
func runMessages[R any](ctx context.Context, e *Engine, req *request) (MessagesResult[R], error) {
	var r MessagesResult[R]
	raw, err := e.runRaw(ctx, req)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("%w: decoding the result: %w", ErrABIMismatch, err)
	}
	if err := json.Unmarshal(raw, &r.Report); err != nil {
		return r, fmt.Errorf("%w: decoding the result: %w", ErrABIMismatch, err)
	}
	return r, nil
}

// run sends req and decodes the result into result.
func (e *Engine) run(ctx context.Context, req *request, result any) error {
	raw, err := e.runRaw(ctx, req)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("%w: decoding the result: %w", ErrABIMismatch, err)
	}
	return nil
}

// runRaw sends req and returns the raw result, or the core's error.
func (e *Engine) runRaw(ctx context.Context, req *request) (json.RawMessage, error) {
	env, err := req.bytes()
	if err != nil {
		return nil, err
	}
	resp, err := e.Call(ctx, env)
	if err != nil {
		return nil, err
	}
	return splitResponse(resp)
}
