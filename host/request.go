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
type request struct {
	b   []byte
	err error
}

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
	if !gjson.ValidBytes(v) {
		r.err = &core.Error{Code: core.CodeInvalidJSON, Path: "/" + key,
			Message: "ctxcompact: " + key + " is not valid JSON (at /" + key + ")"}
		return r
	}
	r.key(key)
	r.b = append(r.b, v...)
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

// bytes closes the object.
func (r *request) bytes() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	return append(r.b, '}'), nil
}
