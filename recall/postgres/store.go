// Package postgres is the recall store on PostgreSQL (issue 29, docs/RECALL.md "On
// PostgreSQL"): one archive that many processes on many machines write and search at
// once, with the SQLite store's tables, ids, answers and guarantees. A *Store is a
// recall.Backend and a host.RecallStore: pass it as host.ContextEngineOptions.Store.
//
// Importing the package registers it with recall.OpenURL for postgres:// and
// postgresql:// URLs and key=value DSNs. The driver is github.com/jackc/pgx/v5 (a
// connection pool); it is its own package so that a program that uses only SQLite
// does not link it.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/recall"
)

// SchemaSQL is the store's schema, recall/schema_postgres.sql, run as one script
// when a database has no ctxc_meta table yet (the JS store reads the same file, the
// Python store's copy is tested to be it).
var SchemaSQL = recall.PostgresSchemaSQL

// lockClass is the first key of every advisory lock the stores take ("ctxc"): alone,
// the schema's set-up; with hashtext(session), a session's archives.
const lockClass = 1668577379

func init() {
	recall.Register("postgres", func(ctx context.Context, url string) (recall.Backend, error) { return Open(ctx, url) })
}

// Store is a recall store on a PostgreSQL database. It is safe for concurrent use
// (a pool of connections); processes share it through the server, which orders a
// session's archives with an advisory lock and never makes a reader wait.
type Store struct {
	pool *pgxpool.Pool
	// name is the URL without its password, for messages.
	name string
}

// Open connects to the database the URL or key=value DSN names (PG* environment
// variables fill what it leaves out, as libpq's do) and sets up the schema when the
// database has none. A database of another schema version is invalid_state.
func Open(ctx context.Context, url string) (*Store, error) {
	name := recall.Redact(url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &core.Error{Code: core.CodeInvalidRequest, Path: "/url", Message: fmt.Sprintf("ctxcompact: %s is not a PostgreSQL URL or DSN: %v", name, err)}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ctxcompact: opening the recall store %s: %w", name, err)
	}
	s := &Store{pool: pool, name: name}
	if err := s.retry(ctx, s.setUp); err != nil {
		pool.Close()
		return nil, s.failure("opening the recall store", err)
	}
	return s, nil
}

// setUp creates the schema in a database without one, under the set-up lock, and
// checks the version of one that has it.
func (s *Store) setUp(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockClass)); err != nil {
			return err
		}
		// Reading pg_class first makes the server take in the catalog changes
		// committed while this connection waited for the lock; to_regclass alone can
		// answer from a cache that predates them.
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('ctxc_meta') IS NOT NULL FROM pg_catalog.pg_class LIMIT 1`).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, SchemaSQL); err != nil {
				return fmt.Errorf("creating the schema (recall/schema_postgres.sql; the role needs CREATE on the database, and pg_trgm must be installable): %w", err)
			}
			return nil
		}
		var version string
		err := tx.QueryRow(ctx, `SELECT value FROM ctxc_meta WHERE key = 'schema_version'`).Scan(&version)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if version != recall.SchemaVersion {
			return &core.Error{Code: core.CodeInvalidState, Path: "/path", Message: fmt.Sprintf(
				"ctxcompact: the recall store %s has schema version %q; this ctxcompact reads and writes version %s (open it with a ctxcompact of its version)", s.name, version, recall.SchemaVersion)}
		}
		return nil
	})
}

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Name is the store's URL without its password.
func (s *Store) Name() string { return s.name }

// lost reports whether err means the connection is gone (retry on a new one): not a
// server's answer to the statement, but the socket closed, reset or timed out, or the
// server ending the session (SQLSTATE class 08, 57P01-57P03).
func lost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNREFUSED) || pgconn.Timeout(err) || strings.Contains(err.Error(), "conn closed")
}

// errLostTwice wraps the error of a retry that lost its connection too.
type errLostTwice struct{ err error }

func (e errLostTwice) Error() string { return e.err.Error() }
func (e errLostTwice) Unwrap() error { return e.err }

// retry runs op, and once more when it lost its connection.
func (s *Store) retry(ctx context.Context, op func(context.Context) error) error {
	err := op(ctx)
	if !lost(err) {
		return err
	}
	if err = op(ctx); lost(err) {
		return errLostTwice{err}
	}
	return err
}

// failure is err as the store reports it: a lost connection is store_unavailable,
// a core.Error as it is, anything else named with what failed.
func (s *Store) failure(what string, err error) error {
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	var twice errLostTwice
	if errors.As(err, &twice) || lost(err) {
		return &core.Error{Code: recall.CodeStoreUnavailable, Message: fmt.Sprintf(
			"ctxcompact: %s %s: the connection to the server was lost, and again on the retry: nothing of it is written (%v)", what, s.name, err)}
	}
	return fmt.Errorf("ctxcompact: %s %s: %w", what, s.name, err)
}

// collect runs a read (retried once on a lost connection) and scans each row with
// scan; what failed is named with what.
func collect[T any](ctx context.Context, s *Store, what, sql string, args []any, scan func(pgx.CollectableRow) (T, error)) ([]T, error) {
	var out []T
	err := s.retry(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scan)
		return err
	})
	if err != nil {
		return nil, s.failure(what, err)
	}
	return out, nil
}

// NextRangeID is the id the session's next archived range gets: r<k>, k being 1 +
// the number of ranges it has.
func (s *Store) NextRangeID(ctx context.Context, session string) (string, error) {
	if !noNUL(session) {
		return "r1", nil
	}
	var n int
	err := s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT count(*) FROM ctxc_ranges WHERE session = $1`, session).Scan(&n)
	})
	if err != nil {
		return "", s.failure("reading", err)
	}
	return "r" + strconv.Itoa(n+1), nil
}

