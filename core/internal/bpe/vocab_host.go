//go:build wasip1 && ctxcompact_hostvocab

package bpe

import (
	"fmt"
	"unsafe"
)

// The WebAssembly module's rank tables come from its host, through two imports
// (wasm/abi.json): the module asks for the one it needs when it first needs it.
//
//	ctxcompact.vocab_size(name_ptr, name_len) -> n: the table's length, or -1 when the
//	    host has none of that name
//	ctxcompact.vocab_read(name_ptr, name_len, dst) -> 0, having written the n bytes
//	    at dst (guest memory), or -1

//go:wasmimport ctxcompact vocab_size
func vocabSize(name unsafe.Pointer, nameLen int32) int32

//go:wasmimport ctxcompact vocab_read
func vocabRead(name unsafe.Pointer, nameLen int32, dst unsafe.Pointer) int32

func tableOf(name string) (string, error) {
	p, n := unsafe.Pointer(unsafe.StringData(name)), int32(len(name))
	size := vocabSize(p, n)
	if size <= 0 {
		return "", fmt.Errorf("ctxcompact: the host gives no %s vocabulary (the ctxcompact.vocab_size import answered %d): a host of this module must serve the tables of core/internal/bpe/vocab (wasm/abi.json)", name, size)
	}
	buf := make([]byte, size)
	if rc := vocabRead(p, n, unsafe.Pointer(&buf[0])); rc != 0 {
		return "", fmt.Errorf("ctxcompact: the host failed to give the %s vocabulary (ctxcompact.vocab_read answered %d)", name, rc)
	}
	return unsafe.String(&buf[0], len(buf)), nil
}

// Embedded: the module has no table compiled in.
func Embedded(string) (string, bool) { return "", false }
