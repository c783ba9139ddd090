"""Shared fixtures. Paths: the repository root (CTXCOMPACT_REPO_ROOT, set by test.sh,
else two levels up), its testdata/ and wasm/, and ../shared/traces beside it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import pytest

import ctxcompact

ROOT = Path(os.environ.get("CTXCOMPACT_REPO_ROOT") or Path(__file__).resolve().parents[3])
TESTDATA = ROOT / "testdata"
TRACES = ROOT.parent / "shared" / "traces"


def trace_files() -> List[Path]:
    return sorted(TRACES.glob("*.json")) if TRACES.is_dir() else []


def load_trace(path: Path) -> List[Dict[str, Any]]:
    with open(path, "rb") as f:
        return json.load(f)["messages"]


def in_ci(env: Optional[Mapping[str, str]] = None) -> bool:
    """CI is set (to anything but "", "0" or "false"): missing inputs fail, not skip."""
    value = (os.environ if env is None else env).get("CI", "")
    return value.strip().lower() not in ("", "0", "false")


def require_traces(directory: Path, env: Optional[Mapping[str, str]] = None) -> List[Path]:
    """The *.json traces in directory. When the directory is missing: a failure if CI
    is set (a CI run without ../shared would otherwise pass on skips alone), else a
    skip whose reason names the path (pytest -ra prints it in the summary)."""
    if not directory.is_dir():
        msg = f"shared traces not found at {directory} (the ../shared folder beside the checkout)"
        if in_ci(env):
            pytest.fail(f"{msg}; CI is set, so trace-based tests must not skip")
        pytest.skip(f"SKIPPED, NOT TESTED: {msg}")
    files = sorted(directory.glob("*.json"))
    assert files, f"{directory} exists but holds no *.json trace"
    return files


def need_traces() -> List[Path]:
    """The shared traces (../shared/traces/*.json); see require_traces."""
    return require_traces(TRACES)


def need_trace(relative: str) -> Path:
    """One shared trace by its path under ../shared/traces; see require_traces."""
    require_traces(TRACES)
    path = TRACES / relative
    assert path.is_file(), f"{path} is missing from the shared traces"
    return path


@pytest.fixture(scope="session")
def compactor() -> ctxcompact.Compactor:
    c = ctxcompact.Compactor()
    yield c
    c.close()


def conversation(n_turns: int = 30, tool_output_chars: int = 3000) -> List[Dict[str, Any]]:
    """A synthetic coding session: system, first request, then tool-call turns with
    big outputs, ending with a real user request."""
    msgs: List[Dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Set up a FastAPI project with tests."},
    ]
    for i in range(n_turns):
        cid = f"call_{i}"
        msgs.append(
            {
                "role": "assistant",
                "content": f"Step {i}: running a command.",
                "tool_calls": [
                    {"id": cid, "type": "function",
                     "function": {"name": "terminal", "arguments": json.dumps({"command": f"pytest -k t{i}"})}}
                ],
            }
        )
        body = (f"line {i} of output: " + "x" * 60 + "\n") * (tool_output_chars // 80)
        msgs.append({"role": "tool", "tool_call_id": cid, "content": body})
    msgs.append({"role": "assistant", "content": "8 passed, 2 failed."})
    msgs.append({"role": "user", "content": "Fix the failing tests."})
    return msgs