// Find returns the session's rows that match query (every term an ASCII
// case-insensitive substring of the row's text), newest first, at most limit of them
// (limit <= 0: all), and how many match, counted up to recall.TotalCap (all when
// limit <= 0): the SQLite store's answer.
func (s *Store) Find(ctx context.Context, session, query string, limit int) (hits []core.RecallHit, total int, err error) {
	q, err := core.BuildRecallQuery(query)
	if err != nil {
		return nil, 0, err
	}
	if !noNUL(session) {
		return []core.RecallHit{}, 0, nil
	}
	sql, args := findSQL(session, q.Like, limit)
	hits, err = collect(ctx, s, "searching", sql, args, func(r pgx.CollectableRow) (core.RecallHit, error) {
		var h core.RecallHit
		err := r.Scan(&h.ID, &h.RangeID, &h.Position, &h.Role, &h.Text)
		return h, err
	})
	if err != nil {
		return nil, 0, err
	}
	if hits == nil {
		hits = []core.RecallHit{}
	}
	total = len(hits)
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, total, nil
}

// findSQL is a search's statement: each LIKE pattern of the core's plan, lowered in
// ASCII, against ctxc_fold(text) (which the trigram index covers), newest first,
// reading max(limit, TotalCap) rows when limit > 0.
func findSQL(session string, likes []string, limit int) (string, []any) {
	var b strings.Builder
	b.WriteString(`SELECT id, range_id, position, role, text FROM ctxc_messages WHERE session = $1`)
	args := []any{session}
	for _, p := range likes {
		args = append(args, asciiLower(p))
		fmt.Fprintf(&b, ` AND ctxc_fold(text) LIKE $%d`, len(args))
	}
	b.WriteString(` ORDER BY rowid DESC`)
	if limit > 0 {
		b.WriteString(` LIMIT ` + strconv.Itoa(max(limit, recall.TotalCap)))
	}
	return b.String(), args
}

