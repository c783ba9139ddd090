//go:build !unix

package recall

// processRuns cannot tell here: a lock is taken over by its age alone.
func processRuns(pid int) bool { return true }
