package core

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The typed front door: Compact, Prune, Sanitize and Validate take option structs and
// return result structs, for Go programs that link the core natively. Messages go in
// as a JSON array in the format's shape, as on the wire, and come out one per
// element. The host package (the same ops through the wasm module) takes and gives
// these very types. Each builds the
// op's request and runs it through Dispatch, so it is the same contract, errors and
// bytes as Call and the wasm module; what they add is types, and the summarizer loop
// of compact.begin / compact.finish in one call.

// CompactOptions configures Compact. The zero value compacts with the default config,
// the format detected, and the builtin extractive summary.
type CompactOptions struct {
	// Config is a ctxcompact config as JSON (nil: the defaults).
	Config json.RawMessage
	// Format is the messages' shape ("": detected, see Report and docs/OPS.md).
	Format Format
	// System is the top-level system prompt of a format that has one (Anthropic):
	// a JSON string or list of blocks; nil when there is none.
	System json.RawMessage
	// Force compacts even below the threshold.
	Force bool
	// Focus is what to keep in detail (docs/STEERING.md); "" for none.
	Focus string
	// PromptTokens is the API-reported prompt size of the last response (0: the
	// core's estimate decides).
	PromptTokens int
	// Summarize writes the summary with the host's LLM: it gets the request and
	// returns the text. An error or an empty text falls back to the extractive
	// summary (the report says why, with FallbackError or FallbackEmpty; return a
	// *SummarizeError to give another code). Nil: the builtin summary, no LLM.
	Summarize func(SummaryRequest) (string, error)
}

// SummarizeError is a summarizer failure with its fallback code, for
// CompactOptions.Summarize to return (FallbackTimeout when it gave up waiting, say).
type SummarizeError struct {
	Code FallbackCode
	Err  error
}

func (e *SummarizeError) Error() string { return string(e.Code) + ": " + e.Err.Error() }
func (e *SummarizeError) Unwrap() error { return e.Err }

// Compact compacts messages (a JSON array of messages in the format's shape) when
// they are over the threshold, or always with Force. The result is done: Messages,
// System and Report are set.
func Compact(messages json.RawMessage, opts CompactOptions) (CompactResult, error) {
	req := messagesRequest{Messages: messages, Config: opts.Config, Format: opts.Format, System: opts.System,
		Force: opts.Force, PromptTokens: opts.PromptTokens, Summarizer: SummarizerHost, Focus: opts.Focus}
	if opts.Summarize == nil {
		req.Summarizer = SummarizerBuiltin
	}
	var begun CompactResult
	if err := run("compact.begin", req, &begun); err != nil || begun.Done {
		return begun, err
	}
	finish := finishCall{messagesRequest: req, State: begun.State}
	summary, err := opts.Summarize(*begun.SummaryRequest)
	if err != nil {
		code := FallbackError
		var se *SummarizeError
		if errors.As(err, &se) && se.Code != "" {
			code = se.Code
		}
		finish.Error = &finishFailure{Code: code, Message: err.Error()}
	} else {
		finish.Summary = &summary
	}
	var done CompactResult
	err = run("compact.finish", finish, &done)
	return done, err
}

// PruneOptions configures Prune: the config, format and system prompt as for
// Compact, and the output's shape.
type PruneOptions struct {
	// Config is a ctxcompact config as JSON (nil: the defaults).
	Config json.RawMessage
	// Format is the messages' shape ("": detected).
	Format Format
	// System is the top-level system prompt of a format that has one (Anthropic):
	// it counts toward the head and the tokens before.
	System json.RawMessage
	// Output is OutputMessages ("" too) or OutputRefs (an unchanged message comes
	// back as its input index).
	Output Output
}

// Output is the shape of an op's output messages (docs/OPS.md, "output").
type Output string

const (
	// OutputMessages returns every output message whole.
	OutputMessages Output = "messages"
	// OutputRefs returns an unchanged input message as its index (a JSON integer),
	// so the caller reuses its own copy.
	OutputRefs Output = "refs"
)

// PruneOutput is Prune's result: the messages with long old tool outputs replaced by
// placeholders, the inputs it changed, and what it freed.
type PruneOutput struct {
	Messages []json.RawMessage `json:"messages"`
	Archived []ArchivedMessage `json:"archived"`
	PruneResult
}

// Prune replaces the long tool outputs between the head and the token-budgeted tail
// with placeholders, and summarizes nothing: compaction's cheap first phase alone.
func Prune(messages json.RawMessage, opts PruneOptions) (PruneOutput, error) {
	var out PruneOutput
	err := run("prune", messagesRequest{Messages: messages, Config: opts.Config, Format: opts.Format, System: opts.System, Output: opts.Output}, &out)
	return out, err
}

