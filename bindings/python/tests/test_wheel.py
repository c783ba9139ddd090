"""Build a wheel, install it into a fresh venv, and use it from there on a shared trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, need_traces

HERE = ROOT / "bindings" / "python"

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import ctxcompact
    from ctxcompact import Compactor
    messages = json.load(open(sys.argv[1], encoding="utf-8"))["messages"]
    compactor = Compactor({"model": {"context_length": 64000}})
    result = compactor.compact(messages, summarize=lambda request: "Goal: the task. Progress: some done.")
    report = result.report
    print(json.dumps({"file": ctxcompact.__file__, "before": len(messages), "after": len(result.messages),
                      "compacted": report["compacted"], "fallback": report["fallback_used"], "fits": report["fits"]}))
    """
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    given = os.environ.get("CTXCOMPACT_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(HERE)],
        check=True, capture_output=True,
    )
    (whl,) = out.glob("ctxcompact-*.whl")
    return whl


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for want in ("ctxcompact/__init__.py", "ctxcompact/py.typed", "ctxcompact/ctxcompact.wasm",
                 "ctxcompact/ctxcompact.wasm.sha256"):
        assert want in names, want
    assert not any(n.startswith("tests/") for n in names)
    data = zipfile.ZipFile(wheel).read("ctxcompact/ctxcompact.wasm")
    assert data == (ROOT / "wasm" / "ctxcompact.wasm").read_bytes()


def test_wheel_in_a_fresh_venv_compacts_a_trace(wheel, tmp_path):
    traces = need_traces()
    trace = max(traces, key=lambda p: p.stat().st_size)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
                   check=True, cwd=tmp_path)
    script = tmp_path / "use_it.py"
    script.write_text(SCRIPT)
    # Run from tmp_path so the source tree cannot be imported by accident.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    out = subprocess.run([str(py), str(script), str(trace)], check=True, capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    got = json.loads(out.stdout)
    assert Path(got["file"]).resolve().is_relative_to(env_dir.resolve()), got["file"]
    assert got["compacted"] is True and got["fallback"] is False
    assert got["after"] < got["before"]
