package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/ctxcompact/ctxcompact/wasm"
)

// Engine runs the ctxcompact WebAssembly module on wazero. It compiles the module
// once and keeps a pool of instances; it is safe for concurrent use by many
// goroutines, each call borrowing one instance for its duration.
//
// Compiling the module is slow (2–3 s on the compiler; see WithCompilationCache to
// pay it once per machine instead of once per process), so make one Engine per
// process and share it. Close it when done.
type Engine struct {
	cfg      config
	abi      *abiDescription
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	cache    wazero.CompilationCache
	modCfg   wazero.ModuleConfig

	// slots holds one token per instance that is in use; its capacity is the pool size.
	slots chan struct{}
	// done is closed by Close, to wake calls waiting for a slot.
	done chan struct{}

	mu     sync.Mutex
	idle   []*instance
	closed bool
}

// New compiles the module (wasm.Binary unless WithBinary), checks it against
// wasm/abi.json, and makes one instance to check its ctxc_abi_version. It returns an
// error wrapping ErrBadBinary when the bytes do not compile or instantiate, and
// ErrABIMismatch when the module's boundary is not the one this package speaks, and
// a plain error when WithMemoryLimitPages is below what the module needs to start.
//
// The wazero compiler is used where it is supported, the interpreter elsewhere (or
// with WithInterpreter). Instances get WASI preview1 with no files, environment,
// arguments or network; _initialize runs exactly once per instance.
func New(ctx context.Context, opts ...Option) (*Engine, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.binary == nil {
		cfg.binary = wasm.Binary
	}
	abi, err := loadABI()
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, abi: abi, slots: make(chan struct{}, cfg.poolSize), done: make(chan struct{})}
	if err := e.compile(ctx); err != nil {
		e.closeRuntime(ctx)
		return nil, err
	}
	inst, err := e.newInstance(ctx)
	if err != nil {
		e.closeRuntime(ctx)
		return nil, err
	}
	e.idle = append(e.idle, inst)
	return e, nil
}

// compile makes the runtime, instantiates WASI into it and compiles the module.
func (e *Engine) compile(ctx context.Context) error {
	rc := wazero.NewRuntimeConfig()
	if e.cfg.interpreter {
		rc = wazero.NewRuntimeConfigInterpreter()
	}
	rc = rc.WithCloseOnContextDone(e.cfg.closeOnCtx)
	if e.cfg.memoryPages > 0 {
		rc = rc.WithMemoryLimitPages(e.cfg.memoryPages)
	}
	if e.cfg.cacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(e.cfg.cacheDir)
		if err != nil {
			return fmt.Errorf("ctxcompact: opening the compilation cache %q: %w", e.cfg.cacheDir, err)
		}
		e.cache = cache
		rc = rc.WithCompilationCache(cache)
	}
	e.runtime = wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, e.runtime); err != nil {
		return fmt.Errorf("ctxcompact: instantiating WASI preview1: %w", err)
	}
	if err := instantiateHostImports(ctx, e.runtime); err != nil {
		return fmt.Errorf("ctxcompact: defining the host imports: %w", err)
	}
	compiled, err := e.runtime.CompileModule(ctx, e.cfg.binary)
	if err != nil {
		if e.cfg.memoryPages > 0 && compilesWithoutLimit(ctx, e.cfg.binary) {
			return fmt.Errorf("%w: %w", e.limitTooSmall(), err)
		}
		return fmt.Errorf("%w: compiling: %w", ErrBadBinary, err)
	}
	e.compiled = compiled
	if err := checkModule(e.abi, compiled); err != nil {
		return err
	}
	e.modCfg = wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithStdout(io.Discard).WithStderr(io.Discard)
	if e.cfg.stderr != nil {
		e.modCfg = e.modCfg.WithStderr(e.cfg.stderr)
	}
	return nil
}

// compilesWithoutLimit tells a memory limit below the module's declared minimum
// from a bad binary, on the error path only.
func compilesWithoutLimit(ctx context.Context, bin []byte) bool {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	_, err := rt.CompileModule(ctx, bin)
	return err == nil
}

func (e *Engine) limitTooSmall() error {
	return fmt.Errorf("ctxcompact: the memory limit of %d pages (%d MiB) is too small for the module",
		e.cfg.memoryPages, e.cfg.memoryPages/16)
}

