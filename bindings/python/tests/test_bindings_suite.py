"""The shared bindings suite (testdata/bindings/*.json, format in its README.md):
what this runtime's own API does around the ops, the same cases the JS and Go host
runners run. Each case runs once with ``compact`` and sync summarizers, and (when
it has no trap step) once more with ``acompact`` and async summarizers: the two
paths must agree. Cases that do not list python are skipped as not applicable."""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import ctypes
import json
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from ctxcompact import CompactError, Compactor, ContextEngine, ErrBadBinary

from conftest import TESTDATA

SUITE = TESTDATA / "bindings"
RUNTIMES = {"js", "python", "go"}
DOS = {
    "create", "compact", "trap", "engine.create", "engine.update_from_response", "engine.should_compress",
    "engine.compress", "engine.update_model", "engine.get_status", "engine.on_session_reset",
}
SPECIALS = {"cycle", "deep", "nan", "bigint", "invalid-utf8"}
SUMMARIZER_KINDS = {"returns", "throws", "returns_value", "hangs", "cancels", "times_out"}


def _case_files() -> List[Path]:
    return sorted(p for p in SUITE.glob("*.json") if p.name != "fixtures.json")


def _load(path: Path) -> Dict[str, Any]:
    with open(path, "rb") as f:
        return json.load(f)


FIXTURES: Dict[str, Any] = _load(SUITE / "fixtures.json")["fixtures"] if (SUITE / "fixtures.json").is_file() else {}


def _cases() -> List[Any]:
    out = []
    for path in _case_files():
        for case in _load(path)["cases"]:
            cid = f"bindings/{path.stem}/{case['name']}"
            modes = ["sync"]
            if not any(s["do"] == "trap" for s in case["steps"]):
                modes.append("async")
            for mode in modes:
                out.append(pytest.param(case, mode, id=f"{cid}[{mode}]"))
    return out


# --- the files themselves ------------------------------------------------------------


def test_the_suite_files_are_well_formed():
    files = _case_files()
    assert files, f"no case files in {SUITE}"
    for path in files:
        doc = _load(path)
        assert isinstance(doc.get("_comment"), str) and doc["_comment"], f"{path.name}: a _comment says what it pins down"
        names = [c["name"] for c in doc["cases"]]
        assert len(names) == len(set(names)), f"{path.name}: case names are not unique"
        for case in doc["cases"]:
            where = f"{path.name}/{case['name']}"
            assert set(case.get("runtimes", RUNTIMES)) <= RUNTIMES, f"{where}: unknown runtime"
            assert case.get("runtimes", ["x"]), f"{where}: an empty runtimes list"
            assert case["steps"], f"{where}: no steps"
            for step in case["steps"]:
                assert step["do"] in DOS, f"{where}: unknown do {step['do']!r}"
                m = step.get("messages")
                if isinstance(m, dict):
                    assert set(m) <= {"fixture", "value", "special"} and len(m) == 1, f"{where}: messages {m}"
                    if "fixture" in m:
                        assert m["fixture"] in FIXTURES, f"{where}: unknown fixture {m['fixture']!r}"
                    if "special" in m:
                        assert m["special"] in SPECIALS, f"{where}: unknown special {m['special']!r}"
                s = step.get("summarizer")
                if s is not None:
                    assert len(set(s) & SUMMARIZER_KINDS) == 1 and set(s) <= SUMMARIZER_KINDS | {"records"}, where
                err = step.get("want", {}).get("error")
                if err is not None:
                    assert "code" in err and ("path" in err) != ("path_prefix" in err), f"{where}: want.error {err}"


def test_python_runs_every_kind_of_step():
    """Not a vacuous suite: the cases for python cover each step and summarizer."""
    dos, kinds = set(), set()
    for path in _case_files():
        for case in _load(path)["cases"]:
            if "python" in case.get("runtimes", RUNTIMES):
                for step in case["steps"]:
                    dos.add(step["do"])
                    kinds |= set(step.get("summarizer") or {}) & SUMMARIZER_KINDS
    assert dos == DOS and kinds == SUMMARIZER_KINDS


# --- one case ----------------------------------------------------------------------------


