"""RecallStore (issue 17): the SQLite archive of lossless recall, with rows written by
hand in the shape the core's recall.archive gives (test_recall_engine.py runs it with
the core). Schema, persistence across processes, sessions kept apart,
delete_session, the FTS5 and LIKE modes giving the same hits, threads."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List

import pytest

import ctxcompact
from ctxcompact import CompactError, OptionError
from ctxcompact.recall import RecallStore, fts5_trigram_available, plan_query, split_terms

HAS_FTS5 = fts5_trigram_available()
needs_fts5 = pytest.mark.skipif(not HAS_FTS5, reason="this SQLite build has no FTS5 trigram tokenizer")


def msg_text(m: Dict[str, Any]) -> str:
    """A stand-in for the core's searchable text: role, content, tool calls."""
    parts = [m["role"]]
    if isinstance(m.get("content"), str):
        parts.append(m["content"])
    for tc in m.get("tool_calls") or ():
        parts.append(tc["function"]["name"])
        parts.append(tc["function"]["arguments"])
    return "\n".join(parts)


def archive_rows(range_id: str, start: int, msgs: List[Dict[str, Any]], summary: str) -> Dict[str, Any]:
    """What recall.archive returns for msgs archived from input index start on."""
    rows = []
    for i, m in enumerate(msgs):
        pos = start + i
        rows.append({"id": f"{range_id}.{pos}", "range_id": range_id, "position": pos, "role": m["role"],
                     "reason": "summarized", "json": json.dumps(m, ensure_ascii=False), "text": msg_text(m)})
    smsg = {"role": "user", "content": summary}
    rows.append({"id": f"{range_id}.summary", "range_id": range_id, "position": start, "role": "summary",
                 "reason": "summary", "json": json.dumps(smsg), "text": "summary\n" + summary})
    return {"range": {"id": range_id, "from_index": start, "to_index": start + len(msgs), "summary": summary},
            "rows": rows}


def turn(i: int, path: str, output: str) -> List[Dict[str, Any]]:
    cid = f"call_{i}"
    return [
        {"role": "assistant", "content": f"Reading {path}.",
         "tool_calls": [{"id": cid, "type": "function",
                         "function": {"name": "read_file", "arguments": json.dumps({"path": path})}}]},
        {"role": "tool", "tool_call_id": cid, "content": output},
    ]


def session_msgs(tag: str) -> List[Dict[str, Any]]:
    msgs: List[Dict[str, Any]] = [{"role": "user", "content": f"Add error handling to the {tag} service."}]
    msgs += turn(1, f"src/{tag}/app.py", f"def main():\n    return run_{tag}()  # 100% of_the work\n")
    msgs += turn(2, "tests/test_app.py", "def test_main():\n    assert main() == 0\n")
    msgs += turn(3, "README.md", "Überblick: the café\\bar service, naïve mode.\n")
    return msgs


def fill(store: RecallStore, session: str, tag: str) -> List[Dict[str, Any]]:
    msgs = session_msgs(tag)
    store.archive(session, archive_rows("r1", 2, msgs[:4], f"Summary one of {tag}."))
    store.archive(session, archive_rows("r2", 3, msgs[4:], f"Summary two of {tag}: README read."))
    return msgs


QUERIES = [
    "src/alpha/app.py", "app.py", "APP.PY", "tests/test_app.py", "read_file", "error handling",
    '"error handling"', '"handling error"', "100%", "100% of_the", "of_the", "ofXthe", "a", "py",
    "main", "summary", "Summary two", "café", "CAFÉ", "Überblick", "naïve", "\\bar", "%", "_",
    "assert main() == 0", "nothing-like-this", "r1", "tool", '"x', 'run_alpha()', 'a"b',
]


# --- the query plan ------------------------------------------------------------------------


