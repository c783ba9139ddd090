package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// MaxNestingDepth bounds how deeply arrays and objects may nest in a request, so a
// hostile request cannot make a recursive walk exhaust the stack (no real message
// comes near it).
const MaxNestingDepth = 1000

// MaxRequestBytes bounds one request envelope. Larger requests get
// CodeInputTooLarge instead of exhausting a wasm instance's memory.
const MaxRequestBytes = 256 << 20

// handler runs one op on the parsed request object and appends the JSON of its
// result to dst, which holds the start of the response envelope: a large result
// (a whole conversation, a summary request) is written once, not built and then
// copied into the envelope.
type handler func(req opRequest, dst []byte) ([]byte, error)

// returning makes the handler of an op that returns its result's JSON.
func returning(op func(req opRequest) ([]byte, error)) handler {
	return func(req opRequest, dst []byte) ([]byte, error) {
		result, err := op(req)
		return append(dst, result...), err
	}
}

// opRequest is an op's parameters: the request object, and its top-level fields as
// the validating pass found them, so no op reads the (large) request again to find
// a field. A handler reads a field with Field (of duplicate keys the last, as every
// reader of objects does) and the whole request only with Whole: the two do not
// look alike.
type opRequest struct {
	whole  gjson.Result
	params params
	// arrays holds what validation found in the fields that are arrays (messages).
	arrays map[string]*jsonraw.ArrayParts
	// owned is true when the request lies in memory the core owns, so what is
	// parsed from it may be kept after the call.
	owned bool
}

// newOpRequest makes the opRequest of a validated request and the members
// checkJSON recorded. Of duplicate keys the last wins.
func newOpRequest(req gjson.Result, members []jsonraw.Member) opRequest {
	r := opRequest{whole: req, params: make(params, len(members)), arrays: map[string]*jsonraw.ArrayParts{}}
	for i := range members {
		m := &members[i]
		k := m.Key[1 : len(m.Key)-1]
		if jsonraw.HasByte(k, '\\') {
			k = jsonraw.DecodeString(m.Key)
		}
		r.params[k] = rawValue(m.Value)
		if m.Value[0] == '[' {
			r.arrays[k] = &m.ArrayParts
		} else {
			delete(r.arrays, k) // a later duplicate that is not an array
		}
	}
	return r
}

// Field returns the request's top-level field key (the last of duplicates), a
// string decoded; it does not exist when the request has no such field.
func (q opRequest) Field(key string) gjson.Result { return q.params.Get(key) }

// Fields returns the request's top-level fields, for code that reads several.
func (q opRequest) Fields() params { return q.params }

// Whole returns the request object itself, for an op that reads it whole.
func (q opRequest) Whole() gjson.Result { return q.whole }

// opSpec is one op: its handler and the top-level request fields it takes.
type opSpec struct {
	run handler
	// params are the fields the op reads ("op" aside). Another field is
	// invalid_request naming the closest one, so a misspelt parameter is never
	// ignored. Nil: the op checks its fields itself (session.run, whose fields are
	// the event's).
	params []string
}

// ops is the table of every op. It is the only place that knows op names.
var ops map[string]opSpec

// The fields of the ops over a message list.
var (
	messagesParams = []string{"messages", "config", "format", "system", "output"}
	compactParams  = []string{"messages", "config", "format", "system", "output", "force", "prompt_tokens", "summarizer", "ticket", "archive_id", "focus", "pins", "range"}
	policyParams   = []string{"config", "route", "session", "tokens", "manual"}
)

