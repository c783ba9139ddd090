package core

import (
	"fmt"
	"strconv"
	"strings"
)

// ErrorCode is a stable, machine-readable error code. Codes are the contract shared
// by Go, JS and Python; message text is not.
type ErrorCode string

const (
	// CodeInvalidJSON: the request envelope is not well-formed JSON.
	CodeInvalidJSON ErrorCode = "invalid_json"
	// CodeInvalidRequest: a request field is missing or has the wrong type.
	CodeInvalidRequest ErrorCode = "invalid_request"
	// CodeUnknownOp: the envelope names an op this module does not have.
	CodeUnknownOp ErrorCode = "unknown_op"
	// CodeInvalidMessages: the message list (or one message in it) is malformed.
	CodeInvalidMessages ErrorCode = "invalid_messages"
	// CodeInvalidConfig: a configuration value is out of range or of the wrong type.
	CodeInvalidConfig ErrorCode = "invalid_config"
	// CodeInvalidState: compact.finish got a state that is malformed or that does not
	// belong to the messages and config it was given.
	CodeInvalidState ErrorCode = "invalid_state"
	// CodeInputTooLarge: the request exceeds MaxRequestBytes.
	CodeInputTooLarge ErrorCode = "input_too_large"
	// CodeInternal: a bug; the core recovered from a panic.
	CodeInternal ErrorCode = "internal"
)

// ErrorCodes lists every code, in a stable order, for the ABI description and tests.
var ErrorCodes = []ErrorCode{
	CodeInvalidJSON, CodeInvalidRequest, CodeUnknownOp, CodeInvalidMessages,
	CodeInvalidConfig, CodeInvalidState, CodeInputTooLarge, CodeInternal,
}

// Error is the one error type of the core. Path is a JSON pointer (RFC 6901) into the
// request, "" for the whole request.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	Path    string    `json:"path"`
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, &core.Error{Code: core.CodeInvalidConfig}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// errorf builds an *Error whose message starts with "ctxcompact: ".
func errorf(code ErrorCode, path string, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg += " (at " + path + ")"
	}
	return &Error{Code: code, Message: "ctxcompact: " + msg, Path: path}
}

// pointerEscaper escapes a JSON-pointer segment; built once, it is safe for
// concurrent use.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// pointer joins JSON-pointer segments, escaping "~" and "/" as RFC 6901 says.
func pointer(base string, segs ...any) string {
	var b strings.Builder
	b.WriteString(base)
	for _, s := range segs {
		b.WriteByte('/')
		switch v := s.(type) {
		case int:
			b.WriteString(strconv.Itoa(v))
		case string:
			b.WriteString(pointerEscaper.Replace(v))
		}
	}
	return b.String()
}