def test_split_terms_and_plan():
    assert split_terms('  src/app.py  "add error handling" foo.bar ') == ["src/app.py", "add error handling", "foo.bar"]
    assert split_terms('say "unclosed phrase') == ["say", "unclosed phrase"]
    assert split_terms('"" x') == ["x"]
    p = plan_query('src/app.py ab "x"y" 50%_off')
    # A word ends at a quote; the unclosed quote runs to the end.
    assert p["terms"] == ["src/app.py", "ab", "x", "y", "50%_off"]
    # Short terms are LIKE only; every FTS term is a quoted phrase.
    assert p["fts"] == '"src/app.py" AND "50%_off"'
    assert p["like"] == ["%src/app.py%", "%ab%", "%x%", "%y%", "%50\\%\\_off%"]
    # Repeats (ASCII case-insensitive) once; Unicode spaces separate; phrases trimmed.
    assert split_terms("Foo foo FOO f\u00f6o F\u00d6O") == ["Foo", "f\u00f6o", "F\u00d6O"]
    assert split_terms("a\u3000b\u00a0c\u2003d") == ["a", "b", "c", "d"]
    assert split_terms('"  spaced phrase\u2002 "') == ["spaced phrase"]
    assert plan_query('say "x""y"')["fts"] == '"say"'
    assert plan_query(['a"bc'])["fts"] == '"a""bc"'
    for empty in ("", "   ", '""', []):
        with pytest.raises(CompactError) as e:
            plan_query(empty)
        assert (e.value.code, e.value.path) == ("invalid_request", "/query")


# --- schema ----------------------------------------------------------------------------------


def columns(conn: sqlite3.Connection, table: str) -> List[tuple]:
    return [(r[1], r[2], r[3], r[5]) for r in conn.execute(f"PRAGMA table_info({table})")]


def test_schema_is_the_spec(tmp_path: Path):
    path = tmp_path / "recall.db"
    with RecallStore(path) as s:
        fill(s, "s1", "alpha")
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # a rollback journal (docs/RECALL.md)
        meta = dict(conn.execute("SELECT key, value FROM ctxc_meta"))
        assert meta == {"schema_version": "1", "fts": "fts5" if HAS_FTS5 else "like"}
        assert columns(conn, "ctxc_meta") == [("key", "TEXT", 0, 1), ("value", "TEXT", 1, 0)]
        assert columns(conn, "ctxc_ranges") == [
            ("session", "TEXT", 1, 1), ("id", "TEXT", 1, 2), ("seq", "INTEGER", 1, 0),
            ("from_index", "INTEGER", 1, 0), ("to_index", "INTEGER", 1, 0), ("summary", "TEXT", 1, 0)]
        assert columns(conn, "ctxc_messages") == [
            ("rowid", "INTEGER", 0, 1), ("session", "TEXT", 1, 0), ("id", "TEXT", 1, 0),
            ("range_id", "TEXT", 1, 0), ("position", "INTEGER", 1, 0), ("role", "TEXT", 1, 0),
            ("reason", "TEXT", 1, 0), ("json", "TEXT", 1, 0), ("text", "TEXT", 1, 0)]
        uniques = [r for r in conn.execute("PRAGMA index_list(ctxc_messages)") if r[2]]
        assert [[c[2] for c in conn.execute(f"PRAGMA index_info({u[1]})")] for u in uniques] == [["session", "id"]]
        fts_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'ctxc_fts'").fetchone()
        if HAS_FTS5:
            assert "fts5" in fts_sql[0] and "tokenize='trigram'" in fts_sql[0]
            assert "content='ctxc_messages'" in fts_sql[0] and "content_rowid='rowid'" in fts_sql[0]
            conn.execute("INSERT INTO ctxc_fts(ctxc_fts) VALUES('integrity-check')")
        else:
            assert fts_sql is None
        # Ranges numbered in order; the summary row of each range is a message row.
        assert list(conn.execute("SELECT session, id, seq, from_index, to_index FROM ctxc_ranges ORDER BY seq")) == [
            ("s1", "r1", 1, 2, 6), ("s1", "r2", 2, 3, 6)]
        assert conn.execute(
            "SELECT id, role, reason, position FROM ctxc_messages WHERE id = 'r2.summary'").fetchone() == (
            "r2.summary", "summary", "summary", 3)
        # Insertion order is rowid order: r1's rows, then r2's.
        ids = [r[0] for r in conn.execute("SELECT id FROM ctxc_messages ORDER BY rowid")]
        assert ids == ["r1.2", "r1.3", "r1.4", "r1.5", "r1.summary", "r2.3", "r2.4", "r2.5", "r2.summary"]
    finally:
        conn.close()


