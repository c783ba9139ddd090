//go:build wasm

package core

import (
	"runtime"
	"runtime/debug"
)

// releaseBeforeRows readies the guest for the rows of a large archive, and returns
// what undoes it once they are written. The guest runs at GOGC=200 on a linear
// memory that never shrinks: without a collection the rows (about twice the
// archived bytes) and the garbage of reading each message's text would grow the
// instance beside the compaction's dead parse instead of reusing its place. Small
// archives are not worth a collection.
func releaseBeforeRows(rows int) (restore func()) {
	if rows < 50_000 {
		return func() {}
	}
	runtime.GC()
	old := debug.SetGCPercent(25)
	return func() { debug.SetGCPercent(old) }
}
