package postgres

import (
	"bufio"
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/internal/pgtest"
)

// killChildEnv makes the test binary a writer that stops inside an archive's
// transaction, after all its rows are sent, to be killed there (TestMain).
const killChildEnv = "CTXC_PG_KILL_CHILD"

const killedRows = 2000

func bigArchive(id string, n int) core.RecallArchive {
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("killed writer row %d", i)
	}
	return archive(id, texts...)
}

func runKillChild(url string) int {
	s, err := Open(context.Background(), url)
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	archiveHook = func(uint32) {
		fmt.Println("IN-TRANSACTION")
		time.Sleep(time.Hour)
	}
	err = s.ArchiveOne(context.Background(), "k", bigArchive("r4", killedRows))
	fmt.Println("archive returned:", err)
	return 1
}

// A writer killed with SIGKILL inside an archive's transaction (every row sent,
// not committed), then the server crashed and restarted: every committed range is
// there with its rows, nothing of the killed one, and the session's lock is free
// (the next archive goes through at once, before and after the restart).
func TestAWriterKilledMidArchiveThenTheServerRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own")
	}
	srv := pgtest.Start(t)
	url := pgtest.NewDatabase(t, srv.URL)
	s, err := Open(bg, url)
	require.NoError(t, err)
	for k := 1; k <= 3; k++ {
		require.NoError(t, s.ArchiveOne(bg, "k", archive(fmt.Sprintf("r%d", k), "committed", fmt.Sprint(k))))
	}
	before := map[string]int{}
	for k := 1; k <= 3; k++ {
		rows, err := s.RangeRows(bg, "k", fmt.Sprintf("r%d", k))
		require.NoError(t, err)
		before[fmt.Sprintf("r%d", k)] = len(rows)
	}

	child := osexec.Command(os.Args[0], "-test.run", "^$")
	child.Env = append(os.Environ(), killChildEnv+"="+url)
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "IN-TRANSACTION\n", line)
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	child.Wait()

	// The killed writer's session lock went with its connection: the next archive
	// of the session goes through (bounded by a context far above its time).
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	id, err := s.NextRangeID(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "r4", id, "nothing of the killed writer's r4")
	require.NoError(t, s.ArchiveOne(ctx, "k", archive("r4", "after the kill")))
	s.Close()

	srv.Crash()
	srv.Restart()
	s, err = Open(bg, url)
	require.NoError(t, err)
	defer s.Close()
	rs, err := s.Ranges(bg, "k")
	require.NoError(t, err)
	require.Len(t, rs, 4)
	for id, n := range before {
		rows, err := s.RangeRows(bg, "k", id)
		require.NoError(t, err)
		require.Len(t, rows, n, "range %s after the restart", id)
	}
	ms, err := s.Messages(bg, "k", "r4")
	require.NoError(t, err)
	require.Equal(t, []string{`{"role":"user","content":"after the kill"}`}, ms, "r4 is the one written after the kill")
	hits, _, err := s.Find(bg, "k", "killed writer", 0)
	require.NoError(t, err)
	require.Empty(t, hits)
	require.NoError(t, s.ArchiveOne(bg, "k", archive("r5", "after the restart")))
	require.True(t, strings.HasPrefix(s.Name(), "postgres://"))
}
