package host

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ctxcompact/ctxcompact/core"
)

// Format names the shape of a conversation's messages, so the core reads roles,
// tool calls and the system prompt where that API puts them. The zero value
// detects it: FormatAnthropic when a top-level System is given or a message has
// tool_use or tool_result blocks, else FormatOpenAI. More formats come as the
// core learns them; a name it does not know is invalid_request at /format.
type Format = core.Format

// The formats the core knows (core.Formats lists them; core.ParseFormat reads a
// name or an alias such as "openai-chat").
const (
	// FormatOpenAI is OpenAI chat completions: system, developer, user,
	// assistant (with tool_calls) and tool messages.
	FormatOpenAI = core.FormatOpenAI
	// FormatAnthropic is Anthropic Messages: user and assistant messages with
	// content blocks, tool_use and tool_result among them, and the system prompt
	// beside the messages (System), not in them.
	FormatAnthropic = core.FormatAnthropic
	// FormatAISDK is the Vercel AI SDK's ModelMessage: tool-call parts in assistant
	// messages, tool-result parts in role "tool" messages, the system prompt a
	// system message (no System). Detected from those parts.
	FormatAISDK = core.FormatAISDK
)

// CompactRequest is the request of compact.begin and compact.finish. compact.finish
// must get the same Messages, System, Format, Config, Force and PromptTokens as the
// compact.begin whose State it finishes (any instance, any process, any runtime).
type CompactRequest struct {
	// Messages is the conversation, a JSON array of chat messages.
	Messages json.RawMessage
	// Format is the messages' shape; "" detects it (see Format).
	Format Format
	// System is the Anthropic top-level system prompt (a JSON string or array of
	// content blocks), nil for none. It counts as the first head message and
	// receives the compaction note; the result's System is the one to send. With
	// FormatOpenAI the system prompt is a message instead, and a System is
	// invalid_request at /system.
	System json.RawMessage
	// Config is a JSON config object; nil for the defaults.
	Config json.RawMessage
	// Force compacts even below the threshold.
	Force bool
	// PromptTokens is the API-reported prompt tokens of the last response, 0 if unknown.
	PromptTokens int
	// Summarizer is "host" (return a summary request; the default) or "builtin"
	// (the deterministic extractive summary, no LLM).
	Summarizer core.Summarizer
	// Output is "messages" (the default) or "refs" (unchanged messages as indices).
	Output string
	// Ticket, when set, names the compaction (unique among those in flight): the
	// instance that ran CompactBegin keeps what it parsed, and a CompactFinish with
	// the same ticket can then leave the messages out (see CompactFinishKept).
	Ticket string
	// ArchiveID, when set (r<k>), is the range a lossless context engine archives
	// this compaction as: the summary message then ends with the lines that name
	// it (docs/RECALL.md).
	ArchiveID string
	// Focus is what to keep in detail (at most 1,000 bytes; docs/STEERING.md): the
	// summary request asks for it, and the builtin summary and the facts index
	// put what matches it first.
	Focus string
	// Pins are messages kept verbatim, never summarized or pruned (by index or
	// tool call id; docs/STEERING.md "Pins").
	Pins []core.Pin
	// Range, when not nil, is a range compaction: exactly the messages
	// [From, To) are summarized, whatever the trigger (docs/STEERING.md).
	Range *core.IndexRange
}

// CompactOptions are the optional parameters of Compact.
type CompactOptions struct {
	// Force compacts even below the threshold.
	Force bool
	// PromptTokens is the API-reported prompt tokens of the last response, 0 if
	// unknown (the core then estimates).
	PromptTokens int
	// Output is "messages" (or "") or "refs" (unchanged messages as indices).
	Output string
	// Timeout bounds the summarizer: past it, the compaction falls back to the
	// extractive summary (fallback_code "timeout"), whether or not the summarizer
	// honours its context. 0 means DefaultSummarizeTimeout; a negative Timeout is
	// an invalid_request error at /timeout, as in JS and Python.
	Timeout time.Duration
	// Config, when not nil, is merged over the config the call would use
	// (Compact's cfg, or the Compactor's or ContextEngine's config) by the core's
	// config.merge, section by section and key by key, the same rule in every
	// runtime; its errors read /config/... .
	Config json.RawMessage
	// ArchiveID is CompactRequest.ArchiveID.
	ArchiveID string
	// Format is CompactRequest.Format: the messages' shape, "" to detect it.
	Format Format
	// System is CompactRequest.System: the Anthropic top-level system prompt.
	System json.RawMessage
	// Focus is CompactRequest.Focus: what to keep in detail.
	Focus string
	// Pins is CompactRequest.Pins: messages kept verbatim.
	Pins []core.Pin
	// Range is CompactRequest.Range: the messages to summarize.
	Range *core.IndexRange
}