func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// Expand returns the rows behind id in the session: for a range id (r3) the range's
// archived messages (not its summary) in input order, for any other id the row with
// that id. An unknown id has none.
func (s *Store) Expand(ctx context.Context, session, id string) (out []recall.Message, err error) {
	if !noNUL(session, id) {
		return nil, nil
	}
	sql := `SELECT id, range_id, position, role, reason, json FROM ctxc_messages WHERE session = $1 AND id = $2`
	if core.IsRangeID(id) {
		sql = `SELECT id, range_id, position, role, reason, json FROM ctxc_messages WHERE session = $1 AND range_id = $2 AND reason <> 'summary' ORDER BY position, rowid`
	}
	return collect(ctx, s, "reading", sql, []any{session, id}, func(r pgx.CollectableRow) (recall.Message, error) {
		var m recall.Message
		err := r.Scan(&m.ID, &m.RangeID, &m.Position, &m.Role, &m.Reason, &m.JSON)
		return m, err
	})
}

// Messages is Expand's JSON texts (host.RecallStore).
func (s *Store) Messages(ctx context.Context, session, id string) ([]string, error) {
	return recall.JSONOf(s.Expand(ctx, session, id))
}

// Ranges lists the session's ranges in order.
func (s *Store) Ranges(ctx context.Context, session string) (out []recall.Range, err error) {
	if !noNUL(session) {
		return nil, nil
	}
	return collect(ctx, s, "reading", `SELECT id, seq, from_index, to_index, summary FROM ctxc_ranges WHERE session = $1 ORDER BY seq`,
		[]any{session}, func(r pgx.CollectableRow) (recall.Range, error) {
			var g recall.Range
			err := r.Scan(&g.ID, &g.Seq, &g.FromIndex, &g.ToIndex, &g.Summary)
			return g, err
		})
}

// RangeRows returns every row of one range, its summary row too, in archive order.
func (s *Store) RangeRows(ctx context.Context, session, rangeID string) (out []core.RecallRow, err error) {
	if !noNUL(session, rangeID) {
		return []core.RecallRow{}, nil
	}
	out, err = collect(ctx, s, "reading", rangeRowsSQL, []any{session, rangeID}, scanRow)
	if out == nil && err == nil {
		out = []core.RecallRow{}
	}
	return out, err
}

const rangeRowsSQL = `SELECT id, range_id, position, role, reason, json, text FROM ctxc_messages WHERE session = $1 AND range_id = $2 ORDER BY rowid`

func scanRow(r pgx.CollectableRow) (core.RecallRow, error) {
	var w core.RecallRow
	err := r.Scan(&w.ID, &w.RangeID, &w.Position, &w.Role, &w.Reason, &w.JSON, &w.Text)
	return w, err
}

// Sessions lists the sessions in the store in byte order (as SQLite sorts them,
// whatever the database's collation).
func (s *Store) Sessions(ctx context.Context) (out []string, err error) {
	out, err = collect(ctx, s, "reading", `SELECT session FROM (SELECT session FROM ctxc_ranges UNION SELECT session FROM ctxc_messages) s ORDER BY session COLLATE "C"`,
		nil, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// DeleteSession removes a session's ranges and messages in one transaction, holding
// the session's lock (no archive of it runs meanwhile).
func (s *Store) DeleteSession(ctx context.Context, session string) error {
	err := s.retry(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(lockClass), session); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM ctxc_messages WHERE session = $1`, session); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DELETE FROM ctxc_ranges WHERE session = $1`, session)
			return err
		})
	})
	if err != nil {
		return s.failure("deleting session "+strconv.Quote(session)+" of", err)
	}
	return nil
}

// SearchResult is context_search's answer for query in session (recall.SearchResult).
func (s *Store) SearchResult(ctx context.Context, session, query string, limit int) (string, error) {
	return recall.SearchResult(ctx, s, session, query, limit)
}

// ExpandResult is context_expand's answer for id in session (recall.ExpandResult).
func (s *Store) ExpandResult(ctx context.Context, session, id string, maxTokens int) (string, error) {
	return recall.ExpandResult(ctx, s, session, id, maxTokens)
}

var _ recall.Backend = (*Store)(nil)

// ArchiveOne stores one compaction's range and rows (the result of the core's
// recall.archive) under session: Archive with one part.
func (s *Store) ArchiveOne(ctx context.Context, session string, a core.RecallArchive) error {
	return s.Archive(ctx, session, func(yield func(core.RecallArchive, error) bool) { yield(a, nil) })
}

