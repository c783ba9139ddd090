"""PostgresRecallStore: the recall archive on a PostgreSQL server (docs/RECALL.md
"On PostgreSQL"), for many processes on many machines writing one archive.

The tables, ids, search answers and errors are the SQLite store's (``RecallStore``):
the engine and ``find_rows`` use either. The schema is recall/schema_postgres.sql
(``POSTGRES_SCHEMA_SQL``, tested to be a byte-for-byte copy), run once per database
under an advisory lock. An archive is one transaction holding the session's advisory
lock; a lost connection (not a server error) is retried once on a new connection,
with the parts read so far. The driver is psycopg 3 (``pip install
'ctxcompact[postgres]'``), imported when a store is made; ``open_store`` opens either
kind of store from one URL.
"""

from __future__ import annotations

import os
import re
import threading
from contextlib import contextmanager
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    NoReturn,
    Optional,
    Set,
    Tuple,
    TypeVar,
    Union,
    cast,
)

from ._check import check_opt_int, reject_unknown
from ._errors import CompactError, OptionError
from ._recall import (
    BUSY_TIMEOUT,
    SCHEMA_VERSION,
    TOTAL_CAP,
    QueryArg,
    RecallStore,
    _archive_part,
    _archive_parts,
    _as_plan,
    _ascii_lower,
    _check_session,
    _ToolAnswers,
)
from ._types import ArchiveRows, RecallQuery, RecallRange, SearchHit, StoredMessage

if TYPE_CHECKING:  # pragma: no cover - types only: psycopg stays optional
    import psycopg

    from ._compactor import Compactor

__all__ = ["PostgresRecallStore", "POSTGRES_SCHEMA_SQL", "ENV_URL", "open_store", "store_kind", "redact_url"]

#: The environment variable ``open_store`` reads when given no URL (every runtime's).
ENV_URL = "CTXCOMPACT_RECALL_URL"

#: The advisory lock key of the schema set-up, and the first key of a session's
#: writers' lock (with ``hashtext(session)``): the same numbers in every runtime.
LOCK_KEY = 1668577379

#: Rows per INSERT statement of an archive.
_BATCH = 500

#: The schema, a copy of recall/schema_postgres.sql of the repository (the package
#: ships no repository files; tests/test_recall_postgres.py checks the copy is exact).
#: Run as one script (simple-query protocol, no parameters) when a database has no
#: ctxc_meta table yet, in the transaction that holds the advisory lock LOCK_KEY.
POSTGRES_SCHEMA_SQL = """-- The recall store's schema on PostgreSQL (docs/RECALL.md "On PostgreSQL"): the
-- tables and columns of schema.sql, with the same meaning, and substring search on
-- pg_trgm. The Go store embeds this file, the JS store reads it from its package,
-- the Python store's copy is tested to be it byte for byte. Each store runs it as one
-- script, once, when the database has no ctxc_meta table yet: in one transaction
-- holding the advisory lock (1668577379), which every store's set-up takes first, so
-- that processes opening a new database at once create it once.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
-- ASCII lower case, nothing else: the search rule is "every term an ASCII
-- case-insensitive substring", as SQLite's LIKE has it. lower() under the C
-- collation changes only A-Z, whatever the database's locale (which would also fold
-- non-ASCII letters); it is 7 times faster than translate() with the 26 letters on
-- 4 KB texts, and a search rechecks every candidate row with it.
CREATE FUNCTION ctxc_fold(t text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT lower(t COLLATE "C") $$;
CREATE TABLE ctxc_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ctxc_ranges (
  session TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL,
  from_index INTEGER NOT NULL, to_index INTEGER NOT NULL,
  summary TEXT NOT NULL,
  PRIMARY KEY (session, id),
  UNIQUE (session, seq));
-- rowid: the archive order. A session's archives are written one at a time (each
-- holds the session's advisory lock), so within a session it is the commit order.
CREATE TABLE ctxc_messages (
  rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  session TEXT NOT NULL, id TEXT NOT NULL, range_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  role TEXT NOT NULL, reason TEXT NOT NULL,
  json TEXT NOT NULL,
  text TEXT NOT NULL,
  UNIQUE (session, id));
CREATE INDEX ctxc_messages_session ON ctxc_messages (session, rowid);
CREATE INDEX ctxc_messages_range ON ctxc_messages (session, range_id, position);
CREATE INDEX ctxc_messages_trgm ON ctxc_messages USING gin (ctxc_fold(text) gin_trgm_ops);
INSERT INTO ctxc_meta (key, value) VALUES ('schema_version', '1'), ('search', 'pg_trgm');
"""

