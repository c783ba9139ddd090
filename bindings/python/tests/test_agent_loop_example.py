"""examples/agent-loop/python/agent.py: run as the README says (a subprocess, from
the repository root) and in process (to see every request the loopback got)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from typing import Any, List

import pytest

from conftest import ROOT

pytest.importorskip("openai")

EXAMPLE = ROOT / "examples" / "agent-loop" / "python"
TRACE = ROOT / "examples" / "astropy-12907.json"
LINE = re.compile(
    r"^compaction (\d+) at turn (\d+): (\d+) -> (\d+) messages, (\d+) -> (\d+) tokens \(summarizer (host|builtin)\)$"
)
DONE = re.compile(r"^done: (\d+) turns, (\d+) compactions, (\d+) model requests$")

sys.path.insert(0, str(EXAMPLE))
import loopback  # noqa: E402


def _agent() -> Any:
    spec = importlib.util.spec_from_file_location("agent_loop_example", EXAMPLE / "agent.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def assistant_turns(path: Any) -> int:
    with open(path, "rb") as f:
        msgs = json.load(f)["messages"]
    first_user = next(i for i, m in enumerate(msgs) if m["role"] == "user")
    return sum(1 for m in msgs[first_user:] if m["role"] == "assistant")


def check_lines(lines: List[str], turns: int) -> int:
    """The lines' format and sums; returns the number of compactions."""
    assert lines, "the example printed nothing"
    *comp, done = lines
    m = DONE.match(done)
    assert m, done
    assert int(m[1]) == turns
    k = int(m[2])
    assert k >= 1 and len(comp) == k
    # One request per agent turn and one summary request per compaction.
    assert int(m[3]) == turns + k
    last_turn = 0
    for n, line in enumerate(comp, 1):
        c = LINE.match(line)
        assert c, line
        assert int(c[1]) == n and int(c[2]) > last_turn
        last_turn = int(c[2])
        assert int(c[4]) < int(c[3]) and int(c[6]) < int(c[5])
        assert c[7] == "host", line
    return k


def test_example_runs_from_the_readme_command():
    # The README's command, from the repository root, defaults and all.
    out = subprocess.run(
        [sys.executable, "examples/agent-loop/python/agent.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr
    check_lines(out.stdout.splitlines(), assistant_turns(TRACE))


@pytest.mark.parametrize("window", [16000, 8000])
def test_every_request_fits_the_window(window):
    agent = _agent()
    lines: List[str] = []
    with loopback.LoopbackModel(TRACE) as model:
        k = agent.run(str(TRACE), window, model, lines.append)
        requests = list(model.requests)
    assert check_lines(lines, assistant_turns(TRACE)) == k
    assert [r.kind for r in requests].count("summary") == k
    assert all(r.kind in ("agent", "summary") for r in requests)
    for r in requests:
        # The loopback's own measure, the one its usage reports.
        size = loopback.tokens_of(loopback.request_messages(r.path, r.body))
        assert size <= window, (r.kind, size)
        assert r.body["model"] == ("summary-model" if r.kind == "summary" else "agent-model")


def test_the_readme_route_with_the_openai_extra(tmp_path):
    """`pip install './bindings/python[openai]'` into a fresh venv (PyPI or pip's cache
    for the SDK, pinned through test.sh's constraints), then the example's command
    with that venv's python, from the checkout root."""
    import os
    import venv

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_NO_BUILD_ISOLATION")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if os.environ.get("CTXCOMPACT_PIP_CONSTRAINT"):
        env["PIP_CONSTRAINT"] = os.environ["CTXCOMPACT_PIP_CONSTRAINT"]
    r = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "./bindings/python[openai]"],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, f"pip install failed:\n{r.stdout}\n{r.stderr}"
    check = "import ctxcompact, openai, sys; print(ctxcompact.__file__); print('anthropic' in sys.modules)"
    where = subprocess.run([str(py), "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.splitlines()[0].startswith(str(env_dir)), where.stdout
    out = subprocess.run([str(py), "examples/agent-loop/python/agent.py", "--window", "16000"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    check_lines(out.stdout.splitlines(), assistant_turns(TRACE))
