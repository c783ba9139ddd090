package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/internal/pgtest"
	"github.com/ctxcompact/ctxcompact/internal/recalltest"
	"github.com/ctxcompact/ctxcompact/recall"
)

var bg = context.Background()

func TestMain(m *testing.M) {
	if spec := os.Getenv(loadWorkerEnv); spec != "" {
		os.Exit(runLoadWorker(spec))
	}
	if url := os.Getenv(killChildEnv); url != "" {
		os.Exit(runKillChild(url))
	}
	os.Exit(pgtest.Main(m))
}

// open opens a store on a new database.
func open(t *testing.T) (*Store, string) {
	t.Helper()
	url := pgtest.Database(t)
	s, err := Open(bg, url)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, url
}

func exec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	c, err := pgx.Connect(bg, url)
	require.NoError(t, err)
	defer c.Close(bg)
	_, err = c.Exec(bg, sql, args...)
	require.NoError(t, err)
}

func archive(id string, texts ...string) core.RecallArchive {
	a := core.RecallArchive{Range: core.RecallRange{ID: id, FromIndex: 1, ToIndex: 1 + len(texts), Summary: "summary of " + id}}
	for i, text := range texts {
		a.Rows = append(a.Rows, core.RecallRow{ID: fmt.Sprintf("%s.%d", id, i+1), RangeID: id, Position: i + 1, Role: "user", Reason: "summarized",
			JSON: fmt.Sprintf(`{"role":"user","content":%q}`, text), Text: "user\n" + text})
	}
	return a
}

func codeOf(err error) core.ErrorCode {
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

func pathOf(err error) string {
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce.Path
	}
	return ""
}

// The fixture every runtime's store answers, on PostgreSQL: the same hits, totals
// and originals as the fixture (and so as every SQLite store).
func TestFixtureOnPostgres(t *testing.T) {
	f := recalltest.Load(t)
	s, _ := open(t)
	f.Write(t, s)
	f.Check(t, "go postgres", s)
	sessions, err := s.Sessions(bg)
	require.NoError(t, err)
	require.Equal(t, f.Names(), sessions)
}

