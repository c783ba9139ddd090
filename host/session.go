package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// A ContextEngine's sequences are the core's (session.run, docs/SESSION.md): it
// sends an event with the engine state, performs the effect the core answers with
// (the summarizer, the recall store), sends its answer back, and keeps the state
// the sequence ends with. The instance is held for each step, never while an
// effect runs; the engine's lock is held for each step, so a step reads the
// current state and the state the sequence ends with replaces it whole.

// sessionReply is one step's answer: an effect to perform, or the end.
type sessionReply struct {
	Done   bool              `json:"done"`
	State  json.RawMessage   `json:"state"`
	Status core.EngineStatus `json:"status"`
	Result json.RawMessage   `json:"result"`
	Effect *sessionEffect    `json:"effect"`
	Resume json.RawMessage   `json:"resume"`
	Failed *struct {
		Effect  string `json:"effect"`
		Message string `json:"message"`
	} `json:"failed"`
}

// effectError is a sequence that ended because an effect failed: the core's
// message, wrapping the host's error.
type effectError struct {
	msg   string
	cause error
}

func (e *effectError) Error() string { return e.msg }
func (e *effectError) Unwrap() error { return e.cause }

// sessionEffect is an effect the core asks for: its type and JSON. An archive's
// rows are decoded only when it is performed, after the step let the instance go:
// a large compaction's instance is at its largest then, and decoding its rows
// (twice the archive's JSON) beside it would add them to the process's peak.
type sessionEffect struct {
	Type string
	JSON json.RawMessage
}

func (e *sessionEffect) UnmarshalJSON(b []byte) error {
	e.Type = gjson.GetBytes(b, "type").Str
	e.JSON = bytes.Clone(b) // b is the instance's memory, reused after the step
	return nil
}

// archive decodes an archive effect's range and rows.
func (e *sessionEffect) archive() (core.RecallArchive, error) {
	var a struct {
		Archive core.RecallArchive `json:"archive"`
	}
	if err := json.Unmarshal(e.JSON, &a); err != nil {
		return a.Archive, fmt.Errorf("%w: decoding an archive effect: %w", ErrABIMismatch, err)
	}
	return a.Archive, nil
}

// field returns a field of the effect's JSON.
func (e *sessionEffect) field(key string) gjson.Result { return gjson.GetBytes(e.JSON, key) }

// performFunc performs one effect and returns its answer's value (JSON), or the
// error to answer with. A ctx done ends the sequence.
type performFunc func(ctx context.Context, effect *sessionEffect) (json.RawMessage, error)

// runSession runs event to its end: fields adds the event's fields to each step's
// request (the messages, when it has them, last). It returns the sequence's result.
func (ce *ContextEngine) runSession(ctx context.Context, event string, fields func(*request), perform performFunc) (json.RawMessage, error) {
	s := &sessionRun{ce: ce, event: event, fields: fields}
	var answer json.RawMessage
	for {
		r, err := s.step(ctx, answer)
		switch {
		case err != nil:
			return nil, err
		case r.Failed != nil:
			return nil, &effectError{msg: r.Failed.Message, cause: s.cause}
		case r.Done:
			return s.result, nil
		case perform == nil:
			return nil, fmt.Errorf("%w: session.run asked for %s, which a %s event does not have", ErrABIMismatch, r.Effect.Type, event)
		}
		var ok json.RawMessage
		if r.Effect.Type == core.EffectArchive {
			err = s.archive(ctx, r.Effect)
			if s.fatal != nil {
				return nil, s.fatal
			}
		} else {
			ok, err = perform(ctx, r.Effect)
		}
		// The step after an archive reads only its resume (docs/SESSION.md): a
		// large conversation is neither sent nor validated again.
		s.messages, s.from, s.to = r.Effect.Type == core.EffectArchive, 0, 0
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("ctxcompact: %s: %w", event, ctxErr)
		}
		s.cause = err
		if err != nil {
			answer = effectFailure(err)
		} else {
			answer = append(append([]byte(`{"ok":`), orNull(ok)...), '}')
		}
	}
}

// sessionRun is one event's sequence between its steps.
type sessionRun struct {
	ce     *ContextEngine
	event  string
	fields func(*request)
	// resume is the last step's, sent back with the next answer.
	resume json.RawMessage
	result json.RawMessage
	// messages is set when the next step reads none of the event's messages
	// (after an archive), or only a window of them: messages [from, to).
	messages bool
	from, to int
	elems    []uint32 // the event's messages' element offsets, once a window needs them
	// cause is the host's error behind the last failed effect; fatal, an error
	// that ended the sequence inside an effect (a step of an archive in parts).
	cause, fatal error
}

