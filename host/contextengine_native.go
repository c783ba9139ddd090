package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

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
// ready for the session's route in one native.prepare call over the session's
// config, route and native session: the OpenAI field set, or removed where it must
// not go; Anthropic's compaction edit merged into the body's own
// context_management edits; other issuers' compaction items, and what precedes
// the newest one, trimmed from the list (the result's Trimmed, to archive). The
// result's Betas go in the anthropic-beta header beside the host's own, and
// CompactionBody, when not null, is the Anthropic on-demand compaction request to
// send now. body may be nil where the route sends none (the Codex app server):
// the result then holds the Decision alone. The native session it returns is kept.
func (ce *ContextEngine) PrepareRequest(ctx context.Context, body json.RawMessage, opts PrepareRequestOptions) (core.NativePrepared, error) {
	var out core.NativePrepared
	switch {
	case len(body) == 0:
	case !gjson.ValidBytes(body):
		return out, &core.Error{Code: core.CodeInvalidJSON, Path: "/body", Message: "ctxcompact: body is not valid JSON (at /body)"}
	case !gjson.ParseBytes(body).IsObject():
		return out, invalidRequest("/body", "the request body must be a JSON object")
	}
	ce.mu.Lock()
	defer ce.mu.Unlock()
	tokens := opts.Tokens
	if tokens == 0 {
		tokens = ce.status.LastPromptTokens
	}
	po := NativePolicyOptions{Config: ce.configLocked(), Route: ce.routeLocked(), Session: ce.nativeLocked(),
		Tokens: tokens, Manual: opts.Manual}
	var err error
	if len(body) == 0 {
		out.Decision, err = ce.e.NativePolicy(ctx, po)
		out.Betas = out.Decision.Betas
	} else {
		out, err = ce.prepare(ctx, body, po)
	}
	if err != nil {
		return out, err
	}
	if ce.store != nil && len(out.Trimmed.Archive) > 0 {
		if out.Trimmed.ArchivedAs, err = ce.archiveNative(ctx, out.Trimmed.Archive); err != nil {
			return out, fmt.Errorf("ctxcompact: archiving what the provider's compaction stands for: %w", err)
		}
	}
	return out, ce.keepNativeLocked(out.Decision.Session)
}

// archiveNative archives what a prepare left out for the first time (what the
// provider's compaction now stands for) as a new recall range, and returns its id.
func (ce *ContextEngine) archiveNative(ctx context.Context, archive []core.NativeArchived) (string, error) {
	id, err := ce.store.NextRangeID(ctx, ce.session)
	if err != nil {
		return "", err
	}
	b := []byte{'['}
	for i, a := range archive {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendArchived(b, a.Index, a.Reason, a.Message)
	}
	b = append(b, ']')
	var rows core.RecallArchive
	req := newRequest("recall.archive").str("session", ce.session).str("range_id", id).raw("report", []byte("{}")).raw("archived", b)
	if err := ce.e.run(ctx, req, &rows); err != nil {
		return "", err
	}
	return id, ce.store.Archive(ctx, ce.session, rows)
}

// prepare is NativePrepare, with the body's list left out of the call when it
// holds no compaction item (nothing to trim: a long conversation is not worth
// copying through the module on every request) and put back after.
func (ce *ContextEngine) prepare(ctx context.Context, body json.RawMessage, po NativePolicyOptions) (core.NativePrepared, error) {
	key := "input"
	list := gjson.GetBytes(body, key)
	if !list.Exists() {
		key = "messages"
		list = gjson.GetBytes(body, key)
	}
	if !list.IsArray() || strings.Contains(list.Raw, `"compaction"`) {
		return ce.e.NativePrepare(ctx, body, po)
	}
	rest, err := sjson.DeleteBytes(bytes.Clone(body), key)
	if err != nil {
		return core.NativePrepared{}, fmt.Errorf("ctxcompact: setting the body's %s aside: %w", key, err)
	}
	out, err := ce.e.NativePrepare(ctx, rest, po)
	if err != nil {
		return out, err
	}
	if out.Body, err = sjson.SetRawBytes(out.Body, key, []byte(list.Raw)); err != nil {
		return out, fmt.Errorf("ctxcompact: putting the body's %s back: %w", key, err)
	}
	if cb := gjson.ParseBytes(out.CompactionBody); cb.IsObject() {
		if out.CompactionBody, err = sjson.SetRawBytes(out.CompactionBody, key, []byte(list.Raw)); err != nil {
			return out, fmt.Errorf("ctxcompact: putting the compaction body's %s back: %w", key, err)
		}
	}
	return out, nil
}

// ObserveResponse records what the provider's response object (a Responses
// response, an Anthropic Message) says about native compaction: the compaction
// items it returned, with this route as their issuer.
func (ce *ContextEngine) ObserveResponse(ctx context.Context, response json.RawMessage) (core.NativeObservation, error) {
	return ce.observe(ctx, NativeObserveOptions{Response: orNull(response)})
}

// ObserveError records an error response (HTTP status and body, JSON or not). A
// rejection of the native compaction field disables it for the session, and the
// result's Retry says to send the request again: PrepareRequest then leaves the
// field out. A transient compaction failure is retried as it is.
func (ce *ContextEngine) ObserveError(ctx context.Context, status int, body []byte) (core.NativeObservation, error) {
	return ce.observe(ctx, NativeObserveOptions{Error: &NativeError{Status: status, Body: body}})
}

