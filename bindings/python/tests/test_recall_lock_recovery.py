"""The store's lock directory in Python (docs/RECALL.md "Concurrency"): it records its
holder; a wait sleeps up to the timeout (an injected clock: no wall-clock bounds); a
lock whose holder on this host is gone (a writer killed with SIGKILL in a write
transaction) or that is older than STALE_AFTER is taken over at once."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

import ctxcompact._recall as R
from ctxcompact import CompactError
from ctxcompact.recall import RecallStore

SRC = Path(__file__).resolve().parent.parent / "src"


def one(k: int, who: str) -> Dict[str, Any]:
    rid = f"r{k}"
    return {"range": {"id": rid, "from_index": 0, "to_index": 1, "summary": f"{who} {rid}"},
            "rows": [{"id": f"{rid}.0", "range_id": rid, "position": 0, "role": "tool", "reason": "summarized",
                      "json": json.dumps({"role": "tool", "content": f"{who} {rid}"}), "text": f"{who} wrote {rid}"}]}


class FakeClock:
    def __init__(self) -> None:
        self.t = 1_000_000_000.0
        self.sleeps: List[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    c = FakeClock()
    monkeypatch.setattr(R._LockClock, "now", staticmethod(c.now))
    monkeypatch.setattr(R._LockClock, "sleep", staticmethod(c.sleep))
    return c


def hold(path: Path, at_ms: float, pid: int) -> None:
    lock = Path(str(path) + ".lock")
    lock.mkdir()
    (lock / "owner").write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "runtime": "test", "at": at_ms}))


def test_a_live_holder_is_waited_for_then_a_clear_error(tmp_path: Path, clock: FakeClock):
    path = tmp_path / "r.db"
    with RecallStore(path) as s:
        s.archive("a", one(1, "py"))
        hold(path, clock.t * 1000, os.getpid())
        with pytest.raises(CompactError) as e:
            s.archive("a", one(2, "py"))
        assert (e.value.code, e.value.path) == ("internal", "/path")
        assert f"held by another process for more than 5 s (holder: pid {os.getpid()} on {socket.gethostname()} (test)" in str(e.value)
        assert sum(clock.sleeps) == pytest.approx(5.0) and len(clock.sleeps) > 100


def test_an_old_lock_or_an_old_ownerless_one_is_taken_over(tmp_path: Path, clock: FakeClock):
    path = tmp_path / "r.db"
    with RecallStore(path) as s:
        hold(path, (clock.t - R.STALE_AFTER - 1) * 1000, os.getpid())
        s.archive("a", one(1, "py"))
        lock = Path(str(path) + ".lock")
        lock.mkdir()  # node-sqlite3-wasm's own lock: no owner file
        old = clock.t - R.STALE_AFTER - 5
        os.utime(lock, (old, old))
        assert [r["id"] for r in s.ranges("a")] == ["r1"]
        assert clock.sleeps == [] and not lock.exists()


CHILD = """
import json, sys, time
import ctxcompact._recall as R
from ctxcompact.recall import RecallStore
path = sys.argv[1]
def one(k):
    rid = "r%d" % k
    return {"range": {"id": rid, "from_index": 0, "to_index": 1, "summary": "child " + rid},
            "rows": [{"id": rid + ".0", "range_id": rid, "position": 0, "role": "tool", "reason": "summarized",
                      "json": "{}", "text": "child wrote " + rid}]}
s = RecallStore(path)
s.archive("a", one(1))
def hold():
    print("holding", flush=True)
    time.sleep(3600)
R._before_commit = hold
s.archive("a", one(2))
"""


def test_a_writer_killed_holding_the_lock_is_taken_over(tmp_path: Path):
    path = tmp_path / "r.db"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "holding\n"
        owner = json.loads(Path(str(path) + ".lock/owner").read_text())
        assert owner["pid"] == child.pid and owner["host"] == socket.gethostname() and owner["runtime"] == "python"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert Path(str(path) + ".lock").exists(), "left behind"
    with RecallStore(path, timeout=2) as s:
        s.archive("a", one(2, "parent"))
        assert [r["summary"] for r in s.ranges("a")] == ["child r1", "parent r2"]
        assert s.count_rows("a", "child wrote r2") == 0, "the killed transaction is not in the file"
