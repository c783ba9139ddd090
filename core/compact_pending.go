package core

import (
	"sync"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
)

// A compaction that compact.begin left waiting for the host's summary is kept for
// compact.finish, so finishing the same request on the same instance does not read,
// count and plan the messages a second time: that is a third of begin + finish.
// The protocol stays stateless (docs/DESIGN.md §8.8): finish still carries the messages,
// and a finish that finds no entry here (another instance began it, the entry was
// evicted, or the request differs) does the whole work as before, with the same
// result. An entry is used once; each holds a private copy of its request.
//
// A host that sends a "ticket" with both calls may leave the messages out of
// finish: the entry begun with that ticket (and the same state and fields) stands
// for them, so they are neither sent, copied nor compared again. When no entry is
// kept, that finish fails with invalid_state at /messages and the host sends the
// whole finish. The ticket, unique among the host's compactions in flight, is what
// makes this safe: the state alone could name two conversations that differ only
// in their text.

const (
	// pendingMaxEntries is how many unfinished compactions are kept: a JS or Python
	// compactor may run a few concurrently.
	pendingMaxEntries = 4
	// pendingMaxRequest is the largest request kept (a conversation filling a 1M
	// token window is about 4 MB), and pendingMaxBytes bounds the request bytes
	// kept in all entries: a huge request is not copied, so it does not double a
	// wasm instance's memory between begin and finish.
	pendingMaxRequest = 16 << 20
	pendingMaxBytes   = 32 << 20
)

// pendingCompaction is a parsed and planned compact.begin request.
type pendingCompaction struct {
	state string
	// params are the raw bytes of the request's fields; finish must send the same
	// (op, state, summary and error excepted).
	params map[string]string
	size   int
	r      *compactRequest
	p      plan
}

var pending struct {
	sync.Mutex
	entries []*pendingCompaction // oldest first
	bytes   int
}

// finishOnlyParams are the fields compact.finish adds to or changes from begin's;
// a "summarizer" of "host" counts as absent (defaultSummarizer).
var finishOnlyParams = map[string]bool{"op": true, "state": true, "summary": true, "error": true}

// keepPending stores a begun compaction; r must read only memory the core owns.
func keepPending(req params, size int, state string, r *compactRequest, p plan) {
	if size > pendingMaxRequest {
		return
	}
	e := &pendingCompaction{state: state, params: make(map[string]string, len(req)), size: size, r: r, p: p}
	for k, v := range req {
		if !finishOnlyParams[k] && !defaultSummarizer(k, v.Raw) {
			e.params[k] = v.Raw
		}
	}
	pending.Lock()
	defer pending.Unlock()
	pending.entries = append(pending.entries, e)
	pending.bytes += size
	for len(pending.entries) > pendingMaxEntries || pending.bytes > pendingMaxBytes {
		pending.bytes -= pending.entries[0].size
		pending.entries[0] = nil
		pending.entries = pending.entries[1:]
	}
}

// takePending removes and returns the begun compaction that a compact.finish
// request with these fields and state finishes, if one is kept.
func takePending(req params, state string) (*compactRequest, plan, bool) {
	return findPending(req, state, true)
}

// findPending returns the begun compaction of these fields and state, if one is
// kept, and removes it when take (a compaction summarized in chunks reads it at
// each chunk and takes it at the last; nothing changes it in between).
func findPending(req params, state string, take bool) (*compactRequest, plan, bool) {
	pending.Lock()
	defer pending.Unlock()
	for k := len(pending.entries) - 1; k >= 0; k-- {
		e := pending.entries[k]
		if e.state != state || !sameParams(e.params, req) {
			continue
		}
		if !take {
			return e.r, e.p, true
		}
		pending.bytes -= e.size
		pending.entries = append(pending.entries[:k], pending.entries[k+1:]...)
		return e.r, e.p, true
	}
	return nil, plan{}, false
}

// defaultSummarizer reports whether the field k: raw is "summarizer": "host", the
// default: the bindings name the summarizer in begin only.
func defaultSummarizer(k, raw string) bool {
	return k == "summarizer" && raw == `"`+string(SummarizerHost)+`"`
}