func init() {
	ops = map[string]opSpec{
		"info":                   {returning(opInfo), []string{}},
		"config.merge":           {returning(opConfigMerge), []string{"base", "config"}},
		"engine.start":           {returning(opEngineStart), []string{"config"}},
		"engine.usage":           {opEngineUsage, []string{"state", "usage"}},
		"engine.should_compress": {opEngineShouldCompress, []string{"state", "prompt_tokens"}},
		"engine.record":          {opEngineRecord, []string{"state", "report"}},
		"engine.update_model":    {opEngineUpdateModel, []string{"state", "model", "context_length", "provider", "base_url", "api_mode"}},
		"engine.reset":           {opEngineReset, []string{"state"}},
		"engine.status":          {opEngineStatus, []string{"state"}},
		"threshold.resolve":      {returning(opThresholdResolve), []string{"config"}},
		"should_compress":        {returning(opShouldCompress), []string{"config", "prompt_tokens", "last_compaction_tokens"}},
		"hygiene.check":          {returning(opHygieneCheck), []string{"config", "messages", "prompt_tokens", "format", "system"}},
		"prune":                  {returning(opPrune), messagesParams},
		"sanitize":               {returning(opSanitize), []string{"messages", "format", "output"}},
		"validate":               {returning(opValidate), []string{"messages", "format", "provider", "config"}},
		"compact.begin":          {opCompactBegin, compactParams},
		"compact.finish":         {opCompactFinish, append(slices.Clone(compactParams), "state", "summary", "error")},
		"cache.apply":            {returning(opCacheApply), []string{"messages", "config", "format", "system", "layout", "ttl"}},
		"cache.policy":           {returning(opCachePolicy), []string{"config", "model", "provider", "ttl"}},
		"cache.simulate":         {returning(opCacheSimulate), []string{"messages", "config", "format", "system", "layout", "ttl", "model", "min_cacheable_tokens", "per_request", "strategies", "timestamps"}},
		"tokens.count":           {returning(opTokensCount), []string{"messages", "encoding", "config", "format", "system", "report_cache_hits"}},
		"tokens.calibrate":       {returning(opTokensCalibrate), []string{"messages", "config", "encoding", "prompt_tokens", "fixed_overhead", "baseline"}},
		"native.policy":          {returning(opNativePolicy), policyParams},
		"native.prepare":         {returning(opNativePrepare), append(slices.Clone(policyParams), "body")},
		"native.observe":         {returning(opNativeObserve), []string{"config", "route", "session", "response", "error", "event", "messages_count"}},
		"native.trim":            {returning(opNativeTrim), []string{"messages", "format", "config", "session", "route", "drop_before_newest", "replace"}},
		"recall.tools":           {returning(opRecallTools), []string{"format"}},
		"recall.archive":         {returning(opRecallArchive), []string{"session", "range_id", "report", "archived", "summary_message", "messages"}},
		"recall.query":           {returning(opRecallQuery), []string{"query"}},
		"recall.search_result":   {returning(opRecallSearchResult), []string{"query", "hits", "limit", "total"}},
		"recall.expand_result":   {returning(opRecallExpandResult), []string{"id", "messages", "max_tokens"}},
		"recall.check_call":      {returning(opRecallCheckCall), []string{"name", "arguments"}},
		"session.run":            {opSessionRun, nil},
	}
}

