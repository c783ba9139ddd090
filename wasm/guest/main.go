//go:build wasip1

// Command guest is the ctxcompact WebAssembly module: a reactor whose exports move
// bytes in and out of linear memory and call core.Call. See wasm/abi.json.
//
// Protocol, per instance (an instance is single-threaded and not re-entrant):
//  1. p := ctxc_alloc(n); write the n-byte request envelope at p.
//  2. r := ctxc_call(p, n); the response is ctxc_result_len() bytes at r.
//  3. ctxc_free(p). The response buffer stays valid until the next ctxc_call or
//     ctxc_free(r), whichever comes first; the guest frees it on the next call.
package main

import (
	"runtime"
	"unsafe"

	"github.com/ctxcompact/ctxcompact/core"
)

// abiVersion changes only when the boundary changes incompatibly.
const abiVersion = 1

// live keeps buffers handed to the host reachable, so the Go GC does not free them.
var live = map[uintptr][]byte{}

var (
	lastResult    uintptr
	lastResultLen int32
)

func main() {}

//go:wasmexport ctxc_abi_version
func ctxcABIVersion() int32 { return abiVersion }

// ctxc_alloc returns a buffer of size bytes (size >= 1) or 0 when size is out of range.
//
//go:wasmexport ctxc_alloc
func ctxcAlloc(size int32) int32 {
	if size <= 0 || int64(size) > core.MaxRequestBytes+1024 {
		return 0
	}
	buf := make([]byte, size)
	p := uintptr(unsafe.Pointer(&buf[0]))
	live[p] = buf
	return int32(p)
}

// ctxc_free releases a buffer from ctxc_alloc or a response; unknown pointers are ignored.
//
//go:wasmexport ctxc_free
func ctxcFree(ptr int32) {
	p := uintptr(uint32(ptr))
	delete(live, p)
	if p == lastResult {
		lastResult, lastResultLen = 0, 0
	}
	runtime.Gosched()
}

// ctxc_call runs the request envelope at [ptr, ptr+n) and returns a pointer to the
// response envelope; its length is ctxc_result_len(). It never traps on bad input:
// a bad pointer or a panic becomes an error envelope.
//
//go:wasmexport ctxc_call
func ctxcCall(ptr, n int32) int32 {
	if lastResult != 0 {
		delete(live, lastResult)
	}
	out := call(ptr, n)
	p := uintptr(unsafe.Pointer(&out[0]))
	live[p] = out
	lastResult, lastResultLen = p, int32(len(out))
	runtime.Gosched()
	return int32(p)
}

//go:wasmexport ctxc_result_len
func ctxcResultLen() int32 { return lastResultLen }

func call(ptr, n int32) (out []byte) {
	defer func() {
		if r := recover(); r != nil {
			out = []byte(`{"error":{"code":"internal","message":"ctxcompact: guest panic","path":""}}`)
		}
	}()
	buf, ok := live[uintptr(uint32(ptr))]
	if !ok || n < 0 || int(n) > len(buf) {
		return []byte(`{"error":{"code":"invalid_request","message":"ctxcompact: request buffer was not allocated with ctxc_alloc or is shorter than the length given","path":""}}`)
	}
	return core.Call(buf[:n])
}
