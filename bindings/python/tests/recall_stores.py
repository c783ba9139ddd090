"""The cross-runtime store fixture (testdata/recall/stores.json): writes its sessions
into a store file with the Python store. The Python, Go and JS tests run it:
    python bindings/python/tests/recall_stores.py write FILE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict

from ctxcompact.recall import RecallStore

FIXTURE_PATH = Path(__file__).resolve().parents[3] / "testdata" / "recall" / "stores.json"


def load_fixture() -> Dict[str, Any]:
    with open(FIXTURE_PATH, encoding="utf-8") as f:
        return json.load(f)


def write_fixture(path: str) -> None:
    """The fixture's sessions into a new store at path, range by range in its order."""
    fx = load_fixture()
    with RecallStore(path) as s:
        for k, round_ in enumerate(fx["write_order"]):
            for session in round_:
                s.archive(session, fx["sessions"][session][k])


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "write":
        sys.exit("usage: recall_stores.py write FILE")
    write_fixture(sys.argv[2])
    print("ok")