// Ops returns the names of every op, sorted.
func Ops() []string {
	names := make([]string, 0, len(ops))
	for name := range ops {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Call runs one request envelope {"op": ..., ...} and returns the response envelope:
// {"result": ...} or {"error": {"code", "message", "path"}}. It never panics.
// The wasm guest and the CLI both call it; its bytes are the contract. The
// envelope is read in place: it must not change until Call returns.
func Call(envelope []byte) []byte {
	return serve("", envelope, false)
}

// CallTaking is Call for an envelope the caller hands over: it must never change
// again (the wasm guest's ctxc_call_take, whose host gives up the buffer). A
// compact.begin then keeps the envelope itself for compact.finish instead of a copy.
func CallTaking(envelope []byte) []byte {
	return serve("", envelope, true)
}

// Dispatch runs op on request, a JSON object of the op's parameters (an "op" field in
// it is ignored). It is Call with the op given separately. The request is read in place,
// as Call reads its envelope.
func Dispatch(op string, request []byte) []byte {
	return serve(op, request, false)
}

// serve is Call (op "", read from the request), CallTaking (taken) and Dispatch.
func serve(op string, request []byte, taken bool) []byte {
	if len(request) > MaxRequestBytes {
		return errorEnvelope(errorf(CodeInputTooLarge, "", "request is %d bytes; the limit is %d", len(request), MaxRequestBytes))
	}
	if q, name, ok := finishRequest(op, request); ok {
		return dispatch(name, q)
	}
	given := op
	req, members, op, err := readEnvelope(op, request)
	if err != nil {
		if e, ok := err.(*Error); ok && e.Code == CodeInvalidJSON && (given == "" || given == "validate") {
			if out, ok := validateInvalidUTF8(given, jsonraw.ViewString(request)); ok {
				return out
			}
		}
		return errorEnvelope(err)
	}
	owned := false
	if (op == "compact.begin" || op == "session.run" && compressEvent(members)) && len(request) <= pendingMaxRequest && !builtinSummarizer(members) {
		// What begin parses is kept for compact.finish (compact_pending.go): it
		// must point into memory the core owns, a copy unless the caller gave it.
		if !taken {
			req = gjson.Parse(ownMembers(request, members))
		}
		owned = true
	}
	q := newOpRequest(req, members)
	q.owned = owned
	return dispatch(op, q)
}

// readEnvelope validates request, a JSON object, and returns it with its top-level
// members and its op: the one given, or else its "op" field. The request is read in
// place: nothing returned is a copy.
func readEnvelope(op string, request []byte) (req gjson.Result, members []jsonraw.Member, name string, err error) {
	if valid, depth := checkJSON(request, &members); !valid {
		return req, nil, "", invalidJSON(jsonraw.ViewString(request))
	} else if depth > MaxNestingDepth {
		return req, nil, "", errorf(CodeInputTooLarge, "", "request nests arrays and objects more than %d levels deep", MaxNestingDepth)
	}
	req = gjson.Parse(jsonraw.ViewString(request))
	switch {
	case !req.IsObject() && op != "":
		return req, nil, "", errorf(CodeInvalidRequest, "", "request must be a JSON object")
	case !req.IsObject():
		return req, nil, "", errorf(CodeInvalidRequest, "", "request must be a JSON object with an \"op\" field")
	case op != "":
		return req, members, op, nil
	}
	v := memberField(members, "op")
	if v.Type != gjson.String {
		return req, nil, "", errorf(CodeInvalidRequest, "/op", "\"op\" must be a string naming an operation")
	}
	return req, members, v.Str, nil
}

// memberField returns the value of the last of members whose key is key, read as
// opRequest.Field reads it.
func memberField(members []jsonraw.Member, key string) gjson.Result {
	for k := len(members) - 1; k >= 0; k-- {
		m := &members[k]
		if mk := m.Key[1 : len(m.Key)-1]; mk == key || jsonraw.HasByte(mk, '\\') && jsonraw.DecodeString(m.Key) == key {
			return params{key: rawValue(m.Value)}.Get(key)
		}
	}
	return gjson.Result{}
}

// invalidJSON is the error for a request checkJSON refused: where it stops being
// valid JSON (the path of the value, and the byte) and why.
func invalidJSON(request string) error {
	path, at, what := jsonraw.LocateInvalid(request, MaxNestingDepth)
	if at < 0 { // the locator and the validator disagree: say so rather than guess
		return errorf(CodeInvalidJSON, "", "request is not valid JSON")
	}
	return errorf(CodeInvalidJSON, path, "request is not valid JSON: %s at byte %d", what, at)
}

func dispatch(op string, req opRequest) (out []byte) {
	spec, ok := ops[op]
	if !ok {
		return errorEnvelope(errorf(CodeUnknownOp, "/op", "unknown op %q; known ops: %v", op, Ops()))
	}
	if err := checkParams(op, req.params, spec.params); err != nil {
		return errorEnvelope(err)
	}
	defer func() {
		if r := recover(); r != nil {
			out = errorEnvelope(errorf(CodeInternal, "", "internal error in %s: %v", op, r))
		}
	}()
	out, err := spec.run(req, append(make([]byte, 0, 64), `{"result":`...))
	if err != nil {
		return errorEnvelope(err)
	}
	return append(out, '}')
}

// checkParams refuses a request field outside the op's params (the envelope's "op"
// aside), naming the closest one it takes. Of several, the first in sorted order is
// named, so the error does not depend on map order.
func checkParams(op string, p params, takes []string) error {
	if takes == nil {
		return nil
	}
	var unknown []string
	for k := range p {
		if k != "op" && !slices.Contains(takes, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return unknownName(CodeInvalidRequest, "/"+pointerEscaper.Replace(unknown[0]), op+" has no parameter", unknown[0], takes)
}

func errorEnvelope(err error) []byte {
	e, ok := err.(*Error)
	if !ok {
		e = &Error{Code: CodeInternal, Message: "ctxcompact: " + err.Error()}
	}
	b, _ := marshal(map[string]*Error{"error": e})
	return b
}

// marshal is json.Marshal without HTML escaping and without the trailing newline,
// so strings reach the caller exactly as written.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("ctxcompact: encoding result: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// InfoResult is the result of the info op.
type InfoResult struct {
	Name       string      `json:"name"`
	Version    string      `json:"version"`
	Ops        []string    `json:"ops"`
	ErrorCodes []ErrorCode `json:"error_codes"`
	Encodings  []string    `json:"encodings"`
}

func opInfo(opRequest) ([]byte, error) {
	return marshal(InfoResult{Name: "ctxcompact", Version: Version, Ops: Ops(), ErrorCodes: ErrorCodes, Encodings: Encodings()})
}