// sameParams reports whether req has exactly the fields kept, byte for byte,
// besides the finish-only ones. A request that leaves out the messages but names
// the compaction by its ticket stands for the messages kept.
func sameParams(kept map[string]string, req params) bool {
	n := 0
	if _, ok := req["messages"]; !ok && req["ticket"].Exists() {
		if _, ok := kept["messages"]; ok {
			n++
		}
	}
	for k, v := range req {
		if finishOnlyParams[k] || defaultSummarizer(k, v.Raw) {
			continue
		}
		if raw, ok := kept[k]; !ok || !jsonraw.Equal(raw, v.Raw) {
			return false
		}
		n++
	}
	return n == len(kept)
}

// finishRequest recognizes a compact.finish envelope that ends with the messages
// of a kept compaction, `"messages":[...]}` byte for byte, as the bindings write it,
// and reads it without validating those messages again: they were validated, at the
// same depth, when begin kept them. Only the rest of the envelope is checked, with
// a placeholder where the messages were; if it is not valid JSON, or the op is
// not compact.finish, ok is false and the caller reads the whole request.
func finishRequest(op string, request []byte) (q opRequest, name string, ok bool) {
	const key = `"messages":`
	if op != "" && op != "compact.finish" && op != "session.run" {
		return q, "", false
	}
	var msgs string
	pending.Lock()
	for k := len(pending.entries) - 1; k >= 0 && msgs == ""; k-- {
		raw := pending.entries[k].params["messages"]
		start := len(request) - 1 - len(raw)
		if raw != "" && start >= len(key)+1 && request[len(request)-1] == '}' &&
			string(request[start-len(key):start]) == key && jsonraw.Equal(jsonraw.ViewString(request[start:len(request)-1]), raw) {
			msgs = raw
		}
	}
	pending.Unlock()
	if msgs == "" {
		return q, "", false
	}
	rest := make([]byte, 0, len(request)-len(msgs)+1)
	rest = append(append(rest, request[:len(request)-1-len(msgs)]...), '0', '}')
	req, members, name, err := readEnvelope(op, rest)
	if err != nil || (name != "compact.finish" && name != "session.run") {
		return q, "", false
	}
	for k := len(members) - 1; k >= 0; k-- {
		if members[k].Key == `"messages"` {
			members[k].Value = msgs // the kept copy: takePending finds it the same at once
			break
		}
	}
	return newOpRequest(req, members), name, true
}

// dropPending forgets every begun compaction (tests compare a finish with and
// without one).
func dropPending() {
	pending.Lock()
	defer pending.Unlock()
	pending.entries, pending.bytes = nil, 0
}

// compressEvent reports whether a session.run request's members are a compress
// event's, whose compaction is kept between its steps as compact.begin's is.
func compressEvent(members []jsonraw.Member) bool {
	compress := false
	for _, m := range members {
		if m.Key == `"event"` {
			compress = m.Value == `"`+EventCompress+`"`
		}
	}
	return compress
}

// builtinSummarizer reports whether a request's members ask for the builtin
// summarizer, so compact.begin finishes at once and keeps nothing.
func builtinSummarizer(members []jsonraw.Member) bool {
	builtin := false
	for _, m := range members {
		if m.Key == `"summarizer"` {
			builtin = m.Value == `"`+string(SummarizerBuiltin)+`"`
		}
	}
	return builtin
}

// rebase returns the substring of to at the offset where s lies in from: s must be
// a substring of from (or empty), and to a copy of from.
func rebase(s, from, to string) string {
	if len(s) == 0 {
		return ""
	}
	off := jsonraw.OffsetOf(from, s)
	return to[off : off+len(s)]
}

// ownMembers copies envelope and points members at the copy, so what is parsed from
// them may outlive the call (the caller may reuse its buffer).
func ownMembers(envelope []byte, members []jsonraw.Member) string {
	from := jsonraw.ViewString(envelope)
	to := string(envelope)
	for k := range members {
		m := &members[k]
		m.Key, m.Value = rebase(m.Key, from, to), rebase(m.Value, from, to)
		for j := range m.Elements {
			m.Elements[j] = rebase(m.Elements[j], from, to)
		}
	}
	return to
}