def test_in_memory_and_range_ids():
    with RecallStore() as s:
        assert s.path is None and s.sessions() == []
        assert s.next_range_id("a") == "r1"
        fill(s, "a", "alpha")
        assert s.next_range_id("a") == "r3" and s.next_range_id("b") == "r1"
        assert [r["id"] for r in s.ranges("a")] == ["r1", "r2"]
        assert s.ranges("a")[1] == {"id": "r2", "from_index": 3, "to_index": 6,
                                    "summary": "Summary two of alpha: README read."}


def test_archive_is_one_transaction():
    with RecallStore() as s:
        msgs = fill(s, "a", "alpha")
        before = s.search_rows("a", "summary")
        # r2 exists: nothing of this archive is written.
        with pytest.raises(CompactError) as e:
            s.archive("a", archive_rows("r2", 0, msgs, "again"))
        assert (e.value.code, e.value.path) == ("invalid_state", "/range/id")
        # A duplicate message id inside one archive: the range row is rolled back too.
        bad = archive_rows("r3", 0, msgs[:2], "dup")
        bad["rows"][1]["id"] = bad["rows"][0]["id"]
        with pytest.raises(CompactError) as e:
            s.archive("a", bad)
        assert e.value.code == "invalid_state"
        assert [r["id"] for r in s.ranges("a")] == ["r1", "r2"]
        assert s.search_rows("a", "summary") == before
        assert s.expand_rows("a", "r3") == []
        with pytest.raises(OptionError):
            s.archive("a", {"range": {"id": "r3"}, "rows": []})
        with pytest.raises(OptionError):
            s.archive("", archive_rows("r3", 0, msgs, "x"))


def test_archive_in_parts_is_one_transaction():
    """An archive as an iterable of parts (the range in the first): every part's
    rows in order; a part that is malformed, holds a range after the first, has a
    row of another range, or an iterable that raises: nothing written."""
    with RecallStore() as s:
        msgs = session_msgs("alpha")
        whole = archive_rows("r1", 0, msgs, "in two parts")
        first = {"range": whole["range"], "rows": whole["rows"][:3]}
        second = {"rows": whole["rows"][3:]}
        assert s.archive("a", [first, second]) == whole["range"]
        assert [json.loads(j) for j in s.expand_rows("a", "r1")] == msgs
        assert s._conn is not None
        ids = [r for (r,) in s._conn.execute("SELECT id FROM ctxc_messages WHERE session = 'a' ORDER BY rowid")]
        assert ids == [r["id"] for r in whole["rows"]]

        def raising():
            yield archive_rows("r2", 0, msgs[:2], "first part")
            raise RuntimeError("the core failed")

        other = archive_rows("r2", 0, msgs[:2], "x")
        other["rows"][0]["range_id"] = "r1"
        for bad, want in [
            (lambda: s.archive("a", raising()), RuntimeError),
            (lambda: s.archive("a", [archive_rows("r2", 0, msgs[:2], "x"), archive_rows("r2", 2, msgs[2:], "y")]),
             OptionError),
            (lambda: s.archive("a", [archive_rows("r2", 0, msgs[:2], "x"), {"rows": "no"}]), OptionError),
            (lambda: s.archive("a", [{"rows": whole["rows"]}]), OptionError),
            (lambda: s.archive("a", [other]), OptionError),
            (lambda: s.archive("a", []), OptionError),
            (lambda: s.archive("a", "r2"), OptionError),
            (lambda: s.archive("a", iter([first])), CompactError),  # r1 is taken
        ]:
            with pytest.raises(want):
                bad()
            assert [r["id"] for r in s.ranges("a")] == ["r1"]
            assert s.count_rows("a", "part") == 1  # r1's summary row only
            assert not s._conn.in_transaction
        assert s.next_range_id("a") == "r2"