def _messages(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return copy.deepcopy(spec)
    if "fixture" in spec:
        return copy.deepcopy(FIXTURES[spec["fixture"]])
    if "value" in spec:
        return copy.deepcopy(spec["value"])
    kind = spec["special"]
    msgs = copy.deepcopy(FIXTURES["short-chat"])
    m = msgs[1]
    if kind == "cycle":
        m["content"] = [m]
    elif kind == "deep":
        v: Any = []
        for _ in range(100_000):
            v = [v]
        m["content"] = v
    elif kind == "nan":
        m["score"] = float("nan")
    else:  # pragma: no cover - bigint / invalid-utf8 do not list python
        raise AssertionError(f"special {kind} cannot be built in Python")
    return msgs


def _options(opts: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Wire names to Python keywords (timeout_ms -> timeout in seconds); anything
    else passes unchanged, to be rejected when unknown."""
    out = {}
    for k, v in (opts or {}).items():
        if k == "timeout_ms":
            out["timeout"] = v / 1000 if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        else:
            out[k] = v
    return out


class Runner:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.compactor: Optional[Compactor] = None
        self.engine: Optional[ContextEngine] = None
        self.requests: List[Any] = []
        self.release = threading.Event()  # ends hung sync summarizers at teardown

    def close(self) -> None:
        self.release.set()
        if self.engine is not None:
            self.engine.close()
        if self.compactor is not None:
            self.compactor.close()

    def c(self) -> Compactor:
        if self.compactor is None:
            self.compactor = Compactor()
        return self.compactor

    def summarizer(self, spec: Optional[Dict[str, Any]], mode: str) -> Any:
        if spec is None:
            return None
        records = spec.get("records", False)
        release = self.release

        def outcome(request: Any) -> Any:
            if records:
                self.requests.append(request)
            if "returns" in spec:
                return spec["returns"]
            if "returns_value" in spec:
                return spec["returns_value"]
            if "throws" in spec:
                raise RuntimeError(spec["throws"])
            if "times_out" in spec:
                raise TimeoutError(spec["times_out"])
            raise AssertionError(spec)

        if mode == "async":
            async def asummarize(request: Any) -> Any:
                if spec.get("hangs"):
                    await asyncio.Event().wait()
                if spec.get("cancels"):
                    raise asyncio.CancelledError()
                return outcome(request)

            return asummarize

        def summarize(request: Any) -> Any:
            if spec.get("hangs"):
                release.wait()
                return "too late"
            if spec.get("cancels"):
                raise concurrent.futures.CancelledError()
            return outcome(request)

        return summarize

    def trap(self) -> None:
        """Make the compactor's next instance trap on its next call: garbage over
        the memory of the instance the pool hands out next."""
        pool = self.c()._pool
        assert pool is not None
        with pool._cv:
            if not pool._free:
                pool._count += 1
                pool._free.append(_new_instance(pool))
            inst = pool._free[-1]
        buf = inst._mem.get_buffer_ptr(inst.store)
        ctypes.memset(ctypes.addressof(buf), 0xAA, len(buf))

    def step(self, step: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        """Run one step; returns (its value, what it produced for want)."""
        do = step["do"]
        opts = _options(step.get("options"))
        if do == "create":
            if self.compactor is not None:
                self.compactor.close()
                self.compactor = None
            self.compactor = Compactor(step.get("config"), **opts)
            return None, {}
        if do == "compact":
            msgs = _messages(step["messages"])
            summarize = self.summarizer(step.get("summarizer"), self.mode)
            if self.mode == "async":
                res = asyncio.run(self.c().acompact(msgs, summarize=summarize, **opts))
            else:
                res = self.c().compact(msgs, summarize=summarize, **opts)
            return res, {"report": res.report, "messages_count": len(res.messages)}
        if do == "trap":
            self.trap()
            return None, {}
        if do == "engine.create":
            if self.engine is not None:
                self.engine.close()
                self.engine = None
            self.engine = ContextEngine(step.get("config"), summarize=self.summarizer(step.get("summarizer"), "sync"),
                                        compactor=self.c(), **opts)
            return None, {"status": self.engine.get_status()}
        e = self.engine
        assert e is not None, f"{do} before engine.create"
        if do == "engine.update_from_response":
            e.update_from_response(step.get("usage"))
        elif do == "engine.should_compress":
            args = {"prompt_tokens": step["prompt_tokens"]} if "prompt_tokens" in step else {}
            v = e.should_compress(**args)
            return v, {"value": v, "status": e.get_status()}
        elif do == "engine.compress":
            out = e.compress(_messages(step["messages"]), **opts)
            return out, {"messages_count": len(out), "status": e.get_status()}
        elif do == "engine.update_model":
            args = {k: step[k] for k in ("provider",) if k in step}
            e.update_model(step["model"], step["context_length"], **args)
        elif do == "engine.on_session_reset":
            e.on_session_reset()
        else:
            assert do == "engine.get_status"
        return None, {"status": e.get_status()}


def _new_instance(pool: Any) -> Any:
    from ctxcompact._runtime import Instance

    return Instance(pool.loaded.module)


def _subset(want: Any, got: Any, where: str) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{where}: want an object, got {got!r}"
        for k, v in want.items():
            assert k in got, f"{where}: {k!r} missing from {sorted(got)}"
            _subset(v, got[k], f"{where}.{k}")
    else:
        if isinstance(want, bool) or want is None or isinstance(got, bool) or got is None:
            assert got is want, f"{where}: want {want!r}, got {got!r}"
        else:
            assert got == want, f"{where}: want {want!r}, got {got!r}"


@pytest.mark.parametrize("case,mode", _cases())
def test_bindings_case(case, mode):
    if "python" not in case.get("runtimes", RUNTIMES):
        pytest.skip("not applicable to python (the case lists " + ", ".join(case["runtimes"]) + ")")
    r = Runner(mode)
    try:
        for i, step in enumerate(case["steps"]):
            where = f"step {i} ({step['do']})"
            want = step.get("want") or {}
            if "bad_binary" in want:
                with pytest.raises(ErrBadBinary) as bi:
                    r.step(step)
                assert str(bi.value).startswith(want["bad_binary"]), f"{where}: {bi.value!r}"
                continue
            if "error" in want:
                with pytest.raises(CompactError) as ei:
                    r.step(step)
                err = ei.value
                assert err.code == want["error"]["code"], f"{where}: {err!r}"
                if "path" in want["error"]:
                    assert err.path == want["error"]["path"], f"{where}: {err!r}"
                else:
                    assert err.path.startswith(want["error"]["path_prefix"]), f"{where}: {err!r}"
                assert str(err).startswith("ctxcompact:"), f"{where}: {err!r}"
                continue
            _, got = r.step(step)
            for key in ("report", "status"):
                if key in want:
                    _subset(want[key], got[key], f"{where} {key}")
            if "messages_count" in want:
                assert got["messages_count"] == want["messages_count"], where
            if "value" in want:
                assert got["value"] is want["value"], where
            if "summary_request" in want:
                assert r.requests, f"{where}: the summarizer was not asked"
                _subset(want["summary_request"], r.requests[-1], f"{where} summary_request")
    finally:
        r.close()