// SanitizeOptions configures Sanitize.
type SanitizeOptions struct {
	// Format is the messages' shape ("": detected).
	Format Format
	// Output is the output's shape, as for Prune.
	Output Output
}

// SanitizeOutput is Sanitize's result: the repaired messages, the inputs it removed
// or changed, and the repairs.
type SanitizeOutput struct {
	Messages []json.RawMessage `json:"messages"`
	Archived []ArchivedMessage `json:"archived"`
	SanitizeResult
}

// Sanitize repairs tool-call/result pairing: results without their call are removed,
// calls without a result get a stub result.
func Sanitize(messages json.RawMessage, opts SanitizeOptions) (SanitizeOutput, error) {
	var out SanitizeOutput
	err := run("sanitize", messagesRequest{Messages: messages, Format: opts.Format, Output: opts.Output}, &out)
	return out, err
}

// ValidateOptions configures Validate.
type ValidateOptions struct {
	// Format is the messages' shape ("": detected).
	Format Format
	// Provider names the provider whose rules AI SDK messages are checked against
	// ("anthropic", "openai", "gemini"; docs/RULES.md); "" for none. Other formats
	// go to their own provider, which Provider may only repeat. "" for AI SDK
	// messages: the provider Config's model.provider names, if any.
	Provider string
	// Config is the call's config (nil: none); only model.provider is read.
	Config json.RawMessage
}

// Validate lists what providers would reject in messages; it changes nothing.
func Validate(messages json.RawMessage, opts ValidateOptions) (ValidateResult, error) {
	var out ValidateResult
	err := run("validate", messagesRequest{Messages: messages, Format: opts.Format, Provider: opts.Provider, Config: opts.Config}, &out)
	return out, err
}

// messagesRequest is the request of the ops over a message list. Messages are
// written as given (see body), not through encoding/json, which would compact them
// and escape HTML characters: unchanged messages come back in the caller's bytes.
type messagesRequest struct {
	Messages     json.RawMessage `json:"-"`
	Config       json.RawMessage `json:"config,omitempty"`
	Format       Format          `json:"format,omitempty"`
	System       json.RawMessage `json:"system,omitempty"`
	Force        bool            `json:"force,omitempty"`
	PromptTokens int             `json:"prompt_tokens,omitempty"`
	Summarizer   Summarizer      `json:"summarizer,omitempty"`
	Output       Output          `json:"output,omitempty"`
	Provider     string          `json:"provider,omitempty"`
	Focus        string          `json:"focus,omitempty"`
}

// finishCall is compact.finish's request: the begin request with its state and
// the summarizer's answer.
type finishCall struct {
	messagesRequest
	State   string         `json:"state"`
	Summary *string        `json:"summary,omitempty"`
	Error   *finishFailure `json:"error,omitempty"`
}

type finishFailure struct {
	Code    FallbackCode `json:"code"`
	Message string       `json:"message"`
}

// run dispatches op with the request req and decodes its result into out; an error
// envelope is returned as the *Error it holds.
func run(op string, req interface{ list() json.RawMessage }, out any) error {
	body, err := requestBody(req)
	if err != nil {
		return errorf(CodeInvalidRequest, "", "encoding the %s request: %v", op, err)
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := json.Unmarshal(Dispatch(op, body), &env); err != nil {
		return fmt.Errorf("ctxcompact: decoding the %s response: %w", op, err)
	}
	if env.Error != nil {
		return env.Error
	}
	if err := json.Unmarshal(env.Result, out); err != nil {
		return fmt.Errorf("ctxcompact: decoding the %s result: %w", op, err)
	}
	return nil
}

func (r messagesRequest) list() json.RawMessage { return r.Messages }

// requestBody writes req as a request: its messages as given, then its other fields.
func requestBody(req interface{ list() json.RawMessage }) ([]byte, error) {
	fields, err := marshal(req)
	if err != nil {
		return nil, err
	}
	msgs := req.list()
	if len(msgs) == 0 {
		msgs = json.RawMessage("null") // refused by the op at /messages
	}
	b := append(make([]byte, 0, 64+len(fields)+len(msgs)), `{"messages":`...)
	b = append(b, msgs...)
	if len(fields) > 2 {
		b = append(append(b, ','), fields[1:]...)
	} else {
		b = append(b, '}')
	}
	return b, nil
}
