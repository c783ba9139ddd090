package recall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/ctxcompact/core"
)

// rangeOf is a hand-made recall.archive result: four rows of a range r<k>.
func rangeOf(k int, who string) core.RecallArchive {
	id := fmt.Sprintf("r%d", k)
	a := core.RecallArchive{Range: core.RecallRange{ID: id, FromIndex: 0, ToIndex: 4, Summary: who + " " + id}}
	for i := range 4 {
		text := fmt.Sprintf("%s wrote row %d of %s %s", who, i, id, strings.Repeat("padding ", 200))
		a.Rows = append(a.Rows, core.RecallRow{ID: fmt.Sprintf("%s.%d", id, i), RangeID: id, Position: i, Role: "tool",
			Reason: "summarized", JSON: fmt.Sprintf(`{"role":"tool","content":"%s wrote row %d of %s"}`, who, i, id), Text: text})
	}
	return a
}

// A lock directory held by another process (a Node process in a transaction, or one
// that crashed in one) is waited for, then an error naming it; nothing is written
// without it.
func TestTheLockDirectoryIsHonoured(t *testing.T) {
	path := filepath.Join(t.TempDir(), "recall.db")
	s := mustOpen(t, path, Options{LockTimeout: 10 * time.Millisecond})
	require.NoError(t, s.ArchiveOne(bg, "a", rangeOf(1, "go")))
	_, err := os.Stat(path + ".lock")
	require.True(t, errors.Is(err, os.ErrNotExist), "released after each operation")

	require.NoError(t, os.Mkdir(path+".lock", 0o755))
	err = s.ArchiveOne(bg, "a", rangeOf(2, "go"))
	require.ErrorIs(t, err, ErrLocked)
	require.Contains(t, err.Error(), path+".lock")
	require.Contains(t, err.Error(), "remove it when no process uses the store")
	_, _, err = s.Find(bg, "a", "wrote", 10)
	require.ErrorIs(t, err, ErrLocked)
	_, err = OpenWith(path, Options{LockTimeout: 10 * time.Millisecond})
	require.ErrorIs(t, err, ErrLocked)

	// Released by its holder while an operation waits: the operation goes on.
	go func() { time.Sleep(20 * time.Millisecond); os.Remove(path + ".lock") }()
	w := mustOpen(t, path, Options{LockTimeout: time.Minute})
	require.NoError(t, w.ArchiveOne(bg, "a", rangeOf(2, "go")))
	rs, err := s.Ranges(bg, "a")
	require.NoError(t, err)
	require.Len(t, rs, 2)
}

const nodeWriter = `
import { RecallStore } from %q;
const [file, n] = process.argv.slice(1);
const s = await RecallStore.open(file, { driver: "wasm" });
for (let k = 1; k <= Number(n); k++) {
  const rid = "r" + k;
  const rows = [0, 1, 2, 3].map((i) => ({ id: rid + "." + i, range_id: rid, position: i, role: "tool", reason: "summarized",
    json: JSON.stringify({ role: "tool", content: "node wrote row " + i + " of " + rid }), text: "node wrote row " + i + " of " + rid + " " + "padding ".repeat(200) }));
  s.archive("node", { range: { id: rid, from_index: 0, to_index: 4, summary: "node " + rid }, rows });
  s.search("node", "wrote row");
}
s.close();
console.log("ok");
`

// A Go process and a Node 20 process (the wasm driver, whose lock is the directory)
// write one file at the same time: every row of both is there, the file and its
// index are intact.
func TestGoAndNodeWriteOneFileAtTheSameTime(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(here))
	node, err := exec.LookPath("node")
	if err != nil || !dirExists(filepath.Join(root, "node_modules", "node-sqlite3-wasm")) {
		if os.Getenv("CI") != "" {
			t.Fatal("node or node_modules/node-sqlite3-wasm missing (npm ci)")
		}
		t.Skip("node or node_modules/node-sqlite3-wasm missing (npm ci)")
	}
	path := filepath.Join(t.TempDir(), "recall.db")
	s := mustOpen(t, path, Options{})
	const n = 40
	script := fmt.Sprintf(nodeWriter, "file://"+filepath.Join(root, "bindings", "js", "recall.js"))
	cmd := exec.Command(node, "--input-type=module", "-e", script, path, fmt.Sprint(n))
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	require.NoError(t, cmd.Start())
	for k := 1; k <= n; k++ {
		require.NoError(t, s.ArchiveOne(bg, "go", rangeOf(k, "go")))
		_, _, err := s.Find(bg, "go", "wrote row", 10)
		require.NoError(t, err)
	}
	require.NoError(t, cmd.Wait(), stderr.String())
	require.Equal(t, "ok\n", out.String())

	for _, who := range []string{"go", "node"} {
		rs, err := s.Ranges(bg, who)
		require.NoError(t, err)
		require.Len(t, rs, n, who)
		n4, err := s.sessionRows(who)
		require.NoError(t, err)
		require.Equal(t, 4*n, n4, "no row of %s lost", who)
		hits, _, err := s.Find(bg, who, fmt.Sprintf("%s wrote row 3 of r%d", who, n), 10)
		require.NoError(t, err)
		require.Len(t, hits, 1)
	}
	unlock, err := s.lock(bg)
	require.NoError(t, err)
	defer unlock()
	for _, sql := range []string{`PRAGMA integrity_check`} {
		st, _, err := s.conn.Prepare(sql)
		require.NoError(t, err)
		require.True(t, st.Step())
		require.Equal(t, "ok", st.ColumnText(0))
		st.Close()
	}
	require.NoError(t, s.conn.Exec(`INSERT INTO ctxc_fts(ctxc_fts) VALUES ('integrity-check')`))
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// fakeClock makes every store opened from now on wait on a clock that sleeping
// advances; it returns the time slept and the number of sleeps.
func fakeClock(t *testing.T) (*time.Time, *time.Duration, *int) {
	now := time.UnixMilli(1_000_000_000_000)
	var slept time.Duration
	var sleeps int
	lockHook = func(l *dirLock) {
		l.now = func() time.Time { return now }
		l.sleep = func(_ context.Context, d time.Duration) error { now = now.Add(d); slept += d; sleeps++; return nil }
	}
	t.Cleanup(func() { lockHook = nil })
	return &now, &slept, &sleeps
}

