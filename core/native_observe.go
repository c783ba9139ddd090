package core

import (
	"strings"

	"github.com/tidwall/gjson"
)

// NativeObservation is what native.observe learned from one response, error or
// app-server notification, with the session after it.
type NativeObservation struct {
	Session NativeSession `json:"session"`
	// Seen lists the compaction items and events found, in order.
	Seen []NativeSeen `json:"seen"`
	// Disabled names the mechanism a rejection turned off for the session, or null.
	Disabled *string `json:"disabled"`
	// Retry is true when the host should send the request again: without the
	// rejected field (Disabled set), or as it was (a transient compaction error).
	Retry bool `json:"retry"`
	// Reason is a stable code: recorded, compaction_returned, rejected, transient,
	// compaction_started, compaction_completed, turn_completed, compact_requested,
	// nothing, unrelated.
	Reason string `json:"reason"`
}

// NativeSeen is one compaction item or event: its kind (openai_compaction,
// anthropic_compaction, app_server_compaction), the key it is recorded under and
// its issuer (the route it was first seen on).
type NativeSeen struct {
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	Issuer string `json:"issuer"`
}

// observeResponse records the compaction items of a provider's response: a
// Responses object's output items, or an Anthropic Message's content blocks.
func observeResponse(o *NativeObservation, resp gjson.Result, route string) error {
	if !resp.IsObject() {
		return errorf(CodeInvalidRequest, "/response", "response must be the provider's response object")
	}
	list, kind, path := fieldOf(resp, "output"), MechanismOpenAICompaction, "/response/output"
	if !list.Exists() {
		list, kind, path = fieldOf(resp, "content"), disabledAnthropic, "/response/content"
	}
	if !list.Exists() || list.Type == gjson.Null {
		return errorf(CodeInvalidRequest, "/response", "response has neither output (OpenAI Responses) nor content (Anthropic Messages)")
	}
	if !list.IsArray() {
		return errorf(CodeInvalidRequest, path, "%s must be an array", path[len("/response/"):])
	}
	o.Reason = "nothing"
	var err error
	i := 0
	list.ForEach(func(_, item gjson.Result) bool {
		if !item.IsObject() {
			err = errorf(CodeInvalidRequest, pointer(path, i), "every item must be an object")
			return false
		}
		if t := fieldOf(item, "type"); t.Type == gjson.String && t.Str == "compaction" {
			o.Seen = append(o.Seen, o.Session.record(kind, nativeItemKey(item), route))
			o.Reason = "recorded"
		}
		i++
		return true
	})
	if err != nil {
		return err
	}
	if sr := fieldOf(resp, "stop_reason"); sr.Type == gjson.String && sr.Str == "compaction" {
		o.Reason = "compaction_returned"
	}
	return nil
}

// record records a compaction item under its key, first sighting winning.
func (s *NativeSession) record(kind, key, route string) NativeSeen {
	issuer, ok := s.Issuers[key]
	if !ok {
		issuer = route
		s.Issuers[key] = route
	}
	return NativeSeen{Kind: kind, Key: key, Issuer: issuer}
}