// Archive stores one compaction's range and rows under session, in one transaction,
// as they come in parts (host.RecallStore): the first part holds the range, every
// part rows of it. The range must be the session's next (NextRangeID): one that
// another writer took first is invalid_state at /range/id, and nothing is written;
// so does an error in parts. The parts are kept until the commit: a connection lost
// on the way is retried once, from the beginning, on a new one.
func (s *Store) Archive(ctx context.Context, session string, parts iter.Seq2[core.RecallArchive, error]) error {
	if session == "" {
		return errors.New("ctxcompact: a recall session id must not be empty")
	}
	if strings.IndexByte(session, 0) >= 0 {
		return &core.Error{Code: core.CodeInvalidRequest, Path: "/session", Message: "ctxcompact: a recall session id must not contain a NUL character (U+0000): PostgreSQL text cannot hold it"}
	}
	next, stop := iter.Pull2(parts)
	defer stop()
	src := &partSource{next: next}
	id := ""
	attempt := func(ctx context.Context) error {
		rid, err := s.archiveOnce(ctx, session, src)
		id = rid
		return err
	}
	err := s.retry(ctx, attempt)
	if err == nil {
		return nil
	}
	if src.err != nil {
		return fmt.Errorf("ctxcompact: archiving %s of session %q: %w", id, session, src.err)
	}
	return s.failure(fmt.Sprintf("archiving %s of session %q in", id, session), err)
}

// partSource hands an archive's parts to each attempt: the ones seen so far from
// memory, then the next from the iterator.
type partSource struct {
	next  func() (core.RecallArchive, error, bool)
	kept  []core.RecallArchive
	done  bool
	err   error // the parts' own error: not retried
	retry bool  // a second attempt is reading
}

// part is part i, ok false after the last.
func (p *partSource) part(i int) (core.RecallArchive, bool, error) {
	if i < len(p.kept) {
		return p.kept[i], true, nil
	}
	if p.done {
		return core.RecallArchive{}, false, p.err
	}
	a, err, ok := p.next()
	if !ok || err != nil {
		p.done, p.err = true, err
		return core.RecallArchive{}, false, err
	}
	p.kept = append(p.kept, a)
	return a, true, nil
}

// archiveHook, when set (by a test), runs in an archive's transaction before its
// commit, with the connection's backend pid.
var archiveHook func(pid uint32)

var messageColumns = []string{"session", "id", "range_id", "position", "role", "reason", "json", "text"}

// archiveOnce is one attempt of Archive: the whole transaction.
func (s *Store) archiveOnce(ctx context.Context, session string, src *partSource) (rangeID string, err error) {
	retrying := src.retry
	src.retry = true
	first, ok, err := src.part(0)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errors.New("ctxcompact: an archive with no parts")
	}
	rangeID = first.Range.ID
	if !core.IsRangeID(rangeID) {
		return rangeID, fmt.Errorf("ctxcompact: %q is not a range id r<k>", rangeID)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return rangeID, err
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return rangeID, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(lockClass), session); err != nil {
		return rangeID, err
	}
	var n int
	if err = tx.QueryRow(ctx, `SELECT count(*) FROM ctxc_ranges WHERE session = $1`, session).Scan(&n); err != nil {
		return rangeID, err
	}
	if want := "r" + strconv.Itoa(n+1); rangeID != want {
		if retrying {
			// The lost connection may have been the COMMIT's answer: then the range
			// is there, with these rows.
			if same, err := s.landed(ctx, tx, session, src); err != nil || same {
				return rangeID, err
			}
		}
		return rangeID, &core.Error{Code: core.CodeInvalidState, Path: "/range/id", Message: fmt.Sprintf(
			"ctxcompact: the session's next range is %s, not %s: another compaction of the session archived first (nothing of this one is written; compact again)", want, rangeID)}
	}
	rg := first.Range
	if _, err = tx.Exec(ctx, `INSERT INTO ctxc_ranges (session, id, seq, from_index, to_index, summary) VALUES ($1, $2, $3, $4, $5, $6)`,
		session, rg.ID, n+1, rg.FromIndex, rg.ToIndex, searchable(rg.Summary)); err != nil {
		return rangeID, err
	}
	row := 0
	for i := 0; ; i++ {
		a, ok, err := src.part(i)
		if err != nil {
			return rangeID, err
		}
		if !ok {
			break
		}
		if i > 0 && a.Range.ID != "" {
			return rangeID, fmt.Errorf("part after the first holds a range (%s)", a.Range.ID)
		}
		values := make([][]any, len(a.Rows))
		for j, r := range a.Rows {
			if r.RangeID != rangeID {
				return rangeID, fmt.Errorf("row %s belongs to range %s, not %s", r.ID, r.RangeID, rangeID)
			}
			if err := checkNULs(r, row+j); err != nil {
				return rangeID, err
			}
			values[j] = []any{session, r.ID, r.RangeID, r.Position, r.Role, r.Reason, r.JSON, searchable(r.Text)}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"ctxc_messages"}, messageColumns, pgx.CopyFromRows(values)); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "23505" {
				return rangeID, &core.Error{Code: core.CodeInvalidRequest, Path: "/rows", Message: fmt.Sprintf(
					"ctxcompact: session %q already has a message of those rows (%s)", session, pe.Detail)}
			}
			return rangeID, err
		}
		row += len(a.Rows)
	}
	if archiveHook != nil {
		archiveHook(conn.Conn().PgConn().PID())
	}
	return rangeID, tx.Commit(ctx)
}

