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

// NativeSession is the native session a ContextEngine keeps, decoded.
type NativeSession struct {
	V int `json:"v"`
	// Route is the route key the session last decided for.
	Route string `json:"route"`
	// Disabled lists the mechanisms a provider rejected for the session
	// (openai_compaction, anthropic_compaction).
	Disabled []string `json:"disabled"`
	// Issuers maps each compaction item's key to the route that issued it.
	Issuers map[string]string `json:"issuers"`
	// AppServer is the Codex app-server bookkeeping.
	AppServer NativeAppServerSession `json:"app_server"`
	// NoticeShown is "<model>@<threshold_tokens>" of the autoraise notice last
	// shown.
	NoticeShown string `json:"notice_shown"`
}

// NativeAppServerSession is the app-server part of a NativeSession.
type NativeAppServerSession struct {
	// Pending says a compaction was started and has not completed.
	Pending bool `json:"pending"`
	// Compactions counts the completed compactions.
	Compactions int `json:"compactions"`
	// Boundaries are the local transcript's lengths at each completed compaction.
	Boundaries []int `json:"boundaries"`
}

// PrepareRequestOptions are the optional parameters of PrepareRequest.
type PrepareRequestOptions struct {
	// Tokens is the prompt's current size; 0 means the session's last reported
	// prompt tokens.
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
	// Dropped are the items or messages left out of the body, to archive.
	Dropped []json.RawMessage
	// Decision is native.policy's answer, for CompactNow, AppServer, Local,
	// Notice, ....
	Decision NativeDecision
}

// PrepareRequest decides what the next request carries (native.policy, over the
// session's config, route and native session) and applies it to body, a JSON
// request object (the Responses API's, with "input", or a Messages or chat
// completions one, with "messages"); body may be nil when the route sends none
// (the Codex app server: the decision is all). The native session it returns is
// kept.
func (ce *ContextEngine) PrepareRequest(ctx context.Context, body json.RawMessage, opts PrepareRequestOptions) (PreparedRequest, error) {
	var out PreparedRequest
	if len(body) > 0 && !gjson.GetBytes(body, "@this").IsObject() {
		return out, invalidRequest("/body", "the request body must be a JSON object")
	}
	ce.mu.Lock()
	defer ce.mu.Unlock()
	tokens := opts.Tokens
	if tokens == 0 {
		tokens = ce.status.LastPromptTokens
	}
	route := ce.routeLocked()
	d, err := ce.e.NativePolicy(ctx, NativePolicyOptions{Config: ce.configLocked(), Route: route,
		Session: ce.nativeLocked(), Tokens: tokens, Manual: opts.Manual})
	if err != nil {
		return out, err
	}
	out.Decision, out.Betas = d, d.Betas
	if len(body) > 0 {
		if out.Body, out.Dropped, err = ce.applyDecision(ctx, body, route, d, opts.KeepBeforeNewest); err != nil {
			return out, err
		}
	}
	return out, ce.keepNativeLocked(d.Session)
}

// applyDecision sets d.Body's fields in body, deletes d.Remove's, and trims the
// compaction items of its "input" or "messages" list.
func (ce *ContextEngine) applyDecision(ctx context.Context, body json.RawMessage, route NativeRoute, d NativeDecision, keep bool) (json.RawMessage, []json.RawMessage, error) {
	out := bytes.Clone(body)
	var err error
	gjson.ParseBytes(d.Body).ForEach(func(k, v gjson.Result) bool {
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
		if d.Route == "anthropic" || route.APIMode == "anthropic_messages" {
			format = FormatAnthropic
		}
		list = gjson.GetBytes(out, key)
	}
	// Only a list that may hold a compaction item is worth a trim.
	if !list.IsArray() || !strings.Contains(list.Raw, `"compaction"`) {
		return out, nil, nil
	}
	t, err := ce.e.NativeTrim(ctx, json.RawMessage(list.Raw), NativeTrimOptions{Format: format,
		Session: d.Session, Route: route, KeepBeforeNewest: keep})
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
	return out, t.DroppedMessages, nil
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
func (ce *ContextEngine) ObserveResponse(ctx context.Context, response json.RawMessage) (NativeObserveResult, error) {
	return ce.observe(ctx, NativeObserveOptions{Response: orNull(response)})
}

// ObserveError records an error response (HTTP status and body, JSON or not). A
// rejection of the native compaction field disables it for the session, and the
// result's Retry says to send the request again: PrepareRequest then leaves the
// field out. A transient compaction failure is retried as it is.
func (ce *ContextEngine) ObserveError(ctx context.Context, status int, body []byte) (NativeObserveResult, error) {
	return ce.observe(ctx, NativeObserveOptions{Error: &NativeError{Status: status, Body: body}})
}

// ObserveEvent records a Codex app-server JSON-RPC message: a notification the
// peer sent (item/started, item/completed, thread/compacted, turn/completed), or
// the host's own thread/compact/start request. messagesCount is the local
// transcript's length, recorded as the boundary of a completed compaction (0 for
// none).
func (ce *ContextEngine) ObserveEvent(ctx context.Context, message json.RawMessage, messagesCount int) (NativeObserveResult, error) {
	if messagesCount < 0 {
		return NativeObserveResult{}, invalidRequest("/messages_count",
			fmt.Sprintf("messages_count must not be negative, not %d", messagesCount))
	}
	return ce.observe(ctx, NativeObserveOptions{Event: orNull(message), MessagesCount: messagesCount})
}

func (ce *ContextEngine) observe(ctx context.Context, opts NativeObserveOptions) (NativeObserveResult, error) {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	opts.Config, opts.Route, opts.Session = ce.configLocked(), ce.routeLocked(), ce.nativeLocked()
	r, err := ce.e.NativeObserve(ctx, opts)
	if err != nil {
		return r, err
	}
	return r, ce.keepNativeLocked(r.Session)
}

// NativeSession is the native session the engine keeps (the zero session before
// any native call). It makes no call.
func (ce *ContextEngine) NativeSession() NativeSession {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	var s NativeSession
	if raw := ce.nativeLocked(); raw != nil {
		_ = json.Unmarshal(raw, &s) // the core wrote it
	}
	return s
}

func (ce *ContextEngine) configLocked() json.RawMessage {
	if c := gjson.GetBytes(ce.state, "config"); c.IsObject() {
		return json.RawMessage(c.Raw)
	}
	return nil
}

// routeLocked is the session's route: the config's provider and the route
// UpdateModel recorded.
func (ce *ContextEngine) routeLocked() NativeRoute {
	return NativeRoute{Provider: gjson.GetBytes(ce.state, "config.model.provider").Str,
		BaseURL: gjson.GetBytes(ce.state, "base_url").Str, APIMode: gjson.GetBytes(ce.state, "api_mode").Str}
}

// nativeLocked is the state's native session, nil when it has none.
func (ce *ContextEngine) nativeLocked() json.RawMessage {
	if n := gjson.GetBytes(ce.state, "native"); n.IsObject() {
		return json.RawMessage(n.Raw)
	}
	return nil
}

// keepNativeLocked stores session as the state's native field.
func (ce *ContextEngine) keepNativeLocked(session json.RawMessage) error {
	if !gjson.ValidBytes(session) || !gjson.ParseBytes(session).IsObject() {
		return fmt.Errorf("%w: a native op returned no session", ErrABIMismatch)
	}
	st, err := sjson.SetRawBytes(bytes.Clone(ce.state), "native", session)
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
