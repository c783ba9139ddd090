"""RecallStore: the archive of lossless recall (issue 17), in SQLite.

The schema is the one every runtime reads and writes (SPEC-recall, README "Lossless
recall"): one file holds many sessions; ``ctxc_ranges`` has one row per compaction
(``r<k>``), ``ctxc_messages`` one row per archived message (``r<k>.<index>``) plus the
range's summary (``r<k>.summary``), with the original message JSON as it was given;
``ctxc_fts`` is an FTS5 index with the trigram tokenizer over ``ctxc_messages.text``
where the SQLite build has it, else search reads ``text LIKE ? ESCAPE '\\'`` per term.

The rows and the query plans come from the core: a ContextEngine's session.run
asks for them as effects (``archive``, ``search`` with ``recall.query``'s plan,
``expand``) and formats the tool results itself. ``plan_query`` here is the same
rule as ``recall.query``; the store's own ``search`` / ``expand`` format their
results with the core's ``recall.search_result`` / ``recall.expand_result``. This
module is storage only and never loads the WebAssembly module itself unless those
are called without a compactor.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import sqlite3
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union, cast

from ._check import check_int, check_opt_int
from ._errors import CompactError, OptionError
from ._types import (
    ArchiveRows,
    ExpandResult,
    RecallMessageRow,
    RecallQuery,
    RecallRange,
    SearchHit,
    SearchResult,
    StoredMessage,
)

if TYPE_CHECKING:  # pragma: no cover
    import os

    from ._compactor import Compactor
    from ._recall_postgres import PostgresRecallStore

__all__ = ["RecallStore", "plan_query", "split_terms", "fts5_trigram_available", "SCHEMA_VERSION", "SCHEMA_SQL", "BUSY_TIMEOUT"]

#: ctxc_meta 'schema_version' of the files this module writes and reads.
SCHEMA_VERSION = "1"
#: Seconds a write waits for another process's lock (SQLite's busy timeout).
BUSY_TIMEOUT = 5.0
#: FTS5 with the trigram tokenizer matches substrings of at least 3 characters.
_MIN_FTS_TERM = 3

#: The schema, a copy of recall/schema.sql of the repository (the one text every
#: runtime's store runs; tests/test_recall_stores.py checks the copy is exact): the
#: part above its "-- fts5" line runs on every open, the part below creates the
#: index of a new file.
SCHEMA_SQL = """-- The recall store's schema (docs/RECALL.md): the one file of it. The Go store embeds
-- it, the JS store reads it from its package, the Python store's copy is tested to be
-- it byte for byte. Each runs the part above the fts5 line on every open, and the
-- part below when it creates a file where its SQLite has FTS5 with the trigram
-- tokenizer.
CREATE TABLE IF NOT EXISTS ctxc_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ctxc_ranges (
  session TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL,
  from_index INTEGER NOT NULL, to_index INTEGER NOT NULL,
  summary TEXT NOT NULL,
  PRIMARY KEY (session, id));
CREATE TABLE IF NOT EXISTS ctxc_messages (
  rowid INTEGER PRIMARY KEY,
  session TEXT NOT NULL, id TEXT NOT NULL, range_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  role TEXT NOT NULL, reason TEXT NOT NULL,
  json TEXT NOT NULL,
  text TEXT NOT NULL,
  UNIQUE (session, id));
CREATE INDEX IF NOT EXISTS ctxc_messages_session ON ctxc_messages (session);
-- fts5
CREATE VIRTUAL TABLE IF NOT EXISTS ctxc_fts USING fts5(
  text, content='ctxc_messages', content_rowid='rowid', tokenize='trigram');
