"""PostgresRecallStore (docs/RECALL.md "On PostgreSQL"): the SQLite store's answers
from a PostgreSQL server. Each test makes its own database on the server that
CTXCOMPACT_TEST_PG_URL names (test.sh starts one when it is unset): the schema set
up once by stores opening at once, a database of another version refused, the
fixture's answers (testdata/recall/stores.json) equal to the SQLite store's, the
search rule (ASCII case folding, LIKE metacharacters literal), NULs, the session's
advisory lock (two writers of one range: one wins, the other writes nothing), a
lost connection retried once and a second loss refused, the lossless engine on it,
open_store's routing, the load-test worker."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import psycopg  # test.sh installs it (psycopg[binary], pinned)
import pytest

from ctxcompact import CompactError, ContextEngine, OptionError
from ctxcompact import _recall_postgres
from ctxcompact._recall import find_rows
from ctxcompact.recall import POSTGRES_SCHEMA_SQL, PostgresRecallStore, RecallStore, open_store, plan_query

from conftest import ROOT, conversation, in_ci
from recall_stores import load_fixture, write_fixture
from test_recall_store import QUERIES, archive_rows, fill, session_msgs

HERE = Path(__file__).resolve().parent
SERVER = os.environ.get("CTXCOMPACT_TEST_PG_URL", "")
LOSSLESS: Dict[str, Any] = {"model": {"context_length": 32000}, "context": {"engine": "lossless"}}
MADE: List[str] = []  # the databases this module made, dropped after it


@pytest.fixture(scope="module")
def server() -> str:
    if not SERVER:
        msg = "no PostgreSQL server: CTXCOMPACT_TEST_PG_URL is unset (bindings/python/test.sh starts one)"
        if in_ci():
            pytest.fail(msg + "; CI is set, so the PostgreSQL store's tests must not skip")
        pytest.skip("SKIPPED, NOT TESTED: " + msg)
    return SERVER


@pytest.fixture(scope="module")
def admin(server: str) -> Iterator[Any]:
    conn = psycopg.connect(server, autocommit=True)
    yield conn
    for name in MADE:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


def db_url(server: str, name: str) -> str:
    """The server's URL with another database."""
    if "://" not in server:
        return f"{server} dbname={name}"
    u = urllib.parse.urlsplit(server)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + name, u.query, u.fragment))


@pytest.fixture
def new_db(server: str, admin: Any):
    """A function making a fresh database (dropped after the module), its URL."""

    def make() -> str:
        name = f"ctxc_py_{os.getpid()}_{uuid.uuid4().hex[:10]}"
        admin.execute(f'CREATE DATABASE "{name}"')
        MADE.append(name)
        return db_url(server, name)

    return make


@pytest.fixture
def url(new_db) -> str:
    return new_db()


def kill(admin: Any, pid: int) -> None:
    """End a server backend as an administrator does (57P01), and wait until it is gone."""
    if admin.info.server_version >= 140000:
        assert admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,)).fetchone()[0]
        return
    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    for _ in range(1000):
        if admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0] == 0:
            return
        time.sleep(0.01)


def rows_of(url: str, session: str) -> List[tuple]:
    """(id, json) of the session's rows in archive order, read on a connection of its own."""
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute("SELECT id, json FROM ctxc_messages WHERE session = %s ORDER BY rowid", (session,)).fetchall()


def ranges_of(url: str, session: str) -> List[tuple]:
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute("SELECT id, seq, summary FROM ctxc_ranges WHERE session = %s ORDER BY seq", (session,)).fetchall()


def one_row(rid: str, text: str, json_text: str = "{}", pos: int = 0) -> Dict[str, Any]:
    return {"id": f"{rid}.{pos}", "range_id": rid, "position": pos, "role": "user", "reason": "summarized",
            "json": json_text, "text": text}


def archive_of(rid: str, texts: List[str], summary: str = "s") -> Dict[str, Any]:
    return {"range": {"id": rid, "from_index": 0, "to_index": len(texts), "summary": summary},
            "rows": [one_row(rid, t, json.dumps({"role": "user", "content": t}), k) for k, t in enumerate(texts)]}


def child_env() -> Dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


# --- the schema ------------------------------------------------------------------------------


def test_the_python_schema_is_recall_schema_postgres_sql():
    assert POSTGRES_SCHEMA_SQL == (ROOT / "recall" / "schema_postgres.sql").read_text(), \
        "a copy of recall/schema_postgres.sql, byte for byte"


