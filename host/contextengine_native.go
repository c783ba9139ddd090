package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// A ContextEngine applies provider-native compaction (issue 16) to each request
// and feeds what comes back into its native session, which it keeps in its state
// ("native"; see NativePolicy): PrepareRequest before a request, ObserveResponse
// and ObserveError after it, ObserveEvent for a Codex app-server message. The
// route is the session's: config.model.provider and the base URL and API mode
// UpdateModel set.

// PrepareRequestOptions are the optional parameters of PrepareRequest.
type PrepareRequestOptions struct {
	// Tokens is the prompt's current size; 0 means the session's last reported
	// prompt tokens. After an Anthropic on-demand compaction has been swapped in
	// (NativeTrim with Replace), the last report is the summarized conversation's:
	// pass the new prompt's estimate (TokensCount) until the next response.
	Tokens int
	// Manual reports that the user asked to compact now.
	Manual bool
}

// PrepareRequest makes body, the JSON request object the host is about to send
// (the Responses API's, with "input", or Anthropic Messages', with "messages"),
// ready for the session's route (session.run's prepare) over the session's
// config, route and native session: the OpenAI field set, or removed where it must
// not go; Anthropic's compaction edit merged into the body's own
// context_management edits; other issuers' compaction items, and what precedes
// the newest one, trimmed from the list (the result's Trimmed, which a lossless
// engine archives first). The result's Betas go in the anthropic-beta header
// beside the host's own, and CompactionBody, when not null, is the Anthropic
// on-demand compaction request to send now. body may be nil where the route sends
// none (the Codex app server): the result then holds the Decision alone. The
// native session it returns is kept.
func (ce *ContextEngine) PrepareRequest(ctx context.Context, body json.RawMessage, opts PrepareRequestOptions) (core.NativePrepared, error) {
	var out core.NativePrepared
	switch {
	case len(body) == 0:
	case !gjson.ValidBytes(body):
		return out, &core.Error{Code: core.CodeInvalidJSON, Path: "/body", Message: "ctxcompact: body is not valid JSON (at /body)"}
	case !gjson.ParseBytes(body).IsObject():
		return out, invalidRequest("/body", "the request body must be a JSON object")
	}
	res, err := ce.runSession(ctx, core.EventPrepare, func(r *request) {
		r.num("tokens", opts.Tokens).flag("manual", opts.Manual).raw("body", body)
	}, ce.storeEffects)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return out, fmt.Errorf("%w: decoding the prepared request: %w", ErrABIMismatch, err)
	}
	if len(body) == 0 {
		out = core.NativePrepared{Decision: out.Decision, Betas: out.Decision.Betas}
	}
	return out, nil
}

// ObserveResponse records what the provider's response object (a Responses
// response, an Anthropic Message) says about native compaction: the compaction
// items it returned, with this route as their issuer.
func (ce *ContextEngine) ObserveResponse(ctx context.Context, response json.RawMessage) (core.NativeObservation, error) {
	return ce.observe(ctx, core.EventObserveResp, func(r *request) { r.raw("response", orNull(response)) })
}

// ObserveError records an error response (HTTP status and body, JSON or not). A
// rejection of the native compaction field disables it for the session, and the
// result's Retry says to send the request again: PrepareRequest then leaves the
// field out. A transient compaction failure is retried as it is.
func (ce *ContextEngine) ObserveError(ctx context.Context, status int, body []byte) (core.NativeObservation, error) {
	e := gjson.ParseBytes(errorJSON(NativeError{Status: status, Body: body}))
	return ce.observe(ctx, core.EventObserveError, func(r *request) {
		r.raw("status", json.RawMessage(e.Get("status").Raw)).raw("body", json.RawMessage(e.Get("body").Raw))
	})
}

// ObserveEvent records a Codex app-server JSON-RPC message: a notification the
// peer sent (item/started, item/completed, thread/compacted, turn/completed), or
// the host's own thread/compact/start request. messagesCount is the local
// transcript's length, recorded as the boundary of a completed compaction; a
// negative one records none.
func (ce *ContextEngine) ObserveEvent(ctx context.Context, message json.RawMessage, messagesCount int) (core.NativeObservation, error) {
	return ce.observe(ctx, core.EventObserveEvent, func(r *request) {
		r.raw("message", orNull(message))
		if messagesCount >= 0 {
			r.raw("messages_count", json.RawMessage(strconv.Itoa(messagesCount)))
		}
	})
}

func (ce *ContextEngine) observe(ctx context.Context, event string, fields func(*request)) (core.NativeObservation, error) {
	var o core.NativeObservation
	res, err := ce.runSession(ctx, event, fields, nil)
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(res, &o); err != nil {
		return o, fmt.Errorf("%w: decoding the observation: %w", ErrABIMismatch, err)
	}
	return o, nil
}

// NativeSession is the native session the engine keeps in its state, nil before
// the first native call (PrepareRequest or an Observe method). It makes no call;
// the session is a copy.
func (ce *ContextEngine) NativeSession() *core.NativeSession {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	return ce.nativeLocked()
}

// nativeLocked is the state's native session (decoded afresh: a copy), nil when
// it has none.
func (ce *ContextEngine) nativeLocked() *core.NativeSession {
	n := gjson.GetBytes(ce.state, "native")
	if !n.IsObject() {
		return nil
	}
	s := new(core.NativeSession)
	if json.Unmarshal([]byte(n.Raw), s) != nil {
		return nil // not ours to repair: the core says invalid_state at the next engine op
	}
	return s
}

// invalidRequest is an invalid_request error at path.
func invalidRequest(path, msg string) error {
	return &core.Error{Code: core.CodeInvalidRequest, Path: path,
		Message: "ctxcompact: " + msg + " (at " + path + ")"}
}

// ApplyCompactionOptions are the options of ApplyCompaction.
type ApplyCompactionOptions struct {
	// Count is how many leading messages the compaction request sent (and the
	// block replaces); 0 means all of them.
	Count int
}

// ApplyCompactionResult is native.trim's result of the swap, and the recall range
// a lossless engine archived the summarized messages under ("" otherwise).
type ApplyCompactionResult struct {
	core.NativeTrimResult
	ArchivedAs string
}

// ApplyCompaction finishes an Anthropic on-demand compaction: response is the
// compaction request's answer (an Anthropic message whose content holds the
// compaction block); the block is recorded (ObserveResponse) and swapped in for
// the first Count messages with native.trim's replace. The result's messages start
// with the assistant message holding the block; its DroppedMessages are the
// summarized originals, which a lossless engine archives. Until a response reports
// usage, the prompt's size is the swapped conversation's estimate.
func (ce *ContextEngine) ApplyCompaction(ctx context.Context, messages, response json.RawMessage, opts ApplyCompactionOptions) (ApplyCompactionResult, error) {
	var out ApplyCompactionResult
	if !gjson.ParseBytes(messages).IsArray() {
		return out, &core.Error{Code: core.CodeInvalidMessages, Path: "/messages", Message: "ctxcompact: messages must be a JSON array (at /messages)"}
	}
	res, err := ce.runSession(ctx, core.EventApply, func(r *request) {
		r.raw("response", orNull(response)).num("count", max(opts.Count, 0)).raw("messages", messages)
	}, ce.storeEffects)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(res, &out.NativeTrimResult); err != nil {
		return out, fmt.Errorf("%w: decoding the swap: %w", ErrABIMismatch, err)
	}
	out.ArchivedAs = gjson.GetBytes(res, "archived_as").Str
	return out, nil
}