// Call runs one request envelope {"op": ..., ...} on an instance and returns the
// response envelope, byte for byte what core.Call returns for the same request:
// {"result": ...} or {"error": {"code", "message", "path"}}. A request the core
// rejects is a response, not an error.
//
// The error is non-nil only for host-level failures: ErrClosed; the context's error
// when it is done before an instance is free; ErrTrapped (wrapping wazero's cause,
// and the context's error if the call was stopped by it; also the core's internal
// error, see ErrTrapped) when the instance trapped, in which case the instance is
// discarded and the next call makes a new one. A call that trapped is not retried.
func (e *Engine) Call(ctx context.Context, envelope []byte) ([]byte, error) {
	var out []byte
	err := e.callParts(ctx, []reqPart{{lit: envelope}}, func(resp []byte) error {
		out = bytes.Clone(resp)
		return nil
	})
	return out, err
}

// callParts is Call for an envelope in parts (see request), and the response is
// handed to use while the instance is held: it is valid only until use returns
// (use copies what it keeps). use's error is returned; it leaves the instance
// healthy.
func (e *Engine) callParts(ctx context.Context, parts []reqPart, use func(resp []byte) error) error {
	n := 0
	for _, p := range parts {
		n += p.size()
	}
	if n > e.abi.MaxRequestBytes {
		return use(tooLarge(n, e.abi.MaxRequestBytes))
	}
	inst, err := e.acquire(ctx)
	if err != nil {
		return err
	}
	var view []byte
	if inst.enter() {
		view, err = inst.call(ctx, parts, n)
	} else {
		err = trapped(ctx, "ctxc_call", errModuleClosed)
	}
	healthy := err == nil
	if healthy {
		err = use(view)
	}
	inst.leave()
	e.release(ctx, inst, healthy)
	return err
}

// errModuleClosed is the cause of a call on an instance whose module was closed.
var errModuleClosed = errors.New("the module was closed")

// tooLarge is the response core.Call gives a request over the limit. The host
// answers it itself: such a request cannot be copied into a guest buffer.
func tooLarge(n, limit int) []byte {
	return fmt.Appendf(nil, `{"error":{"code":"input_too_large","message":"ctxcompact: request is %d bytes; the limit is %d","path":""}}`, n, limit)
}

// acquire waits for a free slot and returns an idle instance or a new one.
func (e *Engine) acquire(ctx context.Context) (*instance, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("ctxcompact: waiting for a wasm instance: %w", err)
	}
	select {
	case e.slots <- struct{}{}:
	case <-e.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("ctxcompact: waiting for a wasm instance: %w", context.Cause(ctx))
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.slots
		return nil, ErrClosed
	}
	if n := len(e.idle); n > 0 {
		inst := e.idle[n-1]
		e.idle = e.idle[:n-1]
		e.mu.Unlock()
		return inst, nil
	}
	e.mu.Unlock()
	inst, err := e.newInstance(ctx)
	if err != nil {
		<-e.slots
		return nil, err
	}
	return inst, nil
}

// release returns inst to the pool, or discards it when it trapped or when its
// linear memory grew past the bound (WithMaxInstanceMemory): memory a wasm instance
// grew is never given back but by closing it, which unmaps it at once.
func (e *Engine) release(ctx context.Context, inst *instance, healthy bool) {
	if max := e.cfg.maxInstanceMemory; healthy && max > 0 && uint64(inst.memoryBytes()) > max {
		healthy = false
	}
	e.mu.Lock()
	keep := healthy && !e.closed
	if keep {
		e.idle = append(e.idle, inst)
	}
	e.mu.Unlock()
	if !keep {
		_ = inst.close(context.WithoutCancel(ctx))
	}
	<-e.slots
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Close waits for the calls in flight (until ctx is done), then releases every
// instance, the compiled module and the runtime. Calls after Close return ErrClosed.
// Closing twice is a no-op.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.done)
	e.mu.Unlock()
	e.drain(ctx)
	e.mu.Lock()
	e.idle = nil
	e.mu.Unlock()
	return e.closeRuntime(ctx)
}

// drain takes every slot, so that no call is in flight, or gives up when ctx is done.
func (e *Engine) drain(ctx context.Context) {
	for range cap(e.slots) {
		select {
		case e.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
	}
}

func (e *Engine) closeRuntime(ctx context.Context) error {
	var err error
	if e.runtime != nil {
		err = e.runtime.Close(ctx) // closes the instances and the compiled module too
	}
	if e.cache != nil {
		if cerr := e.cache.Close(ctx); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("ctxcompact: closing the engine: %w", err)
	}
	return nil
}
