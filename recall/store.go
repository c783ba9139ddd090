// Package recall is the Go recall store of ctxcompact's lossless context engine
// (issue 17, docs/RECALL.md): the archived originals of every compaction, in one
// SQLite file holding many sessions (or in memory), searchable with FTS5's trigram
// tokenizer and recoverable byte for byte.
//
// It is its own package so that a program that imports host (or core) alone does not
// link SQLite. A *Store satisfies host.RecallStore: pass it as
// host.ContextEngineOptions.Store with a SessionID and the config
// {"context": {"engine": "lossless"}}.
//
// SQLite is github.com/ncruces/go-sqlite3: SQLite's C source compiled to wasm and
// translated to Go (wasm2go), so no cgo; its build has FTS5 and the trigram
// tokenizer. The schema is the one every runtime (JS, Python, Go) reads and writes.
package recall

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/ext/fts5"

	"github.com/ctxcompact/ctxcompact/core"
)

// SchemaVersion is the value of meta schema_version this package writes and reads.
const SchemaVersion = "1"

// BusyTimeout is how long a write waits for another process's lock on the file.
const BusyTimeout = 5 * time.Second

// Search modes (meta "fts").
const (
	ModeFTS5 = "fts5"
	ModeLike = "like"
)

// SchemaSQL is the store's schema, schema.sql: the statements above its "-- fts5"
// line run on every open; the one below it creates the FTS5 index of a new file
// where SQLite has FTS5 with the trigram tokenizer. Every runtime's store runs this
// same text (the JS store reads the file, the Python store's copy is tested to be it).
//
//go:embed schema.sql
var SchemaSQL string

var schema, ftsSchema = splitSchema(SchemaSQL)

// splitSchema splits the schema at its "-- fts5" line.
func splitSchema(sql string) (base, fts string) {
	base, fts, ok := strings.Cut(sql, "\n-- fts5\n")
	if !ok {
		panic("recall: schema.sql has no -- fts5 line")
	}
	return base + "\n", fts
}

// lockHook, when set (by a test), sees the lock of every file store opened.
var lockHook func(*dirLock)

// Options are the optional parameters of OpenWith.
type Options struct {
	// ForceLike searches with LIKE instead of FTS5 (the fallback of a SQLite
	// without FTS5). A new store is then created without the FTS index; an existing
	// store with one keeps it in sync.
	ForceLike bool
	// LockTimeout is how long an operation waits for the store's lock (the
	// <file>.lock directory, see Store); 0 is BusyTimeout.
	LockTimeout time.Duration
	// ReadOnly opens the store for reading only (Find, Expand, Ranges, Sessions);
	// a write is invalid_state at /path. A file this process cannot write is
	// opened so without it. The lock directory beside the file is still taken.
	ReadOnly bool
}

// Store is a recall store. It is safe for concurrent use: one connection, under a
// mutex. Across processes, every use of a file store takes the directory
// <absolute path>.lock (made with mkdir, removed after): the lock of the Node 20
// WebAssembly driver, which cannot take POSIX locks, and which every runtime's
// store takes, so that processes of different runtimes use one file one at a time.
// The file has a rollback journal, not WAL (that driver cannot share a WAL).
type Store struct {
	mu   sync.Mutex
	conn *sqlite3.Conn
	path string
	// dirLock is the cross-runtime lock (nil in memory).
	dirLock *dirLock
	// hasFTS: ctxc_fts exists (kept in sync on every write); useFTS: search with it.
	hasFTS, useFTS bool
	// window is recentWindow (tests set 0 to search the index at once).
	window int
	// readOnly: opened for reading only (Options.ReadOnly, or a file not writable).
	readOnly bool
}

// Open opens (creating when missing) the store at path; "" or ":memory:" is a
// store in memory.
func Open(path string) (*Store, error) { return OpenWith(path, Options{}) }

