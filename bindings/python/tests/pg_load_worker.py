"""One worker of the PostgreSQL load test (recall/postgres's Go test spawns 16 of
them across Go, Node and Python, all on one database):
    python bindings/python/tests/pg_load_worker.py URL WORKER OPS SEARCHES SESSIONS
It archives OPS ranges (each into session load-s<(WORKER*7 + i*13) % SESSIONS>,
asking next_range_id again when another writer took the id), runs SEARCHES searches
spread over the ops, checks every hit holds every query term (ASCII
case-insensitively), and prints one JSON line: {"worker", "runtime": "python",
"archived": [[session, range id, tag], ...], "conflicts", "errors", "searches",
"search_errors"}. It exits 0 even with errors: the parent judges.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List

from ctxcompact import CompactError
from ctxcompact._recall import _ascii_lower, find_rows
from ctxcompact.recall import open_store, plan_query

VOCAB = ["alpha", "Bravo", "CHARLIE", "delta", "echo_1", "fox%trot", "golf", "hotel", "India", "juliet", "kilo",
         "lima", "Mike", "november", "oscar", "papa"]
ROLES = ["user", "assistant", "tool"]


def compact(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def archive_of(worker: int, i: int, rid: str, tag: str) -> Dict[str, Any]:
    """Op i's archive under range id rid: three rows and the summary row."""
    rows = []
    for j, role in enumerate(ROLES):
        words = [VOCAB[(worker * 31 + i * 17 + j * 7 + k * 3) % len(VOCAB)] for k in range(3)]
        content = f"{tag} row{j} " + " ".join(words)
        rows.append({"id": f"{rid}.{j}", "range_id": rid, "position": i + j, "role": role, "reason": "summarized",
                     "json": compact({"role": role, "content": content}), "text": role + "\n" + content})
    rows.append({"id": f"{rid}.summary", "range_id": rid, "position": i + 3, "role": "user", "reason": "summary",
                 "json": compact({"role": "user", "content": "summary " + tag}), "text": "user\nsummary " + tag})
    return {"range": {"id": rid, "from_index": i, "to_index": i + 3, "summary": "summary " + tag}, "rows": rows}


def run(url: str, worker: int, ops: int, searches: int, sessions: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {"worker": worker, "runtime": "python", "archived": [], "conflicts": 0, "errors": [],
                           "searches": 0, "search_errors": 0}
    errors: List[str] = out["errors"]
    try:
        store = open_store(url)
    except Exception as e:  # reported, not raised: the parent judges
        errors.append(f"open: {e}")
        return out
    n = 0
    with store:
        for i in range(ops):
            session = f"load-s{(worker * 7 + i * 13) % sessions}"
            tag = f"w{worker}o{i}"
            while True:
                try:
                    rid = store.next_range_id(session)
                    store.archive(session, archive_of(worker, i, rid, tag))
                except CompactError as e:
                    if e.code == "invalid_state" and e.path == "/range/id":
                        out["conflicts"] += 1
                        continue
                    errors.append(f"archive {session} {tag}: {e.code} {e.path}: {e}")
                    break
                except Exception as e:
                    errors.append(f"archive {session} {tag}: {e!r}")
                    break
                out["archived"].append([session, rid, tag])
                break
            for _ in range(searches * (i + 1) // ops - searches * i // ops):
                s = f"load-s{(worker * 11 + n * 5) % sessions}"
                query = VOCAB[(n * 3) % 16] + (" " + VOCAB[(n * 5 + 1) % 16].lower() if n % 3 == 0 else "")
                n += 1
                out["searches"] += 1
                try:
                    plan = plan_query(query)
                    hits, _ = find_rows(store, s, plan, 10)
                    terms = [_ascii_lower(t) for t in plan["terms"]]
                    if any(not all(t in _ascii_lower(h["text"]) for t in terms) for h in hits):
                        out["search_errors"] += 1
                except Exception:
                    out["search_errors"] += 1
    return out


def main(argv: List[str]) -> int:
    if len(argv) != 5:
        print("usage: pg_load_worker.py URL WORKER OPS SEARCHES SESSIONS", file=sys.stderr)
        return 2
    url, worker, ops, searches, sessions = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), int(argv[4])
    print(json.dumps(run(url, worker, ops, searches, sessions)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