// landed reports whether the store already has the archive src holds, row for row
// (a first attempt whose COMMIT landed before its connection was lost).
func (s *Store) landed(ctx context.Context, tx pgx.Tx, session string, src *partSource) (bool, error) {
	first, _, _ := src.part(0)
	var from, to int
	var summary string
	err := tx.QueryRow(ctx, `SELECT from_index, to_index, summary FROM ctxc_ranges WHERE session = $1 AND id = $2`, session, first.Range.ID).Scan(&from, &to, &summary)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil || from != first.Range.FromIndex || to != first.Range.ToIndex || summary != searchable(first.Range.Summary) {
		return false, err
	}
	rows, err := tx.Query(ctx, rangeRowsSQL, session, first.Range.ID)
	if err != nil {
		return false, err
	}
	have, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return false, err
	}
	k := 0
	for i := 0; ; i++ {
		a, ok, err := src.part(i)
		if err != nil || !ok {
			return err == nil && k == len(have), err
		}
		for _, r := range a.Rows {
			r.Text = searchable(r.Text)
			if k >= len(have) || have[k] != r {
				return false, nil
			}
			k++
		}
	}
}

// checkNULs refuses a row PostgreSQL cannot hold as it is: a NUL in its id, role or
// reason, or a raw NUL byte in its json (not JSON, where it is the escape \u0000).
// A NUL in its text is kept as U+FFFD (searchable).
func checkNULs(r core.RecallRow, i int) error {
	for _, f := range []struct{ name, v string }{{"id", r.ID}, {"role", r.Role}, {"reason", r.Reason}, {"json", r.JSON}} {
		if strings.IndexByte(f.v, 0) >= 0 {
			what := "must not contain a NUL character (U+0000): PostgreSQL text cannot hold it"
			if f.name == "json" {
				what = "holds a raw NUL byte, which is not JSON (it writes \\u0000) and which PostgreSQL text cannot hold"
			}
			return &core.Error{Code: core.CodeInvalidRequest, Path: "/rows/" + strconv.Itoa(i) + "/" + f.name, Message: fmt.Sprintf("ctxcompact: row %s's %s %s", r.ID, f.name, what)}
		}
	}
	return nil
}

// noNUL reports whether none of the strings holds a NUL: a session or id that
// does, which no archive can have written, answers nothing.
func noNUL(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 {
			return false
		}
	}
	return true
}

// searchable is a row's text as PostgreSQL can hold it: U+0000 as U+FFFD.
func searchable(text string) string {
	if strings.IndexByte(text, 0) < 0 {
		return text
	}
	return strings.ReplaceAll(text, "\x00", "\uFFFD")
}
