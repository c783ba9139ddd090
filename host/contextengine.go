package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// ContextEngine keeps an agent session between compactions, with the method set of
// the JS and Python ContextEngine (Hermes' context-engine interface): feed it each
// LLM response's usage (UpdateFromResponse), ask it whether to compact
// (ShouldCompress), compact (Compress), switch models (UpdateModel), start over
// (OnSessionReset), and read its Status.
//
// Its rules are the core's engine.* ops (docs/OPS.md): the usage of OpenAI, the
// Responses API, Anthropic, the AI SDK and Gemini, the breaker that keeps a
// compaction that could not fit from triggering every turn, the model switch.
// The ContextEngine only keeps the engine state, a JSON object the ops return and
// take back, so a host can persist a session (State) and restore it
// (ContextEngineOptions.State), in this or another runtime.
//
// With {"context": {"engine": "lossless"}} in its config, a Store and a SessionID
// (ContextEngineOptions), it is the lossless engine (issue 17, docs/RECALL.md):
// every compaction is archived to the store as range r<k>, its summary names the
// range, and the agent gets the tools context_search and context_expand
// (ToolSchemas, HandleToolCall: Hermes' get_tool_schemas and handle_tool_call).
//
// A ContextEngine is safe for concurrent use: each op runs under a mutex, which
// Compress does not hold while it compacts (the summarizer may take minutes).
type ContextEngine struct {
	e         *Engine
	summarize Summarize
	timeout   time.Duration
	// store and session: where a lossless engine archives (nil in compressor mode).
	store   RecallStore
	session string

	mu     sync.Mutex
	state  json.RawMessage
	status core.EngineStatus
	// originals are the last compaction's archived messages, for Undo (a
	// compressor engine's copy; a lossless one asks its store).
	originals []json.RawMessage
}

// ContextEngineOptions are the optional parameters of NewContextEngine.
type ContextEngineOptions struct {
	// Summarize is the summarizer Compress calls; nil for the built-in extractive
	// summary.
	Summarize Summarize
	// Timeout bounds Summarize in each Compress, as CompactOptions.Timeout: 0
	// means DefaultSummarizeTimeout; negative is an invalid_request at /timeout.
	Timeout time.Duration
	// State, when not nil, restores a session: an engine state that State
	// returned (here or in another runtime). The session's config is then the
	// state's, and NewContextEngine's cfg must be nil. A state that is not one is
	// invalid_state at /state.
	State json.RawMessage
	// Store is the recall store a lossless engine ({"context": {"engine":
	// "lossless"}}) archives every compaction's originals to, and its tools read:
	// a *recall.Store (package github.com/ctxcompact/ctxcompact/recall). Required in
	// lossless mode, ignored in compressor mode.
	Store RecallStore
	// SessionID names the session in the store (required in lossless mode).
	SessionID string
}

// CompressOptions are the optional parameters of Compress.
type CompressOptions struct {
	// Force compacts even below the threshold.
	Force bool
	// PromptTokens is the prompt size to compact for; 0 means the session's last
	// reported prompt tokens (when it has any; else the core estimates).
	PromptTokens int
	// Config, when not nil, is merged over the session's config for this call
	// only (config.merge; errors at /config/...).
	Config json.RawMessage
	// Output is "messages" (or "") or "refs".
	Output string
	// Format is the messages' shape; "" detects it (see Format).
	Format Format
	// System is the Anthropic top-level system prompt (see CompactRequest.System);
	// the result's System is the one to send next.
	System json.RawMessage
	// Focus is a topic the summary gives priority to, and MemoryContext what a
	// memory provider knows: both are added to the summary request.
	Focus         string
	MemoryContext string
	// Pins are messages kept verbatim, never summarized or pruned: the session
	// keeps them pinned in later compactions too, by the messages' bytes
	// (docs/STEERING.md "Pins").
	Pins []core.Pin
	// Range, when not nil, summarizes exactly the messages [From, To), whatever
	// the trigger: a range compaction (docs/STEERING.md).
	Range *core.IndexRange
}

// engineResult is what every engine.* op returns, with the fields some add.
type engineResult struct {
	State          json.RawMessage   `json:"state"`
	Status         core.EngineStatus `json:"status"`
	ShouldCompress bool              `json:"should_compress"`
}

