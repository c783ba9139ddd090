package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/ctxcompact/ctxcompact/core"
)

// CompactRequest is the request of compact.begin and compact.finish. compact.finish
// must get the same Messages, Config, Force and PromptTokens as the compact.begin
// whose State it finishes (any instance, any process, any runtime).
type CompactRequest struct {
	// Messages is the conversation, a JSON array of chat messages.
	Messages json.RawMessage
	// Config is a JSON config object; nil for the defaults.
	Config json.RawMessage
	// Force compacts even below the threshold.
	Force bool
	// PromptTokens is the API-reported prompt tokens of the last response, 0 if unknown.
	PromptTokens int
	// Summarizer is "host" (return a summary request; the default) or "builtin"
	// (the deterministic extractive summary, no LLM).
	Summarizer string
	// Output is "messages" (the default) or "refs" (unchanged messages as indices).
	Output string
	// Ticket, when set, names the compaction (unique among those in flight): the
	// instance that ran CompactBegin keeps what it parsed, and a CompactFinish with
	// the same ticket can then leave the messages out (see CompactFinishKept).
	Ticket string
}

// CompactOptions are the optional parameters of Compact.
type CompactOptions struct {
	Force        bool
	PromptTokens int
	Output       string
}

// Summarize asks an LLM for the summary a compaction needs. Send req.Messages with
// req.MaxTokens and return the text. An error makes the core fall back to its
// extractive summary (the report says fallback_used and why), unless ctx is done.
type Summarize func(ctx context.Context, req core.SummaryRequest) (string, error)

// CompactBegin runs compact.begin: a finished result (Done), or a summary request
// and an opaque State for CompactFinish.
func (e *Engine) CompactBegin(ctx context.Context, req CompactRequest) (core.CompactResult, error) {
	var r core.CompactResult
	err := e.run(ctx, req.beginEnvelope(), &r)
	return r, err
}

// CompactFinish runs compact.finish with the summary, or with summaryErr (non-empty)
// when the summarizer failed.
func (e *Engine) CompactFinish(ctx context.Context, req CompactRequest, state, summary, summaryErr string) (core.CompactResult, error) {
	var r core.CompactResult
	err := e.run(ctx, req.finishEnvelope(state, summary, summaryErr), &r)
	return r, err
}

// CompactFinishKept is CompactFinish without sending the messages again: the
// instance that ran CompactBegin with req.Ticket finishes the compaction it kept.
// When the call lands on another instance (or the kept compaction was evicted),
// the core answers invalid_state at /messages and the whole finish is sent.
func (e *Engine) CompactFinishKept(ctx context.Context, req CompactRequest, state, summary, summaryErr string) (core.CompactResult, error) {
	if req.Ticket == "" {
		return e.CompactFinish(ctx, req, state, summary, summaryErr)
	}
	var r core.CompactResult
	err := e.run(ctx, req.finishParams(state, summary, summaryErr), &r)
	var ce *core.Error
	if errors.As(err, &ce) && ce.Code == core.CodeInvalidState && ce.Path == "/messages" {
		return e.CompactFinish(ctx, req, state, summary, summaryErr)
	}
	return r, err
}

// tickets name this process's compactions: a random prefix and a counter.
var tickets = struct {
	prefix string
	n      atomic.Uint64
}{prefix: func() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()}

func newTicket() string {
	return tickets.prefix + "-" + strconv.FormatUint(tickets.n.Add(1), 10)
}

// Compact compacts messages under cfg: compact.begin, then, when the core asks for a
// summary, summarize and compact.finish (without the messages when the instance
// that began it still keeps it: CompactFinishKept). With a nil summarize the
// built-in extractive summarizer is used and no callback runs. The instance is not
// held while summarize runs.
func (e *Engine) Compact(ctx context.Context, messages, cfg json.RawMessage, summarize Summarize, opts CompactOptions) (core.CompactResult, error) {
	req := CompactRequest{Messages: messages, Config: cfg, Force: opts.Force, PromptTokens: opts.PromptTokens,
		Summarizer: core.SummarizerHost, Output: opts.Output}
	if summarize == nil {
		req.Summarizer = core.SummarizerBuiltin
	} else {
		req.Ticket = newTicket()
	}
	res, err := e.CompactBegin(ctx, req)
	if err != nil || res.Done {
		return res, err
	}
	if res.SummaryRequest == nil || res.State == "" {
		return res, fmt.Errorf("%w: compact.begin returned neither a result nor a summary request", ErrABIMismatch)
	}
	summary, serr := summarize(ctx, *res.SummaryRequest)
	if err := context.Cause(ctx); err != nil {
		return core.CompactResult{}, fmt.Errorf("ctxcompact: summarizing: %w", err)
	}
	failure := ""
	if serr != nil {
		failure = serr.Error()
		if failure == "" {
			failure = "summarizer failed"
		}
	}
	return e.CompactFinishKept(ctx, req, res.State, summary, failure)
}

// beginEnvelope is the compact.begin request.
func (req CompactRequest) beginEnvelope() *request {
	return req.params("compact.begin").raw("messages", req.Messages)
}

// finishEnvelope is the compact.finish request with the summary, or with
// summaryErr when it is not empty. The messages go last, byte for byte as in
// compact.begin, so an instance that kept the begun compaction reads the finish
// without reading them again.
func (req CompactRequest) finishEnvelope(state, summary, summaryErr string) *request {
	return req.finishParams(state, summary, summaryErr).raw("messages", req.Messages)
}

// finishParams is finishEnvelope without the messages.
func (req CompactRequest) finishParams(state, summary, summaryErr string) *request {
	env := req.params("compact.finish").str("state", state)
	if summaryErr != "" {
		env.str("error", summaryErr)
	} else {
		env.raw("summary", mustString(summary))
	}
	return env
}

// params starts the request of op with every field but the messages.
func (req CompactRequest) params(op string) *request {
	return newRequest(op).raw("config", req.Config).
		flag("force", req.Force).num("prompt_tokens", req.PromptTokens).
		str("summarizer", req.Summarizer).str("output", req.Output).str("ticket", req.Ticket)
}

// mustString is s as a JSON string value (even when empty).
func mustString(s string) json.RawMessage {
	return appendString(nil, s)
}
