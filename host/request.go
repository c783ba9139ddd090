package host

import (
	"encoding/json"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// request builds a request envelope field by field. Raw JSON values (messages,
// config) are copied as they are, not re-encoded: compact.finish must see the same
// bytes compact.begin saw, and a long conversation is not worth a second encoding.
// A large raw value is not even copied here: the request keeps a reference to it
// (a part), and the call writes the parts one after the other straight into the
// guest's buffer (instance.call), so a conversation is copied once, into the
// module, not first into an envelope of its own.
type request struct {
	// parts are the envelope's bytes before b, in order.
	parts []reqPart
	b     []byte
	err   error
	// swap writes a field raw is given in its stead (or leaves it out): a
	// session.run step's messages, when it reads a window of them or none.
	swap map[string]func(r *request, v json.RawMessage)
}

// reqPart is a piece of an envelope: bytes written as they are, or a value that
// emit writes piece by piece (emit runs once to size it and once to copy it, and
// must write the same bytes both times).
type reqPart struct {
	lit  []byte
	emit func(write func([]byte))
}

// bigRaw is the size from which a raw value becomes a part of its own instead of
// being copied into the request.
const bigRaw = 64 << 10

func newRequest(op string) *request {
	r := &request{b: make([]byte, 0, 256)}
	r.b = append(r.b, `{"op":`...)
	r.b = appendString(r.b, op)
	return r
}

// raw adds key with a raw JSON value, unless v is empty. Invalid JSON is an
// invalid_json error at /key, as the core would report it.
func (r *request) raw(key string, v json.RawMessage) *request {
	if len(v) == 0 || r.err != nil {
		return r
	}
	if swap := r.swap[key]; swap != nil {
		swap(r, v)
		return r
	}
	if !gjson.ValidBytes(v) {
		r.err = &core.Error{Code: core.CodeInvalidJSON, Path: "/" + key,
			Message: "ctxcompact: " + key + " is not valid JSON (at /" + key + ")"}
		return r
	}
	r.key(key)
	if len(v) < bigRaw {
		r.b = append(r.b, v...)
		return r
	}
	r.parts = append(r.parts, reqPart{lit: r.b}, reqPart{lit: v})
	r.b = make([]byte, 0, 256)
	return r
}

// stream adds key with a JSON value that emit writes (see reqPart), not checked
// here: the core validates the envelope as a whole.
func (r *request) stream(key string, emit func(write func([]byte))) *request {
	if r.err != nil {
		return r
	}
	r.key(key)
	r.parts = append(r.parts, reqPart{lit: r.b}, reqPart{emit: emit})
	r.b = make([]byte, 0, 256)
	return r
}

// str adds key with a string value, unless v is "".
func (r *request) str(key, v string) *request {
	if v == "" {
		return r
	}
	r.key(key)
	r.b = appendString(r.b, v)
	return r
}

// num adds key with an integer value, unless v is 0.
func (r *request) num(key string, v int) *request {
	if v == 0 {
		return r
	}
	r.key(key)
	r.b = strconv.AppendInt(r.b, int64(v), 10)
	return r
}

// flag adds key: true, unless v is false.
func (r *request) flag(key string, v bool) *request {
	if !v {
		return r
	}
	r.key(key)
	r.b = append(r.b, "true"...)
	return r
}

func (r *request) key(k string) {
	r.b = append(r.b, ',')
	r.b = appendString(r.b, k)
	r.b = append(r.b, ':')
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// pieces closes the object and returns its parts.
func (r *request) pieces() ([]reqPart, error) {
	if r.err != nil {
		return nil, r.err
	}
	return append(r.parts, reqPart{lit: append(r.b, '}')}), nil
}

// bytes closes the object and returns it in one buffer.
func (r *request) bytes() ([]byte, error) {
	parts, err := r.pieces()
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, p := range parts {
		out = p.appendTo(out)
	}
	return out, nil
}

// size is the length of the part in bytes.
func (p reqPart) size() int {
	if p.emit == nil {
		return len(p.lit)
	}
	n := 0
	p.emit(func(b []byte) { n += len(b) })
	return n
}

// appendTo appends the part's bytes to b.
func (p reqPart) appendTo(b []byte) []byte {
	if p.emit == nil {
		return append(b, p.lit...)
	}
	p.emit(func(piece []byte) { b = append(b, piece...) })
	return b
}
