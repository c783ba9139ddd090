package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/wasm"
)

func TestInfo(t *testing.T) {
	info, err := sharedEngine(t).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "ctxcompact" || info.Version != core.Version {
		t.Errorf("info = %s %s, want ctxcompact %s", info.Name, info.Version, core.Version)
	}
	if !slices.Equal(info.Ops, core.Ops()) {
		t.Errorf("module ops %v, core ops %v: rebuild with ./build.sh wasm", info.Ops, core.Ops())
	}
	if !slices.Equal(info.ErrorCodes, core.ErrorCodes) {
		t.Errorf("module error codes %v, core %v", info.ErrorCodes, core.ErrorCodes)
	}
}

// TestABIDescription checks wasm/abi.json against the module's real exports and
// imports, in both directions, and that every signature is i32-only.
func TestABIDescription(t *testing.T) {
	ctx := context.Background()
	d, err := loadABI()
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	m, err := rt.CompileModule(ctx, wasm.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkModule(d, m); err != nil {
		t.Fatal(err)
	}
	for name, f := range m.ExportedFunctions() {
		if _, ok := d.Exports[name]; !ok {
			t.Errorf("the module exports %q, which wasm/abi.json does not describe", name)
		}
		for _, vt := range slices.Concat(f.ParamTypes(), f.ResultTypes()) {
			if vt != api.ValueTypeI32 {
				t.Errorf("export %q uses %s; the ABI is i32-only", name, api.ValueTypeName(vt))
			}
		}
	}
	for name := range m.ExportedMemories() {
		if x, ok := d.Exports[name]; !ok || x.Kind != "memory" {
			t.Errorf("the module exports memory %q, which wasm/abi.json does not describe", name)
		}
	}
	if d.MaxRequestBytes != core.MaxRequestBytes {
		t.Errorf("abi.json max_request_bytes = %d, core.MaxRequestBytes = %d", d.MaxRequestBytes, core.MaxRequestBytes)
	}
	if len(m.ImportedFunctions()) == 0 {
		t.Error("the module imports nothing; a Go wasip1 module imports WASI preview1")
	}
}

func TestNewRejectsBadBinary(t *testing.T) {
	ctx := context.Background()
	for name, bin := range map[string][]byte{
		"garbage":   []byte("not wasm at all"),
		"truncated": wasm.Binary[:len(wasm.Binary)/2],
		"empty":     {},
	} {
		_, err := New(ctx, WithBinary(bin), WithInterpreter())
		if !errors.Is(err, ErrBadBinary) {
			t.Errorf("%s: New error = %v, want ErrBadBinary", name, err)
		}
	}
}

func TestNewRejectsABIMismatch(t *testing.T) {
	ctx := context.Background()
	for name, bin := range map[string][]byte{
		// The smallest valid module: no exports at all.
		"no-exports": []byte("\x00asm\x01\x00\x00\x00"),
		// One function "ctxc_abi_version" of type () -> i64 instead of () -> i32.
		"wrong-signature": []byte("\x00asm\x01\x00\x00\x00" +
			"\x01\x05\x01\x60\x00\x01\x7e" + // type section: (func (result i64))
			"\x03\x02\x01\x00" + // function section: one func of type 0
			"\x07\x14\x01\x10ctxc_abi_version\x00\x00" + // export section
			"\x0a\x06\x01\x04\x00\x42\x01\x0b"), // code: i64.const 1
	} {
		_, err := New(ctx, WithBinary(bin), WithInterpreter())
		if !errors.Is(err, ErrABIMismatch) {
			t.Errorf("%s: New error = %v, want ErrABIMismatch", name, err)
		}
	}
}

// TestMemoryLimitTooSmall: a limit below what the module needs is reported as such,
// not as a bad binary: below the declared minimum (compile fails), and at the
// declared minimum, which the Go runtime outgrows in _initialize.
func TestMemoryLimitTooSmall(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	m, err := rt.CompileModule(ctx, wasm.Binary)
	if err != nil {
		t.Fatal(err)
	}
	minPages := m.ExportedMemories()["memory"].Min()
	for _, pages := range []uint32{minPages - 1, minPages} {
		_, err := New(ctx, WithCompilationCache(cacheDir), WithMemoryLimitPages(pages))
		if err == nil || errors.Is(err, ErrBadBinary) || !strings.Contains(err.Error(), "memory limit") {
			t.Errorf("WithMemoryLimitPages(%d), declared minimum %d: %v, want a memory-limit error", pages, minPages, err)
		}
	}
}

// TestCoreErrors checks that an error envelope becomes a *core.Error that matches
// its code with errors.Is.
func TestCoreErrors(t *testing.T) {
	e := sharedEngine(t)
	err := e.Invoke(context.Background(), "no.such.op", nil, nil)
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Path != "/op" || !strings.HasPrefix(ce.Message, "ctxcompact: ") {
		t.Fatalf("Invoke unknown op: %#v", err)
	}
	if !errors.Is(err, &core.Error{Code: core.CodeUnknownOp}) || errors.Is(err, &core.Error{Code: core.CodeInvalidJSON}) {
		t.Errorf("errors.Is does not match the code of %v", err)
	}
	if err := e.Invoke(context.Background(), "info", json.RawMessage(`[1]`), nil); err == nil {
		t.Error("Invoke accepted params that are not an object")
	}
}

// TestMalformedRequests: every malformed request is answered with an error envelope
// by a healthy instance, never a trap.
func TestMalformedRequests(t *testing.T) {
	e := sharedEngine(t)
	for name, env := range malformedRequests() {
		resp, err := e.Call(context.Background(), env)
		if err != nil {
			t.Errorf("%s: Call: %v", name, err)
			continue
		}
		if _, err := splitResponse(resp); !errors.As(err, new(*core.Error)) {
			t.Errorf("%s: want an error envelope, got %v: %s", name, err, clip(resp))
		}
	}
}

// TestOversizedRequest: a request over core.MaxRequestBytes is answered with the
// core's input_too_large envelope, and the engine stays usable.
func TestOversizedRequest(t *testing.T) {
	e := sharedEngine(t)
	env := make([]byte, core.MaxRequestBytes+1)
	copy(env, `{"op":"info","pad":"`)
	resp, err := e.Call(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if want := core.Call(env); !bytes.Equal(resp, want) {
		t.Fatalf("oversized: got %s, core.Call gives %s", resp, want)
	}
	if _, err := splitResponse(resp); !errors.Is(err, &core.Error{Code: core.CodeInputTooLarge}) {
		t.Fatalf("oversized: %v", err)
	}
	if _, err := e.Info(context.Background()); err != nil {
		t.Fatalf("Info after an oversized request: %v", err)
	}
}

// TestRawABINeverTraps calls the exports directly with bad pointers and lengths.
func TestRawABINeverTraps(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, WithPoolSize(1))
	inst := e.idle[0]
	call := func(f api.Function, name string, args ...uint32) uint32 {
		t.Helper()
		r, err := inst.invoke(ctx, f, name, args...)
		if err != nil {
			t.Fatalf("%s%v trapped: %v", name, args, err)
		}
		return r
	}
	if n := call(inst.resultLen, "ctxc_result_len"); n != 0 {
		t.Errorf("ctxc_result_len before any call = %d, want 0", n)
	}
	for _, size := range []uint32{0, 1 << 31, 0xffffffff, core.MaxRequestBytes + 1025} {
		if p := call(inst.alloc, "ctxc_alloc", size); p != 0 {
			t.Errorf("ctxc_alloc(%d) = %#x, want 0", int32(size), p)
		}
	}
	p := call(inst.alloc, "ctxc_alloc", 16)
	inst.mem.Write(p, []byte(`{"op":"info"}   `))
	for _, args := range [][2]uint32{{0, 10}, {12345, 10}, {p + 1, 4}, {p, 17}, {p, 0xffffffff}, {0xfffffff0, 4}} {
		r := call(inst.callFn, "ctxc_call", args[0], args[1])
		n := call(inst.resultLen, "ctxc_result_len")
		resp, _ := inst.mem.Read(r, n)
		if _, err := splitResponse(resp); !errors.Is(err, &core.Error{Code: core.CodeInvalidRequest}) {
			t.Errorf("ctxc_call(%#x, %d) = %s, want an invalid_request envelope", args[0], int32(args[1]), resp)
		}
	}
	r := call(inst.callFn, "ctxc_call", p, 16)
	resp, _ := inst.mem.Read(r, call(inst.resultLen, "ctxc_result_len"))
	if !bytes.Equal(resp, core.Call([]byte(`{"op":"info"}   `))) {
		t.Errorf("ctxc_call on a good buffer = %s", resp)
	}
	for _, ptr := range []uint32{0, 7, r, r, p, p, 0xffffffff} { // r and p twice: double free
		call(inst.free, "ctxc_free", ptr)
	}
	if n := call(inst.resultLen, "ctxc_result_len"); n != 0 {
		t.Errorf("ctxc_result_len after freeing the response = %d, want 0", n)
	}
	if r := call(inst.callFn, "ctxc_call", p, 16); r == 0 {
		t.Error("ctxc_call on a freed buffer returned no response")
	}
	if _, err := e.Info(ctx); err != nil {
		t.Fatalf("Info after raw calls: %v", err)
	}
}

// TestTrapRecovered makes an instance run out of memory under a small limit, then
// checks that the engine discards it and the next call succeeds on a new instance.
func TestTrapRecovered(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, WithPoolSize(1), WithMemoryLimitMB(64))
	before := e.idle[0]
	big := append(append([]byte(`{"op":"info","pad":"`), bytes.Repeat([]byte("a"), 96<<20)...), `"}`...)
	_, err := e.Call(ctx, big)
	requireTrap(t, "a 96 MiB request under a 64 MiB limit", err)
	if len(e.idle) != 0 {
		t.Fatalf("the trapped instance went back to the pool")
	}
	info, err := e.Info(ctx)
	if err != nil || info.Name != "ctxcompact" {
		t.Fatalf("Info after a trap: %v, %v", info, err)
	}
	if len(e.idle) != 1 || e.idle[0] == before {
		t.Fatalf("want one new instance in the pool, have %d (same as before: %v)", len(e.idle), len(e.idle) == 1 && e.idle[0] == before)
	}
}

