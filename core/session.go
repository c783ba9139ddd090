package core

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// session.run (docs/SESSION.md): the sequences of a context engine, written once.
// An event goes in with the engine state; the core answers with the next effect
// for the host to perform (ask the summarizer, reserve a range id, archive, search,
// expand) and an opaque resume, or with the sequence's end: the new state, its
// status and the event's result. The host sends the same event again with the
// resume and the effect's answer, until the end. No instance is held while an
// effect runs, any instance (or runtime) may take the next step, and a failed
// effect is an answer: the core decides what it means (a failed summarizer is the
// extractive fallback; a failed store ends the sequence with nothing recorded).

// Session events.
const (
	EventCompress       = "compress"
	EventToolCall       = "tool_call"
	EventUsage          = "usage"
	EventShouldCompress = "should_compress"
	EventUpdateModel    = "update_model"
	EventReset          = "reset"
	EventStatus         = "status"
	EventTools          = "tools"
	EventPrepare        = "prepare"
	EventObserveResp    = "observe_response"
	EventObserveError   = "observe_error"
	EventObserveEvent   = "observe_event"
	EventApply          = "apply_compaction"
)

// Effects a session asks the host for.
const (
	EffectSummarize   = "summarize"
	EffectNextRangeID = "next_range_id"
	EffectArchive     = "archive"
	EffectSearch      = "search"
	EffectExpand      = "expand"
)

// sessionCommon are the fields every session.run request may carry.
var sessionCommon = []string{"op", "state", "event", "resume", "answer"}

// sessionFields are each event's own fields.
var sessionFields = map[string][]string{
	EventCompress:       {"messages", "format", "system", "config", "force", "prompt_tokens", "output", "summarizer", "focus", "memory_context", "prepare", "pins", "range"},
	EventToolCall:       {"name", "arguments"},
	EventUsage:          {"usage"},
	EventShouldCompress: {"prompt_tokens"},
	EventUpdateModel:    {"model", "context_length", "provider", "base_url", "api_mode"},
	EventReset:          {},
	EventStatus:         {},
	EventTools:          {"format"},
	EventPrepare:        {"body", "tokens", "manual"},
	EventObserveResp:    {"response"},
	EventObserveError:   {"status", "body"},
	EventObserveEvent:   {"message", "messages_count"},
	EventApply:          {"messages", "response", "count"},
	EventUndo:           {"messages", "originals"},
}

// sessionResumeVersion is the v of the resume this core writes and reads.
const sessionResumeVersion = 1

