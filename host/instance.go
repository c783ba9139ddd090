package host

import (
	"context"
	"errors"
	"fmt"
	"math/bits"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/ctxcompact/ctxcompact/core"
)

// instance is one module instance. It is single-threaded: the pool hands it to one
// call at a time.
type instance struct {
	// lin is the linear memory this package allocated (nil: wazero's own).
	lin       linearMemory
	mod       api.Module
	mem       api.Memory
	alloc     api.Function
	free      api.Function
	callFn    api.Function
	callTake  api.Function
	resultLen api.Function
	stack     [2]uint64
	// reqBuf is the request buffer kept between calls, reqCap its size.
	reqBuf, reqCap uint32
}

// errInitialize marks a failed _initialize, which under a memory limit means the
// limit is too small.
var errInitialize = errors.New("_initialize failed")

// newInstance instantiates the compiled module, runs _initialize once and checks
// ctxc_abi_version.
func (e *Engine) newInstance(ctx context.Context) (*instance, error) {
	var lin linearMemory
	mod, err := e.runtime.InstantiateModule(experimental.WithMemoryAllocator(ctx, memoryAllocator(&lin)), e.compiled, e.modCfg)
	if err != nil {
		return nil, fmt.Errorf("%w: instantiating: %w", ErrBadBinary, err)
	}
	inst := &instance{
		lin:       lin,
		mod:       mod,
		mem:       mod.Memory(),
		alloc:     mod.ExportedFunction("ctxc_alloc"),
		free:      mod.ExportedFunction("ctxc_free"),
		callFn:    mod.ExportedFunction("ctxc_call"),
		callTake:  mod.ExportedFunction("ctxc_call_take"),
		resultLen: mod.ExportedFunction("ctxc_result_len"),
	}
	inst.enter()
	err = inst.start(ctx, e.abi.ABIVersion)
	inst.leave()
	if err != nil {
		switch {
		case errors.Is(err, errInitialize) && e.cfg.memoryPages > 0:
			err = fmt.Errorf("%w: %w", e.limitTooSmall(), err)
		case errors.Is(err, errInitialize):
			err = fmt.Errorf("%w: %w", ErrBadBinary, err)
		}
		_ = mod.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return inst, nil
}

// start runs _initialize and compares ctxc_abi_version with want.
func (inst *instance) start(ctx context.Context, want uint32) error {
	if inst.mem == nil || inst.alloc == nil || inst.free == nil || inst.callFn == nil || inst.callTake == nil || inst.resultLen == nil {
		return fmt.Errorf("%w: the instance lacks memory or a ctxc_* export", ErrABIMismatch)
	}
	if _, err := inst.mod.ExportedFunction("_initialize").Call(ctx); err != nil {
		return fmt.Errorf("%w: %w", errInitialize, err)
	}
	got, err := inst.mod.ExportedFunction("ctxc_abi_version").Call(ctx)
	if err != nil {
		return fmt.Errorf("%w: ctxc_abi_version: %w", ErrBadBinary, err)
	}
	if uint32(got[0]) != want {
		return fmt.Errorf("%w: the module's ctxc_abi_version is %d; this host speaks %d",
			ErrABIMismatch, uint32(got[0]), want)
	}
	return nil
}

// call writes the request, the n bytes of parts, into a guest buffer, runs it
// and returns the response where the guest keeps it: the view is valid until the
// next call on this instance, so the caller decodes or copies it before it
// releases the instance. Any error means the instance is no longer usable. A call
// usually crosses the boundary twice (ctxc_call, ctxc_result_len): the request
// buffer is kept for the next call, and the response is left to the guest, which
// frees it on the next ctxc_call. A request too large for the kept buffer gets a
// buffer of its own, handed to the guest with ctxc_call_take: the guest frees it
// (or keeps it, as a compact.begin with a ticket keeps its messages, without a
// copy).
func (inst *instance) call(ctx context.Context, parts []reqPart, n int) ([]byte, error) {
	p, oneOff, err := inst.requestBuffer(ctx, n)
	if err != nil {
		return nil, err
	}
	if !inst.write(p, parts, n) {
		return nil, fmt.Errorf("%w: ctxc_alloc returned %#x, outside memory", ErrABIMismatch, p)
	}
	fn, name := inst.callFn, "ctxc_call"
	if oneOff {
		fn, name = inst.callTake, "ctxc_call_take"
	}
	r, err := inst.invoke(ctx, fn, name, p, uint32(n))
	if err != nil {
		return nil, err
	}
	rn, err := inst.invoke(ctx, inst.resultLen, "ctxc_result_len")
	if err != nil {
		return nil, err
	}
	view, ok := inst.mem.Read(r, rn)
	if !ok || rn == 0 {
		return nil, fmt.Errorf("%w: ctxc_call returned %d bytes at %#x, outside memory", ErrABIMismatch, rn, r)
	}
	return view, nil
}

// write copies the n bytes of parts to guest memory at p: each literal part
// directly, the small pieces an emitting part writes through a staging buffer;
// false when [p, p+n) is outside memory.
func (inst *instance) write(p uint32, parts []reqPart, n int) bool {
	if _, ok := inst.mem.Read(p, uint32(n)); !ok {
		return false
	}
	off := p
	var stage []byte
	flush := func() {
		if len(stage) > 0 {
			inst.mem.Write(off, stage)
			off += uint32(len(stage))
			stage = stage[:0]
		}
	}
	put := func(b []byte) {
		if len(b) >= 4096 {
			flush()
			inst.mem.Write(off, b)
			off += uint32(len(b))
			return
		}
		if len(stage)+len(b) > cap(stage) {
			flush()
			if stage == nil {
				stage = make([]byte, 0, 64<<10)
			}
		}
		stage = append(stage, b...)
	}
	for _, part := range parts {
		if part.emit == nil {
			flush()
			inst.mem.Write(off, part.lit)
			off += uint32(len(part.lit))
		} else {
			part.emit(put)
		}
	}
	flush()
	return off == p+uint32(n)
}

// keptRequestBytes bounds the request buffer an instance keeps between calls;
// a larger request gets a buffer of its own, freed after the call.
const keptRequestBytes = 1 << 20

// requestBuffer returns a guest buffer of at least n bytes: the kept one, a larger
// kept one (up to keptRequestBytes, in powers of two), or a one-off buffer.
func (inst *instance) requestBuffer(ctx context.Context, n int) (p uint32, oneOff bool, err error) {
	if n <= int(inst.reqCap) && inst.reqBuf != 0 {
		return inst.reqBuf, false, nil
	}
	size := max(n, 1)
	if size <= keptRequestBytes {
		size = max(4096, 1<<bits.Len(uint(size-1)))
	}
	if p, err = inst.invoke(ctx, inst.alloc, "ctxc_alloc", uint32(size)); err != nil {
		return 0, false, err
	}
	if p == 0 {
		return 0, false, fmt.Errorf("%w: ctxc_alloc(%d) returned 0", ErrABIMismatch, size)
	}
	if size > keptRequestBytes {
		return p, true, nil
	}
	if inst.reqBuf != 0 {
		if _, err := inst.invoke(ctx, inst.free, "ctxc_free", inst.reqBuf); err != nil {
			return 0, false, err
		}
	}
	inst.reqBuf, inst.reqCap = p, uint32(size)
	return p, false, nil
}

// invoke calls f with up to two i32 arguments and returns its i32 result (0 if none),
// without allocating. A wazero error is a trap.
func (inst *instance) invoke(ctx context.Context, f api.Function, name string, args ...uint32) (uint32, error) {
	for i, a := range args {
		inst.stack[i] = api.EncodeI32(int32(a))
	}
	if err := f.CallWithStack(ctx, inst.stack[:]); err != nil {
		return 0, trapped(ctx, name, err)
	}
	return api.DecodeU32(inst.stack[0]), nil
}

// trapped is the error of a call whose instance trapped: wazero's error err from
// export name, and the context's cause when the call was stopped by it.
func trapped(ctx context.Context, name string, err error) error {
	return &trapError{export: name, cause: err, ctxErr: context.Cause(ctx)}
}

// trapError is what a call whose instance trapped returns. It is one error with
// three faces: it wraps ErrTrapped (and wazero's cause, and the context's error
// when the context stopped the call), and it is a *core.Error with code internal
// and path "", the code JS and Python give a trap, so one check serves every
// runtime: errors.Is(err, &core.Error{Code: core.CodeInternal}).
type trapError struct {
	export string
	cause  error
	ctxErr error
}

func (e *trapError) Error() string {
	msg := "ctxcompact: the wasm instance trapped in " + e.export +
		" and was replaced (the next call runs on a fresh instance): " + e.cause.Error()
	if e.ctxErr != nil {
		msg += " (" + e.ctxErr.Error() + ")"
	}
	return msg
}

// Unwrap gives ErrTrapped, wazero's cause and the context's error, if any.
func (e *trapError) Unwrap() []error {
	errs := []error{ErrTrapped, e.cause}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	return errs
}

// Is matches &core.Error{Code: core.CodeInternal}.
func (e *trapError) Is(target error) bool {
	t, ok := target.(*core.Error)
	return ok && t.Code == core.CodeInternal
}

// As sets a **core.Error target to the internal error the other runtimes report.
func (e *trapError) As(target any) bool {
	p, ok := target.(**core.Error)
	if ok {
		*p = &core.Error{Code: core.CodeInternal, Message: e.Error()}
	}
	return ok
}

// enter marks the instance's memory in use until leave, so that a close meanwhile
// (the context done under WithCloseOnContextDone, Engine.Close) releases it only at
// leave; false when the module was closed already: its memory must not be touched.
func (inst *instance) enter() bool { return inst.lin == nil || inst.lin.enter() }

func (inst *instance) leave() {
	if inst.lin != nil {
		inst.lin.leave()
	}
}

// memoryBytes is the size of the instance's linear memory.
func (inst *instance) memoryBytes() uint32 { return inst.mem.Size() }

func (inst *instance) close(ctx context.Context) error { return inst.mod.Close(ctx) }