// observeError reads a provider's error: a rejection of the native field turns
// the route's mechanism off for the session (the request is retried without it);
// Anthropic's transient compaction_unavailable is retried as it was.
func observeError(o *NativeObservation, e gjson.Result, route string) error {
	if !e.IsObject() {
		return errorf(CodeInvalidRequest, "/error", "error must be {\"status\": <HTTP status>, \"body\": <the error body>}")
	}
	status := fieldOf(e, "status")
	if status.Type != gjson.Number || status.Num != float64(int(status.Num)) || status.Num < 100 || status.Num > 599 {
		return errorf(CodeInvalidRequest, "/error/status", "status must be an HTTP status code, got %s", status.Raw)
	}
	body := fieldOf(e, "body")
	if body.Type == gjson.String && gjson.Valid(body.Str) { // a body the host did not parse
		body = gjson.Parse(body.Str)
	}
	inner := fieldOf(body, "error")
	message := strings.ToLower(fieldOf(inner, "message").Str)
	if body.Type == gjson.String {
		message = strings.ToLower(body.Str)
	}
	param := fieldOf(inner, "param").Str
	code := fieldOf(fieldOf(inner, "details"), "error_code").Str
	o.Reason = "unrelated"
	var mechanism string
	switch route {
	case RouteOpenAI, RouteCodex:
		if status.Num == 400 && (param == "context_management" || strings.Contains(message, "context_management")) {
			mechanism = MechanismOpenAICompaction
		}
	case RouteAnthropic:
		switch {
		case code == "compaction_unavailable":
			o.Reason, o.Retry = "transient", true
			return nil
		case status.Num == 400 && (strings.Contains(message, "context_management") || strings.Contains(message, "compact_20260112") ||
			strings.Contains(message, betaCompactThreshold) || strings.Contains(message, betaCompactOnDemand) ||
			strings.HasPrefix(code, "compaction_")):
			mechanism = disabledAnthropic
		}
	}
	if mechanism != "" {
		o.Session.disable(mechanism)
		o.Disabled, o.Retry, o.Reason = &mechanism, true, "rejected"
	}
	return nil
}

// observeEvent reads one message of a Codex app-server's JSON-RPC stream (or the
// host's own thread/compact/start request, given as an event).
func observeEvent(o *NativeObservation, ev gjson.Result, messagesCount int) error {
	if !ev.IsObject() {
		return errorf(CodeInvalidRequest, "/event", "event must be a JSON-RPC message {\"method\", \"params\"}")
	}
	method := fieldOf(ev, "method")
	if method.Type != gjson.String {
		return errorf(CodeInvalidRequest, "/event/method", "event method must be a string")
	}
	params := fieldOf(ev, "params")
	item := fieldOf(params, "item")
	compaction := fieldOf(item, "type").Str == "contextCompaction"
	as := &o.Session.AppServer
	o.Reason = "unrelated"
	switch {
	case method.Str == "thread/compact/start":
		as.Pending, o.Reason = true, "compact_requested"
	case method.Str == "item/started" && compaction:
		as.Pending, o.Reason = true, "compaction_started"
	case method.Str == "item/completed" && compaction, method.Str == "thread/compacted":
		as.Pending, o.Reason = false, "compaction_completed"
		as.Compactions++
		if messagesCount >= 0 {
			as.Boundaries = append(as.Boundaries, messagesCount)
		}
		key := fieldOf(item, "id").Str
		if key == "" {
			key = fieldOf(params, "turnId").Str
		}
		o.Seen = append(o.Seen, NativeSeen{Kind: "app_server_compaction", Key: key, Issuer: RouteCodexAppServer})
	case method.Str == "turn/completed":
		if as.Pending {
			as.Pending = false
		}
		o.Reason = "turn_completed"
	}
	return nil
}

func opNativeObserve(req opRequest) ([]byte, error) {
	_, route, s, err := nativeParams(req)
	if err != nil {
		return nil, err
	}
	o := NativeObservation{Session: s, Seen: []NativeSeen{}}
	resp, e, ev := req.Field("response"), req.Field("error"), req.Field("event")
	n := 0
	for _, v := range []gjson.Result{resp, e, ev} {
		if v.Exists() && v.Type != gjson.Null {
			n++
		}
	}
	if n != 1 {
		return nil, errorf(CodeInvalidRequest, "", "native.observe takes exactly one of response, error and event")
	}
	count := -1
	if v := req.Field("messages_count"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num < 0 || v.Num != float64(int(v.Num)) || v.Num > 1e9 {
			return nil, errorf(CodeInvalidRequest, "/messages_count", "messages_count must be a non-negative integer, got %s", v.Raw)
		}
		count = int(v.Num)
	}
	key := route.Key()
	switch {
	case resp.Exists() && resp.Type != gjson.Null:
		err = observeResponse(&o, resp, key)
	case e.Exists() && e.Type != gjson.Null:
		err = observeError(&o, e, key)
	default:
		err = observeEvent(&o, ev, count)
	}
	if err != nil {
		return nil, err
	}
	return marshal(o)
}