// TestContextDone: a done context fails the call with the context's error, and the
// engine stays usable.
func TestContextDone(t *testing.T) {
	e := newEngine(t, WithPoolSize(1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Info(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Info with a canceled context: %v, want context.Canceled", err)
	}
	if _, err := e.Info(context.Background()); err != nil {
		t.Errorf("Info after a canceled call: %v", err)
	}
	// With the only instance busy, a waiting call gives up at its deadline.
	inst, err := e.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	if _, err := e.Info(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Info while the pool is busy: %v, want context.DeadlineExceeded", err)
	}
	e.release(context.Background(), inst, true)
}

// TestCloseOnContextDone: with the option on, a deadline stops a running
// compaction; the instance is discarded and the next call succeeds.
func TestCloseOnContextDone(t *testing.T) {
	requireOps(t, "compact.begin")
	e := newEngine(t, WithPoolSize(1), WithCloseOnContextDone(true), WithInterpreter()) // the interpreter compiles fast
	var biggest []byte
	for _, tr := range loadTraces(t) {
		if len(tr.messages) > len(biggest) {
			biggest = tr.messages
		}
	}
	env := compactBegin(biggest, 32000)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Millisecond)
	defer cancel()
	_, err := e.Call(ctx, env)
	if !errors.Is(err, ErrTrapped) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a compaction past its deadline: %v, want ErrTrapped and context.DeadlineExceeded", err)
	}
	if _, err := e.Info(context.Background()); err != nil {
		t.Fatalf("Info after a stopped call: %v", err)
	}
}