// NewContextEngine starts a session with config cfg (a JSON config object; nil
// for the defaults), validated here: a bad config is invalid_config at
// /config/<section>/<key>. With opts.State it resumes that session instead.
func NewContextEngine(ctx context.Context, e *Engine, cfg json.RawMessage, opts ContextEngineOptions) (*ContextEngine, error) {
	if opts.Timeout < 0 {
		return nil, &core.Error{Code: core.CodeInvalidRequest, Path: "/timeout",
			Message: fmt.Sprintf("ctxcompact: timeout must be positive, not %v (at /timeout)", opts.Timeout)}
	}
	ce := &ContextEngine{e: e, summarize: opts.Summarize, timeout: opts.Timeout, store: opts.Store, session: opts.SessionID}
	var req *request
	switch {
	case opts.State != nil && cfg != nil:
		return nil, &core.Error{Code: core.CodeInvalidRequest, Path: "/config",
			Message: "ctxcompact: pass a config or a state to restore, not both: a state carries its config (at /config)"}
	case opts.State != nil:
		req = newRequest("engine.status").raw("state", orNull(opts.State))
	default:
		req = newRequest("engine.start").raw("config", cfg)
	}
	if err := ce.apply(ctx, req, nil); err != nil {
		return nil, err
	}
	if !ce.Lossless() {
		ce.store, ce.session = nil, ""
	} else if opts.Store == nil {
		return nil, &core.Error{Code: core.CodeInvalidRequest, Path: "/store",
			Message: "ctxcompact: a lossless context engine needs a recall store (ContextEngineOptions.Store) (at /store)"}
	} else if opts.SessionID == "" {
		return nil, &core.Error{Code: core.CodeInvalidRequest, Path: "/session_id",
			Message: "ctxcompact: a lossless context engine needs a session id (ContextEngineOptions.SessionID) (at /session_id)"}
	}
	return ce, nil
}

// orNull is v, or the JSON null when v is empty (so that an empty state is
// rejected by the core as one, not left out).
func orNull(v json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(v)) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// apply runs an engine op that req starts (the state is added here) and keeps
// the state and status it returns. The caller holds no lock.
func (ce *ContextEngine) apply(ctx context.Context, req *request, res *engineResult) error {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	return ce.applyLocked(ctx, req, res)
}

func (ce *ContextEngine) applyLocked(ctx context.Context, req *request, res *engineResult) error {
	if ce.state != nil {
		req.raw("state", ce.state)
	}
	if res == nil {
		res = new(engineResult)
	}
	if err := ce.e.run(ctx, req, res); err != nil {
		return err
	}
	if len(res.State) == 0 {
		return fmt.Errorf("%w: an engine op returned no state", ErrABIMismatch)
	}
	ce.state, ce.status = res.State, res.Status
	return nil
}

// ShouldCompress reports whether the session should compact now: promptTokens
// (when > 0) or else the last reported prompt tokens reach the threshold, unless
// the breaker holds the trigger back after a compaction that could not fit.
func (ce *ContextEngine) ShouldCompress(ctx context.Context, promptTokens int) (bool, error) {
	res, err := ce.runSession(ctx, core.EventShouldCompress, func(r *request) {
		r.raw("prompt_tokens", promptTokensParam(promptTokens))
	}, nil)
	return gjson.GetBytes(res, "should_compress").Bool(), err
}

// promptTokensParam is the prompt_tokens of an engine op: none for 0, the number
// otherwise (a negative one for the core to reject at /prompt_tokens).
func promptTokensParam(n int) json.RawMessage {
	if n == 0 {
		return nil
	}
	return json.RawMessage(fmt.Sprint(n))
}

