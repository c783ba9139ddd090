package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// The provider-native compaction ops (issue 16, docs/OPS.md): native.policy says
// what the next request to a route carries (OpenAI's context_management
// compaction field, an Anthropic compaction edit or beta, or nothing) and who
// starts a Codex app-server compaction; native.prepare applies that to a request
// body; native.observe updates the session from a
// response, an error or an app-server event; native.trim drops the compaction
// items another issuer left in a conversation, and what precedes the newest one.
// The session (core.NativeSession, nil for a fresh one) is data the host keeps
// and sends back: the core stays stateless. A ContextEngine keeps it in its state
// (PrepareRequest, ObserveResponse, ObserveError, ObserveEvent).

// NativePolicyOptions are the parameters of NativePolicy.
type NativePolicyOptions struct {
	// Config is a JSON config object; nil for the defaults. Its model.name and
	// model.context_length are the model and window decided for, its compression
	// section the opt-ins (codex_responses_native, anthropic_native,
	// codex_app_server_auto, ...).
	Config json.RawMessage
	// Route is where the request goes: provider, base URL, API mode
	// (chat_completions, codex_responses, anthropic_messages, codex_app_server);
	// the core derives the route key from it (core.NativeRoute.Key).
	Route core.NativeRoute
	// Session is the native session the last native op returned; nil for a fresh
	// one.
	Session *core.NativeSession
	// Tokens is the prompt's current size, for the who-initiates decisions
	// (Anthropic on-demand, the app server's hermes mode); 0 for unknown.
	Tokens int
	// Manual reports that the user asked to compact now.
	Manual bool
}

// NativePolicy decides what the next request to opts.Route carries (the fields to
// set and to remove, the Anthropic betas), why, and who starts a compaction.
// Keep the result's Session for the next native call.
func (e *Engine) NativePolicy(ctx context.Context, opts NativePolicyOptions) (core.NativeDecision, error) {
	var r core.NativeDecision
	req := newRequest("native.policy").raw("config", opts.Config).raw("route", routeJSON(opts.Route)).
		raw("session", sessionJSON(opts.Session)).num("tokens", opts.Tokens).flag("manual", opts.Manual)
	err := e.run(ctx, req, &r)
	return r, err
}

// NativePrepare applies native.policy's decision for opts to body, the JSON
// request object the host is about to send (native.prepare): the OpenAI field set
// or removed, Anthropic's compaction edit merged into the body's own
// context_management edits, the body's input or messages trimmed as NativeTrim
// does (Trimmed lists what went, to archive), the betas to send, and the body of
// an Anthropic on-demand compaction due now (CompactionBody, else null). Keep
// the result's Decision.Session.
func (e *Engine) NativePrepare(ctx context.Context, body json.RawMessage, opts NativePolicyOptions) (core.NativePrepared, error) {
	var r core.NativePrepared
	req := newRequest("native.prepare").raw("config", opts.Config).raw("route", routeJSON(opts.Route)).
		raw("session", sessionJSON(opts.Session)).raw("body", orNull(body)).num("tokens", opts.Tokens).flag("manual", opts.Manual)
	err := e.run(ctx, req, &r)
	return r, err
}

// routeJSON is the route object of a native op, nil (none) for the zero route.
func routeJSON(r core.NativeRoute) json.RawMessage {
	if r == (core.NativeRoute{}) {
		return nil
	}
	b, _ := json.Marshal(r) // three strings always encode
	return b
}

// sessionJSON is a session as the native ops read it, nil (a fresh one) for nil.
func sessionJSON(s *core.NativeSession) json.RawMessage {
	if s == nil {
		return nil
	}
	b, _ := json.Marshal(s) // strings, ints and a string map always encode
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
// Session, and exactly one of Response, Error and Event (else invalid_request).
type NativeObserveOptions struct {
	// Config is a JSON config object; nil for the defaults.
	Config json.RawMessage
	// Route is where the request went: the issuer of the compaction items seen.
	Route core.NativeRoute
	// Session is the native session to update; nil for a fresh one.
	Session *core.NativeSession
	// Response is the provider's response object (a Responses response with
	// "output", an Anthropic Message with "content").
	Response json.RawMessage
	// Error is the provider's error response.
	Error *NativeError
	// Event is an app-server JSON-RPC message ({"method", "params"}), a
	// notification the peer sent or the host's own thread/compact/start.
	Event json.RawMessage
	// MessagesCount, when not nil, is the length of the local transcript when
	// Event arrives: a completed compaction records it as its boundary.
	MessagesCount *int
}

// NativeObserve updates a native session from a provider response (the
// compaction items it returned), an error response (a rejection of the native
// field disables it; the result's Retry says to send the request again) or an
// app-server event (pending and completed compactions).
func (e *Engine) NativeObserve(ctx context.Context, opts NativeObserveOptions) (core.NativeObservation, error) {
	var r core.NativeObservation
	req := newRequest("native.observe").raw("config", opts.Config).raw("route", routeJSON(opts.Route)).
		raw("session", sessionJSON(opts.Session)).raw("response", opts.Response).raw("event", opts.Event)
	if opts.Error != nil {
		req.raw("error", errorJSON(*opts.Error))
	}
	if n := opts.MessagesCount; n != nil {
		req.raw("messages_count", json.RawMessage(strconv.Itoa(*n)))
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
// compaction: the message with the signed compaction block replaces what it
// summarized).
type NativeReplace struct {
	Count   int
	Message json.RawMessage
}

// NativeTrimOptions are the optional parameters of NativeTrim.
type NativeTrimOptions struct {
	// Format is the messages' shape; "" detects it from their native items.
	Format Format
	// Session is the native session whose issuers say who issued each compaction
	// item; nil for a fresh one.
	Session *core.NativeSession
	// Route is where the messages go: compaction items another route issued are
	// removed. The zero route removes none.
	Route core.NativeRoute
	// KeepBeforeNewest keeps what precedes the newest compaction item (the op
	// drops it by default).
	KeepBeforeNewest bool
	// Replace, when not nil, is applied first.
	Replace *NativeReplace
}

// NativeTrim removes from messages what must not be sent: the compaction items of
// another issuer than opts.Route and, unless opts.KeepBeforeNewest, what precedes
// the newest compaction item. Every input index is kept or listed in the result's
// Dropped, with the message in DroppedMessages to archive.
func (e *Engine) NativeTrim(ctx context.Context, messages json.RawMessage, opts NativeTrimOptions) (core.NativeTrimResult, error) {
	var r core.NativeTrimResult
	req := newRequest("native.trim").raw("messages", messages).str("format", string(opts.Format)).
		raw("session", sessionJSON(opts.Session)).raw("route", routeJSON(opts.Route))
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