// CompactAnswer is what compact.finish adds to the CompactRequest of the
// compact.begin it finishes: that begin's State and the summarizer's answer.
type CompactAnswer struct {
	// State is the opaque State compact.begin returned.
	State string
	// Summary is the summarizer's text.
	Summary string
	// SummaryError, when not "", says why the summarizer gave no summary; the
	// core then writes its extractive summary (the report's fallback_code is
	// "error") and ignores Summary.
	SummaryError string
}

// DefaultSummarizeTimeout is how long Compact waits for the summarizer when
// CompactOptions.Timeout is 0: the CLI's two minutes, as in the JS and Python
// bindings.
const DefaultSummarizeTimeout = 2 * time.Minute

// Summarize asks an LLM for the summary a compaction needs. Send req.Messages with
// req.MaxTokens and return the text; honour ctx, which is done at the summarizer's
// timeout or when Compact's own context is done. An error makes the core fall back
// to its extractive summary (the report says fallback_used, fallback_code and
// why), unless Compact's context is done, in which case Compact fails.
type Summarize func(ctx context.Context, req core.SummaryRequest) (string, error)

// CompactBegin runs compact.begin: a finished result (Done), or a summary request
// and an opaque State for CompactFinish.
func (e *Engine) CompactBegin(ctx context.Context, req CompactRequest) (core.CompactResult, error) {
	var r core.CompactResult
	err := e.run(ctx, req.beginEnvelope(), &r)
	return r, err
}

// CompactFinish runs compact.finish: the compaction req began, with the summary
// or the summarizer's failure in ans.
func (e *Engine) CompactFinish(ctx context.Context, req CompactRequest, ans CompactAnswer) (core.CompactResult, error) {
	return e.compactFinish(ctx, req, ans.State, ans.Summary, stringFailure(ans.SummaryError))
}

func (e *Engine) compactFinish(ctx context.Context, req CompactRequest, state, summary string, failure json.RawMessage) (core.CompactResult, error) {
	var r core.CompactResult
	err := e.run(ctx, req.finishEnvelope(state, summary, failure), &r)
	return r, err
}

// stringFailure is summaryErr as compact.finish's error value, nil when empty.
func stringFailure(summaryErr string) json.RawMessage {
	if summaryErr == "" {
		return nil
	}
	return mustString(summaryErr)
}

// CompactFinishKept is CompactFinish without sending the messages again: the
// instance that ran CompactBegin with req.Ticket finishes the compaction it kept.
// When the call lands on another instance (or the kept compaction was evicted),
// the core answers invalid_state at /messages and the whole finish is sent.
func (e *Engine) CompactFinishKept(ctx context.Context, req CompactRequest, ans CompactAnswer) (core.CompactResult, error) {
	return e.compactFinishKept(ctx, req, ans.State, ans.Summary, stringFailure(ans.SummaryError))
}

