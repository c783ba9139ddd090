"""A store written by each runtime (Python here; Go and Node by their stores, run as
child processes) gives the hits, totals and originals of testdata/recall/stores.json
when the Python store reads it (the Go and JS tests read all three the same way)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ctxcompact.recall import RecallStore

from conftest import ROOT, in_ci
from recall_stores import load_fixture, write_fixture


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
    for who, path in files.items():
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