def test_eight_stores_opening_a_new_database_at_once_create_the_schema_once(url: str):
    start = threading.Barrier(8)
    errors: List[BaseException] = []

    def open_one() -> None:
        try:
            start.wait()
            with PostgresRecallStore(url) as s:
                assert s.next_range_id("a") == "r1"
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []  # a second run of the script would fail (CREATE FUNCTION, CREATE TABLE)
    with psycopg.connect(url, autocommit=True) as c:
        assert dict(c.execute("SELECT key, value FROM ctxc_meta").fetchall()) == {"schema_version": "1", "search": "pg_trgm"}
        assert c.execute("SELECT count(*) FROM pg_proc WHERE proname = 'ctxc_fold'").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'").fetchone()[0] == 1
        indexes = {r[0] for r in c.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'ctxc_messages'")}
        assert {"ctxc_messages_session", "ctxc_messages_range", "ctxc_messages_trgm"} <= indexes
        assert c.execute("SELECT is_identity FROM information_schema.columns"
                         " WHERE table_name = 'ctxc_messages' AND column_name = 'rowid'").fetchone()[0] == "YES"


def test_a_database_of_another_schema_version_is_refused(url: str):
    PostgresRecallStore(url).close()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("UPDATE ctxc_meta SET value = '2' WHERE key = 'schema_version'")
    with pytest.raises(CompactError) as e:
        PostgresRecallStore(url)
    assert (e.value.code, e.value.path) == ("invalid_state", "/path")
    assert "schema version 2; this ctxcompact reads and writes version 1" in str(e.value)
    with psycopg.connect(url, autocommit=True) as c:
        assert c.execute("SELECT value FROM ctxc_meta WHERE key = 'schema_version'").fetchone()[0] == "2"


# --- the same answers as SQLite --------------------------------------------------------------


def test_every_fixture_answer_is_the_fixtures_and_the_sqlite_stores(url: str):
    fx = load_fixture()
    write_fixture(url)
    with PostgresRecallStore(url) as pg, RecallStore() as lite:
        for k, round_ in enumerate(fx["write_order"]):
            for session in round_:
                lite.archive(session, fx["sessions"][session][k])
        assert pg.sessions() == lite.sessions() == sorted(fx["sessions"])
        for session in fx["sessions"]:
            assert pg.ranges(session) == lite.ranges(session)
        for c in fx["searches"]:
            where = f'{c["query"]!r} in {c["session"]}, limit {c["limit"]}'
            plan = plan_query(c["query"])
            hits, total = find_rows(pg, c["session"], plan, c["limit"])
            assert ([h["id"] for h in hits], total) == (c["hits"], c["total"]), where
            assert (hits, total) == find_rows(lite, c["session"], plan, c["limit"]), where
            n = max(1, min(c["limit"], 50))
            assert pg.search_rows(c["session"], c["query"], limit=n) == lite.search_rows(c["session"], c["query"], limit=n)
            assert pg.count_rows(c["session"], c["query"], 100) == lite.count_rows(c["session"], c["query"], 100)
        for c in fx["expands"]:
            assert pg.expand_rows(c["session"], c["id"]) == c["messages"] == lite.expand_rows(c["session"], c["id"]), c["id"]
            assert pg.messages(c["session"], c["id"]) == lite.messages(c["session"], c["id"])


def test_the_fixture_script_writes_sessions_apart_and_checks(new_db):
    script = str(HERE / "recall_stores.py")
    whole, split = new_db(), new_db()
    for args in (["write", whole], ["write", split, "alpha"], ["write", split, "beta", "gamma"]):
        out = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=child_env(), timeout=300)
        assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    fx = load_fixture()
    for target in (whole, split):
        out = subprocess.run([sys.executable, script, "check", target], capture_output=True, text=True, env=child_env(),
                             timeout=300)
        assert (out.returncode, out.stdout.strip()) == (0, f'ok {len(fx["searches"])} {len(fx["expands"])}'), out.stdout + out.stderr
    # A store missing a session: check names the first mismatch and fails.
    part = new_db()
    subprocess.run([sys.executable, script, "write", part, "alpha"], check=True, capture_output=True, env=child_env())
    out = subprocess.run([sys.executable, script, "check", part], capture_output=True, text=True, env=child_env())
    assert out.returncode == 1 and out.stdout.startswith("mismatch: "), out.stdout


def test_a_sqlite_target_of_the_fixture_script(tmp_path: Path):
    path = str(tmp_path / "f.db")
    script = str(HERE / "recall_stores.py")
    subprocess.run([sys.executable, script, "write", path], check=True, capture_output=True, env=child_env())
    out = subprocess.run([sys.executable, script, "check", "sqlite:" + path], capture_output=True, text=True, env=child_env())
    assert out.returncode == 0 and out.stdout.startswith("ok "), out.stdout + out.stderr


def test_search_semantics_equal_sqlites(url: str):
    with PostgresRecallStore(url) as pg, RecallStore() as lite:
        for s in (pg, lite):
            fill(s, "a", "alpha")
            fill(s, "b", "beta")
        for q in QUERIES:
            for session in ("a", "b"):
                got = pg.search_rows(session, q)
                assert got == lite.search_rows(session, q), q
                assert pg.search_rows(session, q, limit=2) == got[:2]
                assert pg.count_rows(session, q) == lite.count_rows(session, q) == len(got)
                assert pg.count_rows(session, q, 1) == lite.count_rows(session, q, 1)
        assert [h["id"] for h in pg.search_rows("a", "summary")] == ["r2.summary", "r1.summary"]
        with pytest.raises(OptionError):
            pg.search_rows("a", "x", limit=-1)
        with pytest.raises(OptionError):
            pg.search_rows("a", 3)  # type: ignore[arg-type]
        with pytest.raises(CompactError) as e:
            pg.search_rows("a", "  ")
        assert (e.value.code, e.value.path) == ("invalid_request", "/query")


