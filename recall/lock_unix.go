//go:build unix

package recall

import (
	"errors"
	"os"
	"syscall"
)

// processRuns reports whether a process with pid runs on this host (or cannot be
// told: then it is taken to run).
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return !errors.Is(err, syscall.ESRCH)
}

// notWritable reports whether path is a file this process cannot write.
func notWritable(path string) bool {
	if _, err := os.Stat(path); err != nil {
		return false
	}
	return syscall.Access(path, 2 /* W_OK */) != nil
}