// Compress compacts messages (a JSON array of chat messages) under the session's
// config with the engine's summarizer, as Engine.Compact does, and records the
// report in the session: the compaction count, the prompt estimate after it, and
// the breaker. It returns the compaction's result. When the compaction fails
// (a bad input, ctx done, a trap), nothing is recorded.
//
// Lossless: the originals go to the store before the report is recorded, and a
// compaction whose archive fails returns no result and records nothing (the
// caller keeps its messages; a summary naming a range the store does not hold
// never reaches the conversation). Another compaction of the session that
// archived the same range id first is invalid_state at /range/id.
func (ce *ContextEngine) Compress(ctx context.Context, messages json.RawMessage, opts CompressOptions) (core.CompactResult, error) {
	// Output "messages": the core answers with refs, put back here from the input.
	output := opts.Output
	refs := output == "" || output == "messages"
	if refs {
		output = "refs"
	}
	summarizer := core.SummarizerHost
	if ce.summarize == nil {
		summarizer = core.SummarizerBuiltin
	}
	fields := func(r *request) {
		r.str("format", string(opts.Format)).raw("system", opts.System).raw("config", opts.Config).
			flag("force", opts.Force).num("prompt_tokens", opts.PromptTokens).str("output", output).
			str("summarizer", string(summarizer)).str("focus", opts.Focus).str("memory_context", opts.MemoryContext).
			raw("pins", pinsParam(opts.Pins)).raw("range", rangeParam(opts.Range)).raw("messages", messages)
	}
	raw, err := ce.runSession(ctx, core.EventCompress, fields, ce.summarizeEffect)
	if err != nil {
		return core.CompactResult{}, err
	}
	var res core.CompactResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return res, fmt.Errorf("%w: decoding the compaction: %w", ErrABIMismatch, err)
	}
	if res.Report == nil {
		return res, fmt.Errorf("%w: the compaction returned no report", ErrABIMismatch)
	}
	if refs {
		err = putBack(&res, messages)
	}
	if err == nil && res.Report.Compacted && ce.store == nil {
		originals := make([]json.RawMessage, 0, len(res.Archived))
		for _, a := range res.Archived {
			originals = append(originals, a.Message)
		}
		ce.mu.Lock()
		ce.originals = originals
		ce.mu.Unlock()
	}
	return res, err
}

// Undo takes the last compaction back (docs/STEERING.md "See and undo"):
// messages is the conversation as it is now, which must start with that
// compaction's result; Undo returns the compaction's input (the archived
// originals in their places, the messages it returned unchanged as they are
// now) followed by what came after the result. A compressor engine uses its
// copy of the last Compress's originals (this process's), a lossless one its
// store's. It refuses (invalid_state) when nothing is to undo, the conversation
// changed, or the restored conversation does not fit the window.
func (ce *ContextEngine) Undo(ctx context.Context, messages json.RawMessage) (json.RawMessage, error) {
	ce.mu.Lock()
	originals := ce.originals
	ce.mu.Unlock()
	var given json.RawMessage
	if ce.store == nil && originals != nil {
		given = append(append([]byte{'['}, bytes.Join(asByteSlices(originals), []byte{','})...), ']') // byte for byte
	}
	raw, err := ce.runSession(ctx, core.EventUndo, func(r *request) {
		r.raw("originals", given).raw("messages", messages)
	}, ce.storeEffects)
	if err != nil {
		return nil, err
	}
	ce.mu.Lock()
	ce.originals = nil
	ce.mu.Unlock()
	return json.RawMessage(gjson.GetBytes(raw, "messages").Raw), nil
}

// asByteSlices is msgs as byte slices.
func asByteSlices(msgs []json.RawMessage) [][]byte {
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		out[i] = m
	}
	return out
}

// UpdateFromResponse records the usage of the last LLM response, the usage object
// as the API or SDK returned it (OpenAI chat or Responses, Anthropic, the AI SDK,
// Gemini's usageMetadata). A null or empty usage records nothing; a count that is
// not a non-negative integer is invalid_request at /usage/<key>.
func (ce *ContextEngine) UpdateFromResponse(ctx context.Context, usage json.RawMessage) error {
	_, err := ce.runSession(ctx, core.EventUsage, func(r *request) { r.raw("usage", orNull(usage)) }, nil)
	return err
}

// UpdateModel switches the session to another model (or a fallback): the config's
// model section becomes m's, the threshold is resolved again and the breaker is
// cleared; m.BaseURL and m.APIMode are kept in the state. A context length
// outside 1..10M is invalid_request at /context_length.
func (ce *ContextEngine) UpdateModel(ctx context.Context, m core.ModelUpdate) error {
	_, err := ce.runSession(ctx, core.EventUpdateModel, func(r *request) {
		r.str("model", m.Model).raw("context_length", json.RawMessage(fmt.Sprint(m.ContextLength))).
			str("provider", m.Provider).str("base_url", m.BaseURL).str("api_mode", m.APIMode)
	}, nil)
	return err
}

