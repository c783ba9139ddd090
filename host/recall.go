package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	// Archive stores one compaction's range and rows (recall.archive's result) in
	// one transaction.
	Archive(ctx context.Context, session string, a core.RecallArchive) error
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

// archiveBatch is how many archived entries one recall.archive call takes. The
// rows of an entry depend on that entry alone, so a compaction's rows are made in
// batches and joined: one call over 1.4M archived messages grew the instance's
// memory to 2.5 GB; a batch stays within a few MiB.
var archiveBatch = 8192

// archive stores a compaction's originals as range id: the core's recall.archive
// makes the rows, in batches of archiveBatch entries (the last batch with the
// output messages, where the core finds the summary message and its row), and
// the store writes them in one transaction. With refs output the originals are
// put back from messages.
func (ce *ContextEngine) archive(ctx context.Context, messages json.RawMessage, res core.CompactResult, report []byte, id string) error {
	var offs []uint32
	archived := make([]json.RawMessage, len(res.Archived))
	for i, a := range res.Archived {
		archived[i] = a.Message
		if len(a.Message) > 0 {
			continue
		}
		if offs == nil {
			offs = arrayElements(messages)
		}
		if a.Index < 0 || 2*a.Index+1 >= len(offs) {
			return fmt.Errorf("%w: archived index %d is outside the input", ErrABIMismatch, a.Index)
		}
		archived[i] = messages[offs[2*a.Index]:offs[2*a.Index+1]]
	}
	out := []byte{'['} // by hand: json.Marshal would escape <, > and & in the messages
	for i, m := range res.Messages {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	out = append(out, ']')
	var all core.RecallArchive
	for start := 0; start < len(res.Archived); start += archiveBatch {
		end := min(start+archiveBatch, len(res.Archived))
		batch, msgs := res.Archived[start:end], archived[start:end]
		req := newRequest("recall.archive").str("session", ce.session).str("range_id", id).raw("report", report).
			stream("archived", func(write func([]byte)) {
				b := make([]byte, 0, 64)
				write([]byte{'['})
				for i, a := range batch {
					b = b[:0]
					if i > 0 {
						b = append(b, ',')
					}
					write(appendArchivedHead(b, a.Index, string(a.Reason)))
					write(msgs[i])
					write([]byte{'}'})
				}
				write([]byte{']'})
			})
		if end == len(res.Archived) {
			req.raw("messages", out)
		}
		var rows core.RecallArchive
		if err := ce.e.run(ctx, req, &rows); err != nil {
			return batchError(err, start)
		}
		if start == 0 {
			all = rows
			continue
		}
		all.Range.FromIndex = min(all.Range.FromIndex, rows.Range.FromIndex)
		all.Range.ToIndex = max(all.Range.ToIndex, rows.Range.ToIndex)
		if rows.Range.Summary != "" {
			all.Range.Summary = rows.Range.Summary
		}
		all.Rows = append(all.Rows, rows.Rows...)
	}
	return ce.store.Archive(ctx, ce.session, all)
}

// appendArchived appends one archived entry of recall.archive, {"index", "reason",
// "message"}, by hand: json.Marshal would escape <, > and & in the message.
func appendArchived(b []byte, index int, reason string, msg []byte) []byte {
	b = append(appendArchivedHead(b, index, reason), msg...)
	return append(b, '}')
}

// appendArchivedHead appends an archived entry up to its message.
func appendArchivedHead(b []byte, index int, reason string) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"reason":`...)
	b = appendString(b, reason)
	return append(b, `,"message":`...)
}

// batchError is the error of the recall.archive batch that starts at entry start,
// its path counted in the whole archived list.
func batchError(err error, start int) error {
	var ce *core.Error
	if start == 0 || !errors.As(err, &ce) {
		return err
	}
	rest, ok := strings.CutPrefix(ce.Path, "/archived/")
	if !ok {
		return err
	}
	k, tail, _ := strings.Cut(rest, "/")
	n, convErr := strconv.Atoi(k)
	if convErr != nil {
		return err
	}
	path := "/archived/" + strconv.Itoa(n+start)
	if tail != "" {
		path += "/" + tail
	}
	return &core.Error{Code: ce.Code, Path: path, Message: strings.ReplaceAll(ce.Message, "(at "+ce.Path+")", "(at "+path+")")}
}

// ToolSchemas returns the schemas of the tools the engine gives the agent, a JSON
// array in the shape of format ("openai" or "", "responses" or "anthropic"):
// context_search and context_expand in lossless mode, none in compressor mode.
func (ce *ContextEngine) ToolSchemas(ctx context.Context, format string) (json.RawMessage, error) {
	if ce.store == nil {
		return json.RawMessage("[]"), nil
	}
	var res struct {
		Tools json.RawMessage `json:"tools"`
	}
	if err := ce.e.run(ctx, newRequest("recall.tools").str("format", format), &res); err != nil {
		return nil, err
	}
	return res.Tools, nil
}

// HandleToolCall runs one of the engine's tools for the agent and returns its
// answer, a JSON string: name is the tool's name, args its arguments (a JSON
// object, or a JSON string holding one, as OpenAI sends them; nil for none). A
// bad call (an unknown tool, a missing argument, an unknown id) is an answer
// {"error": "..."}, not an error; an error is the store failing or ctx done.
func (ce *ContextEngine) HandleToolCall(ctx context.Context, name string, args json.RawMessage) (string, error) {
	if ce.store == nil {
		b, _ := json.Marshal(map[string]string{"error": "unknown tool " + strconv.Quote(name) + ": this context engine has no tools (context.engine is compressor)"})
		return string(b), nil
	}
	var check struct {
		OK     bool   `json:"ok"`
		Result string `json:"result"`
		Args   struct {
			Query     string `json:"query"`
			Limit     int    `json:"limit"`
			ID        string `json:"id"`
			MaxTokens int    `json:"max_tokens"`
		} `json:"args"`
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = nil
	}
	if err := ce.e.run(ctx, newRequest("recall.check_call").str("name", name).raw("arguments", args), &check); err != nil {
		var cerr *core.Error
		if errors.As(err, &cerr) && cerr.Code == core.CodeInvalidJSON {
			b, _ := json.Marshal(map[string]string{"error": name + ": arguments are not valid JSON"})
			return string(b), nil
		}
		return "", err
	}
	if !check.OK {
		return check.Result, nil
	}
	var out struct {
		Result string `json:"result"`
	}
	if name == core.ToolContextSearch {
		hits, total, err := ce.store.Find(ctx, ce.session, check.Args.Query, check.Args.Limit)
		if err != nil {
			return "", err
		}
		h, err := json.Marshal(hits)
		if err != nil {
			return "", err
		}
		req := newRequest("recall.search_result").str("query", check.Args.Query).raw("hits", h).
			num("limit", check.Args.Limit).raw("total", json.RawMessage(strconv.Itoa(total)))
		if err := ce.e.run(ctx, req, &out); err != nil {
			return "", err
		}
		return out.Result, nil
	}
	ms, err := ce.store.Messages(ctx, ce.session, check.Args.ID)
	if err != nil {
		return "", err
	}
	b := []byte{'['}
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, m) // the JSON text: the core writes it byte for byte
	}
	b = append(b, ']')
	req := newRequest("recall.expand_result").str("id", check.Args.ID).raw("messages", b).num("max_tokens", check.Args.MaxTokens)
	if err := ce.e.run(ctx, req, &out); err != nil {
		return "", err
	}
	return out.Result, nil
}
