package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
)

// The provider-native compaction ops (issue 16, docs/OPS.md): native.policy says
// what the next request to a route carries (OpenAI's context_management
// compaction field, an Anthropic compaction edit or beta, or nothing) and who
// starts a Codex app-server compaction; native.observe updates the session from a
// response, an error or an app-server event; native.trim drops the compaction
// items another issuer left in a conversation, and what precedes the newest one.
// The session is data the host keeps and sends back (a JSON object, nil for a
// fresh one): the core stays stateless. A ContextEngine keeps it in its state
// (PrepareRequest, ObserveResponse, ObserveError, ObserveEvent).

// NativeRoute is where a request goes: the provider, the base URL and the API mode
// (chat_completions, codex_responses, anthropic_messages, codex_app_server). Every
// field is optional; the core derives the route key (openai, codex, anthropic,
// codex_app_server, other:<host>) from them.
type NativeRoute struct {
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
	APIMode  string `json:"api_mode,omitempty"`
}

// NativePolicyOptions are the parameters of NativePolicy.
type NativePolicyOptions struct {
	// Config is a JSON config object; nil for the defaults. Its model.name and
	// model.context_length are the model and window decided for, its compression
	// section the opt-ins (codex_responses_native, anthropic_native,
	// codex_app_server_auto, ...).
	Config json.RawMessage
	// Route is where the request goes.
	Route NativeRoute
	// Session is the native session the last native op returned; nil for a fresh
	// one.
	Session json.RawMessage
	// Tokens is the prompt's current size, for the who-initiates decisions
	// (Anthropic on-demand, the app server's hermes mode); 0 for unknown.
	Tokens int
	// Manual reports that the user asked to compact now.
	Manual bool
}

// NativeDecision is what native.policy returns: what the next request carries, and
// why. Every field is always present on the wire.
type NativeDecision struct {
	// Route is the route key (openai, codex, anthropic, codex_app_server,
	// other:<host>, other).
	Route string `json:"route"`
	// Mechanism is openai_compaction, anthropic_threshold, anthropic_on_demand,
	// app_server or none.
	Mechanism string `json:"mechanism"`
	// Reason is a stable code: sent, not_enabled, model_not_eligible,
	// route_not_eligible, not_responses_api, rejected, window_too_small, armed,
	// compact_now, pending, app_server_native, app_server_hermes, app_server_off.
	Reason string `json:"reason"`
	// Body holds the top-level request fields to set (a JSON object, {} for none).
	Body json.RawMessage `json:"body"`
	// Remove lists the top-level request fields to delete when present.
	Remove []string `json:"remove"`
	// Betas are the Anthropic beta header values to send (anthropic-beta).
	Betas []string `json:"betas"`
	// CompactNow says the host should start native compaction now.
	CompactNow bool `json:"compact_now"`
	// CompactionRequest is, for Anthropic on-demand compaction, the body fields of
	// the compaction request (JSON null otherwise).
	CompactionRequest json.RawMessage `json:"compaction_request"`
	// AppServer is the app-server decision on that route, nil elsewhere.
	AppServer *NativeAppServerDecision `json:"app_server"`
	// DropIssuers are the issuers whose recorded compaction items must not be
	// sent (every recorded issuer but the current route).
	DropIssuers []string `json:"drop_issuers"`
	// Local is what the local compressor does beside it.
	Local NativeLocal `json:"local"`
	// CompactThreshold is the compact_threshold sent (0 when not applicable).
	CompactThreshold int `json:"compact_threshold"`
	// Notice is the Codex gpt-5.5 autoraise notice, nil when the threshold was not
	// autoraised.
	Notice *NativeNotice `json:"notice"`
	// Session is the next session: keep it and send it back.
	Session json.RawMessage `json:"session"`
}

// NativeAppServerDecision is the Codex app-server part of a NativeDecision.
type NativeAppServerDecision struct {
	// Mode is compression.codex_app_server_auto: native, hermes or off.
	Mode string `json:"mode"`
	// Initiator is who starts compaction: app_server, host or none.
	Initiator string `json:"initiator"`
	// CompactNow says the host should send thread/compact/start now.
	CompactNow bool `json:"compact_now"`
}

// NativeLocal is what the local compressor does on the route.
type NativeLocal struct {
	// Armed says the local compressor stays the fallback.
	Armed bool `json:"armed"`
	// Rewrite is false where the local transcript is never rewritten (the app
	// server: the compaction boundary is recorded instead).
	Rewrite bool `json:"rewrite"`
	// ThresholdTokens is the local trigger threshold.
	ThresholdTokens int `json:"threshold_tokens"`
}

// NativeNotice is the one-time notice of the Codex gpt-5.5 autoraise.
type NativeNotice struct {
	// Kind is codex_autoraise.
	Kind  string `json:"kind"`
	Model string `json:"model"`
	// From and To are the threshold fractions before and after the raise.
	From float64 `json:"from"`
	To   float64 `json:"to"`
	// Show says the host should show it now (it has not for this model and
	// threshold).
	Show bool `json:"show"`
}

// NativePolicy decides what the next request to opts.Route carries and who starts
// compaction.
func (e *Engine) NativePolicy(ctx context.Context, opts NativePolicyOptions) (NativeDecision, error) {
	var r NativeDecision
	req := newRequest("native.policy").raw("config", opts.Config).raw("route", routeJSON(opts.Route)).
		raw("session", opts.Session).num("tokens", opts.Tokens).flag("manual", opts.Manual)
	err := e.run(ctx, req, &r)
	return r, err
}

// routeJSON is the route object of a native op ({} for the zero route).
func routeJSON(r NativeRoute) json.RawMessage {
	b, _ := json.Marshal(r) // three strings always encode
	return b
}