// Eight processes' worth of stores opening one new database at once create its
// schema once, and every one of them opens.
func TestSchemaIsCreatedOnceWhenManyOpenAtOnce(t *testing.T) {
	url := pgtest.Database(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(bg, url)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	s, err := Open(bg, url)
	require.NoError(t, err)
	defer s.Close()
	var n int
	require.NoError(t, s.pool.QueryRow(bg, `SELECT count(*) FROM ctxc_meta`).Scan(&n))
	require.Equal(t, 2, n)
}

func TestAnotherSchemaVersionIsRefused(t *testing.T) {
	s, url := open(t)
	s.Close()
	exec(t, url, `UPDATE ctxc_meta SET value = '2' WHERE key = 'schema_version'`)
	_, err := Open(bg, url)
	require.Equal(t, core.CodeInvalidState, codeOf(err), "%v", err)
	require.Equal(t, "/path", pathOf(err))
	require.Contains(t, err.Error(), `schema version "2"`)
}

// The rule is SQLite's LIKE: ASCII letters match either case, other letters only
// themselves, and %, _ and \ in a term are literal.
func TestSearchFoldsASCIIOnly(t *testing.T) {
	s, _ := open(t)
	require.NoError(t, s.ArchiveOne(bg, "s", archive("r1", "HELLO there", "ÉCOLE normale", "100% sure", "snake_case", `a\b`, "100 percent")))
	find := func(q string) []string {
		hits, _, err := s.Find(bg, "s", q, 10)
		require.NoError(t, err)
		ids := []string{}
		for _, h := range hits {
			ids = append(ids, h.ID)
		}
		return ids
	}
	require.Equal(t, []string{"r1.1"}, find("hello"))
	require.Equal(t, []string{"r1.2"}, find("ÉCOLE"))
	require.Empty(t, find("éCOLE"), "É matches only É: it is not ASCII")
	require.Empty(t, find("école"))
	require.Equal(t, []string{"r1.3"}, find("100%"))
	require.Equal(t, []string{"r1.4"}, find("e_c"))
	require.Empty(t, find("e_s"), "_ is no wildcard")
	require.Equal(t, []string{"r1.5"}, find(`a\b`))
}

// PostgreSQL text cannot hold U+0000: a searchable text keeps U+FFFD in its place;
// a json with a raw NUL is refused, and nothing is written.
func TestNULs(t *testing.T) {
	s, _ := open(t)
	a := archive("r1", "before")
	a.Rows[0].Text = "user\nbefore\x00after"
	require.NoError(t, s.ArchiveOne(bg, "s", a))
	hits, _, err := s.Find(bg, "s", "after", 10)
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, "user\nbefore\uFFFDafter", hits[0].Text)
	b := archive("r2", "x", "y")
	b.Rows[1].JSON = "{\"role\":\"user\",\"content\":\"y\x00\"}"
	err = s.ArchiveOne(bg, "s", b)
	require.Equal(t, core.CodeInvalidRequest, codeOf(err), "%v", err)
	require.Equal(t, "/rows/1/json", pathOf(err))
	rs, err := s.Ranges(bg, "s")
	require.NoError(t, err)
	require.Len(t, rs, 1, "nothing of r2")
	c := archive("r2", "x")
	c.Rows[0].Role = "us\x00er"
	err = s.ArchiveOne(bg, "s", c)
	require.Equal(t, "/rows/0/role", pathOf(err), "%v", err)
	err = s.ArchiveOne(bg, "s\x00", archive("r1", "x"))
	require.Equal(t, "/session", pathOf(err), "%v", err)
	d := archive("r2", "x")
	d.Range.Summary = "sum\x00mary"
	require.NoError(t, s.ArchiveOne(bg, "s", d))
	rs, err = s.Ranges(bg, "s")
	require.NoError(t, err)
	require.Equal(t, "sum\uFFFDmary", rs[1].Summary)
	ms, err := s.Messages(bg, "s\x00", "r1")
	require.NoError(t, err)
	require.Empty(t, ms, "a session with a NUL has nothing")
}