// ObserveEvent records a Codex app-server JSON-RPC message: a notification the
// peer sent (item/started, item/completed, thread/compacted, turn/completed), or
// the host's own thread/compact/start request. messagesCount is the local
// transcript's length, recorded as the boundary of a completed compaction; a
// negative one records none.
func (ce *ContextEngine) ObserveEvent(ctx context.Context, message json.RawMessage, messagesCount int) (core.NativeObservation, error) {
	opts := NativeObserveOptions{Event: orNull(message)}
	if messagesCount >= 0 {
		opts.MessagesCount = &messagesCount
	}
	return ce.observe(ctx, opts)
}

func (ce *ContextEngine) observe(ctx context.Context, opts NativeObserveOptions) (core.NativeObservation, error) {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	opts.Config, opts.Route, opts.Session = ce.configLocked(), ce.routeLocked(), ce.nativeLocked()
	r, err := ce.e.NativeObserve(ctx, opts)
	if err != nil {
		return r, err
	}
	return r, ce.keepNativeLocked(r.Session)
}

// NativeSession is the native session the engine keeps in its state, nil before
// the first native call (PrepareRequest or an Observe method). It makes no call;
// the session is a copy.
func (ce *ContextEngine) NativeSession() *core.NativeSession {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	return ce.nativeLocked()
}

func (ce *ContextEngine) configLocked() json.RawMessage {
	if c := gjson.GetBytes(ce.state, "config"); c.IsObject() {
		return json.RawMessage(c.Raw)
	}
	return nil
}

// routeLocked is the session's route: the config's provider and the route
// UpdateModel recorded.
func (ce *ContextEngine) routeLocked() core.NativeRoute {
	return core.NativeRoute{Provider: gjson.GetBytes(ce.state, "config.model.provider").Str,
		BaseURL: gjson.GetBytes(ce.state, "base_url").Str, APIMode: gjson.GetBytes(ce.state, "api_mode").Str}
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

// keepNativeLocked stores session as the state's native field.
func (ce *ContextEngine) keepNativeLocked(session core.NativeSession) error {
	if session.V == 0 {
		return fmt.Errorf("%w: a native op returned no session", ErrABIMismatch)
	}
	raw, err := json.Marshal(session)
	if err != nil {
		return fmt.Errorf("ctxcompact: encoding the native session: %w", err)
	}
	st, err := sjson.SetRawBytes(bytes.Clone(ce.state), "native", raw)
	if err != nil {
		return fmt.Errorf("ctxcompact: keeping the native session: %w", err)
	}
	ce.state = st
	return nil
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
	msgs := gjson.ParseBytes(messages)
	if !msgs.IsArray() {
		return out, &core.Error{Code: core.CodeInvalidMessages, Path: "/messages", Message: "ctxcompact: messages must be a JSON array (at /messages)"}
	}
	content := gjson.GetBytes(response, "content")
	block := false
	content.ForEach(func(_, b gjson.Result) bool {
		block = block || b.Get("type").Str == "compaction"
		return !block
	})
	if !content.IsArray() || !block {
		return out, invalidRequest("/response/content", "the response must be an Anthropic message whose content holds a compaction block")
	}
	if _, err := ce.ObserveResponse(ctx, response); err != nil {
		return out, err
	}
	count := opts.Count
	if count <= 0 {
		count = len(msgs.Array())
	}
	message := append(append([]byte(`{"role":"assistant","content":`), content.Raw...), '}')
	ce.mu.Lock()
	defer ce.mu.Unlock()
	r, err := ce.e.NativeTrim(ctx, messages, NativeTrimOptions{Format: core.FormatAnthropic, Session: ce.nativeLocked(),
		Route: ce.routeLocked(), Replace: &NativeReplace{Count: count, Message: message}})
	if err != nil {
		return out, err
	}
	out.NativeTrimResult = r
	if ce.store != nil && len(r.Dropped) > 0 {
		archive := make([]core.NativeArchived, len(r.Dropped))
		for i, d := range r.Dropped {
			archive[i] = core.NativeArchived{Index: d.Index, Reason: d.Reason, Message: r.DroppedMessages[i]}
		}
		if out.ArchivedAs, err = ce.archiveNative(ctx, archive); err != nil {
			return out, fmt.Errorf("ctxcompact: archiving what the compaction summarized: %w", err)
		}
	}
	// The reported size was the summarized conversation's: the swapped one's
	// estimate stands until a response reports usage.
	swapped := append([]byte{'['}, bytes.Join(rawList(r.Messages), []byte{','})...)
	swapped = append(swapped, ']')
	var count2 core.CountTokensResult
	if err := ce.e.run(ctx, newRequest("tokens.count").raw("messages", swapped).str("format", string(core.FormatAnthropic)).
		raw("config", ce.configLocked()), &count2); err != nil {
		return out, err
	}
	usage := fmt.Appendf(nil, `{"prompt_tokens":%d,"completion_tokens":0}`, count2.Total)
	return out, ce.applyLocked(ctx, newRequest("engine.usage").raw("usage", usage), nil)
}

func rawList(msgs []json.RawMessage) [][]byte {
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		out[i] = m
	}
	return out
}