// NativeError is a provider's error response, for NativeObserveOptions.Error.
type NativeError struct {
	// Status is the HTTP status.
	Status int
	// Body is the response body: a JSON value as it came, or any other bytes,
	// which are sent as a JSON string.
	Body []byte
}

// NativeObserveOptions are the parameters of NativeObserve: Config, Route and
// Session, and exactly one of Response, Error and Event.
type NativeObserveOptions struct {
	// Config is a JSON config object; nil for the defaults.
	Config json.RawMessage
	// Route is where the request went.
	Route NativeRoute
	// Session is the native session to update; nil for a fresh one.
	Session json.RawMessage
	// Response is the provider's response object (a Responses response with
	// "output", an Anthropic Message with "content").
	Response json.RawMessage
	// Error is the provider's error response.
	Error *NativeError
	// Event is an app-server JSON-RPC message ({"method", "params"}), a
	// notification the peer sent or the host's own thread/compact/start.
	Event json.RawMessage
	// MessagesCount is the length of the local transcript when Event arrives: a
	// completed compaction records it as its boundary. 0 records none.
	MessagesCount int
}

// NativeObserveResult is what native.observe returns.
type NativeObserveResult struct {
	// Session is the updated session: keep it and send it back.
	Session json.RawMessage `json:"session"`
	// Seen lists the compaction items or events observed.
	Seen []NativeSeen `json:"seen"`
	// Disabled names the mechanism the observation disabled for the session
	// (openai_compaction or anthropic_compaction), "" for none.
	Disabled string `json:"disabled"`
	// Retry says to send the request again (without the rejected field when
	// Disabled is set).
	Retry bool `json:"retry"`
	// Reason is a stable code: rejected, transient, compaction_returned,
	// unrelated, ...
	Reason string `json:"reason"`
}

// NativeSeen is one compaction item, block or event an observation saw.
type NativeSeen struct {
	// Kind is openai_compaction, anthropic_compaction or app_server_compaction.
	Kind string `json:"kind"`
	// Key is the item's key in the session's issuers ("" for an event).
	Key string `json:"key"`
	// Issuer is the route key that issued it.
	Issuer string `json:"issuer"`
}

// NativeObserve updates a native session from a provider response, an error
// response or an app-server event.
func (e *Engine) NativeObserve(ctx context.Context, opts NativeObserveOptions) (NativeObserveResult, error) {
	var r NativeObserveResult
	req := newRequest("native.observe").raw("config", opts.Config).raw("route", routeJSON(opts.Route)).
		raw("session", opts.Session).raw("response", opts.Response).raw("event", opts.Event).
		num("messages_count", opts.MessagesCount)
	if opts.Error != nil {
		req.raw("error", errorJSON(*opts.Error))
	}
	err := e.run(ctx, req, &r)
	return r, err
}

// errorJSON is the error object of native.observe: the body as it came when it is
// JSON, else as a string.
func errorJSON(e NativeError) json.RawMessage {
	b := append([]byte(`{"status":`), strconv.Itoa(e.Status)...)
	b = append(b, `,"body":`...)
	if len(e.Body) > 0 && gjson.ValidBytes(e.Body) {
		b = append(b, e.Body...)
	} else {
		b = appendString(b, string(e.Body))
	}
	return append(b, '}')
}

// NativeReplace swaps the first Count messages for Message (Anthropic on-demand
// compaction: the signed compaction block replaces what it summarized).
type NativeReplace struct {
	Count   int
	Message json.RawMessage
}

// NativeTrimOptions are the optional parameters of NativeTrim.
type NativeTrimOptions struct {
	// Format is the messages' shape; "" detects it.
	Format Format
	// Session is the native session whose issuers say who issued each compaction
	// item; nil for a fresh one.
	Session json.RawMessage
	// Route is where the messages go: items another route issued are removed.
	Route NativeRoute
	// KeepBeforeNewest keeps what precedes the newest compaction item (the op
	// drops it by default).
	KeepBeforeNewest bool
	// Replace, when not nil, is applied first.
	Replace *NativeReplace
}

// NativeTrimResult is what native.trim returns.
type NativeTrimResult struct {
	// Messages are the messages to send, each as JSON.
	Messages []json.RawMessage `json:"messages"`
	// Dropped lists each input message left out, by index, with its reason
	// (replaced, other_issuer, before_compaction).
	Dropped []NativeDropped `json:"dropped"`
	// DroppedMessages are those messages, in the same order: archive them.
	DroppedMessages []json.RawMessage `json:"dropped_messages"`
	// Changed reports any change.
	Changed bool `json:"changed"`
}

// NativeDropped is one message native.trim left out.
type NativeDropped struct {
	Index  int    `json:"index"`
	Reason string `json:"reason"`
}

// NativeTrim removes from messages the compaction items of other issuers than
// opts.Route and, unless opts.KeepBeforeNewest, what precedes the newest one.
func (e *Engine) NativeTrim(ctx context.Context, messages json.RawMessage, opts NativeTrimOptions) (NativeTrimResult, error) {
	var r NativeTrimResult
	req := newRequest("native.trim").raw("messages", messages).str("format", string(opts.Format)).
		raw("session", opts.Session).raw("route", routeJSON(opts.Route))
	if opts.KeepBeforeNewest {
		req.raw("drop_before_newest", json.RawMessage("false"))
	}
	if rp := opts.Replace; rp != nil {
		b := fmt.Appendf(nil, `{"count":%d,"message":`, rp.Count)
		req.raw("replace", append(append(b, orNull(rp.Message)...), '}'))
	}
	err := e.run(ctx, req, &r)
	return r, err
}