// OnSessionReset starts the session over (/new, /reset): counters, usage, the
// breaker and the last compaction are cleared; the config and the model's route
// stay.
func (ce *ContextEngine) OnSessionReset(ctx context.Context) error {
	_, err := ce.runSession(ctx, core.EventReset, nil, nil)
	return err
}

// Status is the session as the last engine op described it (get_status in JS and
// Python): model, window, threshold, the last usage, the compaction count, the
// breaker and how the last compaction went. It makes no call.
func (ce *ContextEngine) Status() core.EngineStatus {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	st := ce.status
	st.BreakerTokens = clonePtr(st.BreakerTokens)
	st.LastCompactionFits = clonePtr(st.LastCompactionFits)
	st.LastFallbackUsed = clonePtr(st.LastFallbackUsed)
	st.LastFallbackCode = clonePtr(st.LastFallbackCode)
	return st
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// State is the engine state, a copy of the JSON object the core keeps the session
// in: persist it and pass it as ContextEngineOptions.State to resume.
func (ce *ContextEngine) State() json.RawMessage {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	return bytes.Clone(ce.state)
}

// summarizeEffect performs a compress event's effects: the summarizer's, and
// the store's.
func (ce *ContextEngine) summarizeEffect(ctx context.Context, effect *sessionEffect) (json.RawMessage, error) {
	if effect.Type != core.EffectSummarize {
		return ce.storeEffects(ctx, effect)
	}
	var req core.SummaryRequest
	if err := json.Unmarshal([]byte(effect.field("request").Raw), &req); err != nil {
		return nil, fmt.Errorf("%w: decoding a summary request: %w", ErrABIMismatch, err)
	}
	summary, failure, err := runSummarize(ctx, ce.summarize, req, ce.timeout)
	switch {
	case err != nil:
		return nil, err
	case failure != nil:
		return nil, summarizerFailure(failure)
	}
	return appendString(nil, summary), nil
}

// ShouldPrepare reports whether to prepare the next compaction in the background
// now (docs/STEERING.md, "Compaction that never blocks"): the prompt
// (promptTokens when > 0, else the last reported) is at
// compression.prepare_ratio of the threshold but below it, and no compaction
// is prepared, or the one prepared is old. Start PrepareCompaction then, without
// waiting for it.
func (ce *ContextEngine) ShouldPrepare(ctx context.Context, promptTokens int) (bool, error) {
	res, err := ce.runSession(ctx, core.EventShouldCompress, func(r *request) {
		r.raw("prompt_tokens", promptTokensParam(promptTokens))
	}, nil)
	return gjson.GetBytes(res, "prepare_compaction").Bool(), err
}

// PrepareCompaction summarizes messages ahead of the trigger with the engine's
// summarizer and keeps the compaction in the session instead of applying it:
// the Compress at the trigger splices it into the grown conversation (the same
// head and summary, everything after verbatim) without calling the summarizer,
// when the conversation still starts with these messages. It is safe to run
// beside the session's other calls (the engine's lock is held for each step,
// not while the summarizer runs). The result's Prepared is nil, with a Reason,
// when nothing was kept: nothing to summarize, the summarizer failed, or a
// compaction was recorded meanwhile. opts.Force and opts.Output do not apply.
func (ce *ContextEngine) PrepareCompaction(ctx context.Context, messages json.RawMessage, opts CompressOptions) (core.PrepareResult, error) {
	var out core.PrepareResult
	summarizer := core.SummarizerHost
	if ce.summarize == nil {
		summarizer = core.SummarizerBuiltin
	}
	fields := func(r *request) {
		r.str("format", string(opts.Format)).raw("system", opts.System).raw("config", opts.Config).
			num("prompt_tokens", opts.PromptTokens).str("summarizer", string(summarizer)).str("focus", opts.Focus).
			str("memory_context", opts.MemoryContext).flag("prepare", true).raw("pins", pinsParam(opts.Pins)).raw("messages", messages)
	}
	raw, err := ce.runSession(ctx, core.EventCompress, fields, ce.summarizeEffect)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("%w: decoding the prepared compaction: %w", ErrABIMismatch, err)
	}
	return out, nil
}
