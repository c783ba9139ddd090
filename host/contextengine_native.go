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
	// KeepBeforeNewest keeps in the body what precedes the newest compaction item
	// (by default it is left out: the provider drops it anyway).
	KeepBeforeNewest bool
}

// PreparedRequest is a request body made ready for the session's route.
type PreparedRequest struct {
	// Body is the request body with the decision applied: Decision.Body's fields
	// set, Decision.Remove's deleted, and compaction items of other issuers (and
	// what precedes the newest one) left out of its "input" or "messages". nil
	// when PrepareRequest was given no body.
	Body json.RawMessage
	// Betas are the Anthropic beta header values to send.
	Betas []string
	// Trim is what native.trim left out of (or rewrote in) the body's list, to
	// archive; nil when the list was not trimmed.
	Trim *core.NativeTrimResult
	// Decision is native.policy's answer, for CompactNow, AppServer, Local,
	// Notice, ....
	Decision core.NativeDecision
}

// PrepareRequest decides what the next request carries (native.policy, over the
// session's config, route and native session) and applies it to body, a JSON
// request object (the Responses API's, with "input", or a Messages or chat
// completions one, with "messages"); body may be nil when the route sends none
// (the Codex app server: the decision is all). The native session it returns is
// kept.
func (ce *ContextEngine) PrepareRequest(ctx context.Context, body json.RawMessage, opts PrepareRequestOptions) (PreparedRequest, error) {
	var out PreparedRequest
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
	route := ce.routeLocked()
	d, raw, err := ce.e.nativePolicy(ctx, NativePolicyOptions{Config: ce.configLocked(), Route: route,
		Session: ce.nativeLocked(), Tokens: tokens, Manual: opts.Manual})
	if err != nil {
		return out, err
	}
	out.Decision, out.Betas = d, d.Betas
	if len(body) > 0 {
		fields := gjson.GetBytes(raw, "body")
		if out.Body, out.Trim, err = ce.applyDecision(ctx, body, fields, route, d, opts.KeepBeforeNewest); err != nil {
			return out, err
		}
	}
	return out, ce.keepNativeLocked(d.Session)
}

// applyDecision sets the fields of the decision's body (fields, as the core wrote
// them) in body, deletes d.Remove's, and trims the compaction items of its
// "input" or "messages" list.
func (ce *ContextEngine) applyDecision(ctx context.Context, body json.RawMessage, fields gjson.Result, route core.NativeRoute, d core.NativeDecision, keep bool) (json.RawMessage, *core.NativeTrimResult, error) {
	out := bytes.Clone(body)
	var err error
	fields.ForEach(func(k, v gjson.Result) bool {
		out, err = sjson.SetRawBytes(out, escapeKey(k.Str), []byte(v.Raw))
		return err == nil
	})
	for _, k := range d.Remove {
		if err == nil && gjson.GetBytes(out, escapeKey(k)).Exists() {
			out, err = sjson.DeleteBytes(out, escapeKey(k))
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ctxcompact: applying the native decision to the body: %w", err)
	}
	key, format := "input", core.FormatResponses
	list := gjson.GetBytes(out, key)
	if !list.IsArray() {
		key, format = "messages", ""
		if d.Route == core.RouteAnthropic || route.APIMode == "anthropic_messages" {
			format = FormatAnthropic
		}
		list = gjson.GetBytes(out, key)
	}
	// Only a list that may hold a compaction item is worth a trim.
	if !list.IsArray() || !strings.Contains(list.Raw, `"compaction"`) {
		return out, nil, nil
	}
	t, err := ce.e.NativeTrim(ctx, json.RawMessage(list.Raw), NativeTrimOptions{Format: format,
		Session: &d.Session, Route: route, KeepBeforeNewest: keep})
	if err != nil || !t.Changed {
		return out, nil, err
	}
	arr := []byte{'['}
	for i, m := range t.Messages {
		if i > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, m...)
	}
	if out, err = sjson.SetRawBytes(out, key, append(arr, ']')); err != nil {
		return nil, nil, fmt.Errorf("ctxcompact: setting the body's %s: %w", key, err)
	}
	return out, &t, nil
}

// escapeKey is key as an sjson path of one top-level key.
func escapeKey(key string) string {
	var b strings.Builder
	for _, r := range key {
		if strings.ContainsRune(`\.*?|#@!:`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
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