def test_case_folds_in_ascii_only(url: str):
    texts = ["ÉCOLE normale", "école primaire", "HELLO world", "Straße", "STRASSE", "İstanbul", "ǅemal"]
    with PostgresRecallStore(url) as pg, RecallStore() as lite:
        for s in (pg, lite):
            s.archive("s", archive_of("r1", texts))
        ids = lambda q: [h["text"] for h in pg.search_rows("s", q)]  # noqa: E731
        assert ids("école") == ["école primaire"]  # not ÉCOLE: É is not ASCII
        assert ids("ÉCOLE") == ["ÉCOLE normale"]
        assert ids("hello") == ids("HELLO") == ids("hElLo") == ["HELLO world"]
        assert ids("straße") == ["Straße"] and ids("strasse") == ["STRASSE"]
        assert ids("istanbul") == [] and ids("dž") == []
        for q in ("école", "ÉCOLE", "hello", "ECOLE", "ole", "straße", "İstanbul", "ǅ", "ǆ"):
            assert pg.search_rows("s", q) == lite.search_rows("s", q), q


def test_like_metacharacters_are_literal(url: str):
    texts = ["100% sure", "1000 sure", "of_the", "ofXthe", "back\\slash", "backslash", "a%b_c\\d", "axbycxd"]
    with PostgresRecallStore(url) as pg, RecallStore() as lite:
        for s in (pg, lite):
            s.archive("s", archive_of("r1", texts))
        ids = lambda q: [h["text"] for h in pg.search_rows("s", q)]  # noqa: E731
        assert ids("100%") == ["100% sure"]
        assert ids("of_the") == ["of_the"]
        assert ids("back\\slash") == ["back\\slash"]
        assert ids("a%b_c\\d") == ["a%b_c\\d"]
        assert ids("%") == ["a%b_c\\d", "100% sure"]
        assert ids("_") == ["a%b_c\\d", "of_the"]
        for q in ("100%", "%", "_", "\\", "of_the", "a%b", "b_c", "c\\d", "%_\\", "x"):
            assert pg.search_rows("s", q) == lite.search_rows("s", q), q


@pytest.mark.parametrize("count_limit", [None, 1, 3, 100])
def test_totals_are_counted_as_the_sqlite_store_counts(url: str, count_limit: Optional[int]):
    with PostgresRecallStore(url, count_limit=count_limit) as pg, RecallStore(count_limit=count_limit) as lite:
        for s in (pg, lite):
            fill(s, "x", "alpha")
            s.archive("x", archive_rows("r3", 0, session_msgs("beta") * 2, "more"))
        for q in ("py", "src/beta/app.py", "summary", "nothing", "a"):
            for limit in (1, 2, 5, 50):
                assert find_rows(pg, "x", plan_query(q), limit) == find_rows(lite, "x", plan_query(q), limit), (q, limit)
    with pytest.raises(OptionError):
        PostgresRecallStore(url, count_limit=0)


def test_sessions_in_byte_order_ranges_and_delete(url: str):
    names = ["b", "B", "a", "é", "Z", "a b", "ä"]
    with PostgresRecallStore(url) as pg, RecallStore() as lite:
        for s in (pg, lite):
            for n in names:
                s.archive(n, archive_of("r1", [f"text of {n}"]))
        assert pg.sessions() == lite.sessions() == sorted(names)
        fill(pg, "f", "alpha")
        assert pg.next_range_id("f") == "r3" and [r["id"] for r in pg.ranges("f")] == ["r1", "r2"]
        assert pg.ranges("f")[1] == {"id": "r2", "from_index": 3, "to_index": 6, "summary": "Summary two of alpha: README read."}
        assert pg.delete_session("f") == 9 and pg.delete_session("f") == 0
        assert pg.ranges("f") == [] and pg.search_rows("f", "py") == [] and pg.next_range_id("f") == "r1"
        assert "f" not in pg.sessions()


def test_expand_by_range_and_message(url: str):
    with PostgresRecallStore(url) as pg, RecallStore() as lite:
        msgs = fill(pg, "a", "alpha")
        fill(lite, "a", "alpha")
        assert [json.loads(j) for j in pg.expand_rows("a", "r1")] == msgs[:4]
        assert json.loads(pg.expand_rows("a", "r2.4")[0]) == msgs[5]
        assert json.loads(pg.expand_rows("a", "r1.summary")[0]) == {"role": "user", "content": "Summary one of alpha."}
        for id in ("r1", "r2", "r1.3", "r2.summary", "R1", "r1.0", "r9", "r1.", "", "r1\0"):
            assert pg.messages("a", id) == lite.messages("a", id), id
        odd = '{"role":"tool",  "content":"caf\\u00e9 \u00fcber\\n","k":[1,2.50,true]}'
        pg.archive("b", {"range": {"id": "r1", "from_index": 0, "to_index": 1, "summary": "s"},
                         "rows": [one_row("r1", "tool\ncafé", odd)]})
        assert pg.expand_rows("b", "r1.0") == [odd]  # byte for byte