// sessionResume is where a sequence stands between two steps: opaque to hosts,
// which send it back as they got it.
type sessionResume struct {
	V     int    `json:"v"`
	Event string `json:"event"`
	Step  string `json:"step"`
	// RangeID is the range a lossless compaction archives as.
	RangeID string `json:"range_id,omitempty"`
	// CompactState is compact.begin's state, for the finish, and Config and
	// PromptTokens what the compaction began with: the state may change (a
	// response's usage recorded) while the summarizer runs.
	CompactState string          `json:"compact_state,omitempty"`
	Config       json.RawMessage `json:"config,omitempty"`
	PromptTokens int             `json:"prompt_tokens,omitempty"`
	// Chunks are the runs of a middle summarized chunk by chunk
	// (summary_chunks.go), Chunk the one asked for.
	Chunks []IndexRange `json:"chunks,omitempty"`
	Chunk  int          `json:"chunk,omitempty"`
	// Record is what the compaction records beside its report.
	Record *compactionRecord `json:"record,omitempty"`
	// Prepare marks a compaction prepared ahead of the trigger, begun at
	// compression count PrepareCount (session_prepare.go).
	Prepare      bool `json:"prepare,omitempty"`
	PrepareCount int  `json:"prepare_count,omitempty"`
	// Report is the compaction's report, recorded once it is archived.
	Report json.RawMessage `json:"report,omitempty"`
	// Left is what an archive in parts has still to ask for (session_archive.go).
	Left *archiveLeft `json:"left,omitempty"`
	// Native is the native session a prepare keeps once its archive is stored.
	Native json.RawMessage `json:"native,omitempty"`
	// Query, Limit, ID and MaxTokens are a tool call's checked arguments.
	Query     string `json:"query,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	ID        string `json:"id,omitempty"`
	MaxTokens int    `json:"max_tokens,omitempty"`
}

// sessionAnswer is the host's answer to an effect: {"ok": value} or {"error":
// {"code", "message"}}.
type sessionAnswer struct {
	ok      gjson.Result
	failed  bool
	code    string
	message string
}

// sessionStep is one step of a sequence: the request, its state and where the
// sequence stands (resume nil on the first step; answer the effect's answer).
type sessionStep struct {
	q      opRequest
	state  EngineState
	event  string
	resume *sessionResume
	answer sessionAnswer
	dst    []byte
}

func opSessionRun(q opRequest, dst []byte) ([]byte, error) {
	ev := q.Field("event")
	if ev.Type != gjson.String {
		return nil, errorf(CodeInvalidRequest, "/event", "event must be one of %s", strings.Join(sessionEvents(), ", "))
	}
	own, ok := sessionFields[ev.Str]
	if !ok {
		return nil, errorf(CodeInvalidRequest, "/event", "unknown event %q; the events are %s", ev.Str, strings.Join(sessionEvents(), ", "))
	}
	if err := checkSessionFields(q.params, ev.Str, own); err != nil {
		return nil, err
	}
	s, err := readEngineState(q.Field("state"))
	if err != nil {
		return nil, err
	}
	st := &sessionStep{q: q, state: s, event: ev.Str, dst: dst}
	if err := st.readResume(); err != nil {
		return nil, err
	}
	switch ev.Str {
	case EventCompress:
		return st.compress()
	case EventToolCall:
		return st.toolCall()
	case EventPrepare:
		return st.prepare()
	case EventObserveResp, EventObserveError, EventObserveEvent:
		return st.observe()
	case EventApply:
		return st.apply()
	case EventUndo:
		return st.undo()
	}
	return st.simple()
}

// sessionEvents lists the events, sorted.
func sessionEvents() []string {
	names := make([]string, 0, len(sessionFields))
	for k := range sessionFields {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// checkSessionFields refuses a field the event does not take, naming the ones it
// does: a misspelt option must not be ignored.
func checkSessionFields(p params, event string, own []string) error {
	for k := range p {
		if !slices.Contains(sessionCommon, k) && !slices.Contains(own, k) {
			allowed := append(slices.Clone(sessionCommon[1:]), own...)
			return unknownName(CodeInvalidRequest, "/"+pointerEscaper.Replace(k), "a "+event+" event has no field", k, allowed)
		}
	}
	return nil
}

// readResume reads the resume and answer of a step after the first.
func (st *sessionStep) readResume() error {
	rv, av := st.q.Field("resume"), st.q.Field("answer")
	if !rv.Exists() || rv.Type == gjson.Null {
		if av.Exists() && av.Type != gjson.Null {
			return errorf(CodeInvalidRequest, "/answer", "an answer goes with the resume of the step that asked for it")
		}
		return nil
	}
	var r sessionResume
	dec := json.NewDecoder(strings.NewReader(rv.Raw))
	dec.DisallowUnknownFields()
	if !rv.IsObject() || dec.Decode(&r) != nil || r.V != sessionResumeVersion || r.Step == "" {
		return errorf(CodeInvalidRequest, "/resume", "resume must be the object the last session.run step returned, unchanged")
	}
	if r.Event != st.event {
		return errorf(CodeInvalidRequest, "/resume", "this resume continues a %s event, not %s: send the same event again", r.Event, st.event)
	}
	st.resume = &r
	switch {
	case !av.IsObject():
		return errorf(CodeInvalidRequest, "/answer", "answer must be {\"ok\": value} or {\"error\": {\"code\", \"message\"}}")
	case fieldOf(av, "error").Exists() && fieldOf(av, "error").Type != gjson.Null:
		e := fieldOf(av, "error")
		if !e.IsObject() || fieldOf(e, "message").Type != gjson.String {
			return errorf(CodeInvalidRequest, "/answer/error", "an effect's error must be {\"code\": string, \"message\": string}")
		}
		st.answer = sessionAnswer{failed: true, code: fieldOf(e, "code").Str, message: fieldOf(e, "message").Str}
	default:
		st.answer.ok = fieldOf(av, "ok")
	}
	return nil
}

// effect ends the step with an effect for the host; result, when not nil, is
// the sequence's result, which stands if the sequence ends without one.
func (st *sessionStep) effect(effect []byte, resume sessionResume, result func([]byte) []byte) ([]byte, error) {
	return st.effectWith(rawResult(effect), resume, result)
}

// effectWith is effect with an effect written in place (a large one is not
// built and then copied).
func (st *sessionStep) effectWith(effect func([]byte) []byte, resume sessionResume, result func([]byte) []byte) ([]byte, error) {
	resume.V, resume.Event = sessionResumeVersion, st.event
	rs, err := marshal(resume)
	if err != nil {
		return nil, err
	}
	b := effect(append(st.dst, `{"done":false,"effect":`...))
	b = append(append(b, `,"resume":`...), rs...)
	if result != nil {
		b = result(append(b, `,"result":`...))
	}
	return append(b, '}'), nil
}

// done ends the sequence with the state and result (nil: none, or the one an
// effect carried).
func (st *sessionStep) done(result func([]byte) []byte) ([]byte, error) {
	s, err := marshal(st.state)
	if err != nil {
		return nil, err
	}
	status, err := marshal(st.state.Status())
	if err != nil {
		return nil, err
	}
	b := append(st.dst, `{"done":true,"state":`...)
	b = append(append(b, s...), `,"status":`...)
	b = append(b, status...)
	if result != nil {
		b = result(append(b, `,"result":`...))
	}
	return append(b, '}'), nil
}

// fail ends the sequence because an effect failed: nothing is recorded, the
// state is the one sent, and the host raises its own error with message.
func (st *sessionStep) fail(effect, message string) ([]byte, error) {
	b := append(st.dst, `{"done":true,"failed":{"effect":`...)
	b = jsonraw.AppendString(b, effect)
	b = append(b, `,"code":`...)
	b = jsonraw.AppendString(b, st.answer.code)
	b = append(b, `,"message":`...)
	b = jsonraw.AppendString(b, "ctxcompact: "+message+": "+st.answer.message)
	return append(b, "}}"...), nil
}

// rawResult writes v as a result (or an effect).
func rawResult(v []byte) func([]byte) []byte {
	return func(b []byte) []byte { return append(b, v...) }
}

// badStep is the error of a resume whose step this event does not have.
func (st *sessionStep) badStep() error {
	return errorf(CodeInvalidRequest, "/resume", "resume names step %q, which a %s event does not have", st.resume.Step, st.event)
}

// lossless reports whether the session archives (context.engine "lossless").
func (st *sessionStep) lossless() bool {
	return gjson.GetBytes(st.state.Config, "context.engine").Str == ContextEngineLossless
}

// rangeAnswer reads the answer to next_range_id.
func (st *sessionStep) rangeAnswer() (string, error) {
	if st.answer.ok.Type != gjson.String || !IsRangeID(st.answer.ok.Str) {
		return "", errorf(CodeInvalidRequest, "/answer/ok", "the answer to next_range_id must be a range id r<k>, got %s", st.answer.ok.Raw)
	}
	return st.answer.ok.Str, nil
}

// --- compress ---

func (st *sessionStep) compress() ([]byte, error) {
	step := "start"
	if st.resume != nil {
		step = st.resume.Step
	}
	switch step {
	case "start":
		if _, err := boolParam(st.q.params, "prepare"); err != nil {
			return nil, err
		}
		if st.lossless() && !st.preparing() {
			return st.effect([]byte(`{"type":"next_range_id"}`), sessionResume{Step: "range"}, nil)
		}
		return st.compressBegin("")
	case "range":
		if st.answer.failed {
			return st.fail(EffectNextRangeID, "the compaction did not start: the store gave no range id")
		}
		id, err := st.rangeAnswer()
		if err != nil {
			return nil, err
		}
		return st.compressBegin(id)
	case "summarize":
		if r := st.resume; r.Chunk+1 < len(r.Chunks) && !st.answer.failed {
			return st.compressChunk()
		}
		if st.resume.Prepare {
			return st.prepareFinish()
		}
		return st.compressFinish()
	case "archive":
		if st.answer.failed {
			return st.fail(EffectArchive, "the compaction is not recorded: archiving it as "+st.resume.RangeID+" failed")
		}
		if st.resume.Left != nil {
			return st.archiveNext()
		}
		var r Report
		if err := json.Unmarshal(st.resume.Report, &r); err != nil {
			return nil, errorf(CodeInvalidRequest, "/resume", "resume must be the object the last session.run step returned, unchanged")
		}
		var rec compactionRecord
		if st.resume.Record != nil {
			rec = *st.resume.Record
		}
		st.record(r, rec)
		return st.done(nil)
	}
	return nil, st.badStep()
}

// compactParams are the fields of the compaction a compress event asks for: the
// event's, over the session's config and prompt size (those the compaction began
// with, after its first step), with the range it archives as.
func (st *sessionStep) compactParams(rangeID string) (params, error) {
	p := params{}
	for _, k := range []string{"messages", "format", "system", "force", "output", "summarizer", "focus", "pins", "range"} {
		if v, ok := st.q.params[k]; ok {
			p[k] = v
		}
	}
	cfg, prompt := []byte(st.state.Config), st.state.LastPromptTokens
	if r := st.resume; r != nil && r.Step == "summarize" {
		cfg, prompt = r.Config, r.PromptTokens
	} else {
		if over := st.q.params.Get("config"); over.Exists() && over.Type != gjson.Null {
			merged, err := MergeConfig(cfg, []byte(over.Raw))
			if err != nil {
				return nil, err
			}
			cfg = merged
		}
		n, err := intParam(st.q.params, "prompt_tokens")
		if err != nil {
			return nil, err
		}
		if n > 0 {
			prompt = n
		}
	}
	p["config"] = gjson.ParseBytes(cfg)
	if prompt > 0 {
		p["prompt_tokens"] = gjson.Parse(strconv.Itoa(prompt))
	}
	if st.preparing() { // ahead of the trigger, by definition below it
		p["force"] = gjson.Parse("true")
	}
	if rq := st.state.Requested; rq != nil { // the agent asked for it (compact_now)
		p["force"] = gjson.Parse("true")
		if _, given := p["focus"]; !given && rq.Focus != "" {
			p["focus"] = gjson.Parse(string(mustMarshal(rq.Focus)))
		}
	}
	if rangeID != "" {
		p["archive_id"] = gjson.Parse(string(mustMarshal(rangeID)))
	}
	return p, nil
}

// summaryExtra is what a compress event adds to the summary request beside the
// compaction's own guidance (its instructions and focus): the memory provider's
// context.
func (st *sessionStep) summaryExtra() (string, error) {
	v := st.q.params.Get("memory_context")
	if !v.Exists() || v.Type == gjson.Null {
		return "", nil
	}
	if v.Type != gjson.String {
		return "", errorf(CodeInvalidRequest, "/memory_context", "memory_context must be a string")
	}
	if strings.TrimSpace(v.Str) == "" {
		return "", nil
	}
	return "\n\nContext from the memory provider (use it, do not repeat it verbatim):\n" + v.Str, nil
}

func (st *sessionStep) compressBegin(rangeID string) ([]byte, error) {
	p, err := st.compactParams(rangeID)
	if err != nil {
		return nil, err
	}
	extra, err := st.summaryExtra()
	if err != nil {
		return nil, err
	}
	r, err := parseCompactParams(p, st.q.arrays["messages"])
	if err != nil {
		return nil, err
	}
	if err := st.pinSession(r); err != nil {
		return nil, err
	}
	preparing := st.preparing()
	if !preparing {
		if o := st.splice(r); o != nil {
			return st.compressDone(rangeID, r, o)
		}
	}
	o, pl, done := r.begin()
	switch {
	case done && preparing && pl.tailStart <= pl.headEnd:
		return st.prepareEnd(nil, "nothing to summarize")
	case done && preparing:
		return st.keepPrepared(r, pl, "", st.state.CompressionCount)
	case done:
		return st.compressDone(rangeID, r, o)
	}
	ask := buildSummaryRequest(r.msgs, pl, r.cfg.Compression)
	chunks := summaryChunks(r.msgs, pl, r.cfg.Compression)
	if chunks != nil {
		ask = buildChunkRequest(r.msgs, pl, r.cfg.Compression, chunks, 0, "")
	}
	ask.extra += extra
	state := r.stateFor(pl)
	if st.q.owned {
		keepPending(p, len(st.q.Whole().Raw), state, r, pl)
	}
	return st.effect(summarizeEffect(&ask), sessionResume{Step: "summarize", RangeID: rangeID, CompactState: state,
		Config: json.RawMessage(p["config"].Raw), PromptTokens: int(p["prompt_tokens"].Int()), Chunks: chunks,
		Prepare: preparing, PrepareCount: prepareCount(preparing, st.state.CompressionCount)}, nil)
}

// prepareCount is the compression count a preparation began at (0 for a
// compaction that is not one: the resume leaves it out).
func prepareCount(preparing bool, count int) int {
	if preparing {
		return count
	}
	return 0
}

// preparing reports whether the compress event prepares a compaction ahead of
// the trigger (its "prepare" field).
func (st *sessionStep) preparing() bool {
	if st.resume != nil && st.resume.Step == "summarize" {
		return st.resume.Prepare
	}
	return st.q.params.Get("prepare").Type == gjson.True
}

// prepareFinish ends a preparation with the summarizer's answer: the prepared
// compaction kept, or, when the summarizer failed, none (the compaction at the
// trigger then summarizes as usual).
func (st *sessionStep) prepareFinish() ([]byte, error) {
	if st.answer.failed {
		return st.prepareEnd(nil, "the summarizer failed: "+fallbackFailure(FallbackCode(st.answer.code), st.answer.message))
	}
	summary, err := st.summaryAnswer()
	if err != nil {
		return nil, err
	}
	r, pl, err := st.begunCompaction(true)
	if err != nil {
		return nil, err
	}
	return st.keepPrepared(r, pl, summary, st.resume.PrepareCount)
}

// summaryAnswer is the summarizer's answer to a summarize effect: a string.
func (st *sessionStep) summaryAnswer() (string, error) {
	if v := st.answer.ok; v.Type == gjson.String {
		return v.Str, nil
	}
	return "", errorf(CodeInvalidRequest, "/answer/ok", "the answer to summarize must be the summary, a string")
}

// summarizeEffect is the effect asking for ask's summary.
func summarizeEffect(ask *summaryAsk) []byte {
	effect := append([]byte(`{"type":"summarize","request":`), appendSummaryRequest(nil, ask)...)
	return append(effect, '}')
}

// compressChunk answers a chunk's summary with the request of the next chunk,
// which updates it (summary_chunks.go).
func (st *sessionStep) compressChunk() ([]byte, error) {
	summary, err := st.summaryAnswer()
	if err != nil {
		return nil, err
	}
	r, pl, err := st.begunCompaction(false)
	if err != nil {
		return nil, err
	}
	extra, err := st.summaryExtra()
	if err != nil {
		return nil, err
	}
	resume := *st.resume
	resume.Chunk++
	ask := buildChunkRequest(r.msgs, pl, r.cfg.Compression, resume.Chunks, resume.Chunk, summary)
	ask.extra += extra
	return st.effect(summarizeEffect(&ask), resume, nil)
}

// begunCompaction is the compaction the summarize step's resume began: the one
// the instance keeps (taken, when take), or the messages planned again.
func (st *sessionStep) begunCompaction(take bool) (*compactRequest, plan, error) {
	p, err := st.compactParams(st.resume.RangeID)
	if err != nil {
		return nil, plan{}, err
	}
	state := st.resume.CompactState
	r, pl, begun := findPending(p, state, take)
	if !begun {
		if r, pl, err = replanBegun(p, st.q.arrays["messages"], state, st.pinSession); err != nil {
			return nil, plan{}, err
		} else if r == nil {
			return nil, plan{}, errorf(CodeInvalidState, "/resume", "the resume does not match these messages and this state: send the same event and state again")
		}
	}
	return r, pl, nil
}

func (st *sessionStep) compressFinish() ([]byte, error) {
	r, pl, err := st.begunCompaction(true)
	if err != nil {
		return nil, err
	}
	summary, failure := "", ""
	r.fallbackCode = FallbackEmpty
	if st.answer.failed {
		r.fallbackCode = FallbackError
		if slices.Contains(FallbackCodes, FallbackCode(st.answer.code)) {
			r.fallbackCode = FallbackCode(st.answer.code)
		}
		failure = fallbackFailure(r.fallbackCode, st.answer.message)
	} else if summary, err = st.summaryAnswer(); err != nil {
		return nil, err
	}
	o := r.finish(pl, summary, failure)
	if n := len(st.resume.Chunks); n > 0 && !st.answer.failed {
		o.report.SummaryChunks = n
	}
	return st.compressDone(st.resume.RangeID, r, o)
}

// compressDone records a finished compaction, or, when a lossless session archived
// messages, first asks the host to store them.
func (st *sessionStep) compressDone(rangeID string, r *compactRequest, o *compactOutcome) ([]byte, error) {
	result := func(b []byte) []byte { return o.appendTo(b, r.refs) }
	rec := recordOf(r, o, rangeID)
	if rangeID == "" || len(o.archived) == 0 {
		st.record(*o.report, rec)
		return st.done(result)
	}
	return st.archiveFirst(rangeID, r, o, rec)
}

// pinSession pins the messages the session pins (by identity), beside those the
// event's pins name.
func (st *sessionStep) pinSession(r *compactRequest) error {
	if len(st.state.Pins) == 0 {
		return nil
	}
	ids := make(map[string]bool, len(st.state.Pins))
	for _, id := range st.state.Pins {
		ids[id] = true
	}
	r.pinByIdentity(ids)
	return r.checkPinned()
}

// sessionPins are the session's pins after a compaction: the identities of the
// output messages kept for a pin.
func sessionPins(r *compactRequest, o *compactOutcome) []string {
	if !r.hasPins {
		return nil
	}
	var pins []string
	for _, m := range o.out {
		if m.src >= 0 && r.msgs[m.src].pinned {
			pins = append(pins, messageIdentity(m.raw))
		}
	}
	return pins
}

// --- tool_call ---

// noToolsAnswer is a tool call's answer in a session without tools.
func noToolsAnswer(name string) string {
	return toolError("unknown tool " + string(mustMarshal(name)) + ": this context engine's tools are context_status and compact_now (context.engine is compressor)")
}

func (st *sessionStep) toolCall() ([]byte, error) {
	answer := func(s string) ([]byte, error) { return st.done(rawResult(mustMarshal(s))) }
	if st.resume == nil {
		name := st.q.Field("name")
		if name.Type != gjson.String {
			return nil, errorf(CodeInvalidRequest, "/name", "name must be the tool's name, a string")
		}
		if isContextTool(name.Str) {
			return answer(contextToolAnswer(&st.state, name.Str, st.q.Field("arguments")))
		}
		if !st.lossless() {
			return answer(noToolsAnswer(name.Str))
		}
		args, bad := checkToolCall(name.Str, st.q.Field("arguments"))
		if bad != "" {
			return answer(bad)
		}
		if name.Str == ToolContextSearch {
			query, limit := args["query"].(string), args["limit"].(int)
			plan, err := BuildRecallQuery(query)
			if err != nil {
				return nil, err
			}
			effect, err := marshal(map[string]any{"type": EffectSearch, "query": query, "limit": limit,
				"terms": plan.Terms, "fts": plan.FTS, "like": plan.Like})
			if err != nil {
				return nil, err
			}
			return st.effect(effect, sessionResume{Step: "search", Query: query, Limit: limit}, nil)
		}
		id := args["id"].(string)
		mt, _ := args["max_tokens"].(int)
		effect, err := marshal(map[string]any{"type": EffectExpand, "id": id})
		if err != nil {
			return nil, err
		}
		return st.effect(effect, sessionResume{Step: "expand", ID: id, MaxTokens: mt}, nil)
	}
	switch st.resume.Step {
	case "search":
		if st.answer.failed {
			return st.fail(EffectSearch, "context_search: the store failed")
		}
		var a struct {
			Hits  []RecallHit `json:"hits"`
			Total int         `json:"total"`
		}
		if !st.answer.ok.IsObject() || json.Unmarshal([]byte(st.answer.ok.Raw), &a) != nil {
			return nil, errorf(CodeInvalidRequest, "/answer/ok", "the answer to search must be {\"hits\": [{id, range_id, position, role, text}], \"total\": n}")
		}
		return answer(SearchResult(st.resume.Query, a.Hits, st.resume.Limit, a.Total))
	case "expand":
		if st.answer.failed {
			return st.fail(EffectExpand, "context_expand: the store failed")
		}
		var msgs []string
		if !st.answer.ok.IsArray() || json.Unmarshal([]byte(st.answer.ok.Raw), &msgs) != nil {
			return nil, errorf(CodeInvalidRequest, "/answer/ok", "the answer to expand must be the original messages' JSON texts, an array of strings")
		}
		return answer(ExpandResult(st.resume.ID, msgs, st.resume.MaxTokens))
	}
	return nil, st.badStep()
}

// --- the engine's own events ---

// sessionSteps are the events that change or read the state alone.
var sessionSteps = map[string]func(s *EngineState, req opRequest) (map[string]any, error){
	EventUsage:          stepUsage,
	EventShouldCompress: stepShouldCompress,
	EventUpdateModel:    stepUpdateModel,
	EventReset:          stepReset,
	EventStatus:         func(*EngineState, opRequest) (map[string]any, error) { return nil, nil },
	EventTools:          stepTools,
}

// stepTools answers the tools event: the schemas of the engine's tools in the shape
// of format (openai, the default, responses or anthropic): the context tools, and
// the recall tools when the engine is lossless.
func stepTools(s *EngineState, req opRequest) (map[string]any, error) {
	defs := contextToolDefs
	if gjson.GetBytes(s.Config, "context.engine").Str == ContextEngineLossless {
		defs = append(slices.Clone(recallToolDefs), contextToolDefs...)
	}
	b, err := appendToolSchemas(nil, req.params.Get("format"), defs)
	if err != nil {
		return nil, err
	}
	return map[string]any{"tools": json.RawMessage(b)}, nil
}

func (st *sessionStep) simple() ([]byte, error) {
	if st.resume != nil {
		return nil, st.badStep()
	}
	extra, err := sessionSteps[st.event](&st.state, st.q)
	if err != nil {
		return nil, err
	}
	if extra == nil {
		return st.done(nil)
	}
	b, err := marshal(extra)
	if err != nil {
		return nil, err
	}
	return st.done(rawResult(b))
}

// --- provider-native compaction ---

// nativeRequest is the native op request of this event: its fields, and the
// session's config, route and native session.
func (st *sessionStep) nativeRequest(extra params) (opRequest, error) {
	p := params{}
	for k, v := range extra {
		p[k] = v
	}
	p["config"] = gjson.ParseBytes(st.state.Config)
	route, err := marshal(NativeRoute{Provider: gjson.GetBytes(st.state.Config, "model.provider").Str,
		BaseURL: st.state.BaseURL, APIMode: st.state.APIMode})
	if err != nil {
		return opRequest{}, err
	}
	p["route"] = gjson.ParseBytes(route)
	if st.state.Native != nil {
		n, err := marshal(st.state.Native)
		if err != nil {
			return opRequest{}, err
		}
		p["session"] = gjson.ParseBytes(n)
	}
	return opRequest{whole: st.q.whole, params: p, arrays: st.q.arrays, owned: st.q.owned}, nil
}

func (st *sessionStep) prepare() ([]byte, error) {
	return st.runNative("archiving what the provider's compaction stands for", func() (nativeOutcome, error) {
		req, err := st.nativeRequest(params{"body": st.q.params["body"], "tokens": st.q.params["tokens"], "manual": st.q.params["manual"]})
		if err != nil {
			return nativeOutcome{}, err
		}
		if v := st.q.Field("tokens"); !v.Exists() || v.Type == gjson.Null || v.Num == 0 {
			req.params["tokens"] = gjson.Parse(strconv.Itoa(st.state.LastPromptTokens))
		}
		cfg, route, ns, err := nativeParams(req)
		if err != nil {
			return nativeOutcome{}, err
		}
		tokens, manual, err := nativeAsk(req)
		if err != nil {
			return nativeOutcome{}, err
		}
		body := st.q.Field("body")
		out := &NativePrepared{}
		if !body.Exists() || body.Type == gjson.Null {
			d := NativePolicy(cfg, route, ns, tokens, manual)
			*out = NativePrepared{Body: json.RawMessage("null"), Betas: d.Betas, CompactionBody: json.RawMessage("null"), Decision: d,
				Trimmed: NativeTrimmed{Dropped: []NativeDropped{}, DroppedMessages: []json.RawMessage{}, Rewritten: []NativeDropped{}, Archive: []NativeArchived{}}}
		} else {
			if !body.IsObject() {
				return nativeOutcome{}, errorf(CodeInvalidRequest, "/body", "body must be the request body object the host is about to send")
			}
			if *out, err = nativePrepare(cfg, route, ns, body, tokens, manual); err != nil {
				return nativeOutcome{}, err
			}
		}
		return nativeOutcome{result: out, named: func(id string) { out.Trimmed.ArchivedAs = id },
			archive: out.Trimmed.Archive, session: out.Decision.Session}, nil
	})
}

func (st *sessionStep) observe() ([]byte, error) {
	if st.resume != nil {
		return nil, st.badStep()
	}
	p := params{}
	switch st.event {
	case EventObserveResp:
		p["response"] = st.q.params["response"]
	case EventObserveError:
		var e bytes.Buffer
		e.WriteString(`{"status":`)
		e.WriteString(orJSONNull(st.q.params["status"].Raw))
		e.WriteString(`,"body":`)
		e.WriteString(orJSONNull(st.q.params["body"].Raw))
		e.WriteByte('}')
		p["error"] = gjson.Parse(e.String())
	default:
		p["event"], p["messages_count"] = st.q.params["message"], st.q.params["messages_count"]
		if !p["event"].Exists() || p["event"].Type == gjson.Null {
			return nil, errorf(CodeInvalidRequest, "/message", "message must be the app server's JSON-RPC message")
		}
	}
	for k, v := range p {
		if !v.Exists() {
			delete(p, k)
		}
	}
	req, err := st.nativeRequest(p)
	if err != nil {
		return nil, err
	}
	b, err := opNativeObserve(req)
	if err != nil {
		return nil, pathFrom(err, "/error/", "/")
	}
	var o NativeObservation
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, err
	}
	st.state.Native = &o.Session
	return st.done(rawResult(b))
}

// pathFrom rewrites an error path that starts with from to start with to.
func pathFrom(err error, from, to string) error {
	if e, ok := err.(*Error); ok && strings.HasPrefix(e.Path, from) {
		e.Message = strings.ReplaceAll(e.Message, "(at "+e.Path+")", "(at "+to+e.Path[len(from):]+")")
		e.Path = to + e.Path[len(from):]
	}
	return err
}

func orJSONNull(raw string) string {
	if raw == "" {
		return "null"
	}
	return raw
}

// apply finishes an Anthropic on-demand compaction: the response's compaction
// block is observed and swapped in for the first count messages (native.trim's
// replace); a lossless session archives the summarized originals; until a
// response reports usage, the prompt's size is the swapped conversation's
// estimate (divergence 1 of issue 26: re-estimated in every runtime).
func (st *sessionStep) apply() ([]byte, error) {
	return st.runNative("archiving what the compaction summarized", func() (nativeOutcome, error) {
		msgs := st.q.Field("messages")
		if !msgs.IsArray() {
			return nativeOutcome{}, errorf(CodeInvalidMessages, "/messages", "messages must be a JSON array")
		}
		resp := st.q.Field("response")
		content := fieldOf(resp, "content")
		block := false
		content.ForEach(func(_, b gjson.Result) bool {
			block = block || fieldOf(b, "type").Str == "compaction"
			return !block
		})
		if !content.IsArray() || !block {
			return nativeOutcome{}, errorf(CodeInvalidRequest, "/response/content", "the response must be an Anthropic message whose content holds a compaction block")
		}
		req, err := st.nativeRequest(params{})
		if err != nil {
			return nativeOutcome{}, err
		}
		_, route, ns, err := nativeParams(req)
		if err != nil {
			return nativeOutcome{}, err
		}
		o := NativeObservation{Session: ns, Seen: []NativeSeen{}}
		if err := observeResponse(&o, resp, route.Key()); err != nil {
			return nativeOutcome{}, pathFrom(err, "/response", "/response")
		}
		n, err := checkItems(msgs, "/messages")
		if err != nil {
			return nativeOutcome{}, err
		}
		count := n
		if v := st.q.Field("count"); v.Exists() && v.Type != gjson.Null {
			if v.Type != gjson.Number || v.Num < 0 || v.Num != float64(int(v.Num)) || int(v.Num) > n {
				return nativeOutcome{}, errorf(CodeInvalidRequest, "/count", "count must be an integer from 0 to the number of messages (%d), got %s", n, v.Raw)
			}
			if v.Num > 0 {
				count = int(v.Num)
			}
		}
		message := `{"role":"assistant","content":` + content.Raw + `}`
		t := trimNative(msgs, FormatAnthropic, o.Session, route.Key(), true, count, message)
		tokens, err := st.countAnthropic(t.Messages)
		if err != nil {
			return nativeOutcome{}, err
		}
		out := &struct {
			NativeTrimResult
			ArchivedAs string `json:"archived_as,omitempty"`
		}{NativeTrimResult: t}
		archive := make([]NativeArchived, len(t.Dropped))
		for i, d := range t.Dropped {
			archive[i] = NativeArchived{Index: d.Index, Reason: d.Reason, Message: t.DroppedMessages[i]}
		}
		return nativeOutcome{result: out, named: func(id string) { out.ArchivedAs = id },
			archive: archive, session: o.Session, tokens: tokens}, nil
	})
}

// nativeOutcome is what a native sequence (prepare, apply_compaction) computes: its
// result (named puts the recall range in it), what of it a lossless session
// archives, the native session to keep, and apply's prompt estimate.
type nativeOutcome struct {
	result  any
	named   func(rangeID string)
	archive []NativeArchived
	session NativeSession
	tokens  int
}

// runNative drives a native sequence; what names its archive in errors. compute
// runs on the first step and again once the store gave a range id: over the same
// state and event it gives the same outcome.
func (st *sessionStep) runNative(what string, compute func() (nativeOutcome, error)) ([]byte, error) {
	if st.resume != nil {
		switch {
		case st.resume.Step == "archive":
			if st.answer.failed {
				return st.fail(EffectArchive, what+" failed")
			}
			var ns NativeSession
			if err := json.Unmarshal(st.resume.Native, &ns); err != nil {
				return nil, errorf(CodeInvalidRequest, "/resume", "resume must be the object the last session.run step returned, unchanged")
			}
			st.keepNative(ns, st.resume.PromptTokens)
			return st.done(nil)
		case st.resume.Step != "range":
			return nil, st.badStep()
		case st.answer.failed:
			return st.fail(EffectNextRangeID, what+" failed: the store gave no range id")
		}
	}
	out, err := compute()
	if err != nil {
		return nil, err
	}
	if !st.lossless() || len(out.archive) == 0 {
		st.keepNative(out.session, out.tokens)
		b, err := marshal(out.result)
		if err != nil {
			return nil, err
		}
		return st.done(rawResult(b))
	}
	if st.resume == nil {
		return st.effect([]byte(`{"type":"next_range_id"}`), sessionResume{Step: "range"}, nil)
	}
	id, err := st.rangeAnswer()
	if err != nil {
		return nil, err
	}
	out.named(id)
	return st.archiveNative(id, out)
}

// keepNative ends a native sequence in the state: its native session and, after an
// on-demand compaction, the swapped conversation's estimate as the prompt size.
func (st *sessionStep) keepNative(ns NativeSession, tokens int) {
	st.state.Native = &ns
	if st.event == EventApply {
		st.state.RecordUsage(Usage{PromptTokens: tokens, TotalTokens: tokens, Source: "estimate"})
	}
}

// archiveNative asks the host to store what a native compaction stands for as
// range id, holding the result and, for the end, the native session and the
// prompt size to record.
func (st *sessionStep) archiveNative(id string, out nativeOutcome) ([]byte, error) {
	entries := make([]archivedMsg, len(out.archive))
	for i, a := range out.archive {
		var m bytes.Buffer
		if err := json.Compact(&m, a.Message); err != nil { // as encoding/json writes a RawMessage
			return nil, err
		}
		entries[i] = archivedMsg{index: a.Index, reason: ArchiveReason(a.Reason), raw: m.String()}
	}
	native, err := marshal(out.session)
	if err != nil {
		return nil, err
	}
	res, err := marshal(out.result)
	if err != nil {
		return nil, err
	}
	from, to := archiveSpan(entries, nil)
	rng := RecallRange{ID: id, FromIndex: from, ToIndex: to}
	effect := func(b []byte) []byte {
		return appendArchiveEffect(b, id, 0, &rng, entries, gjson.Result{}, from, nil)
	}
	return st.effectWith(effect, sessionResume{Step: "archive", RangeID: id, Native: native, PromptTokens: out.tokens}, rawResult(res))
}

// countAnthropic is the session's token estimate of an Anthropic message list.
func (st *sessionStep) countAnthropic(msgs []json.RawMessage) (int, error) {
	env := []byte(`{"op":"tokens.count","format":"anthropic","config":`)
	env = append(append(env, st.state.Config...), `,"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			env = append(env, ',')
		}
		env = append(env, m...)
	}
	env = append(env, "]}"...)
	req, members, _, err := readEnvelope("", env)
	if err != nil {
		return 0, err
	}
	b, err := opTokensCount(newOpRequest(req, members))
	if err != nil {
		return 0, err
	}
	return int(gjson.GetBytes(b, "total").Int()), nil
}
