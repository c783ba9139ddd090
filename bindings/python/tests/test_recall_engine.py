"""ContextEngine with lossless recall (issue 17): the options, compressor mode
unchanged, and (with the core's recall ops) the lossless engine over shared traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ctxcompact
from ctxcompact import ContextEngine, OptionError, _engine
from ctxcompact.recall import RecallStore


def test_store_and_session_options(compactor, tmp_path: Path):
    with pytest.raises(OptionError) as e:
        ContextEngine(compactor=compactor, store=3)  # type: ignore[arg-type]
    assert e.value.path == "/store"
    with pytest.raises(OptionError) as e:
        ContextEngine(compactor=compactor, session_id=7)  # type: ignore[arg-type]
    assert e.value.path == "/session_id"
    with pytest.raises(OptionError):
        ContextEngine(compactor=compactor, session_id="")
    with pytest.raises(OptionError):
        ContextEngine(compactor=compactor, stor="x.db")  # type: ignore[call-arg]
    a = ContextEngine(compactor=compactor)
    b = ContextEngine(compactor=compactor)
    assert a.session_id != b.session_id and a.session_id.startswith("session-")
    a.on_session_start("hermes-session-1")
    assert a.session_id == "hermes-session-1"
    # The earlier name takes them too.
    c = ctxcompact.CompactionEngine(None, None, compactor=compactor, session_id="s")
    assert c.session_id == "s"


def test_compressor_mode_has_only_the_context_tools_and_no_store(compactor, tmp_path: Path):
    path = tmp_path / "never.db"
    e = ContextEngine({"model": {"context_length": 8000}}, compactor=compactor, store=path, session_id="s")
    assert e.lossless is False
    assert [t["name"] for t in e.get_tool_schemas("anthropic")] == ["context_status", "compact_now"]
    out = json.loads(e.handle_tool_call("context_search", {"query": "x"}))
    assert "unknown tool" in out["error"] and "context.engine is compressor" in out["error"]
    from conftest import conversation

    msgs = conversation(30)
    e.compress(msgs, force=True)
    assert e.last_report["compacted"] and e.last_range is None
    # Nothing archived, no file made: compressor mode never opens the store.
    assert not path.exists()
    e.close()
    with pytest.raises(OptionError):
        e.get_tool_schemas(fmt="openai")  # type: ignore[call-arg]


def test_a_lossless_compaction_is_one_session_run_sequence(compactor, monkeypatch):
    """The engine runs session.run alone (the core asks for the range id, the
    summary and the archive as effects: no recall.archive or engine.record calls),
    and the store gets the range and rows in one archive."""
    with ContextEngine(LOSSLESS, compactor=compactor, session_id="s1") as e:
        ops = []
        run, session_run = compactor._run, _engine._session_run

        def counting(op, parts, run=run):
            ops.append(op)
            return run(op, parts)

        def counting_steps(c, parts):
            ops.append(b"session.run")
            return session_run(c, parts)

        archives = []
        archive = e.store.archive

        def listing(session, parts):
            archives.append(list(parts))
            return archive(session, archives[-1])

        monkeypatch.setattr(e.store, "archive", listing)
        monkeypatch.setattr(compactor, "_run", counting)
        monkeypatch.setattr(_engine, "_session_run", counting_steps)
        e.compress(conversation(30), force=True)
        monkeypatch.setattr(compactor, "_run", run)
        monkeypatch.setattr(_engine, "_session_run", session_run)
        assert set(ops) == {b"session.run"} and len(ops) == 3  # range id, archive, the end
        assert len(e.last_archived) > 8 and len(archives) == 1 and len(archives[0]) == 1  # one part
        (one,) = archives[0]
        assert e.last_range == {k: one["range"][k] for k in ("id", "from_index", "to_index", "summary")}
        assert [r["id"] for r in e.store.messages("s1", "r1")] == [
            r["id"] for r in one["rows"] if r["reason"] != "summary"]


def test_a_given_store_is_not_closed_by_the_engine(compactor):
    store = RecallStore()
    e = ContextEngine(compactor=compactor, store=store)
    e.close()
    assert store.sessions() == []
    store.close()


# --- lossless mode (the core's recall ops) ---------------------------------------------------

import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from typing import Any, Dict, List, Tuple  # noqa: E402

from conftest import conversation, load_trace, need_trace  # noqa: E402

LOSSLESS: Dict[str, Any] = {"model": {"context_length": 32000}, "context": {"engine": "lossless"}}
TRACE = "mini-swe-agent-deepseek-django-13964.json"
PATH_RE = re.compile(r"(?:[\w.-]+/)+[\w.-]+\.py")


def compact_json(m: Any) -> str:
    """The bytes the binding sends (and the core stores) for an archived original."""
    return json.dumps(m, ensure_ascii=False, separators=(",", ":"))


def expand_line(summary: str) -> str:
    lines = [ln for ln in summary.splitlines() if ln.startswith("Expand for details about: ")]
    assert len(lines) == 1, summary[-1500:]
    return lines[0]


def test_lossless_compress_archives_every_original(compactor, tmp_path: Path):
    msgs = conversation(30)
    msgs[5]["content"] = "caf\u00e9 \u00fcber \U0001F600 " + msgs[5]["content"]  # non-ASCII stays as it was
    with ContextEngine(LOSSLESS, compactor=compactor, store=tmp_path / "r.db", session_id="s1") as e:
        assert e.lossless
        out = e.compress(msgs, force=True)
        rep = e.last_report
        assert rep["compacted"] and rep["summarized"] is not None
        assert e.last_range is not None and e.last_range["id"] == "r1"
        assert (e.last_range["from_index"], e.last_range["to_index"]) == (rep["summarized"]["from"], rep["summarized"]["to"])
        # The range's summary is the summary message's text.
        summary = out[rep["head_end"]]["content"]
        assert isinstance(summary, str) and "[CONTEXT COMPACTION]" in summary
        assert e.last_range["summary"] == summary
        assert json.loads(e.store.expand_rows("s1", "r1.summary")[0]) == out[rep["head_end"]]
        # Every archived original is stored, its JSON as the binding sent it.
        store = e.store
        for a in e.last_archived:
            rows = store.messages("s1", f"r1.{a['index']}")
            assert len(rows) == 1 and rows[0]["json"] == compact_json(msgs[a["index"]])
            assert rows[0]["reason"] == a["reason"]
        # The range: every archived row but the summary (the system prompt that got
        # the compaction note too), in input order.
        assert [json.loads(j) for j in store.expand_rows("s1", "r1")] == [msgs[a["index"]] for a in e.last_archived]
        assert {a["reason"] for a in e.last_archived} >= {"summarized"}
        assert "\u00fcber \U0001F600" in store.messages("s1", "r1.5")[0]["json"]
        # The next compaction is r2.
        e.compress(out + conversation(20)[2:], force=True)
        assert e.last_range["id"] == "r2" and [r["id"] for r in store.ranges("s1")] == ["r1", "r2"]


def test_summary_names_its_range(compactor):
    with ContextEngine(LOSSLESS, compactor=compactor, session_id="s1") as e:
        out = e.compress(conversation(30), force=True)
        summary = out[e.last_report["head_end"]]["content"]
        assert 'Archived as r1 (messages ' in summary
        assert 'call context_expand with {"id": "r1"} for the originals' in summary
        assert "pytest" in expand_line(summary)
        out = e.compress(out + conversation(20)[2:], force=True)
        assert "Archived as r2 " in out[e.last_report["head_end"]]["content"]
    # Compressor mode: no archive lines.
    with ContextEngine({"model": {"context_length": 32000}}, compactor=compactor) as plain:
        out = plain.compress(conversation(30), force=True)
        assert "Archived as" not in out[plain.last_report["head_end"]]["content"]


def test_tool_schemas_in_three_shapes(compactor):
    with ContextEngine(LOSSLESS, compactor=compactor) as e:
        chat = e.get_tool_schemas()
        assert chat == e.get_tool_schemas("openai")
        names = ["context_search", "context_expand", "context_status", "compact_now"]
        assert [t["function"]["name"] for t in chat] == names
        assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in chat)
        assert chat[0]["function"]["parameters"]["required"] == ["query"]
        resp = e.get_tool_schemas("responses")
        assert [(t["type"], t["name"]) for t in resp] == [("function", n) for n in names]
        assert resp[1]["parameters"] == chat[1]["function"]["parameters"]
        anth = e.get_tool_schemas("anthropic")
        assert [t["name"] for t in anth] == names
        assert anth[0]["input_schema"] == chat[0]["function"]["parameters"] and "type" not in anth[0]
        with pytest.raises(ctxcompact.CompactError) as err:
            e.get_tool_schemas("gemini")
        assert (err.value.code, err.value.path) == ("invalid_request", "/format")


def test_handle_tool_call(compactor):
    msgs = conversation(30)
    with ContextEngine(LOSSLESS, compactor=compactor, session_id="s") as e:
        assert e.store.path is None  # no store given: one in memory
        e.compress(msgs, force=True)
        # args as a dict or as its JSON text: the same answer.
        got = e.handle_tool_call("context_search", {"query": '"pytest -k t7"'})
        assert got == e.handle_tool_call("context_search", '{"query": "\\"pytest -k t7\\""}')
        res = json.loads(got)
        assert res["query"] == '"pytest -k t7"' and res["total"] == len(res["hits"])
        # The call of step 7 (its result does not name the command); the summary
        # may list the command too, and then comes first (newest).
        assert [h["id"] for h in res["hits"]] in (["r1.16"], ["r1.summary", "r1.16"])
        hit = res["hits"][-1]
        assert hit == {"id": "r1.16", "range": "r1", "role": "assistant", "position": 16, "snippet": hit["snippet"]}
        assert "pytest -k t7" in hit["snippet"]
        # limit keeps the newest; total counts them all.
        many = json.loads(e.handle_tool_call("context_search", {"query": "line", "limit": 3}))
        assert len(many["hits"]) == 3 and many["total"] > 3
        ids = [h["id"] for h in many["hits"]]
        assert ids == sorted(ids, key=lambda i: -int(i.split(".")[1]))
        # context_expand: a message whole, byte for byte.
        one = e.handle_tool_call("context_expand", {"id": "r1.17"})
        assert json.loads(one) == {"id": "r1.17", "messages": [msgs[17]], "truncated": False}
        assert compact_json(msgs[17]) in one
        cut = json.loads(e.handle_tool_call("context_expand", {"id": "r1", "max_tokens": 200}))
        assert cut["truncated"] is True and cut["note"] and len(cut["messages"]) < 40
        # Errors are results.
        for name, args, needle in [
            ("context_expand", {"id": "r9"}, "no archived message or range with id r9"),
            ("context_expand", {"id": "R1"}, "no archived message or range with id R1"),
            ("context_expand", {}, "id is required"),
            ("context_expand", {"id": "r1", "max_tokens": 0}, "max_tokens"),
            ("context_search", {"query": "  "}, "no words"),
            ("context_search", {"query": 3}, "query is required"),
            ("context_search", "{not json", "not valid JSON"),
            ("context_search", [1], "must be a JSON object"),
            ("context_search", {"query": "x", "limit": float("nan")}, "JSON object"),
            ("lcm_grep", {"query": "x"}, "unknown tool"),
        ]:
            out = json.loads(e.handle_tool_call(name, args))
            assert set(out) == {"error"} and needle in out["error"], (name, args, out)


def test_two_sessions_in_one_store_file(compactor, tmp_path: Path):
    path = tmp_path / "shared.db"
    a_msgs, b_msgs = conversation(30), conversation(30)
    for m in b_msgs:
        if m["role"] == "assistant" and m.get("tool_calls"):
            m["tool_calls"][0]["function"]["arguments"] = m["tool_calls"][0]["function"]["arguments"].replace(
                "pytest", "cargo test")
    with ContextEngine(LOSSLESS, compactor=compactor, store=path, session_id="a") as a, \
            ContextEngine(LOSSLESS, compactor=compactor, store=path, session_id="b") as b:
        a.compress(a_msgs, force=True)
        b.compress(b_msgs, force=True)
        assert a.last_range["id"] == b.last_range["id"] == "r1"  # ids count per session
        assert json.loads(a.handle_tool_call("context_search", {"query": "cargo test"}))["total"] == 0
        assert json.loads(b.handle_tool_call("context_search", {"query": "cargo test"}))["total"] > 0
        assert json.loads(b.handle_tool_call("context_search", {"query": "pytest -k"}))["total"] == 0
        k = a.last_range["from_index"]  # an assistant message with its tool call
        assert k == b.last_range["from_index"] and a_msgs[k] != b_msgs[k]
        mid = {"id": f"r1.{k}"}
        assert json.loads(a.handle_tool_call("context_expand", mid))["messages"] == [a_msgs[k]]
        assert json.loads(b.handle_tool_call("context_expand", mid))["messages"] == [b_msgs[k]]
        assert sorted(a.store.sessions()) == ["a", "b"]
        a.store.delete_session("a")
        assert "error" in json.loads(a.handle_tool_call("context_expand", {"id": "r1"}))
        assert json.loads(b.handle_tool_call("context_expand", mid))["messages"] == [b_msgs[k]]
        # A new engine on a session that has ranges continues their numbering.
    with ContextEngine(LOSSLESS, compactor=compactor, store=path, session_id="b") as again:
        again.compress(conversation(30), force=True)
        assert again.last_range["id"] == "r2"


CHILD = r"""
import json, sys
from ctxcompact import ContextEngine
path, session = sys.argv[1], sys.argv[2]
calls = json.loads(sys.argv[3])
with ContextEngine({"context": {"engine": "lossless"}}, store=path, session_id=session) as e:
    print(json.dumps([e.handle_tool_call(name, args) for name, args in calls]))
