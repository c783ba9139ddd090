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

// validateMessages lints msgs for what OpenAI-compatible providers reject: malformed
// messages, broken or duplicate tool-call ids, tool results that do not answer a
// call of the assistant message right before them, calls left without a result,
// and assistant messages with neither content nor tool calls.
func validateMessages(v gjson.Result) (ValidateResult, error) {
	if !v.IsArray() {
		return ValidateResult{}, errorf(CodeInvalidMessages, "/messages", "messages must be an array of chat messages")
	}
	res := ValidateResult{Problems: []Problem{}}
	add := func(code, path, msg string) {
		res.Problems = append(res.Problems, Problem{Code: code, Path: path, Message: "ctxcompact: " + msg})
	}
	seen := map[string]bool{}
	type pendingCall struct{ id, path string }
	var pending []pendingCall
	closeGroup := func() {
		for _, c := range pending {
			add(ProblemMissingToolResult, c.path, "tool call "+strconv.Quote(c.id)+" has no result right after its assistant message")
		}
		pending = pending[:0]
	}
	i := -1
	v.ForEach(func(_, mv gjson.Result) bool {
		i++
		path := pointer("/messages", i)
		m, err := parseMessage(mv, path)
		if err != nil {
			e := err.(*Error)
			add(ProblemInvalidMessage, e.Path, e.Message[len("ctxcompact: "):])
			return true
		}
		if len(m.results) > 0 { // Anthropic: every result of the group, in this one message
			for _, id := range m.results {
				k := -1
				for j, c := range pending {
					if c.id == id {
						k = j
					}
				}
				if k < 0 {
					add(ProblemOrphanToolResult, path+"/content", "tool_result "+strconv.Quote(id)+" does not answer a tool_use of the assistant message before it")
					continue
				}
				pending = append(pending[:k], pending[k+1:]...)
			}
			closeGroup()
			return true
		}
		if m.isToolResult() {
			if !fieldOf(mv, "tool_call_id").Exists() || m.resultFor == "" {
				add(ProblemMissingToolCallID, path+"/tool_call_id", "a tool message needs the tool_call_id of the call it answers")
				return true
			}
			k := -1
			for j, c := range pending {
				if c.id == m.resultFor {
					k = j
				}
			}
			if k < 0 {
				add(ProblemOrphanToolResult, path, "tool result "+strconv.Quote(m.resultFor)+" does not answer a pending call of the assistant message before it")
				return true
			}
			pending = append(pending[:k], pending[k+1:]...)
			return true
		}
		closeGroup()
		if m.role != "assistant" {
			return true
		}
		if len(m.calls) == 0 && m.text() == "" && !(m.content().IsArray() && len(m.content().Array()) > 0) {
			add(ProblemEmptyAssistantMessage, path, "an assistant message needs content or tool calls")
		}
		for k, c := range m.calls {
			cp := pointer(path+"/tool_calls", k)
			if m.blocks {
				cp = path + "/content" // a tool_use block
			}
			switch {
			case c.id == "":
				add(ProblemEmptyToolCallID, cp+"/id", "a tool call needs a non-empty id")
			case seen[c.id]:
				add(ProblemDuplicateToolCallID, cp+"/id", "tool call id "+strconv.Quote(c.id)+" is used more than once")
			default:
				seen[c.id] = true
				pending = append(pending, pendingCall{c.id, cp})
			}
			switch {
			case m.blocks && c.name == "":
				add(ProblemMissingToolName, cp, "a tool_use block needs a name")
			case m.blocks && !c.args.IsObject():
				add(ProblemInvalidToolArguments, cp, "a tool_use block's input must be an object")
			case m.blocks:
			case c.name == "":
				add(ProblemMissingToolName, cp+"/function/name", "a tool call needs a function name")
			}
			if !m.blocks && (c.args.Type != gjson.String || !gjson.Valid(c.argsText())) {
				add(ProblemInvalidToolArguments, cp+"/function/arguments", "function.arguments must be a string holding JSON")
			}
		}
		return true
	})
	closeGroup()
	res.OK = len(res.Problems) == 0
	return res, nil
}

func opValidate(req opRequest) ([]byte, error) {
	res, err := validateMessages(req.Field("messages"))
	if err != nil {
		return nil, err
	}
	return marshal(res)
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
	res, err := validateMessages(req.Field("messages"))
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