def test_expand_rows_by_range_and_message():
    with RecallStore() as s:
        msgs = fill(s, "a", "alpha")
        # A range: its archived messages in input order, as stored, not its summary.
        assert [json.loads(j) for j in s.expand_rows("a", "r1")] == msgs[:4]
        assert [json.loads(j) for j in s.expand_rows("a", "r2")] == msgs[4:]
        assert json.loads(s.expand_rows("a", "r2.4")[0]) == msgs[5]
        assert json.loads(s.expand_rows("a", "r1.summary")[0]) == {"role": "user", "content": "Summary one of alpha."}
        stored = s.messages("a", "r1.3")
        assert stored == [{"id": "r1.3", "range_id": "r1", "position": 3, "role": "assistant",
                           "reason": "summarized", "json": json.dumps(msgs[1], ensure_ascii=False)}]
        # Ids are case-sensitive; unknown ids give nothing.
        for unknown in ("R1", "r1.0", "r9", "r1.", ""):
            assert s.expand_rows("a", unknown) == []


def test_json_is_stored_byte_for_byte():
    odd = '{"role":"tool",  "tool_call_id":"c1","content":"caf\\u00e9 \u00fcber\\n","extra":{"k":[1,2.50,true]}}'
    with RecallStore() as s:
        s.archive("a", {"range": {"id": "r1", "from_index": 0, "to_index": 1, "summary": "s"},
                        "rows": [{"id": "r1.0", "range_id": "r1", "position": 0, "role": "tool",
                                  "reason": "summarized", "json": odd, "text": "tool\ncafé über"}]})
        assert s.expand_rows("a", "r1.0") == [odd]


# --- sessions --------------------------------------------------------------------------------


def test_two_sessions_do_not_see_each_other(tmp_path: Path):
    with RecallStore(tmp_path / "r.db") as s:
        fill(s, "alpha-session", "alpha")
        fill(s, "beta-session", "beta")
        assert s.sessions() == ["alpha-session", "beta-session"]
        a = s.search_rows("alpha-session", "app.py")
        assert [h["id"] for h in a] == ["r1.5", "r1.3"]
        assert "alpha" in a[1]["text"] and not any("beta" in h["text"] for h in a)
        assert s.search_rows("alpha-session", "src/beta/app.py") == []
        assert [h["id"] for h in s.search_rows("beta-session", "src/beta/app.py")] == ["r1.3"]
        # The same ids in both sessions, each its own message.
        assert json.loads(s.expand_rows("alpha-session", "r1.3")[0])["content"] != json.loads(
            s.expand_rows("beta-session", "r1.3")[0])["content"]
        assert s.expand_rows("gamma", "r1") == [] and s.search_rows("gamma", "app") == []


def test_delete_session_removes_one(tmp_path: Path):
    with RecallStore(tmp_path / "r.db") as s:
        fill(s, "a", "alpha")
        fill(s, "b", "beta")
        b_hits = s.search_rows("b", "py")
        assert s.delete_session("a") == 9
        assert s.sessions() == ["b"]
        assert s.search_rows("a", "app.py") == [] and s.expand_rows("a", "r1") == [] and s.ranges("a") == []
        assert s.search_rows("b", "py") == b_hits
        assert s.delete_session("a") == 0
        # The index stays in sync with the table, and ids start again at r1.
        if s.file_fts == "fts5":
            s._c().execute("INSERT INTO ctxc_fts(ctxc_fts) VALUES('integrity-check')")
        assert s.next_range_id("a") == "r1"
        fill(s, "a", "gamma")
        assert [h["id"] for h in s.search_rows("a", "src/gamma")] == ["r1.3"]


# --- FTS5 and LIKE ---------------------------------------------------------------------------


