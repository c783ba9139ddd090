package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// RecallStore is what a lossless ContextEngine needs of a recall store; the recall
// package's *Store has it (this package does not import it, so a program that
// does not use recall does not link SQLite). Its methods must be safe for
// concurrent use.
type RecallStore interface {
	// NextRangeID is the id of the session's next range: r<k>, k = 1 + its ranges.
	NextRangeID(ctx context.Context, session string) (string, error)
	// Archive stores one compaction's range and rows in one transaction. They
	// come in parts (docs/SESSION.md "An archive in parts"): the first holds the
	// range, and each holds rows of it, in order. Archive writes each part as it
	// comes; an error in parts is returned, and nothing of the range is written.
	// Whether it returns an error or not, Archive stops ranging over parts.
	Archive(ctx context.Context, session string, parts iter.Seq2[core.RecallArchive, error]) error
	// Find returns the session's rows matching query (docs/RECALL.md), newest
	// first, at most limit, and how many match in all.
	Find(ctx context.Context, session, query string, limit int) ([]core.RecallHit, int, error)
	// Messages returns the original JSON of the messages behind a range or message
	// id, in order; none for an unknown id.
	Messages(ctx context.Context, session, id string) ([]string, error)
}

// Lossless reports whether the session's config chooses the lossless engine
// (context.engine "lossless").
func (ce *ContextEngine) Lossless() bool {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	return gjson.GetBytes(ce.state, "config.context.engine").Str == core.ContextEngineLossless
}

// ToolSchemas returns the schemas of the tools the engine gives the agent, a JSON
// array in the shape of format ("openai" or "", "responses" or "anthropic"):
// context_status and compact_now (docs/STEERING.md), after context_search and
// context_expand in lossless mode.
func (ce *ContextEngine) ToolSchemas(ctx context.Context, format string) (json.RawMessage, error) {
	raw, err := ce.runSession(ctx, core.EventTools, func(r *request) { r.str("format", format) }, nil)
	if err != nil {
		return nil, err
	}
	var res struct {
		Tools json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Tools) == 0 {
		return nil, fmt.Errorf("%w: the tools event gave no tools", ErrABIMismatch)
	}
	return res.Tools, nil
}

// HandleToolCall runs one of the engine's tools for the agent and returns its
// answer, a JSON string: name is the tool's name, args its arguments (a JSON
// object, or a JSON string holding one, as OpenAI sends them; nil for none). A
// bad call (an unknown tool, a missing argument, an unknown id) is an answer
// {"error": "..."}, not an error; an error is the store failing or ctx done.
func (ce *ContextEngine) HandleToolCall(ctx context.Context, name string, args json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = nil
	}
	if args != nil && !gjson.ValidBytes(args) {
		b, _ := json.Marshal(map[string]string{"error": name + ": arguments are not valid JSON"})
		return string(b), nil
	}
	res, err := ce.runSession(ctx, core.EventToolCall, func(r *request) {
		r.raw("name", appendString(nil, name)).raw("arguments", args)
	}, ce.storeEffects)
	if err != nil {
		return "", err
	}
	var answer string
	if err := json.Unmarshal(res, &answer); err != nil {
		return "", fmt.Errorf("%w: decoding a tool's answer: %w", ErrABIMismatch, err)
	}
	return answer, nil
}
