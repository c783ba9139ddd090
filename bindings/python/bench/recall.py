"""Search over a 100 MB archive (issue 17: target under 50 ms). Not a test.

    bindings/python/build/venv/bin/python bindings/python/bench/recall.py [--mb 100]
        [--db PATH] [--keep] [--runs 21] [--like] [--count-limit 1000]

Builds (or reuses, with --db of an existing file) a store whose one session holds
--mb megabytes of archived message JSON: seeded synthetic tool outputs (source
code, test logs, paths) of 1-16 KiB in ranges of 40 messages, the way
recall.archive gives them, then times searches with the median of --runs runs:
the SQL of the first 10 hits (RecallStore.search_rows), of the exact total
(count_rows, run when there are 10 hits or more) and the whole context_search
(recall.query, the SQL, recall.search_result through the core), then the count and
the search with totals counted up to --count-limit (RecallStore count_limit), for a rare path, an identifier, a two-word query, a common
word and a short term (LIKE only). The run is deterministic (random.Random(17)).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parent / "src"))

from ctxcompact._recall import RecallStore, search_result  # noqa: E402

WORDS = ("request response handler config value error retry timeout token buffer stream "
         "session client server cache index query result parse render update delete insert "
         "select commit branch merge build deploy module package import export assert").split()
DIRS = ["src", "lib", "tests", "pkg", "internal", "cmd", "docs", "scripts"]


def ident(rng: random.Random) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def path(rng: random.Random) -> str:
    return f"{rng.choice(DIRS)}/{ident(rng)}/{ident(rng)}.{rng.choice(['py', 'go', 'ts', 'md'])}"


def tool_output(rng: random.Random, size: int) -> str:
    lines: List[str] = []
    n = 0
    while n < size:
        kind = rng.random()
        if kind < 0.5:
            line = f"    def {ident(rng)}(self, {ident(rng)}): return self.{ident(rng)}({rng.randint(0, 999)})"
        elif kind < 0.8:
            line = f"{path(rng)}:{rng.randint(1, 900)}: {' '.join(rng.choice(WORDS) for _ in range(8))}"
        else:
            line = f"PASSED tests/test_{ident(rng)}.py::test_{ident(rng)} [{rng.randint(0, 100)}%]"
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)


def build(store: RecallStore, session: str, mb: float, rng: random.Random) -> Dict[str, Any]:
    target = int(mb * 1e6)
    total, k, rare = 0, 0, ""
    while total < target:
        k += 1
        rid = f"r{k}"
        rows = []
        for i in range(40):
            pos = 10 + i
            if i % 2 == 0:
                p = path(rng)
                if k == 3 and i == 10:
                    p = rare = "src/recall_bench/needle_module.py"
                cid = f"call_{k}_{i}"
                args = json.dumps({"path": p})
                m: Dict[str, Any] = {"role": "assistant", "content": f"Reading {p}.", "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": args}}]}
                text = f"assistant\nReading {p}.\nread_file {p}"
            else:
                out = tool_output(rng, rng.randint(1 << 10, 16 << 10))
                m = {"role": "tool", "tool_call_id": f"call_{k}_{i - 1}", "content": out}
                text = "tool\n" + out
            js = json.dumps(m, ensure_ascii=False)
            total += len(js)
            rows.append({"id": f"{rid}.{pos}", "range_id": rid, "position": pos, "role": m["role"],
                         "reason": "summarized", "json": js, "text": text})
        summary = f"Summary of range {k}: read {40 // 2} files."
        rows.append({"id": f"{rid}.summary", "range_id": rid, "position": 10, "role": "summary",
                     "reason": "summary", "json": json.dumps({"role": "user", "content": summary}),
                     "text": "summary\n" + summary})
        store.archive(session, {"range": {"id": rid, "from_index": 10, "to_index": 50, "summary": summary},
                                "rows": rows})
    return {"ranges": k, "json_bytes": total, "rare": rare}


def median_ms(fn: Any, runs: int) -> float:
    fn()  # warm the page cache and the statement cache
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--db", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--like", action="store_true", help="search in the LIKE mode")
    ap.add_argument("--count-limit", type=int, default=1000, help="the count_limit of the capped columns")
    a = ap.parse_args()
    db = Path(a.db) if a.db else Path(tempfile.mkdtemp(prefix="ctxc-recall-bench-")) / "recall.db"
    temporary = not a.db and not a.keep
    fresh = not db.exists()
    store = RecallStore(db)
    session = "bench"
    if fresh:
        t = time.perf_counter()
        info = build(store, session, a.mb, random.Random(17))
        took = time.perf_counter() - t
        print(f"built {db}: {info['ranges']} ranges, {info['json_bytes'] / 1e6:.1f} MB of message JSON "
              f"in {took:.1f} s; file {os.path.getsize(db) / 1e6:.0f} MB")
    store.close()
    store = RecallStore(db, fts="like" if a.like else None)
    (rows,) = store._c().execute("SELECT COUNT(*) FROM ctxc_messages").fetchone()
    print(f"store: {rows} rows, fts mode {store.fts}, SQLite {__import__('sqlite3').sqlite_version}")
    from ctxcompact import Compactor

    core = Compactor()
    try:
        core.call("recall.query", {"query": "x"})
        have_core = True
    except Exception as e:  # a module without the recall ops
        print(f"(the packaged module has no recall ops: {e}; SQL only)")
        have_core = False
    queries = ["src/recall_bench/needle_module.py", "needle_module", "retry timeout", "assert", "py"]
    cap = a.count_limit
    print(f"{'query':36} {'hits':>6} {'first10':>8} {'count':>8} {'tool':>8} {'count@' + str(cap):>10} "
          f"{'tool@' + str(cap):>9}  (ms, median of {a.runs})")
    nan = float("nan")

    def tool(limit: Any) -> float:
        store.count_limit = limit
        try:
            return median_ms(lambda: search_result(core, store, session, q, 10), a.runs) if have_core else nan
        finally:
            store.count_limit = None

    for q in queries:
        total = store.count_rows(session, q)
        first_ms = median_ms(lambda: store.search_rows(session, q, limit=10), a.runs)
        many = total >= 10
        count_ms = median_ms(lambda: store.count_rows(session, q), a.runs) if many else 0.0
        capped_ms = median_ms(lambda: store.count_rows(session, q, cap), a.runs) if many else 0.0
        print(f"{q:36} {total:>6} {first_ms:>8.2f} {count_ms:>8.2f} {tool(None):>8.2f} {capped_ms:>10.2f} "
              f"{tool(cap):>9.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    store.close()
    core.close()
    if temporary:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(str(db) + suffix)
            except FileNotFoundError:
                pass
        os.rmdir(db.parent)


if __name__ == "__main__":
    main()
