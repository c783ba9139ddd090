"""One store file used by processes of different runtimes (docs/RECALL.md
"Concurrency"): every runtime takes the ``<file>.lock`` directory that the Node 20
WebAssembly driver takes (it cannot take POSIX locks), so a Python process and a
Node process writing one file at the same time are serialized: no lost rows, an
intact file; a lock held past the timeout is a clear error, never a write without it."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict

import pytest

from ctxcompact import CompactError
from ctxcompact.recall import RecallStore, fts5_trigram_available

from conftest import ROOT, in_ci

NODE = shutil.which("node")
RECALL_JS = ROOT / "bindings" / "js" / "recall.js"
HAS_JS = NODE is not None and (ROOT / "node_modules" / "node-sqlite3-wasm").is_dir()


def need_node() -> None:
    if not HAS_JS:
        if in_ci():
            pytest.fail("node or node_modules/node-sqlite3-wasm missing (npm ci)")
        pytest.skip("node or node_modules/node-sqlite3-wasm missing (npm ci)")


def one_range(k: int, who: str) -> Dict[str, Any]:
    rid = f"r{k}"
    rows = [{"id": f"{rid}.{i}", "range_id": rid, "position": i, "role": "tool", "reason": "summarized",
             "json": json.dumps({"role": "tool", "content": f"{who} wrote row {i} of {rid}"}),
             "text": f"{who} wrote row {i} of {rid} " + "padding " * 200} for i in range(4)]
    return {"range": {"id": rid, "from_index": 0, "to_index": 4, "summary": f"{who} {rid}"}, "rows": rows}


NODE_WRITER = """
import { RecallStore } from %s;
const [file, n] = process.argv.slice(1);
const s = await RecallStore.open(file, { driver: "wasm" });
for (let k = 1; k <= Number(n); k++) {
  const rid = `r${k}`;
  const rows = [0, 1, 2, 3].map((i) => ({ id: `${rid}.${i}`, range_id: rid, position: i, role: "tool", reason: "summarized",
    json: JSON.stringify({ role: "tool", content: `node wrote row ${i} of ${rid}` }), text: `node wrote row ${i} of ${rid} ` + "padding ".repeat(200) }));
  s.archive("node", { range: { id: rid, from_index: 0, to_index: 4, summary: `node ${rid}` }, rows });
  s.search("node", "wrote row");
}
s.close();
console.log("ok");
"""


def test_python_and_node_write_one_file_at_the_same_time(tmp_path: Path):
    need_node()
    path = tmp_path / "recall.db"
    RecallStore(path).close()
    n = 40
    script = NODE_WRITER % json.dumps(RECALL_JS.as_uri())
    child = subprocess.Popen([NODE, "--input-type=module", "-e", script, str(path), str(n)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with RecallStore(path) as s:
        for k in range(1, n + 1):
            s.archive("py", one_range(k, "py"))
            s.search_rows("py", "wrote row", limit=10)
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    assert out.strip() == "ok"
    assert not (tmp_path / "recall.db.lock").exists(), "the lock is released"

    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        if fts5_trigram_available(db):
            db.execute("INSERT INTO ctxc_fts(ctxc_fts) VALUES ('integrity-check')")  # raises on a damaged index
        counts = dict(db.execute("SELECT session, count(*) FROM ctxc_messages GROUP BY session").fetchall())
        assert counts == {"node": 4 * n, "py": 4 * n}, "no row lost"
    finally:
        db.close()
    with RecallStore(path) as s:
        for who in ("node", "py"):
            assert [r["id"] for r in s.ranges(who)] == [f"r{k}" for k in range(1, n + 1)]
            assert s.count_rows(who, f"{who} wrote row 3 of r{n}") == 1
            assert s.count_rows(who, "wrote row") == 4 * n


def test_a_held_lock_is_waited_for(tmp_path: Path):
    path = tmp_path / "recall.db"
    RecallStore(path).close()
    lock = tmp_path / "recall.db.lock"
    lock.mkdir()
    timer = threading.Timer(0.05, lock.rmdir)
    timer.start()
    try:
        with RecallStore(path, timeout=30) as s:  # waits for the holder, then writes
            s.archive("a", one_range(1, "py"))
            assert [r["id"] for r in s.ranges("a")] == ["r1"]
    finally:
        timer.join()
    assert not lock.exists()


def test_a_lock_held_past_the_timeout_is_a_clear_error(tmp_path: Path):
    path = tmp_path / "recall.db"
    with RecallStore(path) as s:
        s.archive("a", one_range(1, "py"))
    lock = tmp_path / "recall.db.lock"
    lock.mkdir()  # as a Node process in a transaction, or one that crashed in one
    try:
        with pytest.raises(CompactError) as e:
            RecallStore(path, timeout=0.01)
        assert e.value.code == "internal" and "recall.db.lock" in str(e.value) and "remove it" in str(e.value)
        lock.rmdir()
        s = RecallStore(path, timeout=0.01)  # an open store meeting the lock later
        lock.mkdir()
        with pytest.raises(CompactError, match="held by another process"):
            s.archive("a", one_range(2, "py"))
        with pytest.raises(CompactError, match="held by another process"):
            s.search_rows("a", "wrote")
        lock.rmdir()
        assert [r["id"] for r in s.ranges("a")] == ["r1"], "nothing was written without the lock"
        assert lock.exists() is False
        s.close()
    finally:
        if lock.exists():
            lock.rmdir()


def test_in_memory_stores_take_no_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    made = []
    real = os.mkdir
    monkeypatch.setattr(os, "mkdir", lambda p, *a, **k: (made.append(str(p)), real(p, *a, **k))[1])
    with RecallStore() as s:
        s.archive("a", one_range(1, "py"))
    assert made == []
    with RecallStore(tmp_path / "f.db") as s:
        s.archive("a", one_range(1, "py"))
    assert made and all(p == os.path.abspath(tmp_path / "f.db") + ".lock" for p in made)
