//go:build !(linux || darwin)

package host

import "github.com/tetratelabs/wazero/experimental"

// memoryAllocator is nil where this package does not map memory itself: wazero's
// default slices back the instances' linear memory (see linearmemory_unix.go).
func memoryAllocator(*linearMemory) experimental.MemoryAllocator { return nil }

// mapsMemory reports whether instances get a mapping of their own.
func mapsMemory() bool { return false }
