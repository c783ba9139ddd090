package recall

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

var bg = context.Background()

// archiveOf runs the core's recall.archive for messages archived as summarized at
// input indices from, from+1, ... with a summary message.
func archiveOf(t testing.TB, session, rangeID string, from int, msgs []string, summary string) core.RecallArchive {
	t.Helper()
	var archived []string
	for i, m := range msgs {
		archived = append(archived, fmt.Sprintf(`{"index":%d,"reason":"summarized","message":%s}`, from+i, m))
	}
	sm, _ := json.Marshal(map[string]string{"role": "user", "content": summary})
	req := fmt.Sprintf(`{"session":%q,"range_id":%q,"report":{"summarized":{"from":%d,"to":%d}},"archived":[%s],"summary_message":%s}`,
		session, rangeID, from, from+len(msgs), strings.Join(archived, ","), sm)
	out := gjson.ParseBytes(core.Dispatch("recall.archive", []byte(req)))
	require.False(t, out.Get("error").Exists(), out.Raw)
	var a core.RecallArchive
	require.NoError(t, json.Unmarshal([]byte(out.Get("result").Raw), &a))
	return a
}

func msg(role, content string) string {
	b, _ := json.Marshal(map[string]string{"role": role, "content": content})
	return string(b)
}

func callMsg(name, args string) string {
	b, _ := json.Marshal(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
		map[string]any{"id": "c", "type": "function", "function": map[string]string{"name": name, "arguments": args}}}})
	return string(b)
}

func ids(hits []core.RecallHit) []string {
	out := []string{}
	for _, h := range hits {
		out = append(out, h.ID)
	}
	return out
}

