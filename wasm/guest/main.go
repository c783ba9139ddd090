//go:build wasip1

// Command guest is the ctxcompact WebAssembly module: a reactor whose exports move
// bytes in and out of linear memory and call core.Call. See wasm/abi.json and
// wasm/README.md.
//
// Protocol, per instance (an instance is single-threaded and not re-entrant):
//  1. p := ctxc_alloc(n); write the n-byte request envelope at p.
//  2. r := ctxc_call(p, n); the response is ctxc_result_len() bytes at r.
//  3. ctxc_free(p). The response buffer stays valid until the next ctxc_call or
//     ctxc_free(r), whichever comes first; the guest frees it on the next call.
//
// ctxc_call_take(p, n) is ctxc_call for a host that is done with its request
// buffer: the buffer passes to the guest, which may keep it (a compact.begin keeps
// its request for compact.finish) instead of copying it. The host must not write
// pass or free it again (once the guest frees it, its address may come back from
// ctxc_alloc).
//
// No export traps on bad arguments: an unknown pointer, a length past the end of its
// buffer or a panic in the core becomes an error envelope (ctxc_call), 0
// (ctxc_alloc) or nothing (ctxc_free). Every export yields (runtime.Gosched) before
// it returns, so the Go runtime's background GC work runs between calls and memory
// stays flat. What cannot be recovered is the Go runtime running out of memory
// (a host memory limit): it exits the instance, which the host must discard.
package main

import (
	"runtime"
	"runtime/debug"
	"unsafe"

	"github.com/ctxcompact/ctxcompact/core"
)

// abiVersion changes only when the boundary changes incompatibly.
const abiVersion = 2

// maxAlloc bounds ctxc_alloc: a request may be up to core.MaxRequestBytes, plus some
// slack so that the core itself reports a request just over the limit.
const maxAlloc = core.MaxRequestBytes + 1024

// live keeps buffers handed to the host reachable, so the Go GC does not free them.
// The Go GC does not move objects, so their addresses stay valid.
var live = map[uintptr][]byte{}

// last is the response of the latest ctxc_call, freed by the next one.
var last struct {
	ptr uintptr
	n   int32
}

// Prebuilt error envelopes: building them must not fail or allocate much.
var (
	errBadBuffer = []byte(`{"error":{"code":"invalid_request","message":"ctxcompact: the request buffer was not returned by ctxc_alloc, or is shorter than the length given","path":""}}`)
	errPanic     = []byte(`{"error":{"code":"internal","message":"ctxcompact: the guest panicked outside the core","path":""}}`)
)

func main() {}

// gcPercent is the module's GOGC. The Go runtime in wasm has one thread, so its
// collector takes its time from the compaction itself, and between calls the live
// heap is small (the minimum goal, 4 MiB at 100, sets the pace): a compaction's
// garbage triggered about two collections per call. At 200 they run half as often:
// compact.begin + compact.finish over all shared traces in wasmtime, wasm time 5-10%
// less; linear memory after 1,000 compactions 13.5 -> 18.5 MiB, still flat
// (BenchmarkMemoryPerInstance).
const gcPercent = 200

func init() { debug.SetGCPercent(gcPercent) }

//go:wasmexport ctxc_abi_version
func ctxcABIVersion() int32 {
	runtime.Gosched()
	return abiVersion
}

// ctxc_alloc returns a zeroed buffer of size bytes (1 <= size <= maxAlloc), or 0
// when size is out of range.
//
//go:wasmexport ctxc_alloc
func ctxcAlloc(size int32) (ptr int32) {
	defer func() {
		if recover() != nil {
			ptr = 0
		}
		runtime.Gosched()
	}()
	if size <= 0 || int64(size) > maxAlloc {
		return 0
	}
	buf := make([]byte, size)
	p := uintptr(unsafe.Pointer(&buf[0]))
	live[p] = buf
	return int32(p)
}

// ctxc_free releases a buffer from ctxc_alloc or a response; unknown pointers
// (including 0 and pointers already freed) are ignored.
//
//go:wasmexport ctxc_free
func ctxcFree(ptr int32) {
	defer func() {
		_ = recover()
		runtime.Gosched()
	}()
	p := uintptr(uint32(ptr))
	delete(live, p)
	if p == last.ptr {
		last.ptr, last.n = 0, 0
	}
}

// ctxc_call runs the request envelope at [ptr, ptr+n) and returns a pointer to the
// response envelope; its length is ctxc_result_len(). It frees the previous
// response. It never traps on bad input: a bad pointer or length, or a panic,
// becomes an error envelope.
//
//go:wasmexport ctxc_call
func ctxcCall(ptr, n int32) int32 { return respond(ptr, n, false) }

// ctxc_call_take is ctxc_call, and the request buffer passes to the guest (see the
// package doc): it is no longer the host's to write, free or pass again.
//
//go:wasmexport ctxc_call_take
func ctxcCallTake(ptr, n int32) int32 { return respond(ptr, n, true) }

// respond is ctxc_call and ctxc_call_take: it frees the previous response, runs the
// request (taking its buffer when take is set) and keeps the new response.
func respond(ptr, n int32, take bool) (resp int32) {
	defer runtime.Gosched()
	defer func() {
		if recover() != nil {
			resp = keep(append([]byte(nil), errPanic...))
		}
	}()
	if last.ptr != 0 {
		delete(live, last.ptr)
		last.ptr, last.n = 0, 0
	}
	return keep(call(ptr, n, take))
}

// keep registers out (never empty) as the latest response and returns its address.
func keep(out []byte) int32 {
	p := uintptr(unsafe.Pointer(&out[0]))
	live[p] = out
	last.ptr, last.n = p, int32(len(out))
	return int32(p)
}

// ctxc_result_len is the length in bytes of the latest response, 0 when there is
// none (before the first call, or after it was freed).
//
//go:wasmexport ctxc_result_len
func ctxcResultLen() int32 {
	runtime.Gosched()
	return last.n
}

// call looks up the request buffer and runs core.Call on it, or core.CallTaking
// when the host hands the buffer over (it is then no longer live: the GC frees it
// when the core does not keep it); the result is never empty.
func call(ptr, n int32, take bool) (out []byte) {
	defer func() {
		if recover() != nil || len(out) == 0 {
			out = append([]byte(nil), errPanic...)
		}
	}()
	buf, ok := live[uintptr(uint32(ptr))]
	if !ok || n < 0 || int(n) > len(buf) {
		return append([]byte(nil), errBadBuffer...)
	}
	if take {
		delete(live, uintptr(uint32(ptr)))
		return core.CallTaking(buf[:n])
	}
	return core.Call(buf[:n])
}