func (e *Engine) compactFinishKept(ctx context.Context, req CompactRequest, state, summary string, failure json.RawMessage) (core.CompactResult, error) {
	if req.Ticket == "" {
		return e.compactFinish(ctx, req, state, summary, failure)
	}
	var r core.CompactResult
	err := e.run(ctx, req.finishParams(state, summary, failure), &r)
	var ce *core.Error
	if errors.As(err, &ce) && ce.Code == core.CodeInvalidState && ce.Path == "/messages" {
		return e.compactFinish(ctx, req, state, summary, failure)
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
//
// summarize runs on its own goroutine, with a context that is done at
// opts.Timeout (DefaultSummarizeTimeout when 0) or when ctx is. How it ends
// decides the report's fallback_code:
//   - a summary: none ("", or "empty" when it is blank);
//   - no answer by the timeout: "timeout", and Compact does not wait for it: the
//     goroutine of a summarizer that ignores its context is left to finish on its
//     own, and whatever it returns then is dropped;
//   - an error matching context.DeadlineExceeded, or a net.Error whose Timeout is
//     true (the summarizer's own http.Client timing out): "timeout";
//   - an error matching context.Canceled while ctx is not done (the summarizer
//     reports its own cancellation): "cancelled";
//   - any other error: "error".
//
// The result's unchanged messages and its archived originals are slices of
// messages, not copies (the bytes output "messages" gives): do not change
// messages while you use them. With opts.Output "refs" they are left as the core
// gives them (input indices, archived entries without their message).
//
// When ctx itself is done before the summary is in, Compact sends no
// compact.finish and returns an error wrapping ctx.Err() (and its cause). A panic
// in summarize is re-raised on the goroutine that called Compact.
func (e *Engine) Compact(ctx context.Context, messages, cfg json.RawMessage, summarize Summarize, opts CompactOptions) (core.CompactResult, error) {
	if opts.Timeout < 0 {
		return core.CompactResult{}, &core.Error{Code: core.CodeInvalidRequest, Path: "/timeout",
			Message: fmt.Sprintf("ctxcompact: timeout must be positive, not %v (at /timeout)", opts.Timeout)}
	}
	if opts.Config != nil {
		merged, err := e.MergeConfig(ctx, cfg, opts.Config)
		if err != nil {
			return core.CompactResult{}, err
		}
		cfg = merged
	}
	req := CompactRequest{Messages: messages, Format: opts.Format, System: opts.System, Config: cfg,
		Force: opts.Force, PromptTokens: opts.PromptTokens, Summarizer: core.SummarizerHost,
		Output: opts.Output, ArchiveID: opts.ArchiveID, Focus: opts.Focus, Pins: opts.Pins, Range: opts.Range}
	// Output "messages": the core answers with refs, and the messages are put back
	// here from the input (refs.go).
	refs := opts.Output == "" || opts.Output == "messages"
	if refs {
		req.Output = "refs"
	}
	if summarize == nil {
		req.Summarizer = core.SummarizerBuiltin
	} else {
		req.Ticket = newTicket()
	}
	res, err := e.CompactBegin(ctx, req)
	if err != nil || res.Done {
		if err == nil && refs {
			err = putBack(&res, messages)
		}
		return res, err
	}
	if res.SummaryRequest == nil || res.State == "" {
		return res, fmt.Errorf("%w: compact.begin returned neither a result nor a summary request", ErrABIMismatch)
	}
	summary, failure, err := runSummarize(ctx, summarize, *res.SummaryRequest, opts.Timeout)
	if err != nil {
		return core.CompactResult{}, err
	}
	res, err = e.compactFinishKept(ctx, req, res.State, summary, failure)
	if err == nil && refs {
		err = putBack(&res, messages)
	}
	return res, err
}

// errSummarizeTimeout is the cause of the summarizer's context at its timeout.
var errSummarizeTimeout = errors.New("ctxcompact: the summarizer timed out")

// summarizeAnswer is what the summarizer's goroutine hands back.
type summarizeAnswer struct {
	summary  string
	err      error
	panicked bool
	panicVal any
}

// runSummarize runs summarize on its own goroutine under timeout and returns the
// summary, or the error value for compact.finish (a {code, message} object) when
// there is none, or an error when ctx is done first.
func runSummarize(ctx context.Context, summarize Summarize, req core.SummaryRequest, timeout time.Duration) (string, json.RawMessage, error) {
	if timeout <= 0 {
		timeout = DefaultSummarizeTimeout
	}
	sctx, cancel := context.WithTimeoutCause(ctx, timeout, errSummarizeTimeout)
	defer cancel()
	answers := make(chan summarizeAnswer, 1) // buffered: an abandoned goroutine never blocks
	go func() {
		defer func() {
			if r := recover(); r != nil {
				answers <- summarizeAnswer{panicked: true, panicVal: r}
			}
		}()
		s, err := summarize(sctx, req)
		answers <- summarizeAnswer{summary: s, err: err}
	}()
	var a summarizeAnswer
	timedOut := false
	select {
	case a = <-answers:
	case <-sctx.Done():
		timedOut = true
	}
	if a.panicked {
		panic(a.panicVal)
	}
	if err := ctx.Err(); err != nil {
		if cause := context.Cause(ctx); cause != err {
			return "", nil, fmt.Errorf("ctxcompact: summarizing: %w (%w)", err, cause)
		}
		return "", nil, fmt.Errorf("ctxcompact: summarizing: %w", err)
	}
	ourDeadline := context.Cause(sctx) == errSummarizeTimeout
	switch {
	case timedOut || (ourDeadline && a.err != nil):
		return "", summaryFailure(core.FallbackTimeout,
			fmt.Sprintf("the summarizer did not answer within %d ms", timeout.Milliseconds())), nil
	case a.err == nil:
		return a.summary, nil, nil
	case errors.Is(a.err, context.DeadlineExceeded) || isTimeout(a.err):
		return "", summaryFailure(core.FallbackTimeout, a.err.Error()), nil
	case errors.Is(a.err, context.Canceled):
		return "", summaryFailure(core.FallbackCancelled, a.err.Error()), nil
	default:
		msg := a.err.Error()
		if msg == "" {
			msg = "summarizer failed"
		}
		return "", summaryFailure(core.FallbackError, msg), nil
	}
}

// isTimeout reports whether err is a timeout of the summarizer's own, such as its
// http.Client's Timeout (a net.Error whose Timeout is true): fallback_code
// "timeout", as JS reports a TimeoutError and Python a TimeoutError.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// summaryFailure is compact.finish's error object {"code", "message"}.
func summaryFailure(code core.FallbackCode, message string) json.RawMessage {
	b := append([]byte(`{"code":`), appendString(nil, string(code))...)
	b = append(append(b, `,"message":`...), appendString(nil, message)...)
	return append(b, '}')
}

// beginEnvelope is the compact.begin request.
func (req CompactRequest) beginEnvelope() *request {
	return req.params("compact.begin").raw("messages", req.Messages)
}

// finishEnvelope is the compact.finish request with the summary, or with failure
// (compact.finish's error value: a string or a {code, message} object) when it is
// not nil. The messages go last, byte for byte as in compact.begin, so an instance
// that kept the begun compaction reads the finish without reading them again.
func (req CompactRequest) finishEnvelope(state, summary string, failure json.RawMessage) *request {
	return req.finishParams(state, summary, failure).raw("messages", req.Messages)
}

// finishParams is finishEnvelope without the messages.
func (req CompactRequest) finishParams(state, summary string, failure json.RawMessage) *request {
	env := req.params("compact.finish").str("state", state)
	if failure != nil {
		env.raw("error", failure)
	} else {
		env.raw("summary", mustString(summary))
	}
	return env
}

// params starts the request of op with every field but the messages.
func (req CompactRequest) params(op string) *request {
	return newRequest(op).str("format", string(req.Format)).raw("system", req.System).raw("config", req.Config).
		flag("force", req.Force).num("prompt_tokens", req.PromptTokens).
		str("summarizer", string(req.Summarizer)).str("output", req.Output).str("ticket", req.Ticket).
		str("archive_id", req.ArchiveID).str("focus", req.Focus).raw("pins", pinsParam(req.Pins)).raw("range", rangeParam(req.Range))
}

// rangeParam is the range param of a range compaction (nil for none).
func rangeParam(r *core.IndexRange) json.RawMessage {
	if r == nil {
		return nil
	}
	b, _ := json.Marshal(r)
	return b
}

// pinsParam is the pins param of pins (nil for none).
func pinsParam(pins []core.Pin) json.RawMessage {
	if len(pins) == 0 {
		return nil
	}
	b, _ := json.Marshal(pins) // a Pin always encodes
	return b
}

// mustString is s as a JSON string value (even when empty).
func mustString(s string) json.RawMessage {
	return appendString(nil, s)
}

// Compactor is a config bound to an Engine, the Go counterpart of the JS and
// Python Compactor: the config is validated once, when the Compactor is made, and
// every compaction uses it, with a call's CompactOptions.Config merged over it. It
// is safe for concurrent use; it holds no state but its config.
type Compactor struct {
	e   *Engine
	cfg json.RawMessage
}

// NewCompactor validates cfg (a JSON config object; nil for the defaults) with
// the core's config.merge and returns a Compactor that compacts under it. A bad
// config is the core's invalid_config error, at /config/<section>/<key>.
func NewCompactor(ctx context.Context, e *Engine, cfg json.RawMessage) (*Compactor, error) {
	merged, err := e.MergeConfig(ctx, nil, cfg)
	if err != nil {
		return nil, err
	}
	return &Compactor{e: e, cfg: merged}, nil
}

// Config is the Compactor's config, as config.merge wrote it.
func (c *Compactor) Config() json.RawMessage { return bytes.Clone(c.cfg) }

// Compact is Engine.Compact under the Compactor's config (with opts.Config merged
// over it).
func (c *Compactor) Compact(ctx context.Context, messages json.RawMessage, summarize Summarize, opts CompactOptions) (core.CompactResult, error) {
	return c.e.Compact(ctx, messages, c.cfg, summarize, opts)
}