@needs_fts5
def test_fts5_and_like_give_the_same_hits(tmp_path: Path):
    fts = RecallStore(tmp_path / "fts.db")
    like = RecallStore(tmp_path / "like.db", fts="like")
    try:
        assert (fts.fts, fts.file_fts, like.fts, like.file_fts) == ("fts5", "fts5", "like", "like")
        for store in (fts, like):
            fill(store, "a", "alpha")
            fill(store, "b", "beta")
        seen_some = 0
        for q in QUERIES:
            for session in ("a", "b"):
                got = fts.search_rows(session, q)
                assert got == like.search_rows(session, q), q
                assert got == fts.search_rows(session, q, limit=None)
                assert fts.search_rows(session, q, limit=2) == got[:2]
                assert fts.count_rows(session, q) == like.count_rows(session, q) == len(got)
                seen_some += bool(got)
        assert seen_some > 30  # the queries do find things
        # A LIKE file stays one: asking it for FTS5 is an error.
        with pytest.raises(CompactError) as e:
            RecallStore(tmp_path / "like.db", fts="fts5")
        assert (e.value.code, e.value.path) == ("invalid_request", "/fts")
        with RecallStore(tmp_path / "like.db") as reopened:
            assert reopened.fts == "like"
        # The same file read both ways (forcing LIKE on an indexed file).
        fts.close()
        forced = RecallStore(tmp_path / "fts.db", fts="like")
        assert (forced.fts, forced.file_fts) == ("like", "fts5")
        for q in QUERIES:
            assert forced.search_rows("a", q) == like.search_rows("a", q), q
        # Writes through the forced store keep the index in sync.
        forced.archive("c", archive_rows("r1", 0, session_msgs("gamma"), "g"))
        forced.close()
        again = RecallStore(tmp_path / "fts.db")
        assert again.fts == "fts5"
        assert [h["id"] for h in again.search_rows("c", "src/gamma/app.py")] == ["r1.1"]
        again._c().execute("INSERT INTO ctxc_fts(ctxc_fts) VALUES('integrity-check')")
        again.close()
    finally:
        fts.close()
        like.close()


@pytest.mark.parametrize("fts", [None, "like"])
def test_count_limit_bounds_the_total(fts):
    with RecallStore(fts=fts) as s:
        for tag in ("a", "b", "c"):
            fill(s, tag, tag)  # three sessions: counts stay per session
        fill(s, "x", "alpha")
        s.archive("x", archive_rows("r3", 0, session_msgs("beta") * 2, "more"))
        n = s.count_rows("x", "py")
        assert n == len(s.search_rows("x", "py")) == 6
        assert [s.count_rows("x", "py", k) for k in (1, 3, 6, 7, 500)] == [1, 3, 6, 6, 6]
        assert s.count_rows("x", "src/beta/app.py", 5) == 2 and s.count_rows("a", "src/beta/app.py", 5) == 0
        with pytest.raises(OptionError):
            RecallStore(count_limit=0)
        with pytest.raises(OptionError):
            s.count_rows("x", "py", "3")  # type: ignore[arg-type]


def test_search_semantics():
    with RecallStore() as s:
        fill(s, "a", "alpha")
        ids = lambda q: [h["id"] for h in s.search_rows("a", q)]  # noqa: E731
        assert ids("tests/test_app.py") == ["r1.5"]
        assert ids("app.py") == ["r1.5", "r1.3"]
        # Paths and identifiers match literally, case-insensitively (ASCII).
        assert ids("src/alpha/app.py") == ["r1.3"]
        assert ids("SRC/ALPHA/APP.PY") == ["r1.3"]
        assert ids("src/alpha/appXpy") == []
        # Every term must match; a phrase is one term.
        assert ids("assert main") == ["r2.3"]
        assert ids('"main() == 0" assert') == ["r2.3"]
        assert ids('"assert main() == 1"') == []
        # % and _ are literal.
        assert ids("100%") == ["r1.4"] and ids("of_the") == ["r1.4"] and ids("ofXthe") == []
        # Newest first: summaries and messages alike.
        assert ids("summary") == ["r2.summary", "r1.summary"]
        hit = s.search_rows("a", "README")[0]
        assert hit == {"id": "r2.summary", "range_id": "r2", "position": 3, "role": "summary",
                       "text": "summary\nSummary two of alpha: README read."}
        with pytest.raises(OptionError):
            s.search_rows("a", "x", limit=-1)
        with pytest.raises(OptionError):
            s.search_rows("a", 3)  # type: ignore[arg-type]
        with pytest.raises(CompactError):
            s.search_rows("a", "  ")