#: Test hooks, called inside an archive's transaction with the store and the attempt
#: (0, or 1 on the retry): after its rows, before its COMMIT; and after the COMMIT
#: returned (an exception raised there counts as the COMMIT's).
_before_commit: Optional[Callable[["PostgresRecallStore", int], None]] = None
_after_commit: Optional[Callable[["PostgresRecallStore", int], None]] = None

_RANGE_ID = re.compile(r"r[0-9]+")

_T = TypeVar("_T")
_Row = Tuple[Any, ...]
_Part = Tuple[Tuple[str, int, int, str], List[_Row]]


def _psycopg() -> Any:
    """psycopg 3, or ImportError naming the extra that installs it."""
    try:
        import psycopg
    except ImportError as e:
        raise ImportError(
            "ctxcompact: the PostgreSQL recall store needs psycopg 3: pip install 'ctxcompact[postgres]'"
            f" (or pip install 'psycopg[binary]'); importing it failed: {e}"
        ) from e
    return psycopg


# --- opening by URL -----------------------------------------------------------------------


def store_kind(url: str) -> Tuple[str, str]:
    """``("postgres", url)`` for a postgres:// or postgresql:// URL or a key=value
    DSN (an ``=``, no scheme, no slash), else ``("sqlite", path)``: ``sqlite:PATH``
    without its prefix, or the string as a path (docs/RECALL.md "Opening by URL")."""
    if url.startswith(("postgres://", "postgresql://")):
        return "postgres", url
    if url.startswith("sqlite:"):
        return "sqlite", url[len("sqlite:"):]
    if "://" not in url and "=" in url and "/" not in url and "\\" not in url:
        return "postgres", url
    return "sqlite", url


_URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:@/?#]*):[^@/?#]*@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*")
_DSN_PASSWORD = re.compile(r"(\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'|\S+)")


def redact_url(url: str) -> str:
    """A store URL or DSN with its password replaced by ``xxxxx``, for messages."""
    if "://" in url:
        return _QUERY_PASSWORD.sub(r"\1xxxxx", _URL_PASSWORD.sub(r"\1:xxxxx@", url))
    return _DSN_PASSWORD.sub(r"\1xxxxx", url)


_PG_OPTIONS = ("compactor", "count_limit", "timeout")
_SQLITE_OPTIONS = ("fts", "compactor", "count_limit", "timeout", "read_only")


def _only(kind: str, options: Dict[str, Any], valid: Tuple[str, ...]) -> Dict[str, Any]:
    """options, when every one is an option of the store opened (else OptionError)."""
    reject_unknown(f"open_store ({kind})", {k: v for k, v in options.items() if k not in valid}, valid)
    return options


def open_store(url: Union[None, str, "os.PathLike[str]"] = None, **options: Any) -> Union[RecallStore, "PostgresRecallStore"]:
    """The store a URL names, else the one ``CTXCOMPACT_RECALL_URL`` names: a
    ``postgres://`` or ``postgresql://`` URL or a key=value DSN opens a
    ``PostgresRecallStore``; ``sqlite:PATH``, ``sqlite::memory:`` or a path a
    ``RecallStore``. ``options`` are that store's keyword options. No URL at all is
    ``invalid_request`` at ``/url``."""
    if url is not None and not isinstance(url, (str, os.PathLike)):
        raise OptionError(f"url must be a str or a path, not {type(url).__name__}", "/url")
    if isinstance(url, os.PathLike):
        return RecallStore(url, **_only("sqlite", options, _SQLITE_OPTIONS))
    if not url:
        url = os.environ.get(ENV_URL, "")
    if not url:
        raise CompactError(
            "invalid_request",
            f"no recall store named: give a store URL (postgres://..., sqlite:PATH or a path) or set {ENV_URL}",
            "/url",
        )
    kind, target = store_kind(url)
    if kind == "postgres":
        return PostgresRecallStore(target, **_only("postgres", options, _PG_OPTIONS))
    if not target:
        raise CompactError("invalid_request", "a sqlite: store URL names no path (sqlite:PATH, or sqlite::memory:)", "/url")
    return RecallStore(None if target == ":memory:" else target, **_only("sqlite", options, _SQLITE_OPTIONS))


# --- the store ----------------------------------------------------------------------------