"""
_SCHEMA, _FTS_TABLE = SCHEMA_SQL.split("\n-- fts5\n")

QueryArg = Union[str, Sequence[str], RecallQuery, Dict[str, Any]]
#: Either store: the engine, find_rows and the tool results take both.
AnyRecallStore = Union["RecallStore", "PostgresRecallStore"]


def fts5_trigram_available(conn: Optional[sqlite3.Connection] = None) -> bool:
    """Whether this SQLite build has FTS5 with the trigram tokenizer (3.34+ built
    with FTS5): a probe table in the temp schema, dropped again."""
    own = conn is None
    c = sqlite3.connect(":memory:") if conn is None else conn
    try:
        c.execute("CREATE VIRTUAL TABLE temp.ctxc_probe USING fts5(x, tokenize='trigram')")
        c.execute("DROP TABLE temp.ctxc_probe")
        return True
    except sqlite3.Error:
        return False
    finally:
        if own:
            c.close()


def _like_pattern(term: str) -> str:
    r"""%term% with \, % and _ escaped (for LIKE ... ESCAPE '\')."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _fts_phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


#: What separates terms (the core's isQuerySpace): ASCII and Unicode spaces.
_SPACES = frozenset(
    " \t\n\r\f\v\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(chr(c) for c in range(0x2000, 0x200B))
)


def _ascii_lower(s: str) -> str:
    return s.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def split_terms(query: str) -> List[str]:
    """The terms of a query, as the core's ``recall.query`` splits it: runs of
    non-space characters, a double-quoted "..." phrase is one term (trimmed; an
    unclosed quote runs to the end), empty terms dropped, a term repeated (ASCII
    case-insensitively: it matches the same rows) kept once, as first written."""
    terms: List[str] = []
    seen = set()

    def add(t: str) -> None:
        k = _ascii_lower(t)
        if t and k not in seen:
            seen.add(k)
            terms.append(t)

    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch in _SPACES:
            i += 1
        elif ch == '"':
            j = query.find('"', i + 1)
            if j < 0:
                add(query[i + 1 :].strip("".join(_SPACES)))
                i = n
            else:
                add(query[i + 1 : j].strip("".join(_SPACES)))
                i = j + 1
        else:
            j = i
            while j < n and query[j] not in _SPACES and query[j] != '"':
                j += 1
            add(query[i:j])
            i = j
    return terms


#: The bounds of a search query, the core's (``recall.query``, ``recall.check_call``).
MAX_QUERY_CHARS = 4000
MAX_QUERY_TERMS = 32
MAX_TERM_CHARS = 1000


def _check_terms(n: int, terms: Sequence[str]) -> None:
    if n > MAX_QUERY_TERMS:
        raise CompactError(
            "invalid_request",
            f"query has {n} terms, at most {MAX_QUERY_TERMS} (every term must match;"
            ' "quote" a phrase to search for it as one term)',
            "/query",
        )
    for t in terms:
        if "\0" in t:
            raise CompactError("invalid_request", "query must not contain a NUL character (U+0000)", "/query")
        if len(t) > MAX_TERM_CHARS:
            raise CompactError(
                "invalid_request",
                f"a term of the query is too long: {len(t)} characters, at most {MAX_TERM_CHARS}",
                "/query",
            )


def plan_query(query: Union[str, Sequence[str]]) -> RecallQuery:
    """The query plan of the core's ``recall.query``, computed here: the terms, the
    FTS5 MATCH expression (every term of at least 3 characters quoted as a phrase,
    joined with AND; "" when there is none) and a LIKE pattern per term. An empty
    query, or one past the core's bounds (``MAX_QUERY_CHARS``, ``MAX_QUERY_TERMS``,
    ``MAX_TERM_CHARS``, a NUL), is ``invalid_request`` at ``/query``."""
    if isinstance(query, str):
        if len(query) > MAX_QUERY_CHARS:
            raise CompactError(
                "invalid_request", f"query is too long: {len(query)} characters, at most {MAX_QUERY_CHARS}", "/query"
            )
        if "\0" in query:
            raise CompactError("invalid_request", "query must not contain a NUL character (U+0000)", "/query")
    terms = split_terms(query) if isinstance(query, str) else [t for t in query if t]
    if not terms:
        raise CompactError("invalid_request", "query has no words to search for", "/query")
    _check_terms(len(terms), terms)
    fts = " AND ".join(_fts_phrase(t) for t in terms if len(t) >= _MIN_FTS_TERM)
    return {"terms": terms, "fts": fts, "like": [_like_pattern(t) for t in terms]}


def _as_plan(query: QueryArg) -> RecallQuery:
    if isinstance(query, dict):
        like = query.get("like")
        if not isinstance(like, list) or not like or not all(isinstance(p, str) for p in like):
            raise OptionError("a query plan needs a non-empty list of LIKE patterns", "/query/like")
        fts = query.get("fts") or ""
        if not isinstance(fts, str):
            raise OptionError("a query plan's fts must be a string", "/query/fts")
        # A plan made by hand is held to the core's bounds too: the store never
        # runs an unbounded query.
        _check_terms(len(like), [])
        if any("\0" in p or len(p) > 4 * MAX_QUERY_CHARS for p in [fts, *like]):
            raise CompactError(
                "invalid_request",
                "a query plan's fts and like must be bounded strings without NUL (recall.query's result)",
                "/query",
            )
        return {"terms": list(query.get("terms") or []), "fts": fts, "like": list(like)}
    if isinstance(query, (str, list, tuple)):
        return plan_query(query)
    raise OptionError(f"query must be a str, a list of terms or a plan, not {type(query).__name__}", "/query")


def _check_session(session: Any) -> str:
    if not isinstance(session, str) or not session:
        raise OptionError("session must be a non-empty str", "/session")
    return session


#: A lock older than this (seconds) is taken over whatever its holder: no runtime
#: holds it for more than one statement or transaction.
STALE_AFTER = 30.0


class _LockClock:
    """The clock of every wait for a store's lock (tests replace ``now`` and ``sleep``)."""

    now = staticmethod(time.time)
    sleep = staticmethod(time.sleep)


#: Test hook: called in a store's write transaction, before its COMMIT.
_before_commit: Optional[Any] = None


def _process_runs(pid: int) -> bool:
    """Whether a process with pid runs on this host (True when it cannot be told)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True
    return True


class _DirLock:
    """The lock every runtime takes around its use of a store file: a directory
    ``<absolute path>.lock``, made with mkdir (atomic), with a file ``owner`` in it
    naming its holder (``{pid, host, runtime, at}``), removed after. It is the lock
    of the Node 20 WebAssembly driver's file system layer, which cannot take the
    POSIX locks SQLite takes elsewhere; so Python, Go and node:sqlite take it too,
    and processes of different runtimes never use one file at the same time
    (docs/RECALL.md "Concurrency"). Re-entrant within the store (a depth count,
    under the store's thread lock). A lock whose holder on this host no longer
    runs, or older than ``STALE_AFTER``, is taken over; a live holder that stays
    longer than ``timeout`` seconds makes the operation fail with a clear error,
    never proceed."""

    def __init__(self, path: str, timeout: float) -> None:
        self.dir = os.path.abspath(path) + ".lock"
        self.timeout = timeout
        self.depth = 0

    def acquire(self) -> None:
        if self.depth:
            self.depth += 1
            return
        clock = _LockClock
        deadline = clock.now() + self.timeout
        delay = 0.001
        while True:
            try:
                os.mkdir(self.dir)
                break
            except FileExistsError:
                if self._break_stale():
                    continue
                left = deadline - clock.now()
                if left <= 0:
                    raise CompactError(
                        "internal",
                        f"recall store: {self.dir} is held by another process for more than {self.timeout:g} s"
                        f" (holder: {self._describe()}; the store's lock, taken by every runtime around each use of the file; a holder on"
                        f" this host that is gone, or a lock older than {STALE_AFTER:g} s, is taken over;"
                        " else remove it when no process uses the store)",
                        "/path",
                    ) from None
                clock.sleep(min(delay, left))
                delay = min(delay * 2, 0.02)
            except OSError as e:
                raise CompactError("internal", f"recall store: cannot take the lock {self.dir}: {e}", "/path") from e
        self.depth = 1
        try:
            with open(os.path.join(self.dir, "owner"), "w") as f:
                f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "runtime": "python",
                                    "at": int(clock.now() * 1000)}))
        except OSError:
            pass  # a lock without its owner file is still a lock, taken over by its age

    def release(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            try:
                os.unlink(os.path.join(self.dir, "owner"))
            except OSError:
                pass
            try:
                os.rmdir(self.dir)
            except FileNotFoundError:
                pass

    def _owner(self) -> Optional[Dict[str, Any]]:
        try:
            with open(os.path.join(self.dir, "owner")) as f:
                o = json.loads(f.read())
        except (OSError, ValueError):
            return None
        pid = o.get("pid") if isinstance(o, dict) else None
        return o if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None

    def _stale(self) -> bool:
        """The holder is gone: an owner on this host whose pid does not run, or a
        lock older than STALE_AFTER (by its owner's time, else the directory's)."""
        now = _LockClock.now()
        o = self._owner()
        if o is not None:
            if o.get("host") == socket.gethostname() and not _process_runs(int(o["pid"])):
                return True
            at = o.get("at")
            return isinstance(at, (int, float)) and now - at / 1000 > STALE_AFTER
        try:
            return now - os.stat(self.dir).st_mtime > STALE_AFTER
        except OSError:
            return False

    def _break_stale(self) -> bool:
        """Remove a stale lock, under the breaker ``<lock>.break`` (so two waiters
        never both remove one, the second a fresh lock of a third process)."""
        if not self._stale():
            return False
        brk = self.dir + ".break"
        try:
            os.mkdir(brk)
        except OSError:
            try:
                if _LockClock.now() - os.stat(brk).st_mtime > STALE_AFTER:
                    os.rmdir(brk)  # left by a process that died breaking
            except OSError:
                pass
            return False
        try:
            if not self._stale():
                return False  # released and taken again meanwhile
            try:
                os.unlink(os.path.join(self.dir, "owner"))
            except OSError:
                pass
            os.rmdir(self.dir)
            return True
        except OSError:
            return False
        finally:
            try:
                os.rmdir(brk)
            except OSError:
                pass

    def _describe(self) -> str:
        o = self._owner()
        if o is None:
            return "a process that recorded no owner (node-sqlite3-wasm's own lock)"
        return f"pid {o['pid']} on {o.get('host')} ({o.get('runtime')})"


#: How far a search counts its ``total`` by default, the same in every runtime's
#: store (docs/RECALL.md): the answers are then the same text everywhere.
TOTAL_CAP = 100


class _ToolAnswers:
    """The agent's tools over a store (``RecallStore``, ``PostgresRecallStore``): the
    core plans the queries and formats the answers; the store gives ``messages``,
    its rows, and the compactor it was given (or one it makes on first use)."""

    _lock: "threading.RLock"
    _compactor: Optional["Compactor"]
    _owns_compactor: bool

    def messages(self, session: str, id: str) -> List[StoredMessage]:  # pragma: no cover - each store's
        raise NotImplementedError

    def expand_rows(self, session: str, id: str) -> List[str]:
        """The original message JSON behind an id, as stored (see ``messages``)."""
        return [r["json"] for r in self.messages(session, id)]

    # -- the tool results (formatted by the core) ----------------------------------------

    def _core(self) -> "Compactor":
        with self._lock:
            if self._compactor is None:
                from ._compactor import Compactor

                self._compactor = Compactor()
                self._owns_compactor = True
            return self._compactor

    def search(self, session: str, query: str, limit: int = 10) -> SearchResult:
        """``context_search`` over a session: the core plans the query
        (``recall.query``) and formats the hits (``recall.search_result``)."""
        return cast(SearchResult, json.loads(self.search_json(session, query, limit)))

    def search_json(self, session: str, query: str, limit: int = 10) -> str:
        """``search`` as the tool's JSON string."""
        return search_result(self._core(), cast("AnyRecallStore", self), session, query, limit)

    def expand(self, session: str, id: str, max_tokens: Optional[int] = None) -> ExpandResult:
        """``context_expand`` over a session: the original messages behind a range or
        message id, cut to ``max_tokens`` by the core (``recall.expand_result``); an
        unknown id gives ``{"error": ...}``."""
        return cast(ExpandResult, json.loads(self.expand_json(session, id, max_tokens)))

    def expand_json(self, session: str, id: str, max_tokens: Optional[int] = None) -> str:
        """``expand`` as the tool's JSON string. The stored message JSON goes to the
        core as it is (spliced into the request, never re-encoded)."""
        if not isinstance(id, str):
            raise OptionError(f"id must be a str, not {type(id).__name__}", "/id")
        max_tokens = check_opt_int("max_tokens", max_tokens)
        return expand_result(self._core(), id, self.expand_rows(session, id), max_tokens)


class RecallStore(_ToolAnswers):
    """An SQLite archive of compacted conversations, many sessions per file.

    ``RecallStore(path=None, *, fts=None, compactor=None, count_limit=100,
    timeout=5.0, read_only=False)``: ``path`` is a file (created when missing; a
    rollback journal; every use of the file takes the ``<path>.lock`` directory every
    runtime takes, waiting up to ``timeout`` seconds, so processes of any runtime use
    the file one at a time; a lock whose holder is gone is taken over) or None for a
    store in memory. ``read_only`` (or a file this process cannot write) opens it for
    reading: searches and expands; a write is ``invalid_state`` at ``/path``.
    ``fts``: None uses FTS5 with the trigram tokenizer when this SQLite has it (a new
    file records ``fts5`` or ``like`` in ``ctxc_meta`` and keeps it); ``"like"``
    forces the LIKE search (a new file is created without the index; an existing
    index is still kept in sync). Both give the same hits in the same order.
    ``compactor`` (a Compactor) formats ``search`` and ``expand`` results; without it
    one is made on first use and closed with the store. ``count_limit`` (default
    100, as the Go and JS stores count, so the three answer a search with the same
    text; None: exact) bounds the work of a search's ``total``: matches are counted up
    to that many, so ``total == count_limit`` means "at least"; counting every match of a
    common word re-reads every matching text (about 0.15-0.2 s for 11,000 matches in
    a 100 MB archive, bench/recall.py), the first hits alone take a millisecond.

    Safe to share between threads: one connection, guarded by a lock. Use it as a
    context manager or call ``close()``.
    """

    def __init__(
        self,
        path: Union[None, str, "os.PathLike[str]"] = None,
        *,
        fts: Optional[str] = None,
        compactor: Optional["Compactor"] = None,
        count_limit: Optional[int] = TOTAL_CAP,
        timeout: float = BUSY_TIMEOUT,
        read_only: bool = False,
    ) -> None:
        if fts not in (None, "fts5", "like"):
            raise OptionError(f'fts must be None, "fts5" or "like", not {fts!r}', "/fts")
        count_limit = check_opt_int("count_limit", count_limit)
        if count_limit is not None and count_limit < 1:
            raise OptionError("count_limit must be at least 1", "/count_limit")
        #: totals are counted up to this many matches (None: all).
        self.count_limit = count_limit
        self._lock = threading.RLock()
        self._compactor = compactor
        self._owns_compactor = False
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
            raise OptionError("timeout must be a number of seconds, at least 0", "/timeout")
        if not isinstance(read_only, bool):
            raise OptionError("read_only must be a bool", "/read_only")
        self.path: Optional[str] = None if path is None else str(path)
        #: opened for reading only (``read_only=True``, or a file this process cannot
        #: write): searched and expanded; a write is ``invalid_state`` at ``/path``.
        self.read_only = self.path is not None and (
            read_only or (os.path.exists(self.path) and not os.access(self.path, os.W_OK))
        )
        self._dirlock = None if path is None else _DirLock(str(path), float(timeout))
        self._conn: Optional[sqlite3.Connection] = None
        try:
            if self.path is None:
                conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            elif self.read_only:
                if not os.path.exists(self.path):
                    raise CompactError(
                        "invalid_state", f"the recall store {self.path} is to be read only and does not exist: nothing to read",
                        "/path",
                    )
                conn = sqlite3.connect(
                    pathlib.Path(os.path.abspath(self.path)).as_uri() + "?mode=ro", uri=True,
                    timeout=float(timeout), isolation_level=None, check_same_thread=False,
                )
            else:
                conn = sqlite3.connect(self.path, timeout=float(timeout), isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise _db_error(f"cannot open {self.path}", e) from e
        self._conn = conn
        try:
            with self._guard():
                self._open(conn, fts, float(timeout))
        except BaseException:
            conn.close()
            self._conn = None
            raise

    def _open(self, conn: sqlite3.Connection, want: Optional[str], timeout: float) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        # The version first: a store of another schema version may not take this
        # one's schema (a missing column), and must say which version it is.
        (has_meta,) = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ctxc_meta'"
        ).fetchone()
        row = conn.execute("SELECT value FROM ctxc_meta WHERE key = 'schema_version'").fetchone() if has_meta else None
        if row is not None and row[0] != SCHEMA_VERSION:
            raise CompactError(
                "invalid_state",
                f"the recall store {self.path} has schema version {row[0]}; this ctxcompact reads and writes"
                f" version {SCHEMA_VERSION} (open it with a ctxcompact of its version)",
                "/path",
            )
        if self.read_only:
            if row is None:
                raise CompactError(
                    "invalid_state",
                    f"the recall store {self.path} is read-only and holds no store (no schema_version): nothing to read",
                    "/path",
                )
            mode_row = conn.execute("SELECT value FROM ctxc_meta WHERE key = 'fts'").fetchone()
            mode = mode_row[0] if mode_row else "like"
            have = fts5_trigram_available(conn)
            self.file_fts: str = mode
            self.fts: str = "fts5" if mode == "fts5" and have and want != "like" else "like"
            self._writable = False
            return
        if self.path is not None:
            # A rollback journal, not WAL: the Node 20 driver cannot share a WAL
            # (no shared memory), and a connection that kept a WAL open across
            # another runtime's writes would read and write a stale log.
            conn.execute("PRAGMA journal_mode = DELETE")
        have = fts5_trigram_available(conn)
        if want == "fts5" and not have:
            raise CompactError("invalid_request", "this SQLite build has no FTS5 trigram tokenizer", "/fts")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            meta = dict(conn.execute("SELECT key, value FROM ctxc_meta").fetchall())
            version = meta.get("schema_version")
            if version is None:
                conn.execute("INSERT INTO ctxc_meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
            elif version != SCHEMA_VERSION:
                raise CompactError(
                    "invalid_state",
                    f"store {self.path!r} has schema_version {version}, this package reads {SCHEMA_VERSION}",
                    "/path",
                )
            mode = meta.get("fts")
            if mode is None:
                mode = "fts5" if have and want != "like" else "like"
                if mode == "fts5":
                    conn.execute(_FTS_TABLE)
                conn.execute("INSERT INTO ctxc_meta (key, value) VALUES ('fts', ?)", (mode,))
            elif mode not in ("fts5", "like"):
                raise CompactError("invalid_state", f"store has an unknown fts mode {mode!r}", "/path")
            elif mode == "like" and want == "fts5":
                raise CompactError("invalid_request", "this store was made without an FTS5 index (its fts is like)", "/fts")
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        #: the file's index mode ("fts5": ctxc_fts exists and is kept in sync).
        self.file_fts = mode
        #: how searches run: "fts5" (MATCH, then LIKE per term) or "like".
        self.fts = "fts5" if mode == "fts5" and have and want != "like" else "like"
        # A file indexed by a build with FTS5 opened by one without: the index
        # cannot be kept in sync, so writes are refused (searches use LIKE).
        self._writable = mode == "like" or have

    # -- plumbing ------------------------------------------------------------------------

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """The store for one operation: the thread lock, then (file stores) the
        cross-runtime lock directory. An sqlite3 error in it is a CompactError
        ``internal`` naming the store, with the sqlite3 error as its cause."""
        with self._lock:
            if self._dirlock is not None:
                self._dirlock.acquire()
            try:
                yield
            except sqlite3.Error as e:
                raise _db_error(f"store {self.path or ':memory:'}", e) from e
            finally:
                if self._dirlock is not None:
                    self._dirlock.release()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Several reads as one: one read transaction (one state of the file) under
        one take of the store's locks (the lock directory is a mkdir and an rmdir,
        about 3 ms on a busy ext4 disk). ``search_result`` reads its hits and their
        count this way."""
        with self._guard():
            conn = self._c()
            own = not conn.in_transaction
            if own:
                conn.execute("BEGIN")
            try:
                yield
            finally:
                if own and conn.in_transaction:
                    conn.execute("COMMIT")

    def _c(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            raise CompactError("invalid_state", "the RecallStore is closed")
        return conn

    def _write(self) -> sqlite3.Connection:
        conn = self._c()
        if self.read_only:
            raise CompactError(
                "invalid_state",
                f"the recall store {self.path} is read-only (its file is not writable, or it was opened with"
                " read_only=True): it can be searched and expanded, not written",
                "/path",
            )
        if not self._writable:
            raise CompactError(
                "invalid_state",
                "this store has an FTS5 index and this SQLite build has no FTS5: it can be read, not written",
            )
        return conn

    def close(self) -> None:
        """Close the connection (and the compactor the store made); idempotent."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._owns_compactor and self._compactor is not None:
                self._compactor.close()
                self._compactor = None
                self._owns_compactor = False

    def __enter__(self) -> "RecallStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else self.fts
        return f"RecallStore({self.path!r}, {state})"

    # -- writes --------------------------------------------------------------------------

    def next_range_id(self, session: str) -> str:
        """``r<k>``: k is 1 + the number of ranges the session has."""
        session = _check_session(session)
        with self._guard():
            (n,) = self._c().execute("SELECT COUNT(*) FROM ctxc_ranges WHERE session = ?", (session,)).fetchone()
        return f"r{int(n) + 1}"

    def archive(
        self, session: str, parts: Union[ArchiveRows, Dict[str, Any], Iterable[Dict[str, Any]]]
    ) -> RecallRange:
        """Insert one compaction's archive in one transaction: ``{"range": {...},
        "rows": [...]}`` (the core's ``recall.archive`` result: one part), or an
        iterable of parts as a lossless compaction's archive effects bring them
        (docs/SESSION.md "An archive in parts"): the first with the range, the
        later ones rows only, every row of the range. Each part is written as it
        comes (a ContextEngine's iterable runs the core's step for the next one), so
        no more than one part's rows are held at once; the store is held from the
        first part to the commit. Nothing is written unless every part is: a
        malformed part (``invalid_request`` at ``/rows`` or ``/range``), an
        exception the iterable raises (raised as it is), or a range id the session
        has already (``invalid_state`` at ``/range/id``) rolls it all back."""
        session = _check_session(session)
        checked: Iterator[Tuple[Tuple[str, int, int, str], List[Tuple[Any, ...]]]]
        if isinstance(parts, dict):
            checked = iter((_archive_part(parts, None),))  # checked before the store is taken
        elif isinstance(parts, (str, bytes, bytearray)) or not hasattr(parts, "__iter__"):
            raise OptionError('parts must be the recall.archive result {"range": {...}, "rows": [...]}'
                              f" or an iterable of archive parts, not {type(parts).__name__}", "/rows")
        else:
            checked = _archive_parts(iter(parts))
        range_row: Optional[Tuple[str, str, int, int, str]] = None
        with self._guard():
            conn = self._write()
            try:
                for rng, msg_rows in checked:
                    if range_row is None:
                        range_row = (session,) + rng
                        self._begin_range(conn, session, range_row)
                    self._insert_rows(conn, session, msg_rows)
                if range_row is None:
                    raise OptionError("an archive with no parts", "/rows")
                if _before_commit is not None:
                    _before_commit()
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
        return {"id": range_row[1], "from_index": range_row[2], "to_index": range_row[3], "summary": range_row[4]}

    def _begin_range(self, conn: sqlite3.Connection, session: str, range_row: Tuple[str, str, int, int, str]) -> None:
        """Begin an archive's transaction and insert its range, the session's next."""
        conn.execute("BEGIN IMMEDIATE")
        (seq,) = conn.execute(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM ctxc_ranges WHERE session = ?", (session,)
        ).fetchone()
        try:
            conn.execute(
                "INSERT INTO ctxc_ranges (session, id, seq, from_index, to_index, summary)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (range_row[0], range_row[1], seq) + range_row[2:],
            )
        except sqlite3.IntegrityError as e:
            raise CompactError(
                "invalid_state", f"session {session!r} already has a range {range_row[1]!r}", "/range/id"
            ) from e

    def _insert_rows(self, conn: sqlite3.Connection, session: str, msg_rows: List[Tuple[Any, ...]]) -> None:
        """Insert an archive part's message rows (and their index entries)."""
        index = self.file_fts == "fts5"
        for row in msg_rows:
            try:
                cur = conn.execute(
                    "INSERT INTO ctxc_messages (session, id, range_id, position, role, reason, json, text)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (session,) + row,
                )
            except sqlite3.IntegrityError as e:
                raise CompactError(
                    "invalid_state", f"session {session!r} already has a message {row[0]!r}", "/rows"
                ) from e
            if index:
                conn.execute("INSERT INTO ctxc_fts (rowid, text) VALUES (?, ?)", (cur.lastrowid, row[6]))

    def delete_session(self, session: str) -> int:
        """Remove a session's ranges and messages (and their index entries); returns
        the number of message rows removed."""
        session = _check_session(session)
        with self._guard():
            conn = self._write()
            conn.execute("BEGIN IMMEDIATE")
            try:
                if self.file_fts == "fts5":
                    conn.execute(
                        "INSERT INTO ctxc_fts (ctxc_fts, rowid, text)"
                        " SELECT 'delete', rowid, text FROM ctxc_messages WHERE session = ?",
                        (session,),
                    )
                n = conn.execute("DELETE FROM ctxc_messages WHERE session = ?", (session,)).rowcount
                conn.execute("DELETE FROM ctxc_ranges WHERE session = ?", (session,))
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
        return int(n)

    # -- reads ---------------------------------------------------------------------------

    def sessions(self) -> List[str]:
        """The sessions with anything archived, sorted."""
        with self._guard():
            rows = self._c().execute(
                "SELECT session FROM ctxc_ranges UNION SELECT session FROM ctxc_messages ORDER BY 1"
            ).fetchall()
        return [r[0] for r in rows]

    def ranges(self, session: str) -> List[RecallRange]:
        """The session's ranges, oldest first."""
        session = _check_session(session)
        with self._guard():
            rows = self._c().execute(
                "SELECT id, from_index, to_index, summary FROM ctxc_ranges WHERE session = ? ORDER BY seq",
                (session,),
            ).fetchall()
        return [{"id": r[0], "from_index": r[1], "to_index": r[2], "summary": r[3]} for r in rows]

    def search_rows(self, session: str, query: QueryArg, limit: Optional[int] = None) -> List[SearchHit]:
        """The session's archived rows (messages and summaries) where every term of
        the query is a case-insensitive substring of the searchable text, newest
        first (the hits ``recall.search_result`` takes). ``query`` is a str (split
        as ``recall.query`` does), a list of terms or a ``recall.query`` plan.
        ``limit`` None: every hit."""
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise OptionError("limit must be a non-negative int or None", "/limit")
        source, where, args = self._where(session, query)
        order = "ctxc_fts.rowid" if source.startswith("ctxc_fts") else "m.rowid"
        sql = f"SELECT m.id, m.range_id, m.position, m.role, m.text FROM {source} WHERE {where} ORDER BY {order} DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        with self._guard():
            rows = self._c().execute(sql, args).fetchall()
        return [{"id": r[0], "range_id": r[1], "position": r[2], "role": r[3], "text": r[4]} for r in rows]

    def count_rows(self, session: str, query: QueryArg, limit: Optional[int] = None) -> int:
        """How many rows ``search_rows`` would return without a limit (at most
        ``limit`` of them when it is given: the count stops there)."""
        limit = check_opt_int("limit", limit)
        source, where, args = self._where(session, query, counting=limit is None)
        sql = f"SELECT COUNT(*) FROM {source} WHERE {where}"
        if limit is not None:
            sql = f"SELECT COUNT(*) FROM (SELECT 1 FROM {source} WHERE {where} LIMIT ?)"
            args.append(limit)
        with self._guard():
            (n,) = self._c().execute(sql, args).fetchone()
        return int(n)

    def _where(self, session: str, query: QueryArg, counting: bool = False) -> Tuple[str, str, List[Any]]:
        """(FROM, WHERE, args) of a search (docs/RECALL.md): LIKE for every term,
        over the session's rows; in FTS5 mode only over the rows the index finds
        for the terms of at least 3 characters, newest first (fts5 walks its rowids
        in descending order, so a LIMIT stops early). LIKE decides in both modes,
        so they give the same hits: the trigram tokenizer folds case by Unicode,
        LIKE by ASCII only."""
        session = _check_session(session)
        plan = _as_plan(query)
        args: List[Any] = []
        if self.fts == "fts5" and plan["fts"]:
            source = "ctxc_fts CROSS JOIN ctxc_messages m ON m.rowid = ctxc_fts.rowid"
            where = "ctxc_fts MATCH ? AND m.session = ?"
            args += [plan["fts"], session]
        else:
            source = "ctxc_messages m"
            # Listing walks the rows newest first (rowid order, the session a test
            # on each row), so a LIMIT stops at the first hits; counting reads the
            # session's rows through its index.
            where = "m.session = ?" if counting else "+m.session = ?"
            args.append(session)
        for p in plan["like"]:
            where += " AND m.text LIKE ? ESCAPE '\\'"
            args.append(p)
        return source, where, args

    def messages(self, session: str, id: str) -> List[StoredMessage]:
        """The stored rows behind an id: a range ``r<k>`` gives its archived
        messages in input order (not its summary), ``r<k>.<index>`` or
        ``r<k>.summary`` one row; an unknown id gives []."""
        session = _check_session(session)
        if not isinstance(id, str):
            raise OptionError(f"id must be a str, not {type(id).__name__}", "/id")
        sql = (
            "SELECT id, range_id, position, role, reason, json FROM ctxc_messages"
            " WHERE session = ? AND {} ORDER BY position, rowid"
        )
        with self._guard():
            conn = self._c()
            rows = conn.execute(sql.format("id = ?"), (session, id)).fetchall()
            if not rows:
                rows = conn.execute(
                    sql.format("range_id = ? AND reason != 'summary'"), (session, id)
                ).fetchall()
        return [
            {"id": r[0], "range_id": r[1], "position": r[2], "role": r[3], "reason": r[4], "json": r[5]}
            for r in rows
        ]


def search_result(core: "Compactor", store: AnyRecallStore, session: str, query: str, limit: int) -> str:
    """recall.query, the SQL, recall.search_result: the first ``limit`` hits (with
    their text, for the snippets) and the count of all of them."""
    limit = check_int("limit", limit)
    plan = cast(RecallQuery, core.call("recall.query", {"query": query}))
    hits, total = find_rows(store, session, plan, limit)
    out = core.call("recall.search_result", {"query": query, "hits": hits, "limit": limit, "total": total})
    return cast(str, out["result"])


def find_rows(store: AnyRecallStore, session: str, plan: RecallQuery, limit: int) -> Tuple[List[SearchHit], int]:
    """The first ``limit`` hits of a query plan (newest first, with their text,
    for the snippets) and the count of all of them, in one read: the answer to a
    ``search`` effect of session.run. A PostgresRecallStore reads both in one
    statement (the same answer)."""
    n = max(1, min(limit, 50))
    if not isinstance(store, RecallStore):
        return store._find(session, plan, n)
    with store.reading():
        hits = store.search_rows(session, plan, limit=n)
        total = len(hits) if len(hits) < n else store.count_rows(session, plan, store.count_limit)
    return hits, total


def expand_result(core: "Compactor", id: str, messages: List[str], max_tokens: Optional[int]) -> str:
    """recall.expand_result with the stored JSON texts spliced in as they are."""
    from ._compactor import dumps

    parts = [(b"id", dumps(id)), (b"messages", b"[" + b",".join(m.encode("utf-8") for m in messages) + b"]")]
    if max_tokens is not None:
        parts.append((b"max_tokens", dumps(max_tokens)))
    out = core._run(b"recall.expand_result", parts)
    return cast(str, out["result"])


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back a failed transaction, keeping the error that failed it: SQLite
    may have rolled it back itself (a full disk), and "cannot rollback - no
    transaction is active" must not hide the real error."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def _db_error(what: str, e: sqlite3.Error) -> CompactError:
    """An sqlite3 error as the package's error: ``internal`` (the store failing,
    as in JS), its message kept, the sqlite3 error as ``__cause__``."""
    name = getattr(e, "sqlite_errorname", None)
    return CompactError("internal", f"recall {what}: {e}" + (f" ({name})" if name else ""), "")


def _json_text(v: Any) -> str:
    """A row's json: the core gives the message JSON as a string (kept as it is);
    a message object is serialized compactly."""
    if isinstance(v, str):
        return v
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def _archive_parts(parts: Iterator[Any]) -> Iterator[Tuple[Tuple[str, int, int, str], List[Tuple[Any, ...]]]]:
    """An archive's parts, each checked as it comes (_archive_part): the range is
    the first part's, and each one's rows must be of it."""
    range_id: Optional[str] = None
    for part in parts:
        rng, rows = _archive_part(part, range_id)
        range_id = rng[0]
        yield rng, rows


def _archive_part(part: Any, range_id: Optional[str]) -> Tuple[Tuple[str, int, int, str], List[Tuple[Any, ...]]]:
    """An archive part's range and message rows, checked. range_id is the range's
    id from the first part (None: this is the first, which must hold the range; a
    later one must not): every row must be of it."""
    if not isinstance(part, dict) or not isinstance(part.get("rows"), list):
        raise OptionError('an archive part must be {"range": {...}, "rows": [...]} (the range in the first'
                          " part only)", "/rows")
    rng = part.get("range")
    if range_id is None and not isinstance(rng, dict):
        raise OptionError('rows must be the recall.archive result {"range": {...}, "rows": [...]}', "/rows")
    if range_id is not None and "range" in part:
        raise OptionError(f"an archive part after the first holds a range ({_range_id(rng)})", "/range")
    try:
        if range_id is None:
            r = cast(Dict[str, Any], rng)
            range_row = (str(r["id"]), int(r["from_index"]), int(r["to_index"]), str(r["summary"]))
        else:
            range_row = (range_id, 0, 0, "")  # the first part's id; the rest unused
        msg_rows = [
            (str(r["id"]), str(r["range_id"]), int(r["position"]), str(r["role"]),
             str(r["reason"]), _json_text(r["json"]), str(r["text"]))
            for r in cast(List[Dict[str, Any]], part["rows"])
        ]
    except (KeyError, TypeError, ValueError) as e:
        raise OptionError(f"malformed archive rows: {e!r}", "/rows") from e
    for row in msg_rows:
        if row[1] != range_row[0]:
            raise OptionError(f"archive row {row[0]!r} belongs to range {row[1]!r}, not {range_row[0]!r}", "/rows")
    return range_row, msg_rows


def _range_id(rng: Any) -> str:
    return str(rng.get("id")) if isinstance(rng, dict) else repr(rng)
