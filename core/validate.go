package core

import (
	"strconv"
	"strings"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// Problem codes reported by validate: what providers reject.
const (
	ProblemInvalidMessage        = "invalid_message"
	ProblemEmptyToolCallID       = "empty_tool_call_id"
	ProblemDuplicateToolCallID   = "duplicate_tool_call_id"
	ProblemMissingToolName       = "missing_tool_name"
	ProblemInvalidToolArguments  = "invalid_tool_arguments"
	ProblemMissingToolCallID     = "missing_tool_call_id"
	ProblemOrphanToolResult      = "orphan_tool_result"
	ProblemMissingToolResult     = "missing_tool_result"
	ProblemEmptyAssistantMessage = "empty_assistant_message"
	// ProblemInvalidUTF8 is a string that is not valid UTF-8: every other op
	// refuses such a request with invalid_json at the same path.
	ProblemInvalidUTF8 = "invalid_utf8"
)

// Problem is one thing a provider would reject, located by a JSON pointer.
type Problem struct {
	Code    string `json:"code"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// ValidateResult lists the problems of a message list; OK when there are none.
type ValidateResult struct {
	OK       bool      `json:"ok"`
	Problems []Problem `json:"problems"`
}

// validation collects the problems of a message list as it is linted, and the
// calls of the open tool group still waiting for their results.
type validation struct {
	res     ValidateResult
	seen    map[string]bool // call ids used so far
	pending []pendingCall
}

type pendingCall struct{ id, path string }

func (v *validation) add(code, path, msg string) {
	v.res.Problems = append(v.res.Problems, Problem{Code: code, Path: path, Message: "ctxcompact: " + msg})
}

// answer takes the pending call id out of the open group, and reports whether
// there was one (the last of duplicates).
func (v *validation) answer(id string) bool {
	k := -1
	for j, c := range v.pending {
		if c.id == id {
			k = j
		}
	}
	if k < 0 {
		return false
	}
	v.pending = append(v.pending[:k], v.pending[k+1:]...)
	return true
}

// closeGroup reports the open group's calls left without a result.
func (v *validation) closeGroup() {
	for _, c := range v.pending {
		v.add(ProblemMissingToolResult, c.path, "tool call "+strconv.Quote(c.id)+" has no result right after its assistant message")
	}
	v.pending = v.pending[:0]
}

// validateMessages lints msgs for what providers reject: malformed messages, broken
// or duplicate tool-call ids, tool results that do not answer a call of the
// assistant message right before them, calls left without a result, and assistant
// messages with neither content nor tool calls; then the rules of the provider the
// request goes to (rules.go). formatV is the request's "format"; absent, the format
// is detected from the messages that are well formed. providerV is its "provider",
// which names the rule set of AI SDK messages; configured is the one config.model.provider
// names, used when providerV is absent.
func validateMessages(msgsV, formatV, providerV gjson.Result, configured string) (ValidateResult, error) {
	if !msgsV.IsArray() {
		return ValidateResult{}, errorf(CodeInvalidMessages, "/messages", "messages must be an array of chat messages")
	}
	type item struct {
		m    message
		mv   gjson.Result
		path string
		err  *Error
	}
	name, err := readFormatParam(formatV)
	if err != nil {
		return ValidateResult{}, err
	}
	named, err := readProviderParam(providerV)
	if err != nil {
		return ValidateResult{}, err
	}
	if name == "" {
		name = sniffFormat(msgsV, nil)
	}
	readOne := chatReader{}.readOne
	var f messageFormat // the format that read the items, when it is known
	if name != "" {
		f = formatOf(name)
		readOne = f.readOne
	}
	var items []item
	var good []message
	msgsV.ForEach(func(_, mv gjson.Result) bool {
		path := pointer("/messages", len(items))
		m, err := readOne(mv.Raw, path)
		it := item{m: m, mv: mv, path: path}
		if err != nil {
			it.err = err.(*Error)
		} else {
			good = append(good, m)
		}
		items = append(items, it)
		return true
	})
	if name == "" {
		name = detectFormat(good, false)
		if rereadAs(name) {
			f = formatOf(name)
			readOne = f.readOne
			for k := range items {
				it := &items[k]
				m, err := readOne(it.mv.Raw, it.path)
				it.m, it.err = m, nil
				if err != nil {
					it.err = err.(*Error)
				}
			}
		}
	}
	if f == nil {
		f = formatOf(name)
	}
	if tm, ok := f.(turnMarker); ok { // a format whose turns span items marks them in context
		views := make([]message, len(items))
		for k := range items {
			views[k] = items[k].m
		}
		tm.markTurns(views)
		for k := range items {
			items[k].m.continuesTurn = views[k].continuesTurn
		}
	}
	v := &validation{res: ValidateResult{Problems: []Problem{}}, seen: map[string]bool{}}
	for k := range items {
		it := &items[k]
		m, path := &it.m, it.path
		if it.err != nil {
			v.add(ProblemInvalidMessage, it.err.Path, it.err.Message[len("ctxcompact: "):])
			continue
		}
		if f.validateResults(v, m, it.mv, path) {
			continue
		}
		if !f.joinsPrevious(m) { // a further call of the turn keeps the group open
			v.closeGroup()
		}
		if m.role != "assistant" {
			continue
		}
		if len(m.calls) == 0 && m.text() == "" && !(m.content().IsArray() && len(m.content().Array()) > 0) {
			v.add(ProblemEmptyAssistantMessage, path, "an assistant message needs content or tool calls")
		}
		for k := range m.calls {
			c := &m.calls[k]
			cp := f.callPath(m, path, k)
			switch {
			case c.id == "":
				v.add(ProblemEmptyToolCallID, cp+callIDKey(f, c), "a tool call needs a non-empty id")
			case v.seen[c.id]:
				v.add(ProblemDuplicateToolCallID, cp+callIDKey(f, c), "tool call id "+strconv.Quote(c.id)+" is used more than once")
			default:
				v.seen[c.id] = true
				v.pending = append(v.pending, pendingCall{c.id, cp})
			}
			f.validateCall(v, c, cp)
		}
	}
	v.closeGroup()
	provider := providerOf(name, named)
	if named == "" && name == FormatAISDK {
		provider = configured
	}
	if named != "" && provider != named {
		return ValidateResult{}, errorf(CodeInvalidRequest, "/provider", "%s messages go to %s: provider %q names another", name, provider, named)
	}
	raws := make([]gjson.Result, len(items))
	paths := make([]string, len(items))
	for k := range items {
		raws[k], paths[k] = items[k].mv, items[k].path
	}
	checkProviderRules(v, name, provider, raws, paths)
	v.res.OK = len(v.res.Problems) == 0
	return v.res, nil
}

// callIDKey is the pointer suffix of call c's id in f: "/id", or the key a format
// names by an idKey method (the AI SDK's toolCallId) or, per call, by a callIDKeyOf
// method (Responses: call_id, callId or id).
func callIDKey(f messageFormat, c *toolCall) string {
	if k, ok := f.(interface{ callIDKeyOf(c *toolCall) string }); ok {
		return "/" + k.callIDKeyOf(c)
	}
	if k, ok := f.(interface{ idKey() string }); ok {
		return "/" + k.idKey()
	}
	return "/id"
}

// turnMarker is implemented by a format whose items continue the turn of the items
// before them (continuesTurn), which only the items around them tell.
type turnMarker interface{ markTurns(msgs []message) }

func opValidate(req opRequest) ([]byte, error) {
	res, err := validateRequest(req)
	if err != nil {
		return nil, err
	}
	return marshal(res)
}

// validateRequest validates a validate request's messages under the rules of the
// provider it names: "provider", else for AI SDK messages the provider of
// config.model.provider (rulesProvider).
func validateRequest(req opRequest) (ValidateResult, error) {
	providerV := req.Field("provider")
	cfg, err := parseConfig(req.Field("config"), "/config")
	if err != nil {
		return ValidateResult{}, err
	}
	return validateMessages(req.Field("messages"), req.Field("format"), providerV, rulesProvider(cfg.Model.Provider))
}

// maxUTF8Problems bounds the invalid_utf8 problems validate lists.
const maxUTF8Problems = 100

// validateInvalidUTF8 answers a validate request that is valid JSON but for strings
// that are not valid UTF-8: it lists each such string as a problem (the lint's job
// is to say what is wrong, where every other op refuses the request) and validates
// the rest with the bad bytes read as U+FFFD. ok is false when the request is
// invalid for another reason too, and the caller answers invalid_json.
func validateInvalidUTF8(op string, request string) ([]byte, bool) {
	var problems []Problem
	_, at, _ := jsonraw.WalkInvalid(request, MaxNestingDepth, func(path string, at int) {
		if len(problems) < maxUTF8Problems {
			problems = append(problems, Problem{Code: ProblemInvalidUTF8, Path: path,
				Message: "ctxcompact: invalid UTF-8 in a string at byte " + strconv.Itoa(at) + ": providers reject text that is not UTF-8"})
		}
	})
	if at >= 0 || len(problems) == 0 {
		return nil, false // invalid for another reason
	}
	fixed := []byte(strings.ToValidUTF8(request, "\uFFFD"))
	var members []jsonraw.Member
	if valid, depth := checkJSON(fixed, &members); !valid || depth > MaxNestingDepth {
		return nil, false
	}
	req := newOpRequest(gjson.ParseBytes(fixed), members)
	if op == "" && req.Field("op").Str == "validate" {
		op = "validate"
	}
	if op != "validate" || !req.Whole().IsObject() {
		return nil, false
	}
	res, err := validateRequest(req)
	if err != nil {
		return errorEnvelope(err), true
	}
	res.Problems = append(problems, res.Problems...)
	res.OK = false
	out, err := marshal(map[string]ValidateResult{"result": res})
	if err != nil {
		return errorEnvelope(err), true
	}
	return out, true
}