# --- archives --------------------------------------------------------------------------------


def test_archive_checks_and_is_one_transaction(url: str):
    with PostgresRecallStore(url) as s:
        msgs = fill(s, "a", "alpha")
        before = s.search_rows("a", "summary")
        with pytest.raises(CompactError) as e:
            s.archive("a", archive_rows("r2", 0, msgs, "again"))
        assert (e.value.code, e.value.path) == ("invalid_state", "/range/id") and "already has a range 'r2'" in str(e.value)
        with pytest.raises(CompactError) as e:
            s.archive("a", archive_rows("r5", 0, msgs, "skips"))
        assert (e.value.code, e.value.path) == ("invalid_state", "/range/id") and "next range is 'r3'" in str(e.value)
        bad = archive_rows("r3", 0, msgs[:2], "dup")
        bad["rows"][1]["id"] = bad["rows"][0]["id"]
        with pytest.raises(CompactError) as e:
            s.archive("a", bad)
        assert (e.value.code, e.value.path) == ("invalid_state", "/rows")
        with pytest.raises(OptionError):
            s.archive("a", {"range": {"id": "r3"}, "rows": []})
        with pytest.raises(OptionError):
            s.archive("", archive_rows("r3", 0, msgs, "x"))
        with pytest.raises(OptionError):
            s.archive("a", [])
        with pytest.raises(OptionError):
            s.archive("a", "r3")  # type: ignore[arg-type]

        def raising() -> Iterator[Dict[str, Any]]:
            yield archive_rows("r3", 0, msgs[:2], "first part")
            raise RuntimeError("the core failed")

        with pytest.raises(RuntimeError):
            s.archive("a", raising())
        other = archive_rows("r3", 0, msgs[:2], "x")
        other["rows"][0]["range_id"] = "r1"
        with pytest.raises(OptionError):
            s.archive("a", [other])
        assert [r["id"] for r in s.ranges("a")] == ["r1", "r2"]
        assert s.search_rows("a", "summary") == before and s.expand_rows("a", "r3") == []
        assert s._conn is not None and s._conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        # In parts: every part's rows, in order.
        whole = archive_rows("r3", 0, msgs, "in two parts")
        assert s.archive("a", iter([{"range": whole["range"], "rows": whole["rows"][:3]}, {"rows": whole["rows"][3:]}])) == whole["range"]
        assert [r[0] for r in rows_of(url, "a")][-len(whole["rows"]):] == [r["id"] for r in whole["rows"]]
        assert ranges_of(url, "a")[-1] == ("r3", 3, "in two parts")


def test_nul_characters(url: str):
    with PostgresRecallStore(url) as s:
        part1 = archive_of("r1", ["zero", "one"])
        part2 = {"rows": [one_row("r1", "two", "{}", 2), one_row("r1", "three", '{"a":"x\0y"}', 3)]}
        with pytest.raises(CompactError) as e:
            s.archive("s", [part1, part2])
        assert (e.value.code, e.value.path) == ("invalid_request", "/rows/3/json")  # counted across parts
        assert s.ranges("s") == [] and rows_of(url, "s") == [] and s.next_range_id("s") == "r1"
        bad = archive_of("r1", ["x"])
        bad["rows"][0]["role"] = "us\0er"
        with pytest.raises(CompactError) as e:
            s.archive("s", bad)
        assert (e.value.code, e.value.path) == ("invalid_request", "/rows/0/role")
        with pytest.raises(OptionError) as e:
            s.archive("s\0", archive_of("r1", ["x"]))
        assert e.value.path == "/session"
        # The searchable text and the summary keep U+FFFD in a NUL's place; the JSON's
        # escape \u0000 is JSON, kept as it is.
        ok = archive_of("r1", ["a\0b"], summary="sum\0mary")
        ok["rows"][0]["json"] = '{"content":"a\\u0000b"}'
        s.archive("s", ok)
        (hit,) = s.search_rows("s", "b")
        assert hit["text"] == "a\ufffdb" and s.search_rows("s", "a\ufffdb") == [hit]
        assert s.expand_rows("s", "r1.0") == ['{"content":"a\\u0000b"}']
        assert s.ranges("s")[0]["summary"] == "sum\ufffdmary"
        with pytest.raises(CompactError) as e:
            s.search_rows("s", "a\0b")
        assert (e.value.code, e.value.path) == ("invalid_request", "/query")


