//go:build unix

package recall

import (
	"errors"
	"syscall"
)

// processRuns reports whether a process with pid runs on this host (or cannot be
// told: then it is taken to run).
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return !errors.Is(err, syscall.ESRCH)
}