func mustOpen(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	s, err := OpenWith(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestFTS5WithTrigramIsAvailable(t *testing.T) {
	s := mustOpen(t, "", Options{})
	require.Equal(t, ModeFTS5, s.Mode(), "this SQLite build has FTS5 and the trigram tokenizer")
	l := mustOpen(t, "", Options{ForceLike: true})
	require.Equal(t, ModeLike, l.Mode())
}

func TestArchiveSearchExpand(t *testing.T) {
	s := mustOpen(t, "", Options{})
	s.window = 0 // the FTS index, not the recent rows
	id, err := s.NextRangeID(bg, "a")
	require.NoError(t, err)
	require.Equal(t, "r1", id)
	tool := `{"role":"tool","tool_call_id":"c","content":"caf\u00e9\nTraceback in src/app.py line 3"}`
	a := archiveOf(t, "a", "r1", 2, []string{msg("user", "Please fix src/app.py"), callMsg("read_file", `{"path": "src/app.py"}`), tool}, "summary of r1")
	require.NoError(t, s.ArchiveOne(bg, "a", a))
	id, _ = s.NextRangeID(bg, "a")
	require.Equal(t, "r2", id)

	hits, total, err := s.Find(bg, "a", "SRC/APP.PY", 0)
	require.NoError(t, err)
	require.Equal(t, []string{"r1.4", "r1.3", "r1.2"}, ids(hits), "newest first, case-insensitive, the path literally")
	require.Equal(t, 3, total)
	hits, total, err = s.Find(bg, "a", "src/app.py", 1)
	require.NoError(t, err)
	require.Equal(t, []string{"r1.4"}, ids(hits))
	require.Equal(t, 3, total, "total counts past the limit")
	hits, _, _ = s.Find(bg, "a", `"read_file" path`, 0)
	require.Equal(t, []string{"r1.3"}, ids(hits), "tool names and arguments are searchable")
	hits, _, _ = s.Find(bg, "a", "summary of", 0)
	require.Equal(t, []string{"r1.summary"}, ids(hits), "summaries are searchable")
	hits, _, _ = s.Find(bg, "a", "app.pyx", 0)
	require.Empty(t, hits)
	hits, _, _ = s.Find(bg, "a", "fix py", 0)
	require.Equal(t, []string{"r1.2"}, ids(hits), "every term, a short one included")

	ms, err := s.Expand(bg, "a", "r1.4")
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, tool, ms[0].JSON, "byte for byte")
	ms, _ = s.Expand(bg, "a", "r1")
	require.Len(t, ms, 3, "a range expands to its messages, not its summary")
	require.Equal(t, []int{2, 3, 4}, []int{ms[0].Position, ms[1].Position, ms[2].Position})
	ms, _ = s.Expand(bg, "a", "r7")
	require.Empty(t, ms)

	res, err := s.ExpandResult(bg, "a", "r1.4", 0)
	require.NoError(t, err)
	require.Equal(t, tool, gjson.Get(res, "messages.0").Raw)
	res, _ = s.ExpandResult(bg, "a", "r9", 0)
	require.Contains(t, gjson.Get(res, "error").Str, "r9")
	res, _ = s.SearchResult(bg, "a", "Traceback", 0)
	require.Equal(t, "r1.4", gjson.Get(res, "hits.0.id").Str)
	require.Contains(t, gjson.Get(res, "hits.0.snippet").Str, "Traceback in src/app.py")

	rs, err := s.Ranges(bg, "a")
	require.NoError(t, err)
	require.Equal(t, []Range{{ID: "r1", Seq: 1, FromIndex: 2, ToIndex: 5, Summary: "summary of r1"}}, rs)
}

func TestArchiveRefusesATakenRangeID(t *testing.T) {
	s := mustOpen(t, "", Options{})
	require.NoError(t, s.ArchiveOne(bg, "a", archiveOf(t, "a", "r1", 0, []string{msg("user", "one")}, "s1")))
	err := s.ArchiveOne(bg, "a", archiveOf(t, "a", "r1", 0, []string{msg("user", "again")}, "s1"))
	require.ErrorContains(t, err, "next range is r2")
	err = s.ArchiveOne(bg, "a", archiveOf(t, "a", "r3", 0, []string{msg("user", "skipped")}, "s1"))
	require.Error(t, err)
	hits, _, _ := s.Find(bg, "a", "again", 0)
	require.Empty(t, hits, "a refused archive writes nothing")
	hits, _, _ = s.Find(bg, "a", "skipped", 0)
	require.Empty(t, hits)
}

func TestSessionsAreSeparateAndDeleteSession(t *testing.T) {
	for _, opts := range []Options{{}, {ForceLike: true}} {
		t.Run(fmt.Sprint(opts.ForceLike), func(t *testing.T) {
			s := mustOpen(t, "", opts)
			require.NoError(t, s.ArchiveOne(bg, "a", archiveOf(t, "a", "r1", 0, []string{msg("user", "secret of a: src/a.py")}, "sa")))
			require.NoError(t, s.ArchiveOne(bg, "b", archiveOf(t, "b", "r1", 0, []string{msg("user", "secret of b: src/b.py")}, "sb")))
			hits, _, _ := s.Find(bg, "a", "secret", 0)
			require.Equal(t, []string{"r1.0"}, ids(hits))
			ms, _ := s.Expand(bg, "a", "r1.0")
			require.Contains(t, ms[0].JSON, "secret of a")
			hits, _, _ = s.Find(bg, "a", "src/b.py", 0)
			require.Empty(t, hits, "a does not see b")
			sessions, err := s.Sessions(bg)
			require.NoError(t, err)
			require.Equal(t, []string{"a", "b"}, sessions)

			require.NoError(t, s.DeleteSession(bg, "a"))
			sessions, _ = s.Sessions(bg)
			require.Equal(t, []string{"b"}, sessions)
			hits, _, _ = s.Find(bg, "a", "secret", 0)
			require.Empty(t, hits)
			hits, _, _ = s.Find(bg, "b", "secret", 0)
			require.Equal(t, []string{"r1.0"}, ids(hits))
			id, _ := s.NextRangeID(bg, "a")
			require.Equal(t, "r1", id, "a deleted session starts over")
			if s.hasFTS {
				require.NoError(t, s.conn.Exec(`INSERT INTO ctxc_fts(ctxc_fts, rank) VALUES('integrity-check', 1)`), "the index is in sync")
			}
		})
	}
}

// corpus is a deterministic set of messages with paths, identifiers, mixed case,
// LIKE metacharacters and non-ASCII text.
func corpus(n int) []string {
	words := []string{"src/app.py", "tests/test_app.py", "foo.bar", "FooBar", "50%_done", `a\b`, "café", "error", "Error handling", "x", "go", "ÜBER", "über", "pytest", "npm run build"}
	var out []string
	for i := 0; i < n; i++ {
		var parts []string
		for j := 0; j < 4; j++ {
			parts = append(parts, words[(i*7+j*3+i/5)%len(words)])
		}
		if i%3 == 0 {
			out = append(out, callMsg("bash", fmt.Sprintf(`{"command": %q}`, strings.Join(parts, " "))))
		} else {
			out = append(out, msg([]string{"user", "tool", "assistant"}[i%3], strings.Join(parts, " -- ")))
		}
	}
	return out
}

func TestFTS5AndLikeGiveTheSameHits(t *testing.T) {
	for _, window := range []int{0, 7, recentWindow} {
		t.Run(fmt.Sprint("window-", window), func(t *testing.T) { testSameHits(t, window) })
	}
}

// testSameHits compares the modes with a recent window of window rows (0: the
// index or the LIKE scan at once; 7: the window, then the index, for most queries).
func testSameHits(t *testing.T, window int) {
	dir := t.TempDir()
	fts := mustOpen(t, filepath.Join(dir, "fts.db"), Options{})
	like := mustOpen(t, filepath.Join(dir, "like.db"), Options{ForceLike: true})
	fts.window, like.window = window, window
	require.Equal(t, ModeFTS5, fts.Mode())
	c := corpus(120)
	for k := 0; k < 4; k++ {
		a := archiveOf(t, "s", fmt.Sprintf("r%d", k+1), k*30, c[k*30:(k+1)*30], fmt.Sprintf("summary %d mentions src/app.py", k))
		require.NoError(t, fts.ArchiveOne(bg, "s", a))
		require.NoError(t, like.ArchiveOne(bg, "s", a))
	}
	queries := []string{"src/app.py", "foo.bar", "FOOBAR", "50%_done", "50%", "_done", `a\b`, "café", "CAFÉ", "error",
		`"error handling"`, "x", "go", "über", "Error src/app.py", "npm build", "tests/ app", "summary", "nothing-here", "py go"}
	found := 0
	for _, q := range queries {
		fh, ft, err := fts.Find(bg, "s", q, 0)
		require.NoError(t, err, q)
		lh, lt, err := like.Find(bg, "s", q, 0)
		require.NoError(t, err, q)
		require.Equal(t, ids(lh), ids(fh), "query %q", q)
		require.Equal(t, lt, ft, q)
		fr, _ := fts.SearchResult(bg, "s", q, 5)
		lr, _ := like.SearchResult(bg, "s", q, 5)
		require.Equal(t, lr, fr, q)
		// With a limit: the newest of the same hits, total counted up to TotalCap.
		fl, flt, err := fts.Find(bg, "s", q, 3)
		require.NoError(t, err)
		require.Equal(t, ids(fh)[:min(3, len(fh))], ids(fl), q)
		require.Equal(t, min(len(fh), TotalCap), flt, q)
		found += len(fh)
	}
	require.Greater(t, found, 100, "the queries do find things")
	// Reopened without the option, the LIKE store stays LIKE, the FTS5 store FTS5.
	require.NoError(t, like.Close())
	again := mustOpen(t, filepath.Join(dir, "like.db"), Options{})
	require.Equal(t, ModeLike, again.Mode())
	// Forcing LIKE on an FTS5 store searches with LIKE and keeps the index in sync.
	require.NoError(t, fts.Close())
	forced := mustOpen(t, filepath.Join(dir, "fts.db"), Options{ForceLike: true})
	require.Equal(t, ModeLike, forced.Mode())
	require.NoError(t, forced.ArchiveOne(bg, "s", archiveOf(t, "s", "r5", 200, []string{msg("user", "late addition zebra")}, "s5")))
	require.NoError(t, forced.Close())
	reopened := mustOpen(t, filepath.Join(dir, "fts.db"), Options{})
	hits, _, _ := reopened.Find(bg, "s", "zebra", 0)
	require.Equal(t, []string{"r5.200"}, ids(hits))
}

func TestFileStoreSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "recall.db")
	s, err := Open(path)
	require.NoError(t, err)
	require.NoError(t, s.ArchiveOne(bg, "a", archiveOf(t, "a", "r1", 0, []string{msg("user", "remember src/app.py")}, "s")))
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.ArchiveOne(bg, "a", core.RecallArchive{Range: core.RecallRange{ID: "r2"}}), errClosed)
	s2 := mustOpen(t, path, Options{})
	hits, _, err := s2.Find(bg, "a", "src/app.py", 0)
	require.NoError(t, err)
	require.Equal(t, []string{"r1.0"}, ids(hits))
	var journal string
	st, _, _ := s2.conn.Prepare(`PRAGMA journal_mode`)
	if st.Step() {
		journal = st.ColumnText(0)
	}
	st.Close()
	require.Equal(t, "delete", journal, "a rollback journal: the Node 20 driver cannot share a WAL")
}

func TestConcurrentSessions(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "c.db"), Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			session := fmt.Sprintf("s%d", g)
			for k := 1; k <= 5; k++ {
				a := archiveOf(t, session, fmt.Sprintf("r%d", k), k*10, []string{msg("user", fmt.Sprintf("goroutine %d range %d", g, k))}, "sum")
				if err := s.ArchiveOne(bg, session, a); err != nil {
					errs <- err
					return
				}
				if _, _, err := s.Find(bg, session, "goroutine", 3); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for g := 0; g < 8; g++ {
		hits, total, err := s.Find(bg, fmt.Sprintf("s%d", g), "goroutine", 0)
		require.NoError(t, err)
		require.Equal(t, 5, total)
		require.Equal(t, fmt.Sprintf("r5.50"), hits[0].ID)
	}
}
