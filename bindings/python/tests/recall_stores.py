"""The cross-runtime store fixture (testdata/recall/stores.json) with the Python
stores. The Python, Go and JS tests run it:
    python bindings/python/tests/recall_stores.py write TARGET [SESSION...]
    python bindings/python/tests/recall_stores.py check TARGET
TARGET is a SQLite file path (sqlite:PATH too) or a postgres:// URL (opened with
ctxcompact.recall.open_store). `write` writes the fixture's sessions (all, or only
those named) range by range in its write_order; `check` runs every search and expand
of the fixture against TARGET and prints `ok <searches> <expands>`, or the first
mismatch (exit 1).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from ctxcompact._recall import find_rows
from ctxcompact.recall import open_store, plan_query

FIXTURE_PATH = Path(__file__).resolve().parents[3] / "testdata" / "recall" / "stores.json"


def load_fixture() -> Dict[str, Any]:
    with open(FIXTURE_PATH, encoding="utf-8") as f:
        return json.load(f)


def write_fixture(target: str, sessions: Optional[Sequence[str]] = None) -> None:
    """The fixture's sessions (all, or those named) into the store at target, range
    by range in its order."""
    fx = load_fixture()
    unknown = [s for s in sessions or () if s not in fx["sessions"]]
    if unknown:
        raise SystemExit(f"recall_stores.py: the fixture has no session {unknown[0]!r}")
    with open_store(target) as s:
        for k, round_ in enumerate(fx["write_order"]):
            for session in round_:
                if not sessions or session in sessions:
                    s.archive(session, fx["sessions"][session][k])


def check_fixture(target: str) -> str:
    """Every search and expand of the fixture against the store at target: "" when
    all give the fixture's answers, else the first mismatch."""
    fx = load_fixture()
    with open_store(target) as s:
        for c in fx["searches"]:
            hits, total = find_rows(s, c["session"], plan_query(c["query"]), c["limit"])
            ids = [h["id"] for h in hits]
            if ids != c["hits"] or total != c["total"]:
                return (f'search {c["query"]!r} in {c["session"]}, limit {c["limit"]}: hits {ids}, total {total};'
                        f' the fixture says hits {c["hits"]}, total {c["total"]}')
        for c in fx["expands"]:
            got = s.expand_rows(c["session"], c["id"])
            if got != c["messages"]:
                return f'expand {c["id"]} in {c["session"]}: {len(got)} messages {got[:1]}...; the fixture has {len(c["messages"])}'
    return ""


def main(argv: Sequence[str]) -> int:
    if len(argv) >= 2 and argv[0] == "write":
        write_fixture(argv[1], list(argv[2:]))
        print("ok")
        return 0
    if len(argv) == 2 and argv[0] == "check":
        bad = check_fixture(argv[1])
        if bad:
            print("mismatch: " + bad)
            return 1
        fx = load_fixture()
        print(f'ok {len(fx["searches"])} {len(fx["expands"])}')
        return 0
    print("usage: recall_stores.py write TARGET [SESSION...] | check TARGET", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
