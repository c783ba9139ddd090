package host

import "errors"

// Host-level errors. They say something about the module or the Engine, never about
// a request: a request the core rejects comes back as a *core.Error with its code
// (match it with errors.Is(err, &core.Error{Code: core.CodeInvalidConfig})).
var (
	// ErrBadBinary: the module bytes are not valid WebAssembly, or wazero cannot
	// compile or instantiate them.
	ErrBadBinary = errors.New("ctxcompact: bad wasm binary")

	// ErrABIMismatch: the module compiles but its boundary differs from
	// wasm/abi.json: a missing export, a wrong signature, an import outside WASI
	// preview1, another ctxc_abi_version, or a response that is not an envelope.
	ErrABIMismatch = errors.New("ctxcompact: wasm ABI mismatch")

	// ErrClosed: the Engine was closed.
	ErrClosed = errors.New("ctxcompact: engine closed")

	// ErrTrapped: the instance running the call trapped (out of memory under
	// WithMemoryLimitPages, a guest runtime fatal error, a context canceled
	// mid-call under WithCloseOnContextDone). The call fails; the instance was
	// discarded and the next call gets a fresh one; nothing is retried, not even
	// the input that trapped. The error also wraps wazero's cause (and the
	// context's error when the context stopped the call), and it is the core's
	// internal error, as in the JS and Python bindings:
	// errors.Is(err, &core.Error{Code: core.CodeInternal}) is true and errors.As
	// gives a *core.Error with code internal and path "".
	ErrTrapped = errors.New("ctxcompact: wasm instance trapped")
)