# --- processes and threads -------------------------------------------------------------------

CHILD = r"""
import json, sys
from ctxcompact.recall import RecallStore
path, action = sys.argv[1], sys.argv[2]
with RecallStore(path) as s:
    if action == "read":
        out = {"sessions": s.sessions(), "hits": s.search_rows("a", "src/alpha/app.py"),
               "r2": s.expand_rows("a", "r2"), "next": s.next_range_id("a")}
        print(json.dumps(out))
    elif action == "write":
        n = int(sys.argv[3])
        for k in range(1, n + 1):
            rid = s.next_range_id(sys.argv[4])
            s.archive(sys.argv[4], {"range": {"id": rid, "from_index": 0, "to_index": 1, "summary": "s"},
                                    "rows": [{"id": rid + ".0", "range_id": rid, "position": 0, "role": "user",
                                              "reason": "summarized", "json": "{}", "text": "child write %d" % k}]})
        print("ok")
"""


def run_child(*args: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_persists_across_processes(tmp_path: Path):
    path = tmp_path / "recall.db"
    with RecallStore(path) as s:
        msgs = fill(s, "a", "alpha")
        expect_hits = s.search_rows("a", "src/alpha/app.py")
    got = json.loads(run_child(str(path), "read"))
    assert got["sessions"] == ["a"]
    assert got["hits"] == expect_hits and [h["id"] for h in expect_hits] == ["r1.3"]
    assert [json.loads(j) for j in got["r2"]] == msgs[4:]
    assert got["next"] == "r3"
    # And the other way: what a child writes, this process reads.
    assert run_child(str(path), "write", "2", "child").strip() == "ok"
    with RecallStore(path) as s:
        assert [r["id"] for r in s.ranges("child")] == ["r1", "r2"]
        assert [h["id"] for h in s.search_rows("child", "child write")] == ["r2.0", "r1.0"]


def test_writers_in_two_processes_are_serialized(tmp_path: Path):
    path = tmp_path / "recall.db"
    RecallStore(path).close()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(path), "write", "25", f"p{i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == "ok"
    with RecallStore(path) as s:
        for i in range(2):
            assert [r["id"] for r in s.ranges(f"p{i}")] == [f"r{k}" for k in range(1, 26)]
            assert len(s.search_rows(f"p{i}", "child write")) == 25


def test_threads_share_one_store(tmp_path: Path):
    store = RecallStore(tmp_path / "r.db")
    errors: List[BaseException] = []
    start = threading.Barrier(6)

    def work(i: int) -> None:
        try:
            start.wait()
            session = f"t{i}"
            for k in range(1, 11):
                rid = store.next_range_id(session)
                store.archive(session, archive_rows(rid, k, turn(k, f"src/t{i}/f{k}.py", "out"), f"sum {i} {k}"))
                assert [h["id"] for h in store.search_rows(session, f"src/t{i}/f{k}.py")] == [f"{rid}.{k}"]
                assert store.search_rows(session, f"src/t{(i + 1) % 6}/") == []
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert store.sessions() == [f"t{i}" for i in range(6)]
        for i in range(6):
            assert [r["id"] for r in store.ranges(f"t{i}")] == [f"r{k}" for k in range(1, 11)]
            assert len(store.search_rows(f"t{i}", "summary")) == 10
    finally:
        store.close()


# --- lifecycle -------------------------------------------------------------------------------


def test_close_and_errors(tmp_path: Path):
    s = RecallStore(tmp_path / "r.db")
    s.close()
    s.close()
    with pytest.raises(CompactError) as e:
        s.sessions()
    assert e.value.code == "invalid_state"
    with pytest.raises(OptionError):
        RecallStore(fts="sqlite")
    # A file of another schema version is refused, and not changed.
    p = tmp_path / "v9.db"
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE ctxc_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO ctxc_meta VALUES ('schema_version', '9')")
    conn.commit()
    conn.close()
    with pytest.raises(CompactError) as e:
        RecallStore(p)
    assert e.value.code == "invalid_state" and "schema version 9; this ctxcompact reads and writes version 1" in str(e.value)
    conn = sqlite3.connect(p)
    assert dict(conn.execute("SELECT key, value FROM ctxc_meta")) == {"schema_version": "9"}
    conn.close()


def test_package_exports_and_lazy_sqlite():
    assert ctxcompact.RecallStore is RecallStore
    code = "import sys, ctxcompact; assert 'sqlite3' not in sys.modules; ctxcompact.RecallStore; assert 'sqlite3' in sys.modules"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr


def test_a_full_disk_is_the_error_not_cannot_rollback(tmp_path: Path):
    """SQLite rolls a transaction back itself on a full disk; the store's own
    ROLLBACK then fails ("cannot rollback - no transaction is active"), and must not
    hide the real error. sqlite3 errors are CompactError internal, the sqlite3
    error their cause."""
    import sqlite3

    from ctxcompact import CompactError

    path = tmp_path / "full.db"
    with RecallStore(path) as s:
        s.archive("a", {"range": {"id": "r1", "from_index": 0, "to_index": 1, "summary": "s"},
                        "rows": [{"id": "r1.0", "range_id": "r1", "position": 0, "role": "user", "reason": "summarized",
                                  "json": "{}", "text": "small"}]})
        assert s._conn is not None
        (pages,) = s._conn.execute("PRAGMA page_count").fetchone()
        s._conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full now
        big = "x" * 200_000
        with pytest.raises(CompactError) as e:
            s.archive("a", {"range": {"id": "r2", "from_index": 0, "to_index": 1, "summary": big},
                            "rows": [{"id": "r2.0", "range_id": "r2", "position": 0, "role": "user",
                                      "reason": "summarized", "json": "{}", "text": big}]})
        assert e.value.code == "internal", e.value
        assert "database or disk is full" in str(e.value) and "cannot rollback" not in str(e.value)
        assert isinstance(e.value.__cause__, sqlite3.Error)
        s._conn.execute("PRAGMA max_page_count = 1073741823")
        assert [r["id"] for r in s.ranges("a")] == ["r1"], "nothing of r2 was written"
        s.archive("a", {"range": {"id": "r2", "from_index": 0, "to_index": 1, "summary": "s"}, "rows": []})


def test_a_read_only_store_is_read_not_written(tmp_path: Path):
    from ctxcompact import CompactError

    path = tmp_path / "ro.db"
    with RecallStore(path) as s:
        s.archive("a", {"range": {"id": "r1", "from_index": 0, "to_index": 1, "summary": "s"},
                        "rows": [{"id": "r1.0", "range_id": "r1", "position": 0, "role": "user", "reason": "summarized",
                                  "json": "{}", "text": "wrote this"}]})
    with RecallStore(path, read_only=True) as s:
        assert s.read_only and s.count_rows("a", "wrote") == 1 and s.expand_rows("a", "r1") == ["{}"]
        for write in (lambda: s.delete_session("a"),
                      lambda: s.archive("a", {"range": {"id": "r2", "from_index": 0, "to_index": 1, "summary": ""}, "rows": []})):
            with pytest.raises(CompactError) as e:
                write()
            assert (e.value.code, e.value.path) == ("invalid_state", "/path") and "is read-only" in str(e.value)
    with pytest.raises(CompactError) as e:
        RecallStore(tmp_path / "none.db", read_only=True)
    assert (e.value.code, e.value.path) == ("invalid_state", "/path")
    with RecallStore(path) as s:
        assert not s.read_only and [r["id"] for r in s.ranges("a")] == ["r1"]
