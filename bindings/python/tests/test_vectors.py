"""The shared vectors in testdata/*.json, run through the raw call (testdata/README.md):
send {"op": file.op, **case.request}; compare the parsed result with want.result, or
for an error only its code and path. Case id: <op>/<file>/<name>."""

from __future__ import annotations

import json
from typing import Any, List, Tuple

import pytest

from conftest import TESTDATA


def _cases() -> List[Tuple[str, str, Any, Any]]:
    out = []
    for path in sorted(TESTDATA.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for case in doc["cases"]:
            # request_json is sent as written (duplicate keys, which a parsed dict drops).
            request = case["request_json"] if "request_json" in case else case["request"]
            out.append((f"{doc['op']}/{path.stem}/{case['name']}", doc["op"], request, case["want"]))
    return out


CASES = _cases()


def test_vectors_exist():
    # An empty parameter list would make the runner below pass by skipping.
    assert CASES, f"no vectors found in {TESTDATA}/*.json"


@pytest.mark.parametrize("op,request_,want", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_vector(compactor, op, request_, want):
    if isinstance(request_, str):
        sent = '{"op":' + json.dumps(op) + "," + request_.strip()[1:]
    else:
        # Compact, as JSON.stringify and the bindings write it: ops that keep a message's
        # bytes (recall.archive's json, recall.expand_result) return them as sent.
        sent = json.dumps({"op": op, **request_}, ensure_ascii=False, separators=(",", ":"))
    raw = compactor.call_bytes(sent.encode("utf-8"))
    got = json.loads(raw)
    assert ("result" in want) != ("error" in want), "a case wants exactly one of result/error"
    if "error" in want:
        assert "error" in got, f"want error {want['error']}, got result {json.dumps(got)[:500]}"
        assert got["error"]["code"] == want["error"]["code"]
        assert got["error"]["path"] == want["error"]["path"]
    else:
        assert "result" in got, f"want a result, got error {got.get('error')}"
        assert got["result"] == want["result"]