// step sends answer (nil for the first step) and returns the core's reply: an
// effect to perform (its resume kept for the next step), or the end, whose state
// replaces the engine's.
func (s *sessionRun) step(ctx context.Context, answer json.RawMessage) (sessionReply, error) {
	ce := s.ce
	var r sessionReply
	ce.mu.Lock()
	req := newRequest("session.run").str("event", s.event).raw("state", orNull(ce.state)).raw("resume", s.resume).raw("answer", answer)
	if s.messages {
		req.swap = map[string]func(*request, json.RawMessage){"messages": s.window}
	}
	if s.fields != nil {
		s.fields(req)
	}
	err := ce.e.run(ctx, req, &r)
	if err == nil && r.Done && r.Failed == nil {
		if len(r.State) == 0 {
			err = fmt.Errorf("%w: session.run ended with no state", ErrABIMismatch)
		} else {
			ce.state, ce.status = r.State, r.Status
		}
	}
	ce.mu.Unlock()
	switch {
	case err != nil:
		return r, err
	case !r.Done && (r.Effect == nil || len(r.Resume) == 0):
		return r, fmt.Errorf("%w: session.run neither ended nor asked for an effect", ErrABIMismatch)
	}
	if len(r.Result) > 0 {
		s.result = r.Result
	}
	s.resume, s.messages = r.Resume, false
	return r, nil
}

// window writes the step's messages: none, or the window [from, to) of the
// event's, each element byte for byte as the first step sent it.
func (s *sessionRun) window(r *request, v json.RawMessage) {
	if s.to == 0 {
		return
	}
	if s.elems == nil {
		s.elems = arrayElements(v)
	}
	if s.to > len(s.elems)/2 {
		r.err = fmt.Errorf("%w: an archive part names messages %d-%d; the event has %d", ErrABIMismatch, s.from, s.to-1, len(s.elems)/2)
		return
	}
	from, to, elems := s.from, s.to, s.elems
	r.stream("messages", func(write func([]byte)) {
		write([]byte{'['})
		for i := from; i < to; i++ {
			if i > from {
				write([]byte{','})
			}
			write(v[elems[2*i]:elems[2*i+1]])
		}
		write([]byte{']'})
	})
}

// archive performs an archive effect: the store writes its rows, and those of
// the parts after it (docs/SESSION.md "An archive in parts"), in one
// transaction. Each later part is the core's answer to the part before, asked
// for with that part's window of the event's messages; the last part's answer
// is left to the caller, after the store committed (or rolled back).
func (s *sessionRun) archive(ctx context.Context, first *sessionEffect) error {
	if s.ce.store == nil {
		return fmt.Errorf("%w: session.run asked a compressor engine for %s", ErrABIMismatch, first.Type)
	}
	parts := func(yield func(core.RecallArchive, error) bool) {
		e := first
		for part := int64(0); ; part++ {
			if got := e.field("part").Int(); got != part {
				s.fatal = fmt.Errorf("%w: session.run asked for archive part %d after part %d", ErrABIMismatch, got, part-1)
				yield(core.RecallArchive{}, s.fatal)
				return
			}
			next := e.field("next")
			a, err := e.archive()
			e.JSON = nil // the rows hold what the store needs
			if !yield(a, err) || err != nil || !next.Exists() {
				return
			}
			s.messages, s.from, s.to = true, int(next.Get("from").Int()), int(next.Get("to").Int())
			r, err := s.step(ctx, json.RawMessage(`{"ok":null}`))
			switch {
			case err != nil:
				s.fatal = err
			case r.Done || r.Effect.Type != core.EffectArchive:
				s.fatal = fmt.Errorf("%w: session.run stopped asking for an archive's parts after part %d", ErrABIMismatch, part)
			}
			if s.fatal != nil {
				yield(core.RecallArchive{}, s.fatal)
				return
			}
			e = r.Effect
		}
	}
	return s.ce.store.Archive(ctx, s.ce.session, parts)
}

// effectFailure is the answer of a failed effect. A summarizer's failure is
// already compact.finish's {code, message} (runSummarize); a store's is "store".
func effectFailure(err error) json.RawMessage {
	if f, ok := err.(summarizerFailure); ok {
		return append(append([]byte(`{"error":`), f...), '}')
	}
	return append(append([]byte(`{"error":`), summaryFailure("store", err.Error())...), '}')
}

// summarizerFailure is a summarizer's failure as its answer's error object.
type summarizerFailure json.RawMessage

func (f summarizerFailure) Error() string { return gjson.GetBytes(f, "message").Str }

// storeEffects performs the recall store's effects for a lossless session.
func (ce *ContextEngine) storeEffects(ctx context.Context, e *sessionEffect) (json.RawMessage, error) {
	if ce.store == nil {
		return nil, fmt.Errorf("%w: session.run asked a compressor engine for %s", ErrABIMismatch, e.Type)
	}
	effect := e.field
	switch e.Type {
	case core.EffectNextRangeID:
		id, err := ce.store.NextRangeID(ctx, ce.session)
		if err != nil {
			return nil, err
		}
		return appendString(nil, id), nil
	case core.EffectSearch:
		hits, total, err := ce.store.Find(ctx, ce.session, effect("query").Str, int(effect("limit").Int()))
		if err != nil {
			return nil, err
		}
		if hits == nil {
			hits = []core.RecallHit{}
		}
		return json.Marshal(struct {
			Hits  []core.RecallHit `json:"hits"`
			Total int              `json:"total"`
		}{hits, total})
	case core.EffectExpand:
		ms, err := ce.store.Messages(ctx, ce.session, effect("id").Str)
		if err != nil {
			return nil, err
		}
		b := []byte{'['}
		for i, m := range ms {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, m) // the JSON text: the core writes it byte for byte
		}
		return append(b, ']'), nil
	default:
		return nil, fmt.Errorf("%w: session.run asked for an unknown effect %q", ErrABIMismatch, e.Type)
	}
}