func holdLock(t *testing.T, path string, pid int, at time.Time) {
	require.NoError(t, os.Mkdir(path+".lock", 0o755))
	host, _ := os.Hostname()
	b, _ := json.Marshal(lockOwner{PID: pid, Host: host, Runtime: "test", At: at.UnixMilli()})
	require.NoError(t, os.WriteFile(path+".lock/owner", b, 0o644))
}

// A live holder is waited for by sleeping, the lock timeout in all, then an error
// naming the lock and its holder; a lock older than StaleAfter, or one without an
// owner file whose directory is that old, or one whose holder's pid is gone, is
// taken over at once.
func TestTheLockIsWaitedForThenTakenOverWhenStale(t *testing.T) {
	now, slept, sleeps := fakeClock(t)
	path := filepath.Join(t.TempDir(), "recall.db")
	s := mustOpen(t, path, Options{})
	holdLock(t, path, os.Getpid(), *now)
	err := s.ArchiveOne(bg, "a", rangeOf(1, "go"))
	require.ErrorIs(t, err, ErrLocked)
	host, _ := os.Hostname()
	require.Contains(t, err.Error(), fmt.Sprintf("holder: pid %d on %s (test)", os.Getpid(), host))
	require.Equal(t, BusyTimeout, *slept, "the documented wait, on the lock's clock")
	require.Greater(t, *sleeps, 100)
	require.NoError(t, os.RemoveAll(path+".lock"))

	*sleeps = 0
	holdLock(t, path, os.Getpid(), now.Add(-StaleAfter-time.Second))
	require.NoError(t, s.ArchiveOne(bg, "a", rangeOf(1, "go")))
	require.NoError(t, os.Mkdir(path+".lock", 0o755)) // node-sqlite3-wasm's own: no owner
	old := now.Add(-StaleAfter - time.Minute)
	require.NoError(t, os.Chtimes(path+".lock", old, old))
	require.NoError(t, s.ArchiveOne(bg, "a", rangeOf(2, "go")))
	gone := exec.Command(os.Args[0], "-test.run=^$")
	require.NoError(t, gone.Run())
	holdLock(t, path, gone.Process.Pid, *now)
	require.NoError(t, s.ArchiveOne(bg, "a", rangeOf(3, "go")))
	require.Zero(t, *sleeps, "taken over without waiting")
	_, err = os.Stat(path + ".lock")
	require.True(t, errors.Is(err, os.ErrNotExist))
}

// Options.ReadOnly: searched and expanded, a write is invalid_state at /path; a
// missing file is invalid_state too, not created.
func TestReadOnlyOption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "recall.db")
	w := mustOpen(t, path, Options{})
	require.NoError(t, w.ArchiveOne(bg, "a", rangeOf(1, "go")))
	require.NoError(t, w.Close())
	s := mustOpen(t, path, Options{ReadOnly: true})
	_, total, err := s.Find(bg, "a", "wrote", 10)
	require.NoError(t, err)
	require.Equal(t, 4, total)
	var ce *core.Error
	for _, err := range []error{s.ArchiveOne(bg, "a", rangeOf(2, "go")), s.DeleteSession(bg, "a")} {
		require.ErrorAs(t, err, &ce)
		require.Equal(t, core.CodeInvalidState, ce.Code)
		require.Equal(t, "/path", ce.Path)
		require.Contains(t, err.Error(), "is read-only")
	}
	_, err = OpenWith(filepath.Join(t.TempDir(), "none.db"), Options{ReadOnly: true})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, core.CodeInvalidState, ce.Code)
}
