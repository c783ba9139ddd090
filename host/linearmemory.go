package host

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
)

// linearMemory is an instance's linear memory as this package allocates it
// (memoryAllocator). The host brackets every use of the instance with enter and
// leave: a memory freed while in use (wazero closes a module when its context is
// done, or Engine.Close when calls outlast its context) is released at leave, not
// under the running guest; and enter reports false once it was freed (the module
// is closed: nothing may touch its memory).
type linearMemory interface {
	experimental.LinearMemory
	enter() bool
	leave()
}

// memoryGuard is the enter / leave / Free bookkeeping of a linearMemory; release
// runs once, when the memory is freed and not in use.
type memoryGuard struct {
	mu      sync.Mutex
	busy    bool
	freed   bool
	release func()
}

func (g *memoryGuard) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed {
		return false
	}
	g.busy = true
	return true
}

func (g *memoryGuard) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = false
	if g.freed {
		g.releaseLocked()
	}
}

// free is LinearMemory.Free: wazero calls it when the module is closed.
func (g *memoryGuard) free() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.freed = true
	if !g.busy {
		g.releaseLocked()
	}
}

func (g *memoryGuard) releaseLocked() {
	if g.release != nil {
		g.release()
		g.release = nil
	}
}

// sliceMemory is a linear memory in a Go slice, as wazero keeps one by default: it
// is where the host cannot reserve a mapping (see memoryAllocator). Growing past
// its capacity copies it into one a quarter larger than needed.
type sliceMemory struct {
	memoryGuard
	buf []byte
}

// Reallocate implements experimental.LinearMemory.
func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size > uint64(cap(m.buf)) {
		grown := make([]byte, size, size+size/4)
		copy(grown, m.buf)
		m.buf = grown
	}
	m.buf = m.buf[:size]
	return m.buf
}

// Free implements experimental.LinearMemory (the collector frees the slice).
func (m *sliceMemory) Free() { m.free() }
