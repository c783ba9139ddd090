//go:build linux || darwin

package host

import (
	"math"
	"strconv"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// mmapAllocator backs each instance's linear memory with its own mapping: the
// instance's maximum is reserved up front (address space only, PROT_NONE), and
// growing makes the next pages readable and writable in place. wazero's default,
// a Go slice that grows by append, copies the whole memory on every growth and
// leaves each old copy to the Go collector: a guest that grows to 1.5 GB in small
// steps made the host peak at several times that (bench/memory). Here growth never
// copies, and closing the instance unmaps its memory at once, so its pages go back
// to the system without waiting for a collection.
//
// Where the reservation fails (an address-space limit), the memory falls back to
// a plain slice. memoryAllocator returns nil on a 32-bit host (wazero's default
// then), else an allocator that stores the memory it makes in *slot.
func memoryAllocator(slot *linearMemory) experimental.MemoryAllocator {
	if strconv.IntSize != 64 {
		return nil
	}
	return experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
		var m linearMemory = &sliceMemory{}
		if maxBytes > 0 && maxBytes <= math.MaxInt {
			if reserved, err := syscall.Mmap(-1, 0, int(maxBytes), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON); err == nil {
				mm := &mmapMemory{reserved: reserved}
				mm.release = mm.unmap
				m = mm
			}
		}
		*slot = m
		return m
	})
}

// mapsMemory reports whether instances get a mapping of their own.
func mapsMemory() bool { return strconv.IntSize == 64 }

// mmapMemory is a linear memory in a reserved mapping; the first committed bytes
// are readable and writable.
type mmapMemory struct {
	memoryGuard
	reserved  []byte
	committed int
}

// pageBytes is the granularity of mprotect on every system this file builds for
// (a wasm page, 64 KiB, is a multiple of it).
const pageBytes = 1 << 16

// Reallocate implements experimental.LinearMemory: the memory's first size bytes,
// at the same address, or nil when they cannot be mapped.
func (m *mmapMemory) Reallocate(size uint64) []byte {
	if m.reserved == nil || size > uint64(len(m.reserved)) {
		return nil
	}
	n := int(size)
	if n > m.committed {
		end := min((n+pageBytes-1)/pageBytes*pageBytes, len(m.reserved))
		if err := syscall.Mprotect(m.reserved[m.committed:end], syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
			return nil
		}
		m.committed = end
	}
	return m.reserved[:n:n]
}

// Free implements experimental.LinearMemory: wazero calls it when the module is
// closed; the memory is unmapped then, or at leave when the host is using it.
func (m *mmapMemory) Free() { m.free() }

func (m *mmapMemory) unmap() {
	_ = syscall.Munmap(m.reserved)
	m.reserved, m.committed = nil, 0
}