class PostgresRecallStore(_ToolAnswers):
    """A PostgreSQL archive of compacted conversations, many sessions per database:
    the SQLite ``RecallStore``'s methods, answers and errors, for many writers on
    many machines.

    ``PostgresRecallStore(url, *, compactor=None, count_limit=100, timeout=5.0)``:
    ``url`` is a ``postgres://`` (or ``postgresql://``) URL or a key=value DSN (libpq's
    ``PG*`` environment variables fill what it leaves out); a new database gets the
    schema (recall/schema_postgres.sql, once, under an advisory lock), one of another
    schema version is refused (``invalid_state`` at ``/path``). ``timeout``: seconds
    to connect (libpq's minimum is 2) and for an archive to wait for the lock of
    another writer of its session. ``compactor`` and ``count_limit``: as
    ``RecallStore``'s (the same totals, so every store answers a search with the
    same text).

    A lost connection (the socket closed, timed out, or the server ended the
    session) is retried once on a new connection, an archive from its BEGIN with
    the parts read so far; a second loss is ``store_unavailable``. Safe to share
    between threads: one connection, guarded by a lock. Use it as a context manager
    or call ``close()``. Needs psycopg 3: ``pip install 'ctxcompact[postgres]'``.
    """

    def __init__(
        self,
        url: str,
        *,
        compactor: Optional["Compactor"] = None,
        count_limit: Optional[int] = TOTAL_CAP,
        timeout: float = BUSY_TIMEOUT,
        **unknown: NoReturn,
    ) -> None:
        reject_unknown(type(self).__name__, unknown, _PG_OPTIONS)
        if not isinstance(url, str):
            raise OptionError(f"url must be a str (a postgres:// URL or a key=value DSN), not {type(url).__name__}", "/url")
        count_limit = check_opt_int("count_limit", count_limit)
        if count_limit is not None and count_limit < 1:
            raise OptionError("count_limit must be at least 1", "/count_limit")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
            raise OptionError("timeout must be a number of seconds, at least 0", "/timeout")
        self._pg = _psycopg()
        #: totals are counted up to this many matches (None: all).
        self.count_limit = count_limit
        #: the URL or DSN, its password replaced by xxxxx.
        self.url = redact_url(url)
        self.timeout = float(timeout)
        self._conninfo = url
        self._lock = threading.RLock()
        self._compactor = compactor
        self._owns_compactor = False
        self._conn: Optional["psycopg.Connection[Any]"] = None
        self._closed = False
        self._snapshot = False  # in reading(): one read-only transaction
        try:
            self._read(self._setup)
        except BaseException:
            self._drop()
            self._closed = True
            raise

    # -- plumbing ------------------------------------------------------------------------

    def _connect(self) -> "psycopg.Connection[Any]":
        """The connection, made when there is none (an OperationalError then is a
        lost connection to the caller)."""
        if self._closed:
            raise CompactError("invalid_state", "the PostgresRecallStore is closed")
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        self._drop()
        pg = self._pg
        kwargs: Dict[str, Any] = {"autocommit": True}
        try:
            given = pg.conninfo.conninfo_to_dict(self._conninfo)
        except pg.ProgrammingError as e:
            raise CompactError("invalid_request", f"recall store {self.url}: not a PostgreSQL URL or DSN: {e}", "/url") from e
        if "connect_timeout" not in given and "PGCONNECT_TIMEOUT" not in os.environ:
            kwargs["connect_timeout"] = max(2, int(self.timeout + 0.999))
        if "application_name" not in given and "PGAPPNAME" not in os.environ:
            kwargs["application_name"] = "ctxcompact"
        self._conn = cast("psycopg.Connection[Any]", pg.connect(self._conninfo, **kwargs))
        return self._conn

    def _drop(self) -> None:
        """Forget the connection (closing it): the next use makes a new one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def _lost(self, e: BaseException) -> bool:
        """Whether e is a lost connection (retried), not a server's answer: SQLSTATE
        class 08 or 57P01-57P03, or a client error on a connection now broken."""
        pg = self._pg
        if not isinstance(e, pg.Error):
            return False
        state = getattr(e, "sqlstate", None)
        if state:
            return bool(state.startswith("08") or state in ("57P01", "57P02", "57P03"))
        conn = self._conn
        return conn is None or conn.closed or conn.broken

    def _rollback(self) -> None:
        """End a failed transaction (or drop a connection that cannot)."""
        conn = self._conn
        if conn is None:
            return
        if conn.closed or conn.broken:
            self._drop()
            return
        if conn.info.transaction_status != self._pg.pq.TransactionStatus.IDLE:
            try:
                conn.execute("ROLLBACK")
            except Exception:
                self._drop()

    def _error(self, what: str, e: BaseException) -> CompactError:
        """A server's error as the package's: ``internal``, its message kept, the
        psycopg error as ``__cause__`` (as the SQLite store words its errors)."""
        state = getattr(e, "sqlstate", None)
        if state == "55P03":
            return CompactError(
                "internal",
                f"recall store {self.url}: {what}: another writer of the session held its lock for more than"
                f" {self.timeout:g} s ({str(e).strip()})",
                "",
            )
        return CompactError("internal", f"recall store {self.url}: {what}: {str(e).strip()}" + (f" ({state})" if state else ""), "")

    def _read(self, fn: Callable[["psycopg.Connection[Any]"], _T], what: str = "read") -> _T:
        """fn on the connection, retried once on a new one when the connection is
        lost; a second loss is ``store_unavailable``. In ``reading()`` it runs in
        that transaction, and a loss is not retried (the snapshot is gone)."""
        with self._lock:
            if self._snapshot:
                try:
                    return fn(self._connect())
                except CompactError:
                    raise
                except self._pg.Error as e:
                    if self._lost(e):
                        self._drop()
                        raise CompactError(
                            "store_unavailable",
                            f"recall store {self.url}: the connection to the server was lost during a reading() ({e})",
                            "",
                        ) from e
                    raise self._error(what, e) from e
            first: Optional[BaseException] = None
            for attempt in (0, 1):
                try:
                    conn = self._connect()
                except CompactError:
                    raise
                except self._pg.Error as e:
                    self._drop()
                    if attempt:
                        raise self._unavailable(what, first, e, connecting=True) from e
                    first = e
                    continue
                try:
                    return fn(conn)
                except CompactError:
                    self._rollback()
                    raise
                except self._pg.Error as e:
                    if not self._lost(e):
                        self._rollback()
                        raise self._error(what, e) from e
                    self._drop()
                    if attempt:
                        raise self._unavailable(what, first, e) from e
                    first = e
                except BaseException:
                    self._rollback()
                    raise
            raise AssertionError("unreachable")  # pragma: no cover

    def _unavailable(
        self, what: str, first: Optional[BaseException], e: BaseException, tail: str = "", connecting: bool = False
    ) -> CompactError:
        """store_unavailable: the second loss (connecting: the second try to connect failed)."""
        how = "the server cannot be reached (tried twice)" if connecting else "the connection to the server was lost twice"
        return CompactError(
            "store_unavailable",
            f"recall store {self.url}: {what}: {how} ({str(first).strip() if first else 'no connection'};"
            f" then {str(e).strip()}){tail}",
            "",
        )

    def _setup(self, conn: "psycopg.Connection[Any]") -> None:
        """Create the schema of a new database (once: under the advisory lock, which
        every runtime's set-up takes first), then check its version."""
        if _one(conn.execute("SELECT to_regclass('ctxc_meta') IS NULL")):
            conn.execute("BEGIN")
            conn.execute(f"SELECT pg_advisory_xact_lock({LOCK_KEY})")
            # Again, under the lock. Reading pg_class here first makes the server take in
            # the catalog changes committed while this one waited (its lock on pg_class
            # does): to_regclass alone would answer from this backend's cache, where the
            # first look left "no such table".
            if _one(conn.execute("SELECT to_regclass('ctxc_meta') IS NULL FROM pg_catalog.pg_class LIMIT 1")):
                conn.execute(POSTGRES_SCHEMA_SQL)  # no parameters: one simple-query script
            conn.execute("COMMIT")
        row = conn.execute("SELECT value FROM ctxc_meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            raise CompactError(
                "invalid_state",
                f"the recall store {self.url} has a ctxc_meta table without a schema_version: not a recall store",
                "/path",
            )
        if row[0] != SCHEMA_VERSION:
            raise CompactError(
                "invalid_state",
                f"the recall store {self.url} has schema version {row[0]}; this ctxcompact reads and writes"
                f" version {SCHEMA_VERSION} (open it with a ctxcompact of its version)",
                "/path",
            )

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Several reads as one: one read-only REPEATABLE READ transaction (one state
        of the archive) under the store's lock. A connection lost in it is not
        retried (``store_unavailable``)."""
        with self._lock:
            if self._snapshot:
                yield
                return
            self._read(lambda c: c.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"), "begin a read")
            self._snapshot = True
            try:
                yield
            finally:
                self._snapshot = False
                conn = self._conn
                if conn is not None and not conn.closed and not conn.broken:
                    try:
                        conn.execute("COMMIT")
                    except Exception:
                        self._drop()

    def close(self) -> None:
        """Close the connection (and the compactor the store made); idempotent."""
        with self._lock:
            self._closed = True
            self._drop()
            if self._owns_compactor and self._compactor is not None:
                self._compactor.close()
                self._compactor = None
                self._owns_compactor = False

    def __enter__(self) -> "PostgresRecallStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresRecallStore({self.url!r}, {'closed' if self._closed else 'pg_trgm'})"

    # -- writes --------------------------------------------------------------------------

    def next_range_id(self, session: str) -> str:
        """``r<k>``: k is 1 + the number of ranges the session has."""
        session = _pg_session(session)
        n = self._read(lambda c: _one(c.execute("SELECT count(*) FROM ctxc_ranges WHERE session = %s", (session,))))
        return f"r{int(n) + 1}"

    def archive(
        self, session: str, parts: Union[ArchiveRows, Dict[str, Any], Iterable[Dict[str, Any]]]
    ) -> RecallRange:
        """Insert one compaction's archive in one transaction, as ``RecallStore.archive``
        (one ``recall.archive`` result, or an iterable of its parts, the range in the
        first): the transaction holds the session's advisory lock, and the range must
        be the session's next (``r<n+1>``), else ``invalid_state`` at ``/range/id`` and
        nothing is written. A lost connection is retried once, from BEGIN, with the
        parts read so far (kept until the commit); if the retry finds the range there
        with the same rows, the first COMMIT landed and the archive succeeded. A
        second loss is ``store_unavailable``. A ``json`` with a raw NUL is
        ``invalid_request`` at ``/rows/<i>/json``; a ``text`` with one is stored with
        U+FFFD in its place."""
        session = _pg_session(session)
        checked: Iterator[_Part]
        if isinstance(parts, dict):
            checked = iter((_archive_part(parts, None),))  # checked before the store is taken
        elif isinstance(parts, (str, bytes, bytearray)) or not hasattr(parts, "__iter__"):
            raise OptionError('parts must be the recall.archive result {"range": {...}, "rows": [...]}'
                              f" or an iterable of archive parts, not {type(parts).__name__}", "/rows")
        else:
            checked = _archive_parts(iter(parts))
        with self._lock:
            if self._closed:
                raise CompactError("invalid_state", "the PostgresRecallStore is closed")
            feed = _Feed(checked)
            first = feed.first()
            rng = first[0]
            out: RecallRange = {"id": rng[0], "from_index": rng[1], "to_index": rng[2], "summary": rng[3]}
            what = f"archiving range {rng[0]!r} of session {session!r}"
            lost: Optional[BaseException] = None
            at_commit = False  # a loss awaiting a COMMIT's answer: it may have landed
            for attempt in (0, 1):
                stage = ["connect"]
                try:
                    conn = self._connect()
                    self._archive_once(conn, session, feed, attempt, stage)
                    return out
                except CompactError:
                    self._rollback()
                    raise
                except self._pg.Error as e:
                    if stage[0] != "connect" and not self._lost(e):
                        self._rollback()
                        raise self._error(what, e) from e
                    self._drop()
                    at_commit = at_commit or stage[0] == "commit"
                    if attempt:
                        landed = self._landed_after(session, feed) if at_commit else False
                        if landed:
                            return out  # a COMMIT landed; its answer was lost
                        tail = (
                            "; nothing of the range was written (compact again when the server answers)" if landed is False
                            else "; a COMMIT's answer was lost, and the server cannot be asked whether it landed"
                                 " (next_range_id tells, when it answers)"
                        )
                        raise self._unavailable(what, lost, e, tail, connecting=stage[0] == "connect") from e
                    lost = e
                except BaseException:
                    self._rollback()
                    raise
            raise AssertionError("unreachable")  # pragma: no cover

    def _archive_once(
        self, conn: "psycopg.Connection[Any]", session: str, feed: "_Feed", attempt: int, stage: List[str]
    ) -> None:
        """One try of an archive's transaction: the lock, the range check, the rows of
        the parts read so far, then of the rest, the COMMIT."""
        rng = feed.parts[0][0]
        stage[0] = "lock"
        conn.execute(f"BEGIN; SET LOCAL lock_timeout = '{max(1, int(self.timeout * 1000))}ms'")
        conn.execute(f"SELECT pg_advisory_xact_lock({LOCK_KEY}, hashtext(%s))", (session,))
        n = int(_one(conn.execute("SELECT count(*) FROM ctxc_ranges WHERE session = %s", (session,))))
        if attempt and self._landed(conn, session, feed):
            conn.execute("COMMIT")
            return
        want = f"r{n + 1}"
        if rng[0] != want:
            has = conn.execute("SELECT 1 FROM ctxc_ranges WHERE session = %s AND id = %s", (session, rng[0])).fetchone()
            if has is not None:
                raise CompactError("invalid_state", f"session {session!r} already has a range {rng[0]!r}"
                                   " (another compaction of the session archived first: nothing of this one is written;"
                                   " compact again)", "/range/id")
            raise CompactError(
                "invalid_state",
                f"session {session!r}'s next range is {want!r}, not {rng[0]!r} (another compaction of the session"
                " archived first: nothing of this one is written; compact again)",
                "/range/id",
            )
        stage[0] = "rows"
        conn.execute(
            "INSERT INTO ctxc_ranges (session, id, seq, from_index, to_index, summary) VALUES (%s, %s, %s, %s, %s, %s)",
            (session, rng[0], n + 1, rng[1], rng[2], rng[3]),
        )
        seen: Set[str] = set()
        for rows in feed.rows():
            self._insert_rows(conn, session, rows, seen)
        if _before_commit is not None:
            _before_commit(self, attempt)
        stage[0] = "commit"
        conn.execute("COMMIT")
        if _after_commit is not None:
            _after_commit(self, attempt)

    def _landed(self, conn: "psycopg.Connection[Any]", session: str, feed: "_Feed") -> bool:
        """On a retry: whether the range is there with exactly the archive's rows (the
        lost connection was the COMMIT's answer), the feed having been read whole."""
        rng = feed.parts[0][0]
        got = conn.execute(
            "SELECT from_index, to_index, summary FROM ctxc_ranges WHERE session = %s AND id = %s", (session, rng[0])
        ).fetchone()
        if got is None or not feed.done or tuple(got) != rng[1:]:
            return False
        rows = conn.execute(
            "SELECT id, json FROM ctxc_messages WHERE session = %s AND range_id = %s ORDER BY rowid", (session, rng[0])
        ).fetchall()
        return [tuple(r) for r in rows] == [(r[0], r[5]) for _, part in feed.parts for r in part]

    def _landed_after(self, session: str, feed: "_Feed") -> Optional[bool]:
        """After a second loss at the COMMIT: whether that COMMIT landed, asked once
        on a new connection (None: the server cannot be asked)."""
        try:
            conn = self._connect()
            return self._landed(conn, session, feed)
        except self._pg.Error:
            self._drop()
            return None

    def _insert_rows(self, conn: "psycopg.Connection[Any]", session: str, rows: List[_Row], seen: Set[str]) -> None:
        """A part's rows, up to _BATCH per INSERT."""
        for row in rows:
            if row[0] in seen:
                raise CompactError("invalid_state", f"session {session!r} already has a message {row[0]!r}", "/rows")
            seen.add(row[0])
        for k in range(0, len(rows), _BATCH):
            chunk = rows[k:k + _BATCH]
            sql = ("INSERT INTO ctxc_messages (session, id, range_id, position, role, reason, json, text) VALUES "
                   + ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s)"] * len(chunk)))
            args: List[Any] = []
            for r in chunk:
                args.append(session)
                args.extend(r)
            try:
                conn.execute(sql, args)
            except self._pg.errors.UniqueViolation as e:
                detail = getattr(e.diag, "message_detail", None) or str(e)
                raise CompactError("invalid_state", f"session {session!r} already has a message ({detail})", "/rows") from e

    def delete_session(self, session: str) -> int:
        """Remove a session's ranges and messages in one transaction (holding the
        session's advisory lock); returns the number of message rows removed."""
        session = _pg_session(session)

        def run(conn: "psycopg.Connection[Any]") -> int:
            conn.execute(f"BEGIN; SET LOCAL lock_timeout = '{max(1, int(self.timeout * 1000))}ms'")
            conn.execute(f"SELECT pg_advisory_xact_lock({LOCK_KEY}, hashtext(%s))", (session,))
            n = conn.execute("DELETE FROM ctxc_messages WHERE session = %s", (session,)).rowcount
            conn.execute("DELETE FROM ctxc_ranges WHERE session = %s", (session,))
            conn.execute("COMMIT")
            return int(n)

        if self._snapshot:
            raise CompactError("invalid_state", "delete_session inside reading(): a read-only transaction")
        return self._read(run, f"deleting session {session!r}")

    # -- reads ---------------------------------------------------------------------------

    def sessions(self) -> List[str]:
        """The sessions with anything archived, in byte order (as SQLite sorts)."""
        rows = self._read(lambda c: c.execute(
            # The union's column takes the explicit collation: ORDER BY 1 COLLATE "C"
            # would be an expression, which a UNION's ORDER BY cannot hold.
            'SELECT session COLLATE "C" FROM ctxc_ranges UNION SELECT session FROM ctxc_messages ORDER BY 1'
        ).fetchall())
        return [r[0] for r in rows]

    def ranges(self, session: str) -> List[RecallRange]:
        """The session's ranges, oldest first."""
        session = _pg_session(session)
        rows = self._read(lambda c: c.execute(
            "SELECT id, from_index, to_index, summary FROM ctxc_ranges WHERE session = %s ORDER BY seq", (session,)
        ).fetchall())
        return [{"id": r[0], "from_index": r[1], "to_index": r[2], "summary": r[3]} for r in rows]

    def _where(self, session: str, query: QueryArg) -> Tuple[str, List[Any]]:
        """WHERE and args of a search: the session, and every term's LIKE pattern
        (the core's, lowered in ASCII) against ctxc_fold(text), as SQLite's LIKE
        folds: ASCII only."""
        session = _pg_session(session)
        plan = _as_plan(query)
        where = "session = %s" + " AND ctxc_fold(text) LIKE %s" * len(plan["like"])
        return where, [session] + [_ascii_lower(p) for p in plan["like"]]

    def search_rows(self, session: str, query: QueryArg, limit: Optional[int] = None) -> List[SearchHit]:
        """The session's archived rows (messages and summaries) where every term of
        the query is an ASCII case-insensitive substring of the searchable text,
        newest first (``RecallStore.search_rows``). ``limit`` None: every hit."""
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise OptionError("limit must be a non-negative int or None", "/limit")
        where, args = self._where(session, query)
        sql = f"SELECT id, range_id, position, role, text FROM ctxc_messages WHERE {where} ORDER BY rowid DESC"
        if limit is not None:
            sql += " LIMIT %s"
            args.append(limit)
        rows = self._read(lambda c: c.execute(sql, args).fetchall(), "search")
        return [{"id": r[0], "range_id": r[1], "position": r[2], "role": r[3], "text": r[4]} for r in rows]

    def count_rows(self, session: str, query: QueryArg, limit: Optional[int] = None) -> int:
        """How many rows ``search_rows`` would return without a limit (at most
        ``limit`` of them when it is given: the count stops there)."""
        limit = check_opt_int("limit", limit)
        where, args = self._where(session, query)
        sql = f"SELECT count(*) FROM ctxc_messages WHERE {where}"
        if limit is not None:
            sql = f"SELECT count(*) FROM (SELECT 1 FROM ctxc_messages WHERE {where} LIMIT %s) AS m"
            args.append(limit)
        return int(self._read(lambda c: _one(c.execute(sql, args)), "search"))

    def _find(self, session: str, plan: RecallQuery, n: int) -> Tuple[List[SearchHit], int]:
        """``find_rows`` in one statement: the newest ``max(n, count_limit)``
        matches are read (all with count_limit None), the hits are the first n (with
        their text), the total as RecallStore counts it (``len(hits)`` when fewer
        than n, else the matches counted up to count_limit)."""
        where, args = self._where(session, plan)
        cap = self.count_limit
        if cap is None:
            inner = f"SELECT rowid FROM ctxc_messages WHERE {where}"
        else:
            inner = f"SELECT rowid FROM ctxc_messages WHERE {where} ORDER BY rowid DESC LIMIT %s"
            args.append(max(n, cap))
        sql = (f"WITH hit AS MATERIALIZED ({inner}) SELECT m.id, m.range_id, m.position, m.role, m.text,"
               " (SELECT count(*) FROM hit) FROM (SELECT rowid FROM hit ORDER BY rowid DESC LIMIT %s) AS h"
               " JOIN ctxc_messages m ON m.rowid = h.rowid ORDER BY m.rowid DESC")
        args.append(n)
        rows = self._read(lambda c: c.execute(sql, args).fetchall(), "search")
        hits: List[SearchHit] = [{"id": r[0], "range_id": r[1], "position": r[2], "role": r[3], "text": r[4]} for r in rows]
        if len(hits) < n:
            return hits, len(hits)
        read = int(rows[0][5])
        return hits, read if cap is None else min(read, cap)

    def messages(self, session: str, id: str) -> List[StoredMessage]:
        """The stored rows behind an id: a range ``r<k>`` gives its archived messages
        in input order (not its summary), another id (``r<k>.<index>``,
        ``r<k>.summary``) its row; an unknown id gives []."""
        session = _pg_session(session)
        if not isinstance(id, str):
            raise OptionError(f"id must be a str, not {type(id).__name__}", "/id")
        if "\0" in id:
            return []  # no id holds one (archive refuses them)
        cols = "SELECT id, range_id, position, role, reason, json FROM ctxc_messages"
        if _RANGE_ID.fullmatch(id):
            sql = cols + " WHERE session = %s AND range_id = %s AND reason <> 'summary' ORDER BY position, rowid"
        else:
            sql = cols + " WHERE session = %s AND id = %s"
        rows = self._read(lambda c: c.execute(sql, (session, id)).fetchall(), "expand")
        return [
            {"id": r[0], "range_id": r[1], "position": r[2], "role": r[3], "reason": r[4], "json": r[5]}
            for r in rows
        ]


class _Feed:
    """An archive's parts as the store reads them, kept until its commit: the parts
    read so far (converted for PostgreSQL: NUL rules) are replayed on a retry, then
    the rest is read from the iterator."""

    def __init__(self, it: Iterator[_Part]) -> None:
        self._it = it
        self.parts: List[_Part] = []
        self.done = False
        self._n = 0  # rows so far: the index of a row across parts

    def _take(self) -> bool:
        try:
            rng, rows = next(self._it)
        except StopIteration:
            self.done = True
            return False
        if not self.parts:
            rng = _pg_range(rng)
        pg_rows = []
        for row in rows:
            pg_rows.append(_pg_row(row, self._n))
            self._n += 1
        self.parts.append((rng, pg_rows))
        return True

    def first(self) -> _Part:
        """The first part (with the range); an archive without one is refused."""
        if not self._take():
            raise OptionError("an archive with no parts", "/rows")
        return self.parts[0]

    def rows(self) -> Iterator[List[_Row]]:
        """Every part's rows: those read so far, then the rest as they come."""
        k = 0
        while True:
            if k == len(self.parts) and (self.done or not self._take()):
                return
            yield self.parts[k][1]
            k += 1


def _pg_session(session: Any) -> str:
    checked = _check_session(session)
    if "\0" in checked:
        raise OptionError("session must not contain a NUL character (U+0000)", "/session")
    return checked


def _pg_range(rng: Tuple[str, int, int, str]) -> Tuple[str, int, int, str]:
    """A range for PostgreSQL: no NUL in its id; the summary's NULs as U+FFFD."""
    if "\0" in rng[0]:
        raise OptionError("the range id must not contain a NUL character (U+0000)", "/range/id")
    return rng[0], rng[1], rng[2], rng[3].replace("\0", "\ufffd")


_ROW_FIELDS = ("id", "range_id", "position", "role", "reason", "json", "text")


def _pg_row(row: _Row, i: int) -> _Row:
    """A message row for PostgreSQL, whose text cannot hold U+0000: the searchable
    text with U+FFFD in its place; a json with a raw NUL (JSON writes it \\u0000)
    or a NUL in an id, role or reason is refused at /rows/<i>/<field>."""
    for k in (0, 1, 3, 4, 5):
        if "\0" in row[k]:
            field = _ROW_FIELDS[k]
            what = ("holds a raw NUL character (U+0000), which PostgreSQL text cannot hold (JSON writes it \\u0000)"
                    if field == "json" else "must not contain a NUL character (U+0000)")
            raise CompactError("invalid_request", f"archive row {i} ({row[0]!r}): its {field} {what}", f"/rows/{i}/{field}")
    return row[:6] + (row[6].replace("\0", "\ufffd"),)


def _one(cur: Any) -> Any:
    """The first column of a statement's one row."""
    row = cur.fetchone()
    if row is None:  # pragma: no cover - aggregate statements always answer a row
        raise CompactError("internal", "a statement that answers one row answered none")
    return row[0]
