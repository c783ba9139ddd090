"""A store written by each runtime (Python here; Go and Node by their stores, run as
child processes) gives the hits, totals and originals of testdata/recall/stores.json
when the Python store reads it (the Go and JS tests read all three the same way)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import sqlite3

from ctxcompact.recall import SCHEMA_SQL, RecallStore

from conftest import ROOT, in_ci
from recall_stores import load_fixture, write_fixture


def schema_statements() -> dict:
    """recall/schema.sql's statements by the name they create, as sqlite_master keeps
    them (without IF NOT EXISTS)."""
    text = "\n".join(ln for ln in (ROOT / "recall" / "schema.sql").read_text().splitlines() if not ln.startswith("--"))
    out = {}
    for stmt in filter(None, (s.strip() for s in text.split(";"))):
        stmt = stmt.replace("IF NOT EXISTS ", "")
        out[stmt.split()[2] if stmt.startswith("CREATE INDEX") else stmt.split()[2 if stmt.startswith("CREATE TABLE") else 3]] = stmt
    return out


def test_the_python_schema_is_recall_schema_sql():
    assert SCHEMA_SQL == (ROOT / "recall" / "schema.sql").read_text(), "a copy of recall/schema.sql, byte for byte"


def test_stores_of_every_runtime_read_the_same(tmp_path: Path):
    fx = load_fixture()
    files = {"python": str(tmp_path / "python.db")}
    write_fixture(files["python"])
    missing = []
    go = shutil.which("go")
    if go:
        files["go"] = str(tmp_path / "go.db")
        out = subprocess.run([go, "test", "./recall", "-run", "^TestWriteStoresFixture$", "-count=1"], cwd=ROOT,
                             env=dict(os.environ, CTXC_STORES_OUT=files["go"]), capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
    else:
        missing.append("no go toolchain")
    node = shutil.which("node")
    if node and (ROOT / "node_modules" / "node-sqlite3-wasm").is_dir():
        files["node"] = str(tmp_path / "node.db")
        out = subprocess.run([node, str(ROOT / "bindings" / "js" / "test" / "recall-stores.mjs"), "write", files["node"]],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
    else:
        missing.append("node or node_modules/node-sqlite3-wasm (npm ci)")
    if missing and in_ci():
        pytest.fail("cross-runtime store test: " + "; ".join(missing))
    want_schema = schema_statements()
    assert sorted(want_schema) == ["ctxc_fts", "ctxc_messages", "ctxc_messages_session", "ctxc_meta", "ctxc_ranges"]
    for who, path in files.items():
        db = sqlite3.connect(path)
        try:
            got = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE name IN (%s)" % ",".join("?" * len(want_schema)),
                                  list(want_schema)).fetchall())
        finally:
            db.close()
        assert got == want_schema, f"the {who} store has exactly recall/schema.sql"
        with RecallStore(path) as s:
            for c in fx["searches"]:
                n = max(1, min(c["limit"], 50))
                hits = s.search_rows(c["session"], c["query"], limit=n)
                total = len(hits) if len(hits) < n else s.count_rows(c["session"], c["query"], s.count_limit)
                where = f'{who} store: {c["query"]!r} in {c["session"]}, limit {c["limit"]}'
                assert [h["id"] for h in hits] == c["hits"], where
                assert total == c["total"], where
            for c in fx["expands"]:
                assert s.expand_rows(c["session"], c["id"]) == c["messages"], f'{who} store: expand {c["id"]}'
    if missing:
        pytest.skip("SKIPPED, NOT TESTED (the other runtimes): " + "; ".join(missing))
