package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// The prompt-cache ops: cache.policy decides whether Anthropic cache_control
// markers apply, cache.apply places them, cache.simulate prices placement
// strategies by replaying a conversation (docs/CACHING.md). Their layout says where
// a request is sent, not the shape of its messages: core.LayoutAnthropic is the
// native Messages API (markers on the system prompt and tool results),
// core.LayoutOpenAI an OpenAI-style envelope such as OpenRouter's (markers on
// content parts); "" is the op's default, core.LayoutOpenAI.

// CachePolicyOptions are the optional parameters of CachePolicy.
type CachePolicyOptions struct {
	// Config is a JSON config object; nil for the defaults. Its model.name,
	// model.provider and prompt_caching.cache_ttl are the defaults of the fields
	// below.
	Config json.RawMessage
	// Model is the model name; "" for Config's.
	Model string
	// Provider is where the model is reached ("anthropic", "openrouter", ...);
	// "" for Config's.
	Provider string
	// TTL is the marker lifetime, core.CacheTTL5m or core.CacheTTL1h; "" for
	// Config's.
	TTL string
}

// CachePolicy decides whether prompt-cache markers apply to a model and provider
// and returns the status line a host shows.
func (e *Engine) CachePolicy(ctx context.Context, opts CachePolicyOptions) (core.CachePolicy, error) {
	var r core.CachePolicy
	req := newRequest("cache.policy").raw("config", opts.Config).str("model", opts.Model).
		str("provider", opts.Provider).str("ttl", opts.TTL)
	err := e.run(ctx, req, &r)
	return r, err
}

// CacheApplyOptions are the optional parameters of CacheApply.
type CacheApplyOptions struct {
	// System is Anthropic's top-level system prompt (a JSON string or array of
	// blocks) to mark too; only with core.LayoutAnthropic.
	System json.RawMessage
	// Layout is core.LayoutAnthropic or core.LayoutOpenAI; "" for the latter.
	Layout string
	// TTL is the marker lifetime, core.CacheTTL5m or core.CacheTTL1h; "" for the
	// config's prompt_caching.cache_ttl.
	TTL string
	// Config is a JSON config object; nil for the defaults.
	Config json.RawMessage
}

// CacheApplyResult is what cache.apply returns: the marked conversation and where
// the markers went.
type CacheApplyResult struct {
	// Messages are the input messages with every earlier cache_control marker
	// removed and at most four placed, each as JSON.
	Messages []json.RawMessage `json:"messages"`
	// System is the marked top-level system prompt, when one was given.
	System json.RawMessage `json:"system,omitempty"`
	// Marked lists the indices of the messages that carry a marker.
	Marked []int `json:"marked"`
	// SystemMarked reports a marker on System.
	SystemMarked bool `json:"system_marked"`
	// Markers counts every marker placed, System's included.
	Markers int `json:"markers"`
	// TTL is the lifetime the markers were given.
	TTL string `json:"ttl"`
}

// CacheApply places Anthropic cache_control breakpoints on messages: the system
// prompt, then the last messages that can carry one. Applying it to its own
// output gives the same bytes.
func (e *Engine) CacheApply(ctx context.Context, messages json.RawMessage, opts CacheApplyOptions) (CacheApplyResult, error) {
	var r CacheApplyResult
	req := newRequest("cache.apply").raw("messages", messages).raw("system", opts.System).
		str("layout", opts.Layout).str("ttl", opts.TTL).raw("config", opts.Config)
	err := e.run(ctx, req, &r)
	return r, err
}

// CacheSimulateOptions are the optional parameters of CacheSimulate.
type CacheSimulateOptions struct {
	// System is Anthropic's top-level system prompt, part of every replayed
	// request; only with core.LayoutAnthropic.
	System json.RawMessage
	// Layout is core.LayoutAnthropic or core.LayoutOpenAI; "" to detect it from
	// the messages.
	Layout string
	// TTL is the marker lifetime; "" for the config's prompt_caching.cache_ttl.
	TTL string
	// Strategies names the strategies to price (core.Strategies); nil for all.
	Strategies []core.Strategy
	// Model is the model whose prices and minimum cacheable prompt apply; "" for
	// the config's model.name.
	Model string
	// MinCacheableTokens overrides the model's minimum cacheable prompt; 0 keeps
	// the model's (1 caches a prefix of any length).
	MinCacheableTokens int
	// PerRequest adds each replayed request's numbers to every strategy.
	PerRequest bool
	// Timestamps gives each message's time, one per message (the zero time for
	// unknown), so markers expire by TTL between requests; nil reads the
	// messages' own "timestamp" fields.
	Timestamps []time.Time
	// Config is a JSON config object; nil for the defaults.
	Config json.RawMessage
}

// CacheSimulate replays messages request by request (one request per assistant
// message) and prices each strategy's marker placement against no caching. The
// result's Strategies are in the core's canonical order, each with its Name.
func (e *Engine) CacheSimulate(ctx context.Context, messages json.RawMessage, opts CacheSimulateOptions) (core.SimulateResult, error) {
	req := newRequest("cache.simulate").raw("messages", messages).raw("system", opts.System).
		str("layout", opts.Layout).str("ttl", opts.TTL).str("model", opts.Model).
		num("min_cacheable_tokens", opts.MinCacheableTokens).flag("per_request", opts.PerRequest).
		raw("config", opts.Config)
	if opts.Strategies != nil {
		b := []byte{'['}
		for i, s := range opts.Strategies {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, string(s))
		}
		req.raw("strategies", append(b, ']'))
	}
	if opts.Timestamps != nil {
		req.raw("timestamps", timestampsJSON(opts.Timestamps))
	}
	raw, err := e.runRaw(ctx, req)
	if err != nil {
		return core.SimulateResult{}, err
	}
	return decodeSimulateResult(raw)
}

// timestampsJSON writes times as the op reads them: RFC 3339 in UTC to the
// millisecond (the core's precision), null for the zero time.
func timestampsJSON(ts []time.Time) json.RawMessage {
	b := []byte{'['}
	for i, t := range ts {
		if i > 0 {
			b = append(b, ',')
		}
		if t.IsZero() {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '"')
		b = t.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
		b = append(b, '"')
	}
	return append(b, ']')
}

// decodeSimulateResult reads cache.simulate's result, whose "strategies" is an
// object keyed by strategy name in canonical order (core.SimulateResult's
// MarshalJSON), back into a core.SimulateResult with its Strategies in that order.
func decodeSimulateResult(raw json.RawMessage) (core.SimulateResult, error) {
	var r core.SimulateResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("%w: decoding the result: %w", ErrABIMismatch, err)
	}
	strategies := gjson.GetBytes(raw, "strategies")
	if !strategies.IsObject() {
		return r, fmt.Errorf("%w: cache.simulate returned no strategies object", ErrABIMismatch)
	}
	var err error
	strategies.ForEach(func(name, v gjson.Result) bool {
		var s core.StrategyResult
		if err = json.Unmarshal([]byte(v.Raw), &s); err != nil {
			err = fmt.Errorf("%w: decoding strategy %s: %w", ErrABIMismatch, strconv.Quote(name.Str), err)
			return false
		}
		s.Name = core.Strategy(name.Str)
		r.Strategies = append(r.Strategies, s)
		return true
	})
	return r, err
}