// Two compactions of one session at once, both reserving r1: one archives, the
// other is refused before anything of it is written.
func TestTwoArchivesOfOneSessionAtOnce(t *testing.T) {
	s, url := open(t)
	other, err := Open(bg, url)
	require.NoError(t, err)
	defer other.Close()
	for round := 0; round < 20; round++ {
		session := fmt.Sprintf("s%d", round)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, st := range []*Store{s, other} {
			wg.Go(func() {
				id, err := st.NextRangeID(bg, session)
				if err == nil {
					err = st.ArchiveOne(bg, session, archive(id, fmt.Sprintf("writer %d", i)))
				}
				errs[i] = err
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else {
				require.Equal(t, core.CodeInvalidState, codeOf(err), "%v", err)
				require.Equal(t, "/range/id", pathOf(err))
			}
		}
		require.GreaterOrEqual(t, ok, 1)
		rows, err := s.RangeRows(bg, session, "r1")
		require.NoError(t, err)
		require.Len(t, rows, 1, "one writer's row, once")
		rs, err := s.Ranges(bg, session)
		require.NoError(t, err)
		require.Len(t, rs, ok, "each success has its range: r1, then r2")
	}
}

// terminateIn makes the next n archives' connections be ended by the server before
// their commits, as a lost connection is.
func terminateIn(t *testing.T, url string, n int) *int {
	var mu sync.Mutex
	count := 0
	archiveHook = func(pid uint32) {
		mu.Lock()
		defer mu.Unlock()
		if count < n {
			count++
			exec(t, url, `SELECT pg_terminate_backend($1)`, int(pid))
		}
	}
	t.Cleanup(func() { archiveHook = nil })
	return &count
}

// A connection lost in an archive's transaction is retried once, on a new one: the
// range is archived once.
func TestALostConnectionIsRetriedOnce(t *testing.T) {
	s, url := open(t)
	lostN := terminateIn(t, url, 1)
	require.NoError(t, s.ArchiveOne(bg, "s", archive("r1", "one", "two", "three")))
	require.Equal(t, 1, *lostN)
	rows, err := s.RangeRows(bg, "s", "r1")
	require.NoError(t, err)
	require.Len(t, rows, 3)
	ms, err := s.Messages(bg, "s", "r1")
	require.NoError(t, err)
	require.Equal(t, `{"role":"user","content":"one"}`, ms[0])
}

// Lost twice: store_unavailable, and nothing of the range is written.
func TestALostConnectionTwiceFailsAndWritesNothing(t *testing.T) {
	s, url := open(t)
	terminateIn(t, url, 2)
	err := s.ArchiveOne(bg, "s", archive("r1", "one", "two"))
	require.Equal(t, recall.CodeStoreUnavailable, codeOf(err), "%v", err)
	require.Contains(t, err.Error(), "nothing of it is written")
	rs, err := s.Ranges(bg, "s")
	require.NoError(t, err)
	require.Empty(t, rs)
	rows, err := s.RangeRows(bg, "s", "r1")
	require.NoError(t, err)
	require.Empty(t, rows)
	require.NoError(t, s.ArchiveOne(bg, "s", archive("r1", "again")), "the store works on")
}

// The retry of an archive whose COMMIT landed (its answer lost) finds the range
// there with its rows: the archive succeeded, and is not written twice.
func TestARetryFindsItsLandedCommit(t *testing.T) {
	s, _ := open(t)
	a := archive("r1", "one", "two")
	require.NoError(t, s.ArchiveOne(bg, "s", a))
	src := &partSource{next: func() (core.RecallArchive, error, bool) { return core.RecallArchive{}, nil, false }, kept: []core.RecallArchive{a}, done: true, retry: true}
	_, err := s.archiveOnce(bg, "s", src)
	require.NoError(t, err)
	src = &partSource{kept: []core.RecallArchive{archive("r1", "one", "other")}, done: true, retry: true}
	_, err = s.archiveOnce(bg, "s", src)
	require.Equal(t, core.CodeInvalidState, codeOf(err), "other rows under r1 are another compaction's")
	rows, err := s.RangeRows(bg, "s", "r1")
	require.NoError(t, err)
	require.Len(t, rows, 2)
}

// An error in the parts rolls every part back.
func TestAnErrorInThePartsWritesNothing(t *testing.T) {
	s, _ := open(t)
	boom := errors.New("the session step failed")
	err := s.Archive(bg, "s", func(yield func(core.RecallArchive, error) bool) {
		if yield(archive("r1", "one"), nil) {
			yield(core.RecallArchive{}, boom)
		}
	})
	require.ErrorIs(t, err, boom)
	rs, err := s.Ranges(bg, "s")
	require.NoError(t, err)
	require.Empty(t, rs)
}

func TestDeleteSession(t *testing.T) {
	s, _ := open(t)
	require.NoError(t, s.ArchiveOne(bg, "a", archive("r1", "x")))
	require.NoError(t, s.ArchiveOne(bg, "b", archive("r1", "y")))
	require.NoError(t, s.DeleteSession(bg, "a"))
	sessions, err := s.Sessions(bg)
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, sessions)
}

// Sessions sort in byte order whatever the database's collation.
func TestSessionsInByteOrder(t *testing.T) {
	s, _ := open(t)
	for _, session := range []string{"b", "B", "a", "_x", "Z"} {
		require.NoError(t, s.ArchiveOne(bg, session, archive("r1", "x")))
	}
	got, err := s.Sessions(bg)
	require.NoError(t, err)
	require.Equal(t, []string{"B", "Z", "_x", "a", "b"}, got)
}

// OpenURL routes by the URL: postgres:// and DSNs here, sqlite: and paths to SQLite.
func TestOpenURL(t *testing.T) {
	_, url := open(t)
	b, err := recall.OpenURL(bg, url)
	require.NoError(t, err)
	_, isPG := b.(*Store)
	require.True(t, isPG)
	b.Close()
	t.Setenv(recall.EnvURL, url)
	b, err = recall.OpenURL(bg, "")
	require.NoError(t, err)
	b.Close()
	file := t.TempDir() + "/r.db"
	b, err = recall.OpenURL(bg, "sqlite:"+file)
	require.NoError(t, err)
	_, isSQLite := b.(*recall.Store)
	require.True(t, isSQLite)
	b.Close()
	for _, u := range []string{"postgres://a:secret@h/db", "host=h password=secret dbname=x"} {
		require.NotContains(t, recall.Redact(u), "secret")
	}
	kind, _ := recall.Kind("host=localhost dbname=x")
	require.Equal(t, "postgres", kind)
}

// An export of a SQLite store imported into PostgreSQL (and back) keeps every range
// and row byte for byte; importing it again changes nothing.
func TestExportImportBetweenStores(t *testing.T) {
	f := recalltest.Load(t)
	lite, err := recall.Open(t.TempDir() + "/from.db")
	require.NoError(t, err)
	defer lite.Close()
	f.Write(t, lite)
	var exported bytes.Buffer
	ranges, rows, err := recall.Export(bg, lite, &exported)
	require.NoError(t, err)
	require.Positive(t, ranges)
	pg, _ := open(t)
	st, err := recall.Import(bg, pg, bytes.NewReader(exported.Bytes()))
	require.NoError(t, err)
	require.Equal(t, recall.ImportStats{Ranges: ranges, Rows: rows}, st)
	f.Check(t, "imported into postgres", pg)
	st, err = recall.Import(bg, pg, bytes.NewReader(exported.Bytes()))
	require.NoError(t, err)
	require.Equal(t, recall.ImportStats{Present: ranges}, st, "an import is idempotent")
	var again bytes.Buffer
	_, _, err = recall.Export(bg, pg, &again)
	require.NoError(t, err)
	require.Equal(t, exported.String(), again.String(), "the export of the import is the export")

	// A range the store has with other rows is a conflict, named by its line.
	changed := strings.Replace(exported.String(), `"summary":"`, `"summary":"changed `, 1)
	_, err = recall.Import(bg, pg, strings.NewReader(changed))
	require.Equal(t, core.CodeInvalidState, codeOf(err), "%v", err)
	_, err = recall.Import(bg, pg, strings.NewReader(`{"not":"an export"}`))
	require.Equal(t, core.CodeInvalidRequest, codeOf(err), "%v", err)
}

// A reader in the middle of a long read transaction does not hold up a writer of
// the same session, and still sees the state it started with (MVCC).
func TestReadersNeverBlockWriters(t *testing.T) {
	s, url := open(t)
	require.NoError(t, s.ArchiveOne(bg, "s", archive("r1", "first")))
	c, err := pgx.Connect(bg, url)
	require.NoError(t, err)
	defer c.Close(bg)
	tx, err := c.BeginTx(bg, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	require.NoError(t, err)
	defer tx.Rollback(bg)
	var n int
	require.NoError(t, tx.QueryRow(bg, `SELECT count(*) FROM ctxc_messages WHERE session = 's' AND ctxc_fold(text) LIKE '%first%'`).Scan(&n))
	require.Equal(t, 1, n)
	ctx, cancel := context.WithTimeout(bg, 30*time.Second) // far above an archive's time: a bound against a hang
	defer cancel()
	require.NoError(t, s.ArchiveOne(ctx, "s", archive("r2", "second")), "the writer went through while the reader's transaction is open")
	hits, _, err := s.Find(bg, "s", "second", 10)
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.NoError(t, tx.QueryRow(bg, `SELECT count(*) FROM ctxc_ranges WHERE session = 's'`).Scan(&n))
	require.Equal(t, 1, n, "the reader's snapshot is the one it began with")
}
