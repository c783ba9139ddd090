package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// Invoke runs op with params, a value that encodes to a JSON object (a struct, a
// map, a json.RawMessage, or nil for none), and decodes the op's result into result
// (a pointer, or nil to discard it). A request the core rejects returns its
// *core.Error, so errors.Is(err, &core.Error{Code: core.CodeInvalidConfig}) works;
// host-level failures are as documented on Call.
//
// The typed methods (Info, Compact, Prune, CacheApply, ...) cover the main ops;
// Invoke is for the rest (recall.*, engine.*: ContextEngine wraps those) and for
// ops added later.
func (e *Engine) Invoke(ctx context.Context, op string, params, result any) error {
	req, err := envelope(op, params)
	if err != nil {
		return err
	}
	resp, err := e.Call(ctx, req)
	if err != nil {
		return err
	}
	raw, err := splitResponse(resp)
	if err != nil || result == nil {
		return err
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("%w: decoding the %s result: %w", ErrABIMismatch, op, err)
	}
	return nil
}

// Info returns the module's name, version, ops, error codes and token encodings.
func (e *Engine) Info(ctx context.Context) (core.InfoResult, error) {
	var r core.InfoResult
	err := e.Invoke(ctx, "info", nil, &r)
	return r, err
}

// envelope builds {"op": op, ...params} without HTML escaping.
func envelope(op string, params any) ([]byte, error) {
	var body []byte
	switch p := params.(type) {
	case nil:
		body = []byte("{}")
	case json.RawMessage:
		body = bytes.TrimSpace(p)
	case []byte:
		body = bytes.TrimSpace(p)
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(params); err != nil {
			return nil, fmt.Errorf("ctxcompact: encoding %s params: %w", op, err)
		}
		body = bytes.TrimSpace(buf.Bytes())
	}
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return nil, fmt.Errorf("ctxcompact: %s params must encode to a JSON object", op)
	}
	out := make([]byte, 0, len(body)+len(op)+10)
	out = append(out, `{"op":`...)
	out = appendString(out, op)
	rest := bytes.TrimSpace(body[1:])
	if len(rest) > 1 { // not "}": more fields follow
		out = append(out, ',')
	}
	return append(out, rest...), nil
}

// splitResponse returns the raw result of a response envelope (a slice of resp,
// not a copy), or its error as a *core.Error.
func splitResponse(resp []byte) (json.RawMessage, error) {
	if len(resp) == 0 || !gjson.ValidBytes(resp) {
		return nil, fmt.Errorf("%w: the module answered with invalid JSON", ErrABIMismatch)
	}
	// gjson.GetBytes would copy the result (the whole response, for a large
	// compaction); Get over the same bytes as a string does not.
	text := unsafe.String(&resp[0], len(resp))
	if r := gjson.Get(text, "result"); r.Exists() {
		if r.Index > 0 {
			return json.RawMessage(resp[r.Index : r.Index+len(r.Raw)]), nil
		}
		return json.RawMessage(r.Raw), nil
	}
	if r := gjson.Get(text, "error"); r.IsObject() {
		ce := &core.Error{}
		if err := json.Unmarshal([]byte(r.Raw), ce); err != nil || ce.Code == "" {
			return nil, fmt.Errorf("%w: malformed error envelope %s", ErrABIMismatch, r.Raw)
		}
		return nil, ce
	}
	return nil, fmt.Errorf("%w: the response has neither \"result\" nor \"error\"", ErrABIMismatch)
}