// OpenWith is Open with options.
func OpenWith(path string, opts Options) (*Store, error) {
	if path == "" {
		path = ":memory:"
	}
	s := &Store{path: path, window: recentWindow}
	wait := opts.LockTimeout
	if wait <= 0 {
		wait = BusyTimeout
	}
	if path != ":memory:" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("ctxcompact: opening the recall store %s: %w", path, err)
		}
		s.dirLock = newDirLock(abs+".lock", wait)
		if lockHook != nil {
			lockHook(s.dirLock)
		}
	}
	if err := s.takeDir(context.Background()); err != nil {
		return nil, err
	}
	defer s.dropDir()
	s.readOnly = opts.ReadOnly || (path != ":memory:" && notWritable(path))
	var conn *sqlite3.Conn
	var err error
	if s.readOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, &core.Error{Code: core.CodeInvalidState, Path: "/path", Message: fmt.Sprintf(
				"ctxcompact: the recall store %s is to be read only and does not exist: nothing to read (%v)", path, err)}
		}
		conn, err = sqlite3.OpenFlags(path, sqlite3.OPEN_READONLY)
	} else {
		conn, err = sqlite3.Open(path)
	}
	if err != nil {
		return nil, fmt.Errorf("ctxcompact: opening the recall store %s: %w", path, err)
	}
	s.conn = conn
	if err := s.init(opts); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ctxcompact: opening the recall store %s: %w", path, err)
	}
	return s, nil
}

// ErrLocked is the error (wrapped) of an operation that waited longer than the
// lock timeout for the store's lock directory.
var ErrLocked = errors.New("ctxcompact: the recall store's lock is held by another process")

// takeDir takes the cross-runtime lock directory of a file store, waiting up to
// lockWait (or until ctx is done); a lock whose holder is gone is taken over
// (lock.go).
func (s *Store) takeDir(ctx context.Context) error {
	if s.dirLock == nil {
		return nil
	}
	return s.dirLock.take(ctx)
}

func (s *Store) dropDir() {
	if s.dirLock != nil {
		s.dirLock.drop()
	}
}

func (s *Store) init(opts Options) (err error) {
	if err = s.conn.BusyTimeout(BusyTimeout); err != nil {
		return err
	}
	// The version first: a store of another schema version may not take this
	// one's schema (a missing column), and must say which version it is.
	version, err := s.fileVersion()
	if err != nil {
		return err
	}
	if version != "" && version != SchemaVersion {
		return &core.Error{Code: core.CodeInvalidState, Path: "/path", Message: fmt.Sprintf(
			"ctxcompact: the recall store %s has schema version %s; this ctxcompact reads and writes version %s (open it with a ctxcompact of its version)", s.path, version, SchemaVersion)}
	}
	if s.readOnly {
		return s.initReadOnly(version)
	}
	if s.path != ":memory:" {
		// A rollback journal: a connection that kept a WAL open across another
		// runtime's writes (the Node 20 driver turns a WAL file back into a
		// rollback journal) would read and write a stale log.
		if err = s.conn.Exec(`PRAGMA journal_mode = DELETE`); err != nil {
			return err
		}
	}
	tx, err := s.conn.BeginImmediate()
	if err != nil {
		return err
	}
	defer tx.End(&err)
	if err = s.conn.Exec(schema); err != nil {
		return err
	}
	mode, found, err := s.meta("fts")
	if err != nil {
		return err
	}
	if !found {
		mode = ModeLike
		// FTS5 is an extension of this SQLite build, registered per connection;
		// where it (or its trigram tokenizer) is missing the store falls back to LIKE.
		if !opts.ForceLike && fts5.Register(s.conn) == nil && s.conn.Exec(ftsSchema) == nil {
			mode = ModeFTS5
		}
		if err = s.setMeta("schema_version", SchemaVersion); err != nil {
			return err
		}
		if err = s.setMeta("fts", mode); err != nil {
			return err
		}
	}
	if mode == ModeFTS5 && found {
		if err = fts5.Register(s.conn); err != nil {
			return fmt.Errorf("the store has an FTS5 index and this SQLite has no FTS5: %w", err)
		}
	}
	s.hasFTS = mode == ModeFTS5
	s.useFTS = s.hasFTS && !opts.ForceLike
	return nil
}