func TestClose(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, WithCompilationCache(cacheDir), WithPoolSize(1))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := e.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error)
	go func() { _, err := e.Info(ctx); waiting <- err }()
	closed := make(chan error)
	go func() { closed <- e.Close(ctx) }()
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Errorf("a call waiting for an instance during Close: %v, want ErrClosed", err)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a call was in flight", err)
	case <-time.After(20 * time.Millisecond):
	}
	e.release(ctx, inst, true)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := e.Info(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Info after Close: %v, want ErrClosed", err)
	}
	if err := e.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestConcurrentCalls: many goroutines share a small pool; every response must be
// core.Call's, byte for byte. Run with -race.
func TestConcurrentCalls(t *testing.T) {
	e := newEngine(t, WithPoolSize(3))
	requests := [][]byte{[]byte(`{"op":"info"}`), []byte(`{"op":"nope"}`), []byte(`{"op":`)}
	for _, v := range loadVectors(t) {
		requests = append(requests, v.Envelope)
	}
	want := make([][]byte, len(requests))
	for i, r := range requests {
		want[i] = core.Call(r)
	}
	const goroutines, calls = 12, 250
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				k := (g*calls + i) % len(requests)
				got, err := e.Call(context.Background(), requests[k])
				if err != nil {
					errs <- fmt.Errorf("goroutine %d call %d: %w", g, i, err)
					return
				}
				if !bytes.Equal(got, want[k]) {
					errs <- fmt.Errorf("goroutine %d call %d: got %s, want %s", g, i, clip(got), clip(want[k]))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(e.idle); n < 1 || n > 3 {
		t.Errorf("pool holds %d instances after the run, want 1..3", n)
	}
}