def test_two_writers_of_one_range_one_wins_the_other_writes_nothing(url: str, monkeypatch):
    """Two stores (two connections) archive r1 of one session at once: the session's
    advisory lock lets one in; the other then finds r1 taken and writes nothing."""
    a, b = PostgresRecallStore(url), PostgresRecallStore(url)
    monkeypatch.setattr(_recall_postgres, "_before_commit", lambda store, attempt: time.sleep(0.3))
    start = threading.Barrier(2, timeout=60)
    results: Dict[str, Any] = {}

    def write(name: str, store: PostgresRecallStore) -> None:
        try:
            rid = store.next_range_id("one")  # both reserve r1 before either archives
            start.wait()
            results[name] = store.archive("one", archive_of(rid, [f"written by {name}", f"more by {name}"], f"summary {name}"))
        except BaseException as e:  # judged below
            results[name] = e

    threads = [threading.Thread(target=write, args=(n, s)) for n, s in (("A", a), ("B", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        won = [n for n, r in results.items() if isinstance(r, dict)]
        lost = [n for n, r in results.items() if not isinstance(r, dict)]
        assert len(won) == 1 and len(lost) == 1, results
        err = results[lost[0]]
        assert isinstance(err, CompactError) and (err.code, err.path) == ("invalid_state", "/range/id"), err
        assert "nothing of this one is written" in str(err)
        assert ranges_of(url, "one") == [("r1", 1, f"summary {won[0]}")]
        assert [r[0] for r in rows_of(url, "one")] == ["r1.0", "r1.1"]
        assert a.search_rows("one", f'"by {lost[0]}"') == [] and len(b.search_rows("one", f'"by {won[0]}"')) == 2
        # The loser compacts again: its next range is r2.
        assert b.next_range_id("one") == a.next_range_id("one") == "r2"
    finally:
        a.close()
        b.close()


def test_threads_and_stores_share_a_database(url: str):
    stores = [PostgresRecallStore(url), PostgresRecallStore(url)]
    errors: List[BaseException] = []
    start = threading.Barrier(6)

    def work(i: int) -> None:
        store = stores[i % 2]
        try:
            start.wait()
            for k in range(1, 9):
                while True:  # another thread's archive of the shared session may take the id
                    rid = store.next_range_id("shared")
                    try:
                        store.archive("shared", archive_of(rid, [f"shared {i} {k}"]))
                        break
                    except CompactError as e:
                        if e.path != "/range/id":
                            raise
                rid = store.next_range_id(f"t{i}")
                store.archive(f"t{i}", archive_of(rid, [f"src/t{i}/f{k}.py"]))
                assert [h["id"] for h in store.search_rows(f"t{i}", f"src/t{i}/f{k}.py")] == [f"{rid}.0"]
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert stores[0].sessions() == ["shared"] + [f"t{i}" for i in range(6)]
        assert [r["id"] for r in stores[1].ranges("shared")] == [f"r{k}" for k in range(1, 49)]
        assert len(stores[0].search_rows("shared", "shared")) == 48
    finally:
        for s in stores:
            s.close()


# --- lost connections ------------------------------------------------------------------------


def test_a_connection_lost_in_an_archive_is_retried_once(url: str, admin: Any, monkeypatch):
    with PostgresRecallStore(url) as s:
        killed: List[int] = []

        def before_commit(store: PostgresRecallStore, attempt: int) -> None:
            if attempt == 0:
                assert store._conn is not None
                killed.append(store._conn.info.backend_pid)
                kill(admin, killed[-1])

        monkeypatch.setattr(_recall_postgres, "_before_commit", before_commit)
        whole = archive_of("r1", [f"row {k}" for k in range(7)], "parts")
        parts = iter([{"range": whole["range"], "rows": whole["rows"][:3]}, {"rows": whole["rows"][3:]}])
        assert s.archive("s", parts) == whole["range"]
        assert len(killed) == 1 and s._conn is not None and s._conn.info.backend_pid != killed[0]
        assert rows_of(url, "s") == [(r["id"], r["json"]) for r in whole["rows"]]  # each row once
        assert ranges_of(url, "s") == [("r1", 1, "parts")]


def test_a_connection_lost_between_parts_replays_the_parts_read(url: str, admin: Any):
    with PostgresRecallStore(url) as s:
        whole = archive_of("r1", [f"row {k}" for k in range(6)])
        read = []

        def parts() -> Iterator[Dict[str, Any]]:
            read.append(1)
            yield {"range": whole["range"], "rows": whole["rows"][:2]}
            assert s._conn is not None
            kill(admin, s._conn.info.backend_pid)
            read.append(2)
            yield {"rows": whole["rows"][2:4]}
            read.append(3)
            yield {"rows": whole["rows"][4:]}

        s.archive("s", parts())
        assert read == [1, 2, 3]  # each part read once: the retry replays what was read
        assert rows_of(url, "s") == [(r["id"], r["json"]) for r in whole["rows"]]


def test_a_lost_commit_answer_finds_the_range_written(url: str, admin: Any, monkeypatch):
    """The COMMIT landed but its answer was lost: the retry finds the range with the
    same rows, and the archive succeeded (one copy)."""
    with PostgresRecallStore(url) as s:
        def after_commit(store: PostgresRecallStore, attempt: int) -> None:
            if attempt == 0:
                assert store._conn is not None
                kill(admin, store._conn.info.backend_pid)
                store._conn.execute("SELECT 1")  # the loss, as the COMMIT's answer would meet it

        monkeypatch.setattr(_recall_postgres, "_after_commit", after_commit)
        whole = archive_of("r1", ["one", "two"])
        assert s.archive("s", whole) == whole["range"]
        assert rows_of(url, "s") == [(r["id"], r["json"]) for r in whole["rows"]]
        assert ranges_of(url, "s") == [("r1", 1, "s")] and s.next_range_id("s") == "r2"


def test_a_second_loss_at_the_commit_asks_whether_it_landed(url: str, admin: Any, monkeypatch):
    """Lost before the first COMMIT, then the second COMMIT's answer lost: one look on
    a new connection finds the range written, and the archive succeeded."""
    with PostgresRecallStore(url) as s:
        def before_commit(store: PostgresRecallStore, attempt: int) -> None:
            if attempt == 0:
                assert store._conn is not None
                kill(admin, store._conn.info.backend_pid)

        def after_commit(store: PostgresRecallStore, attempt: int) -> None:
            if attempt == 1:
                assert store._conn is not None
                kill(admin, store._conn.info.backend_pid)
                store._conn.execute("SELECT 1")

        monkeypatch.setattr(_recall_postgres, "_before_commit", before_commit)
        monkeypatch.setattr(_recall_postgres, "_after_commit", after_commit)
        whole = archive_of("r1", ["one", "two"])
        assert s.archive("s", whole) == whole["range"]
        assert rows_of(url, "s") == [(r["id"], r["json"]) for r in whole["rows"]]


def test_a_connection_lost_twice_is_store_unavailable_and_writes_nothing(url: str, admin: Any, monkeypatch):
    with PostgresRecallStore(url) as s:
        attempts: List[int] = []

        def before_commit(store: PostgresRecallStore, attempt: int) -> None:
            attempts.append(attempt)
            assert store._conn is not None
            kill(admin, store._conn.info.backend_pid)

        monkeypatch.setattr(_recall_postgres, "_before_commit", before_commit)
        with pytest.raises(CompactError) as e:
            s.archive("s", archive_of("r1", ["one", "two"]))
        assert (e.value.code, e.value.path) == ("store_unavailable", "")
        assert "lost twice" in str(e.value) and "nothing of the range was written" in str(e.value)
        assert attempts == [0, 1]
        assert ranges_of(url, "s") == [] and rows_of(url, "s") == []
        monkeypatch.setattr(_recall_postgres, "_before_commit", None)
        assert s.next_range_id("s") == "r1"  # the store connects again
        s.archive("s", archive_of("r1", ["one"]))
        assert [r[0] for r in rows_of(url, "s")] == ["r1.0"]


def test_reads_are_retried_once(url: str, admin: Any, monkeypatch):
    with PostgresRecallStore(url) as s:
        fill(s, "a", "alpha")
        assert s._conn is not None
        pid = s._conn.info.backend_pid
        kill(admin, pid)
        assert s.sessions() == ["a"] and s._conn.info.backend_pid != pid
        kill(admin, s._conn.info.backend_pid)
        assert [h["id"] for h in find_rows(s, "a", plan_query("app.py"), 10)[0]] == ["r1.5", "r1.3"]
        # Every connection lost: the second loss is store_unavailable.
        real = s._connect

        def dying() -> Any:
            conn = real()
            kill(admin, conn.info.backend_pid)
            return conn

        monkeypatch.setattr(s, "_connect", dying)
        with pytest.raises(CompactError) as e:
            s.expand_rows("a", "r1")
        assert (e.value.code, e.value.path) == ("store_unavailable", "") and "lost twice" in str(e.value)
        monkeypatch.undo()
        assert len(s.expand_rows("a", "r1")) == 4


def test_no_server_is_store_unavailable():
    with pytest.raises(CompactError) as e:
        PostgresRecallStore("postgres://nobody:pw@127.0.0.1:1/none?sslmode=disable", timeout=2)
    assert (e.value.code, e.value.path) == ("store_unavailable", "")
    assert "pw@" not in str(e.value) and "nobody:xxxxx@127.0.0.1:1" in str(e.value)


# --- the engine --------------------------------------------------------------------------------


def test_the_lossless_engine_on_postgres_answers_as_on_sqlite(compactor, url: str):
    msgs = conversation(30)
    pg = PostgresRecallStore(url, compactor=compactor)
    calls = [("context_search", {"query": '"pytest -k t7"'}), ("context_search", {"query": "line", "limit": 3}),
             ("context_search", {"query": "LINE of output", "limit": 50}), ("context_search", {"query": "nothing-here"}),
             ("context_expand", {"id": "r1.17"}), ("context_expand", {"id": "r1", "max_tokens": 200}),
             ("context_expand", {"id": "r1"}), ("context_expand", {"id": "r9"}), ("context_search", {"query": "  "})]
    try:
        with ContextEngine(LOSSLESS, compactor=compactor, store=pg, session_id="s") as e, \
                ContextEngine(LOSSLESS, compactor=compactor, session_id="s") as lite:
            assert e.store is pg
            out = e.compress(msgs, force=True)
            lite.compress(msgs, force=True)
            assert e.last_range is not None and e.last_range == lite.last_range and e.last_range["id"] == "r1"
            res = json.loads(e.handle_tool_call("context_search", {"query": '"pytest -k t7"'}))
            assert [h["id"] for h in res["hits"]] in (["r1.16"], ["r1.summary", "r1.16"])
            many = json.loads(e.handle_tool_call("context_search", {"query": "line", "limit": 3}))
            assert len(many["hits"]) == 3 and many["total"] > 3
            one = json.loads(e.handle_tool_call("context_expand", {"id": "r1.17"}))
            assert one == {"id": "r1.17", "messages": [msgs[17]], "truncated": False}
            for name, args in calls:
                assert e.handle_tool_call(name, args) == lite.handle_tool_call(name, args), (name, args)
            assert pg.search("s", "pytest", 5) == lite.store.search("s", "pytest", 5)
            assert pg.expand("s", "r1.17") == lite.store.expand("s", "r1.17")
            # The next compaction is r2, in the database.
            e.compress(out + conversation(20)[2:], force=True)
            assert e.last_range is not None and e.last_range["id"] == "r2"
            assert [r[0] for r in ranges_of(url, "s")] == ["r1", "r2"]
        assert pg.sessions() == ["s"]  # a store given to the engine is not closed by it
    finally:
        pg.close()


def test_the_engine_opens_a_store_url(compactor, url: str):
    with ContextEngine(LOSSLESS, compactor=compactor, store=url, session_id="u") as e:
        store = e.store
        assert isinstance(store, PostgresRecallStore)
        e.compress(conversation(30), force=True)
        assert json.loads(e.handle_tool_call("context_search", {"query": "pytest"}))["total"] > 0
    assert repr(store).endswith("closed)")  # the engine's own store, closed with it
    with ContextEngine(LOSSLESS, compactor=compactor, store=url, session_id="u") as again:
        again.compress(conversation(30), force=True)
        assert again.last_range is not None and again.last_range["id"] == "r2"


# --- opening, the API --------------------------------------------------------------------------


def test_open_store_routes_by_url(url: str, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("CTXCOMPACT_RECALL_URL", raising=False)
    with pytest.raises(CompactError) as e:
        open_store()
    assert (e.value.code, e.value.path) == ("invalid_request", "/url") and "CTXCOMPACT_RECALL_URL" in str(e.value)
    monkeypatch.setenv("CTXCOMPACT_RECALL_URL", url)
    with open_store() as s:
        assert isinstance(s, PostgresRecallStore)
        s.archive("env", archive_of("r1", ["x"]))
    u = urllib.parse.urlsplit(url)
    dsn = f"host={u.hostname} port={u.port} dbname={u.path[1:]} user={u.username} sslmode=disable"
    for other in ("postgresql" + url[url.index(":"):], dsn):
        with open_store(other) as s:
            assert isinstance(s, PostgresRecallStore) and s.sessions() == ["env"], other
    with open_store("sqlite::memory:") as s:
        assert isinstance(s, RecallStore) and s.path is None
    for target, path in ((f"sqlite:{tmp_path}/a.db", tmp_path / "a.db"), (str(tmp_path / "b.db"), tmp_path / "b.db"),
                         (tmp_path / "c.db", tmp_path / "c.db")):
        with open_store(target, fts="like") as s:
            assert isinstance(s, RecallStore) and s.path == str(path) and s.fts == "like"
        assert path.exists()
    with pytest.raises(CompactError) as e:
        open_store("sqlite:")
    assert (e.value.code, e.value.path) == ("invalid_request", "/url")
    with pytest.raises(OptionError) as e:
        open_store(url, fts="like")
    assert e.value.path == "/fts"
    with pytest.raises(OptionError):
        open_store(3)  # type: ignore[arg-type]
    assert _recall_postgres.store_kind("host=db port=5432 dbname=x") == ("postgres", "host=db port=5432 dbname=x")
    assert _recall_postgres.store_kind("dir/a=b.db") == ("sqlite", "dir/a=b.db")
    assert _recall_postgres.store_kind("postgres://h/db") == ("postgres", "postgres://h/db")


def test_the_password_is_never_shown(url: str):
    u = urllib.parse.urlsplit(url)
    secret = urllib.parse.urlunsplit((u.scheme, f"{u.username}:s3cret-pw@{u.hostname}:{u.port}", u.path, u.query, ""))
    with PostgresRecallStore(secret) as s:  # the test server trusts its user: the password is not checked
        assert "s3cret" not in repr(s) and "s3cret" not in s.url and ":xxxxx@" in s.url
        assert repr(s) == f"PostgresRecallStore({s.url!r}, pg_trgm)"
    assert _recall_postgres.redact_url("host=h password='a b' user=u") == "host=h password=xxxxx user=u"
    assert _recall_postgres.redact_url("postgres://h/db?password=pw&sslmode=disable") == \
        "postgres://h/db?password=xxxxx&sslmode=disable"


def test_the_api_is_the_sqlite_stores(url: str):
    shared = {n for n in dir(RecallStore) if not n.startswith("_")}
    assert shared <= set(dir(PostgresRecallStore)), shared - set(dir(PostgresRecallStore))
    for name in shared:
        want = list(inspect.signature(getattr(RecallStore, name)).parameters)
        assert list(inspect.signature(getattr(PostgresRecallStore, name)).parameters) == want, name
    s = PostgresRecallStore(url)
    with s.reading():
        assert s.sessions() == [] and s.next_range_id("a") == "r1"
    s.close()
    s.close()
    for call in (s.sessions, lambda: s.archive("a", archive_of("r1", ["x"])), lambda: s.next_range_id("a")):
        with pytest.raises(CompactError) as e:
            call()
        assert e.value.code == "invalid_state"
    with pytest.raises(OptionError) as e:
        PostgresRecallStore(url, fts="like")  # type: ignore[call-arg]
    assert e.value.path == "/fts"
    with pytest.raises(OptionError):
        PostgresRecallStore(url, timeout=-1)


def test_the_readme_gives_the_real_signature():
    from test_readme import test_documented_signature_is_the_real_one

    test_documented_signature_is_the_real_one(PostgresRecallStore)


def test_without_psycopg_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError) as e:
        PostgresRecallStore("postgres://h/db")
    assert "pip install 'ctxcompact[postgres]'" in str(e.value)
    # Importing the recall module (and making a SQLite store) never imports psycopg.
    code = ("import sys, ctxcompact.recall as r; r.open_store('sqlite::memory:').close();"
            " assert 'psycopg' not in sys.modules, 'psycopg imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=120)
    assert out.returncode == 0, out.stderr


# --- the load-test worker ----------------------------------------------------------------------


def test_load_workers_archive_every_op_and_find_what_they_search(url: str):
    worker = str(HERE / "pg_load_worker.py")
    procs = [subprocess.Popen([sys.executable, worker, url, str(w), "12", "12", "3"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=child_env()) for w in range(4)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        (line,) = out.splitlines()
        outs.append(json.loads(line))
    archived = {}
    for w, o in enumerate(outs):
        assert set(o) == {"worker", "runtime", "archived", "conflicts", "errors", "searches", "search_errors"}
        assert (o["worker"], o["runtime"], o["errors"], o["searches"], o["search_errors"]) == (w, "python", [], 12, 0), o
        assert [a[2] for a in o["archived"]] == [f"w{w}o{i}" for i in range(12)]
        for session, rid, tag in o["archived"]:
            archived[(session, rid)] = tag
    assert sum(o["conflicts"] for o in outs) >= 0
    with PostgresRecallStore(url) as s:
        for session in s.sessions():
            rs = s.ranges(session)
            assert [r["id"] for r in rs] == [f"r{k}" for k in range(1, len(rs) + 1)]
            for r in rs:
                assert r["summary"] == "summary " + archived.pop((session, r["id"]))
                assert len(s.expand_rows(session, r["id"])) == 3
    assert archived == {}


def test_the_readme_route_with_the_postgres_extra(tmp_path, url):
    """`pip install './bindings/python[postgres]'` into a fresh venv (psycopg from PyPI or
    pip's cache, pinned through test.sh's constraints), then a store on PostgreSQL from
    that venv: archived, searched and expanded."""
    from test_wheel import _env, _fresh_venv

    env_dir = tmp_path / "venv"
    py = _fresh_venv(env_dir)
    env = _env()
    r = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "./bindings/python[postgres]"],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, f"pip install failed:\n{r.stdout}\n{r.stderr}"
    script = (
        "import json, sys, ctxcompact, psycopg\n"
        "from ctxcompact.recall import open_store\n"
        "s = open_store(sys.argv[1])\n"
        "rows = [{'id': 'r1.1', 'range_id': 'r1', 'position': 1, 'role': 'user', 'reason': 'summarized',\n"
        "         'json': '{\"role\":\"user\",\"content\":\"fix src/app.py\"}', 'text': 'user\\nfix src/app.py'}]\n"
        "s.archive('s1', {'range': {'id': 'r1', 'from_index': 1, 'to_index': 2, 'summary': 'sum'}, 'rows': rows})\n"
        "print(json.dumps({'file': ctxcompact.__file__, 'hits': [h['id'] for h in s.search_rows('s1', 'src/app.py')],\n"
        "                  'expand': s.expand_rows('s1', 'r1')}))\n"
        "s.close()\n")
    out = subprocess.run([str(py), "-c", script, url], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert Path(got["file"]).resolve().is_relative_to(env_dir.resolve()), got["file"]
    assert got["hits"] == ["r1.1"]
    assert got["expand"] == ['{"role":"user","content":"fix src/app.py"}']