// fileVersion is the file's meta schema_version, "" for a file without one (new).
func (s *Store) fileVersion() (string, error) {
	st, _, err := s.conn.Prepare(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ctxc_meta'`)
	if err != nil {
		return "", err
	}
	has := st.Step() && st.ColumnInt(0) > 0
	err = st.Err()
	st.Close()
	if err != nil || !has {
		return "", err
	}
	v, _, err := s.meta("schema_version")
	return v, err
}

// initReadOnly opens a store for reading: nothing is created or changed.
func (s *Store) initReadOnly(version string) error {
	if version == "" {
		return &core.Error{Code: core.CodeInvalidState, Path: "/path", Message: fmt.Sprintf(
			"ctxcompact: the recall store %s is read-only and holds no store (no schema_version): nothing to read", s.path)}
	}
	mode, _, err := s.meta("fts")
	if err != nil {
		return err
	}
	if mode == ModeFTS5 {
		if err := fts5.Register(s.conn); err != nil {
			return fmt.Errorf("the store has an FTS5 index and this SQLite has no FTS5: %w", err)
		}
	}
	s.hasFTS = mode == ModeFTS5
	s.useFTS = s.hasFTS
	return nil
}

// writable is nil for a store that can be written, else the error of a write.
func (s *Store) writable() error {
	if !s.readOnly {
		return nil
	}
	return &core.Error{Code: core.CodeInvalidState, Path: "/path", Message: fmt.Sprintf(
		"ctxcompact: the recall store %s is read-only (its file is not writable, or it was opened read-only): it can be searched and expanded, not written", s.path)}
}

func (s *Store) meta(key string) (value string, found bool, err error) {
	st, _, err := s.conn.Prepare(`SELECT value FROM ctxc_meta WHERE key = ?`)
	if err != nil {
		return "", false, err
	}
	defer st.Close()
	st.BindText(1, key)
	if st.Step() {
		return st.ColumnText(0), true, nil
	}
	return "", false, st.Err()
}

func (s *Store) setMeta(key, value string) error {
	st, _, err := s.conn.Prepare(`INSERT INTO ctxc_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`)
	if err != nil {
		return err
	}
	defer st.Close()
	st.BindText(1, key)
	st.BindText(2, value)
	return st.Exec()
}

// Mode is how the store searches: ModeFTS5 or ModeLike.
func (s *Store) Mode() string {
	if s.useFTS {
		return ModeFTS5
	}
	return ModeLike
}

// Close closes the store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

var errClosed = errors.New("ctxcompact: the recall store is closed")

// lock takes the store for one operation: ctx interrupts a long query.
func (s *Store) lock(ctx context.Context) (unlock func(), err error) {
	s.mu.Lock()
	if s.conn == nil {
		s.mu.Unlock()
		return nil, errClosed
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := s.takeDir(ctx); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	old := s.conn.SetInterrupt(ctx)
	return func() { s.conn.SetInterrupt(old); s.dropDir(); s.mu.Unlock() }, nil
}

// NextRangeID is the id the session's next archived range gets: r<k>, k being 1
// + the number of ranges it has.
func (s *Store) NextRangeID(ctx context.Context, session string) (string, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	n, err := s.rangeCount(session)
	if err != nil {
		return "", err
	}
	return "r" + strconv.Itoa(n+1), nil
}

func (s *Store) rangeCount(session string) (int, error) {
	return s.countOf(`SELECT count(*) FROM ctxc_ranges WHERE session = ?`, session)
}

// countOf runs a count(*) query with one parameter, the session.
func (s *Store) countOf(sql, session string) (int, error) {
	st, _, err := s.conn.Prepare(sql)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	st.BindText(1, session)
	if !st.Step() {
		return 0, st.Err()
	}
	return st.ColumnInt(0), nil
}

// Archive stores one compaction's range and rows (the result of the core's
// recall.archive) under session, in one transaction. The range id must be the
// session's next (NextRangeID): another writer that took it first makes this an
// error, and nothing is written. It is Archive with one part.
func (s *Store) ArchiveOne(ctx context.Context, session string, a core.RecallArchive) error {
	return s.Archive(ctx, session, func(yield func(core.RecallArchive, error) bool) { yield(a, nil) })
}

// Archive stores one compaction's range and rows under session, in one
// transaction, as they come in parts (host.RecallStore): the first part holds
// the range, every part rows of it. The range id must be the session's next
// (NextRangeID): another writer that took it first makes this an error, and
// nothing is written; so does an error in parts. The store is held from the
// first part to the commit.
func (s *Store) Archive(ctx context.Context, session string, parts iter.Seq2[core.RecallArchive, error]) (err error) {
	if session == "" {
		return errors.New("ctxcompact: a recall session id must not be empty")
	}
	if err := s.writable(); err != nil {
		return err
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	w := &archiveWriter{s: s, session: session}
	defer w.close()
	for a, perr := range parts {
		if perr != nil {
			err = perr
			break
		}
		if err = w.write(a); err != nil {
			break
		}
	}
	if err == nil && w.tx == nil {
		err = errors.New("ctxcompact: an archive with no parts")
	}
	if w.tx == nil {
		return err
	}
	if err != nil {
		w.tx.Rollback()
		return fmt.Errorf("ctxcompact: archiving %s of session %q: %w", w.id, session, err)
	}
	if archiveHook != nil {
		archiveHook()
	}
	if err = w.tx.Commit(); err != nil {
		return fmt.Errorf("ctxcompact: archiving %s: %w", w.id, err)
	}
	return nil
}

// archiveWriter writes an archive's parts in its transaction.
type archiveWriter struct {
	s       *Store
	session string
	id      string // the range's, from the first part
	tx      *sqlite3.Txn
	ms, fs  *sqlite3.Stmt
}

// write writes a part: the first begins the transaction and writes the range.
func (w *archiveWriter) write(a core.RecallArchive) error {
	s := w.s
	if w.tx == nil {
		if !core.IsRangeID(a.Range.ID) {
			return fmt.Errorf("ctxcompact: %q is not a range id r<k>", a.Range.ID)
		}
		tx, err := s.conn.BeginImmediate()
		if err != nil {
			return fmt.Errorf("ctxcompact: archiving %s: %w", a.Range.ID, err)
		}
		w.tx, w.id = &tx, a.Range.ID
		if err := w.writeRange(a.Range); err != nil {
			return err
		}
	} else if a.Range.ID != "" {
		return fmt.Errorf("part after the first holds a range (%s)", a.Range.ID)
	}
	for _, r := range a.Rows {
		if r.RangeID != w.id {
			return fmt.Errorf("row %s belongs to range %s, not %s", r.ID, r.RangeID, w.id)
		}
		w.ms.BindText(1, w.session)
		w.ms.BindText(2, r.ID)
		w.ms.BindText(3, r.RangeID)
		w.ms.BindInt(4, r.Position)
		w.ms.BindText(5, r.Role)
		w.ms.BindText(6, r.Reason)
		w.ms.BindText(7, r.JSON)
		w.ms.BindText(8, r.Text)
		if err := w.ms.Exec(); err != nil {
			return err
		}
		if w.fs != nil {
			w.fs.BindInt64(1, s.conn.LastInsertRowID())
			w.fs.BindText(2, r.Text)
			if err := w.fs.Exec(); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeRange checks that the range is the session's next, writes it, and
// prepares the rows' statements.
func (w *archiveWriter) writeRange(rg core.RecallRange) error {
	s := w.s
	n, err := s.rangeCount(w.session)
	if err != nil {
		return err
	}
	if want := "r" + strconv.Itoa(n+1); rg.ID != want {
		return &core.Error{Code: core.CodeInvalidState, Path: "/range/id", Message: fmt.Sprintf(
			"ctxcompact: the session's next range is %s, not %s: another compaction of the session archived first (nothing of this one is written; compact again)", want, rg.ID)}
	}
	rs, _, err := s.conn.Prepare(`INSERT INTO ctxc_ranges (session, id, seq, from_index, to_index, summary) VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer rs.Close()
	rs.BindText(1, w.session)
	rs.BindText(2, rg.ID)
	rs.BindInt(3, n+1)
	rs.BindInt(4, rg.FromIndex)
	rs.BindInt(5, rg.ToIndex)
	rs.BindText(6, rg.Summary)
	if err = rs.Exec(); err != nil {
		return err
	}
	if w.ms, _, err = s.conn.Prepare(`INSERT INTO ctxc_messages (session, id, range_id, position, role, reason, json, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
		return err
	}
	if s.hasFTS {
		if w.fs, _, err = s.conn.Prepare(`INSERT INTO ctxc_fts (rowid, text) VALUES (?, ?)`); err != nil {
			return err
		}
	}
	return nil
}

// close finalizes the statements.
func (w *archiveWriter) close() {
	for _, st := range []*sqlite3.Stmt{w.ms, w.fs} {
		if st != nil {
			st.Close()
		}
	}
}

// archiveHook, when set (by a test), runs in Archive's transaction before its commit.
var archiveHook func()

// TotalCap bounds the total of a search: matches are counted up to it (a total of
// TotalCap means that many or more), so a common word does not cost a scan of the
// whole archive.
const TotalCap = 100

// recentWindow is how many of a session's newest rows a search reads first, with
// LIKE alone: a common term is answered from them without the FTS index, whose
// posting lists for common trigrams are long.
const recentWindow = 300

// Find returns the session's rows that match query (every term a case-insensitive
// substring of the row's text), newest first, at most limit of them (limit <= 0:
// all), and how many match, counted up to TotalCap (all when limit <= 0).
func (s *Store) Find(ctx context.Context, session, query string, limit int) (hits []core.RecallHit, total int, err error) {
	q, err := core.BuildRecallQuery(query)
	if err != nil {
		return nil, 0, err
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer unlock()
	want := 0 // rows to fetch; 0: all
	if limit > 0 {
		want = max(limit, TotalCap)
	}
	var likes strings.Builder
	for range q.Like {
		likes.WriteString(` AND text LIKE ? ESCAPE '\'`)
	}
	lim := ""
	if want > 0 {
		lim = " LIMIT " + strconv.Itoa(want)
	}
	const cols = `SELECT id, range_id, position, role, text FROM ctxc_messages WHERE `
	var rows []core.RecallHit
	complete := false
	if want > 0 && s.window > 0 {
		// The newest rows first, by LIKE alone.
		n, err := s.sessionRows(session)
		if err != nil {
			return nil, 0, err
		}
		rows, err = s.query(cols+`rowid IN (SELECT rowid FROM ctxc_messages WHERE session = ? ORDER BY rowid DESC LIMIT `+
			strconv.Itoa(s.window)+`)`+likes.String()+` ORDER BY rowid DESC`+lim, append([]string{session}, q.Like...))
		if err != nil {
			return nil, 0, err
		}
		complete = len(rows) >= want || n <= s.window
	}
	if !complete {
		where, args := "session = ?", []string{session}
		if s.useFTS && q.FTS != "" {
			// +session: look the index's rowids up, not every row of the session.
			where = "+session = ? AND rowid IN (SELECT rowid FROM ctxc_fts WHERE ctxc_fts MATCH ?)"
			args = append(args, q.FTS)
		}
		rows, err = s.query(cols+where+likes.String()+` ORDER BY rowid DESC`+lim, append(args, q.Like...))
		if err != nil {
			return nil, 0, err
		}
	}
	total = len(rows)
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, total, nil
}

func (s *Store) sessionRows(session string) (int, error) {
	return s.countOf(`SELECT count(*) FROM ctxc_messages WHERE session = ?`, session)
}

func (s *Store) query(sql string, args []string) ([]core.RecallHit, error) {
	st, _, err := s.conn.Prepare(sql)
	if err != nil {
		return nil, fmt.Errorf("ctxcompact: searching the recall store: %w", err)
	}
	defer st.Close()
	for i, a := range args {
		st.BindText(i+1, a)
	}
	hits := []core.RecallHit{}
	for st.Step() {
		hits = append(hits, core.RecallHit{ID: st.ColumnText(0), RangeID: st.ColumnText(1), Position: st.ColumnInt(2),
			Role: st.ColumnText(3), Text: st.ColumnText(4)})
	}
	if err := st.Err(); err != nil {
		return nil, fmt.Errorf("ctxcompact: searching the recall store: %w", err)
	}
	return hits, nil
}

// Message is one archived row.
type Message struct {
	ID       string
	RangeID  string
	Position int
	Role     string
	Reason   string
	// JSON is the original message, byte for byte.
	JSON string
}

// Expand returns the rows behind id in the session: for a range id (r3) the
// range's archived messages (not its summary) in input order, for any other id
// the row with that id. An unknown id has none.
func (s *Store) Expand(ctx context.Context, session, id string) ([]Message, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	sql := `SELECT id, range_id, position, role, reason, json FROM ctxc_messages WHERE session = ? AND id = ?`
	if core.IsRangeID(id) {
		sql = `SELECT id, range_id, position, role, reason, json FROM ctxc_messages WHERE session = ? AND range_id = ? AND reason != 'summary' ORDER BY position, rowid`
	}
	st, _, err := s.conn.Prepare(sql)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	st.BindText(1, session)
	st.BindText(2, id)
	var out []Message
	for st.Step() {
		out = append(out, Message{ID: st.ColumnText(0), RangeID: st.ColumnText(1), Position: st.ColumnInt(2),
			Role: st.ColumnText(3), Reason: st.ColumnText(4), JSON: st.ColumnText(5)})
	}
	if err := st.Err(); err != nil {
		return nil, fmt.Errorf("ctxcompact: reading the recall store: %w", err)
	}
	return out, nil
}

// Messages is Expand's JSON texts (host.RecallStore).
func (s *Store) Messages(ctx context.Context, session, id string) ([]string, error) {
	return JSONOf(s.Expand(ctx, session, id))
}

// JSONOf is the original JSON of messages, in order: a store's Messages from its
// Expand (err is passed on).
func JSONOf(ms []Message, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.JSON
	}
	return out, nil
}

// Range is one archived range of a session.
type Range struct {
	ID        string
	Seq       int
	FromIndex int
	ToIndex   int
	Summary   string
}

// Ranges lists the session's ranges in order.
func (s *Store) Ranges(ctx context.Context, session string) ([]Range, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, _, err := s.conn.Prepare(`SELECT id, seq, from_index, to_index, summary FROM ctxc_ranges WHERE session = ? ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	st.BindText(1, session)
	var out []Range
	for st.Step() {
		out = append(out, Range{ID: st.ColumnText(0), Seq: st.ColumnInt(1), FromIndex: st.ColumnInt(2), ToIndex: st.ColumnInt(3), Summary: st.ColumnText(4)})
	}
	return out, st.Err()
}

// Sessions lists the sessions in the store, sorted.
func (s *Store) Sessions(ctx context.Context) ([]string, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, _, err := s.conn.Prepare(`SELECT session FROM ctxc_ranges UNION SELECT session FROM ctxc_messages ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	out := []string{}
	for st.Step() {
		out = append(out, st.ColumnText(0))
	}
	return out, st.Err()
}

// DeleteSession removes a session's ranges and messages (and their index
// entries), in one transaction.
func (s *Store) DeleteSession(ctx context.Context, session string) (err error) {
	if err := s.writable(); err != nil {
		return err
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	tx, err := s.conn.BeginImmediate()
	if err != nil {
		return err
	}
	defer tx.End(&err)
	if s.hasFTS {
		st, _, err := s.conn.Prepare(`INSERT INTO ctxc_fts (ctxc_fts, rowid, text) SELECT 'delete', rowid, text FROM ctxc_messages WHERE session = ?`)
		if err != nil {
			return err
		}
		defer st.Close()
		st.BindText(1, session)
		if err = st.Exec(); err != nil {
			return err
		}
	}
	for _, sql := range []string{`DELETE FROM ctxc_messages WHERE session = ?`, `DELETE FROM ctxc_ranges WHERE session = ?`} {
		st, _, err := s.conn.Prepare(sql)
		if err != nil {
			return err
		}
		st.BindText(1, session)
		err = st.Exec()
		st.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// SearchResult is context_search's answer for query in session (SearchResult).
func (s *Store) SearchResult(ctx context.Context, session, query string, limit int) (string, error) {
	return SearchResult(ctx, s, session, query, limit)
}

// ExpandResult is context_expand's answer for id in session (ExpandResult).
func (s *Store) ExpandResult(ctx context.Context, session, id string, maxTokens int) (string, error) {
	return ExpandResult(ctx, s, session, id, maxTokens)
}

// RangeRows returns every row of one range, its summary row too, in archive order.
func (s *Store) RangeRows(ctx context.Context, session, rangeID string) ([]core.RecallRow, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, _, err := s.conn.Prepare(`SELECT id, range_id, position, role, reason, json, text FROM ctxc_messages WHERE session = ? AND range_id = ? ORDER BY rowid`)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	st.BindText(1, session)
	st.BindText(2, rangeID)
	out := []core.RecallRow{}
	for st.Step() {
		out = append(out, core.RecallRow{ID: st.ColumnText(0), RangeID: st.ColumnText(1), Position: st.ColumnInt(2),
			Role: st.ColumnText(3), Reason: st.ColumnText(4), JSON: st.ColumnText(5), Text: st.ColumnText(6)})
	}
	if err := st.Err(); err != nil {
		return nil, fmt.Errorf("ctxcompact: reading the recall store: %w", err)
	}
	return out, nil
}
