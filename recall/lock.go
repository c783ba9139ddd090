package recall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// StaleAfter is the age past which a store's lock directory is taken over
// whatever its holder: every runtime holds it for one statement or one
// transaction, never this long. A holder on this host that is gone (its pid no
// longer runs) is taken over at once.
const StaleAfter = 30 * time.Second

// lockOwner is the file <lock dir>/owner every runtime writes after taking the
// lock: who holds it, so that a waiter can take over a lock whose holder died.
type lockOwner struct {
	PID     int    `json:"pid"`
	Host    string `json:"host"`
	Runtime string `json:"runtime"`
	// At is when the lock was taken, Unix milliseconds.
	At int64 `json:"at"`
}

// dirLock is the cross-runtime lock of a store file (docs/RECALL.md
// "Concurrency"): the directory <absolute path>.lock, made with mkdir, with an
// owner file in it.
type dirLock struct {
	dir  string
	wait time.Duration
	// now and sleep are the clock (tests replace them).
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	// held is called once the lock is taken (a test hook).
	held func()
}

func newDirLock(dir string, wait time.Duration) *dirLock {
	return &dirLock{dir: dir, wait: wait, now: time.Now, sleep: func(ctx context.Context, d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}}
}

var hostname = sync.OnceValue(func() string { h, _ := os.Hostname(); return h })

// take takes the lock, waiting up to wait (or until ctx is done): a lock whose
// holder is gone, or older than StaleAfter, is taken over.
func (l *dirLock) take(ctx context.Context) error {
	deadline := l.now().Add(l.wait)
	delay := time.Millisecond
	for {
		err := os.Mkdir(l.dir, 0o755)
		if err == nil {
			l.writeOwner()
			if l.held != nil {
				l.held()
			}
			return nil
		}
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("ctxcompact: taking the recall store's lock %s: %w", l.dir, err)
		}
		if l.breakStale() {
			continue
		}
		left := deadline.Sub(l.now())
		if left <= 0 {
			return fmt.Errorf("%w: %s held for more than %s (holder: %s; every runtime takes it around each use of the file; a holder on this host that is gone, or a lock older than %s, is taken over; else remove it when no process uses the store)",
				ErrLocked, l.dir, l.wait, l.describe(), StaleAfter)
		}
		if err := l.sleep(ctx, min(delay, left)); err != nil {
			return err
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

func (l *dirLock) writeOwner() {
	b, _ := json.Marshal(lockOwner{PID: os.Getpid(), Host: hostname(), Runtime: "go", At: l.now().UnixMilli()})
	// Best effort: a lock without its owner file is still a lock (the Node 20
	// driver's own is one), taken over only by its age.
	_ = os.WriteFile(filepath.Join(l.dir, "owner"), b, 0o644)
}

func (l *dirLock) drop() {
	os.Remove(filepath.Join(l.dir, "owner"))
	os.Remove(l.dir)
}

// stale reads the lock and tells whether its holder is gone: an owner on this
// host whose pid does not run, or a lock taken more than StaleAfter ago (by the
// owner's time, else the directory's). raw is what it read, to compare later.
func (l *dirLock) stale() (bool, string) {
	b, err := os.ReadFile(filepath.Join(l.dir, "owner"))
	var o lockOwner
	if err == nil && json.Unmarshal(b, &o) == nil && o.PID > 0 {
		if o.Host == hostname() && !processRuns(o.PID) {
			return true, string(b)
		}
		return l.now().Sub(time.UnixMilli(o.At)) > StaleAfter, string(b)
	}
	fi, err := os.Stat(l.dir)
	if err != nil {
		return false, ""
	}
	return l.now().Sub(fi.ModTime()) > StaleAfter, "mtime " + fi.ModTime().String()
}

// breakStale removes a stale lock, under the breaker <lock>.break (so that two
// waiters never both remove one, the second a fresh lock of a third process);
// it reports whether the lock was removed.
func (l *dirLock) breakStale() bool {
	if ok, _ := l.stale(); !ok {
		return false
	}
	brk := l.dir + ".break"
	if err := os.Mkdir(brk, 0o755); err != nil {
		// A breaker left by a process that died in these few statements.
		if fi, err := os.Stat(brk); err == nil && l.now().Sub(fi.ModTime()) > StaleAfter {
			os.Remove(brk)
		}
		return false
	}
	defer os.Remove(brk)
	ok, _ := l.stale() // again, under the breaker: it may have been released and taken since
	if !ok {
		return false
	}
	os.Remove(filepath.Join(l.dir, "owner"))
	return os.Remove(l.dir) == nil
}

// describe names the lock's holder for an error.
func (l *dirLock) describe() string {
	b, err := os.ReadFile(filepath.Join(l.dir, "owner"))
	var o lockOwner
	if err != nil || json.Unmarshal(b, &o) != nil {
		return "a process that recorded no owner (the Node 20 driver's own lock)"
	}
	return fmt.Sprintf("pid %d on %s (%s)", o.PID, o.Host, o.Runtime)
}