"""


def tools_in_fresh_process(path: Path, session: str, calls: List[Any]) -> List[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), session, json.dumps(calls)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_acceptance_trace_compacted_twice_recalled_from_a_fresh_process(compactor, tmp_path: Path):
    """Issue 17's acceptance: a shared trace compacted twice in lossless mode; a path
    from the first summarized range found with context_search and its original tool
    output returned byte for byte by context_expand, from a fresh process."""
    trace = load_trace(need_trace(TRACE))
    path = tmp_path / "recall.db"
    n1, n2 = 120, 240
    with ContextEngine(LOSSLESS, compactor=compactor, store=path, session_id="django-13964") as e:
        out = e.compress(trace[:n1], force=True)
        r1, r1_archived = e.last_range, [a["index"] for a in e.last_archived]
        assert r1 is not None and r1["id"] == "r1"
        out = e.compress(out + trace[n1:n2], force=True)
        assert e.last_range is not None and e.last_range["id"] == "r2"
    # The first summary names its range, as the agent reads it.
    assert f'Archived as r1 (messages {r1["from_index"]}-{r1["to_index"] - 1} ' in r1["summary"]
    expand_line(r1["summary"])
    # A path from a tool call of the first summarized range (the one whose output
    # is the longest), and the call's result.
    calls = [(i, p) for i in range(r1["from_index"], r1["to_index"]) for tc in trace[i].get("tool_calls") or ()
             for p in PATH_RE.findall(tc["function"]["arguments"])]
    assert calls, "no path in a tool call of r1"
    call_at, p = max(calls, key=lambda c: len(str(trace[c[0] + 1].get("content"))))
    call_id = trace[call_at]["tool_calls"][0]["id"]
    result_at = next(i for i in range(call_at + 1, r1["to_index"]) if trace[i].get("tool_call_id") == call_id)
    search, expand, whole = tools_in_fresh_process(path, "django-13964", [
        ["context_search", {"query": p, "limit": 50}],
        ["context_expand", {"id": f"r1.{result_at}"}],
        ["context_expand", '{"id": "r1"}'],
    ])
    hits = json.loads(search)
    assert f"r1.{call_at}" in [h["id"] for h in hits["hits"]], (p, hits)
    got = json.loads(expand)
    assert got["truncated"] is False and got["messages"] == [trace[result_at]]
    assert got["messages"][0]["content"] == trace[result_at]["content"]  # the tool output, every byte
    assert compact_json(trace[result_at]) in expand  # the stored JSON, as sent
    # The whole range: every message the first compaction archived, in order.
    assert json.loads(whole)["messages"] == [trace[i] for i in r1_archived]
    assert set(range(r1["from_index"], r1["to_index"])) <= set(r1_archived)


def test_replay_every_archived_path_and_request_is_recalled(compactor, tmp_path: Path):
    """Issue 17, item 5: after the last compaction, every file path in an archived
    tool call and every archived user request is found by context_search and its
    original returned by context_expand."""
    trace = load_trace(need_trace(TRACE))
    with ContextEngine(LOSSLESS, compactor=compactor, store=tmp_path / "r.db", session_id="s") as e:
        out: List[Dict[str, Any]] = []
        inputs = []
        done = 0
        for end in (100, 200, len(trace)):
            conv = out + trace[done:end]
            out = e.compress(conv, force=True)
            inputs.append((e.last_range["id"], conv, list(e.last_archived)))
            done = end
        assert [r["id"] for r in e.store.ranges("s")] == ["r1", "r2", "r3"]
        checked = 0
        for rid, conv, archived in inputs:
            for a in archived:
                m = conv[a["index"]]
                mid = f"{rid}.{a['index']}"
                queries = []
                for tc in m.get("tool_calls") or ():
                    queries += PATH_RE.findall(tc["function"]["arguments"])
                if m["role"] == "user" and isinstance(m["content"], str):
                    first = m["content"].strip().splitlines()[0].replace('"', " ")[:80].strip()
                    if first:
                        queries.append('"' + first + '"')
                for q in queries:
                    ids = [h["id"] for h in e.store.search_rows("s", q)]
                    assert mid in ids, (q, mid)
                    got = json.loads(e.handle_tool_call("context_search", {"query": q, "limit": 50}))
                    assert got["total"] == len(ids)
                    assert json.loads(e.handle_tool_call("context_expand", {"id": mid}))["messages"] == [m]
                    checked += 1
        assert checked > 50


QUERY_CASES = [
    "src/app.py", '  "add error handling" foo.bar ', "Foo foo FOO f\u00f6o F\u00d6O", 'say "unclosed phrase',
    'a"b"c', '""  x', "50%_off \\x", "\u3000a\u00a0b\u2003c", '"  spaced phrase\u2002 "', "ab", "x" * 3,
    'quote"in"side', "\t\n tabs\r\nand lines\f", "\u0085next\u1680ogham\u202fnarrow",
]


def test_the_store_splits_queries_as_the_core(compactor):
    from ctxcompact.recall import plan_query

    for q in QUERY_CASES:
        assert plan_query(q) == compactor.call("recall.query", {"query": q}), q
    for empty in ("", "   ", '""', '" "'):
        with pytest.raises(ctxcompact.CompactError) as e:
            compactor.call("recall.query", {"query": empty})
        assert e.value.path == "/query"
        with pytest.raises(ctxcompact.CompactError):
            plan_query(empty)


def test_store_search_and_expand_give_the_tool_results(compactor):
    msgs = conversation(30)
    with ContextEngine(LOSSLESS, compactor=compactor, session_id="s") as e:
        e.compress(msgs, force=True)
        store = e.store
        assert store.search("s", "pytest -k t12") == json.loads(
            e.handle_tool_call("context_search", {"query": "pytest -k t12"}))
        assert store.search_json("s", "t1", limit=2) == e.handle_tool_call("context_search", {"query": "t1", "limit": 2})
        assert store.expand("s", "r1.9") == {"id": "r1.9", "messages": [msgs[9]], "truncated": False}
        assert store.expand_json("s", "r1", max_tokens=50) == e.handle_tool_call(
            "context_expand", {"id": "r1", "max_tokens": 50})
        assert store.expand("s", "r7") == {"error": "no archived message or range with id r7 in this session"}
        with pytest.raises(OptionError):
            store.expand("s", "r1", max_tokens="5")  # type: ignore[arg-type]
    # A store alone makes its own compactor for the formatting, and closes it.
    with RecallStore() as alone:
        assert alone.search("s", "x") == {"query": "x", "hits": [], "total": 0}


def test_fts5_and_like_stores_give_the_same_answers_on_a_trace(compactor, tmp_path: Path):
    from ctxcompact.recall import fts5_trigram_available

    if not fts5_trigram_available():
        pytest.skip("this SQLite build has no FTS5 trigram tokenizer")
    trace = load_trace(need_trace(TRACE))
    stores = [RecallStore(tmp_path / "fts.db", compactor=compactor),
              RecallStore(tmp_path / "like.db", fts="like", compactor=compactor)]
    engines = [ContextEngine(LOSSLESS, compactor=compactor, store=s, session_id="t") for s in stores]
    try:
        assert [s.fts for s in stores] == ["fts5", "like"]
        for e in engines:
            out = e.compress(trace[:150], force=True)
            e.compress(out + trace[150:], force=True)
        queries = ["django/db/models/base.py", "related_descriptors", "ForeignKey", "pk", "_id", "save()",
                   '"def __set__"', "Traceback", "TRACEBACK", "sqlparse", "100%", "no such thing", "e"]
        for q in queries:
            answers = [e.handle_tool_call("context_search", {"query": q, "limit": 50}) for e in engines]
            assert answers[0] == answers[1], q
        assert sum(json.loads(e.handle_tool_call("context_search", {"query": q}))["total"] > 0
                   for q in queries for e in engines[:1]) >= 9
    finally:
        for e in engines:
            e.close()
        for s in stores:
            s.close()


def test_queries_past_the_cores_bounds_are_error_results(compactor, tmp_path: Path):
    """A NUL, 998 words (a raw sqlite3.OperationalError before), one
    50,000-character word: {"error": ...} results; the store alone raises
    CompactError invalid_request at /query, never a sqlite3 error."""
    from ctxcompact import CompactError

    words = lambda n: " ".join(f"w{i}" for i in range(n))  # noqa: E731
    with ContextEngine(LOSSLESS, compactor=compactor, session_id="s", store=str(tmp_path / "r.db")) as e:
        e.compress(conversation(30), force=True)
        for query, needle in [
            ("line\0", "must not contain a NUL character"),
            ("li\0ne of", "must not contain a NUL character"),
            (words(998), "query is too long"),
            ("w" * 50000, "query is too long: 50000 characters, at most 4000"),
            (words(33), "query has 33 terms, at most 32"),
            ("x" * 1001, "a term of the query is too long: 1001 characters, at most 1000"),
        ]:
            out = json.loads(e.handle_tool_call("context_search", {"query": query}))
            assert set(out) == {"error"} and needle in out["error"], (query[:40], out)
            for call in (lambda: e.store.search("s", query), lambda: e.store.search_rows("s", query)):
                with pytest.raises(CompactError) as ei:
                    call()
                assert ei.value.code == "invalid_request" and ei.value.path == "/query", ei.value
        assert json.loads(e.handle_tool_call("context_search", {"query": words(31) + " line"}))["total"] == 0


# --- an archive in parts (docs/SESSION.md "An archive in parts") ------------------------------

PARTS_TRACE = "claude-code-spotter-4d5611e5-precompact.json"


class PartsStore(RecallStore):
    """A RecallStore that counts the archive parts it writes, and whose parts
    iterable raises at part fail_at (None: never)."""

    def __init__(self, *args: Any, fail_at: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parts: List[Dict[str, Any]] = []
        self.fail_at = fail_at

    def archive(self, session: str, parts: Any) -> Any:
        def counted() -> Any:
            for n, part in enumerate(parts):
                if n == self.fail_at:
                    raise RuntimeError(f"the disk went away at part {n}")
                self.parts.append({k: v for k, v in part.items() if k != "rows"})
                yield part

        return super().archive(session, counted())


def lossless(archive_part: Any = None) -> Dict[str, Any]:
    cfg: Dict[str, Any] = json.loads(json.dumps(LOSSLESS))
    if archive_part is not None:
        cfg["context"]["archive_part"] = archive_part
    return cfg


def stored_rows(store: RecallStore) -> List[tuple]:
    assert store._conn is not None
    return store._conn.execute("SELECT session, id, range_id, position, role, reason, json, text"
                               " FROM ctxc_messages ORDER BY id").fetchall()


def compact_with(compactor: Any, msgs: List[Dict[str, Any]], archive_part: Any,
                 summarize: Any = None) -> Tuple[Any, List[Dict[str, Any]], PartsStore]:
    store = PartsStore(compactor=compactor)
    with ContextEngine(lossless(archive_part), compactor=compactor, store=store, session_id="s",
                       summarize=summarize) as e:
        out = e.compress(msgs, force=True)
        return e, out, store


def test_an_archive_in_parts_stores_what_one_part_does(compactor):
    """A lossless compress of a shared trace with archive_part 7 writes the range
    and the rows the default (one part) does, in more than 5 parts, and gives the
    same messages and report."""
    trace = load_trace(need_trace(PARTS_TRACE))
    one_e, one_out, one = compact_with(compactor, trace, None)
    many_e, many_out, many = compact_with(compactor, trace, 7)
    try:
        assert len(one.parts) == 1 and "range" in one.parts[0] and "next" not in one.parts[0]
        assert len(many.parts) > 5, len(many.parts)
        assert "range" in many.parts[0] and all("range" not in p for p in many.parts[1:])
        assert one.ranges("s") == many.ranges("s") and [r["id"] for r in many.ranges("s")] == ["r1"]
        assert one.expand_rows("s", "r1") == many.expand_rows("s", "r1") != []
        assert stored_rows(one) == stored_rows(many)
        assert len(stored_rows(many)) == len(many_e.last_archived) + 1  # and the summary's row
        assert one_out == many_out and one_e.last_report == many_e.last_report
        assert one_e.last_range == many_e.last_range == many.ranges("s")[0]
        assert many_e.compression_count == 1
    finally:
        one.close()
        many.close()


def test_parts_hold_each_original_byte_for_byte(compactor):
    """Windows of messages with non-ASCII text, escapes, brackets and quotes in
    their strings: every archived original is stored as the binding sent it."""
    msgs = conversation(30)
    for i, m in enumerate(msgs[2:-2], 2):
        m["content"] = f'caf\u00e9 {i} \U0001F600 "quoted]" {{[\\]}}, \\"end\n' + (m["content"] or "")
    _, _, one = compact_with(compactor, msgs, None)
    e, _, many = compact_with(compactor, msgs, 4)
    try:
        assert len(many.parts) > 5
        assert stored_rows(one) == stored_rows(many)
        for a in e.last_archived:
            assert many.messages("s", f"r1.{a['index']}")[0]["json"] == compact_json(msgs[a["index"]])
    finally:
        one.close()
        many.close()


def test_a_failing_part_records_nothing(compactor):
    """The parts iterable raises at part 3: compress raises that error (with the
    core's message), nothing is stored, the state and its count are unchanged."""
    trace = load_trace(need_trace(PARTS_TRACE))
    store = PartsStore(compactor=compactor, fail_at=3)
    with ContextEngine(lossless(7), compactor=compactor, store=store, session_id="s") as e:
        before = e.state
        with pytest.raises(RuntimeError) as ei:
            e.compress(trace, force=True)
        assert "the compaction is not recorded" in str(ei.value) and "the disk went away at part 3" in str(ei.value)
        assert isinstance(ei.value.__cause__, RuntimeError)
        assert len(store.parts) == 3
        assert store.ranges("s") == [] and stored_rows(store) == []
        assert e.compression_count == 0 and e.state == before
        assert e.last_range is None
        # The next compaction archives as r1, all of it.
        store.fail_at = None
        e.compress(trace, force=True)
        assert [r["id"] for r in store.ranges("s")] == ["r1"] and e.compression_count == 1
    store.close()


def test_a_core_error_on_a_window_ends_the_sequence_with_it(compactor, monkeypatch):
    """A window the core refuses (bytes not the first step's) rolls the parts back
    and is the sequence's error, not an answered effect."""
    from ctxcompact import CompactError

    store = PartsStore(compactor=compactor)
    real = _engine._SessionRun.window

    def tampered(self: Any, nxt: Any) -> bytes:
        w = real(self, nxt)
        return w[:-1] + b',{"role":"user","content":"x"}]' if nxt["from"] > 0 else w

    monkeypatch.setattr(_engine._SessionRun, "window", tampered)
    with ContextEngine(lossless(4), compactor=compactor, store=store, session_id="s") as e:
        before = e.state
        with pytest.raises(CompactError) as ei:
            e.compress(conversation(30), force=True)
        assert ei.value.path == "/messages", ei.value
        assert store.ranges("s") == [] and stored_rows(store) == [] and len(store.parts) == 1
        assert e.state == before
    store.close()


def test_array_elements_are_the_exact_bytes():
    """The scanner behind the windows: each element of an array, byte for byte,
    strings with escapes and brackets skipped, whitespace around left out."""
    import random

    from ctxcompact._engine import _array_elements

    rng = random.Random(7)
    pieces = ['"a]b"', '"\\"]"', '"\\\\"', '{"k":[1,{"x":"}"}]}', "[]", "{}", "3", "-1.5e3", "true", "null",
              '"caf\u00e9 \U0001F600"', '{"a":"\\u005d,"}', '[[[]],[{}]]']
    for _ in range(200):
        elems = [rng.choice(pieces) for _ in range(rng.randrange(0, 8))]
        sp = lambda: rng.choice(["", " ", "\n\t", "\r\n "])  # noqa: E731
        b = ("[" + sp() + ("," + sp()).join(e + sp() for e in elems) + "]").encode("utf-8")
        got = [b[x:y].decode("utf-8") for x, y in _array_elements(b)]
        assert got == elems, b
        assert [json.loads(g) for g in got] == json.loads(b)
    assert _array_elements(b"[]") == [] and _array_elements(b'{"a":[1]}') == []


def test_a_step_sends_back_the_resume_the_core_wrote():
    """The resume goes back as the core wrote it (a parted archive's summary row is
    copied from it): its bytes, not a re-encoding; a reply in another layout is
    parsed whole, an error envelope raises."""
    from ctxcompact import CompactError
    from ctxcompact._engine import _session_reply

    resume = '{"v":1,"summary":{"content":"3\u201312 <b>\\u2028</b>"},"n":1.50}'.encode("utf-8")
    out = b'{"result":{"done":false,"effect":{"type":"x","s":",\\"resume\\":"},"resume":' + resume + b',"result":[]}}'
    reply, raw = _session_reply(out)
    assert reply == json.loads(out)["result"] and raw == resume
    assert _session_reply(b'{"result": {"done": true}}') == ({"done": True}, None)
    with pytest.raises(CompactError):
        _session_reply(b'{"error":{"code":"internal","message":"x"}}')
