"""The package as users install it: the wheel and the sdist built from this checkout,
and every install route the README names, each into a fresh venv, used from there.

Routes (README "Install"): `pip install ./bindings/python` (pip builds a local
directory in place, so the build hook finds ../../wasm/ctxcompact.wasm),
`pip install 'git+file://<checkout>#subdirectory=bindings/python'` (pip clones the
whole repository; this test clones the checkout first, so it installs the last
commit, as a user would), the sdist (unpacked by pip far from any checkout) and the
wheel. Each runs with pip's build isolation as a user's would; the pins of test.sh
reach the build environment through PIP_CONSTRAINT. Needs PyPI for wasmtime and
hatchling (or pip's cache), nothing else."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, conversation, need_traces

HERE = ROOT / "bindings" / "python"
WASM = ROOT / "wasm" / "ctxcompact.wasm"

SCRIPT = textwrap.dedent(
    """
    import hashlib, json, sys
    from importlib import resources
    import ctxcompact
    from ctxcompact import Compactor
    messages = json.load(open(sys.argv[1], encoding="utf-8"))["messages"]
    compactor = Compactor({"model": {"context_length": int(sys.argv[2])}})
    result = compactor.compact(messages, summarize=lambda request: "Goal: the task. Progress: some done.")
    report = result.report
    wasm = resources.files("ctxcompact").joinpath("ctxcompact.wasm").read_bytes()
    print(json.dumps({"file": ctxcompact.__file__, "before": len(messages), "after": len(result.messages),
                      "compacted": report["compacted"], "fallback": report["fallback_used"], "fits": report["fits"],
                      "wasm_sha256": hashlib.sha256(wasm).hexdigest(), "source": compactor.module_source}))
    """
)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict:
    """The wheel and sdist test.sh built (python -m build: the wheel from the sdist),
    else built here the same way."""
    wheel, sdist = os.environ.get("CTXCOMPACT_WHEEL"), os.environ.get("CTXCOMPACT_SDIST")
    if wheel and sdist:
        return {"wheel": Path(wheel), "sdist": Path(sdist)}
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(HERE)],
                   check=True, capture_output=True)
    (whl,) = out.glob("ctxcompact-*.whl")
    (sd,) = out.glob("ctxcompact-*.tar.gz")
    return {"wheel": whl, "sdist": sd}


def test_wheel_contents(dist):
    names = zipfile.ZipFile(dist["wheel"]).namelist()
    for want in ("ctxcompact/__init__.py", "ctxcompact/py.typed", "ctxcompact/ctxcompact.wasm",
                 "ctxcompact/ctxcompact.wasm.sha256"):
        assert want in names, want
    assert len(names) == len(set(names)), "a file is in the wheel twice"
    assert not any(n.startswith("tests/") for n in names)
    z = zipfile.ZipFile(dist["wheel"])
    data = z.read("ctxcompact/ctxcompact.wasm")
    assert data == WASM.read_bytes()
    assert z.read("ctxcompact/ctxcompact.wasm.sha256").decode().split() == [_sha256(WASM), "ctxcompact.wasm"]


def test_sdist_carries_the_module(dist):
    with tarfile.open(dist["sdist"]) as tar:
        names = tar.getnames()
        top = names[0].split("/")[0]
        assert len(names) == len(set(names)), "a file is in the sdist twice"
        for want in ("pyproject.toml", "hatch_build.py", "README.md", "src/ctxcompact/__init__.py",
                     "src/ctxcompact/ctxcompact.wasm", "src/ctxcompact/ctxcompact.wasm.sha256"):
            assert f"{top}/{want}" in names, want
        assert not any("/tests/" in n for n in names)
        data = tar.extractfile(f"{top}/src/ctxcompact/ctxcompact.wasm").read()
        sha = tar.extractfile(f"{top}/src/ctxcompact/ctxcompact.wasm.sha256").read().decode().split()[0]
    assert data == WASM.read_bytes() and sha == _sha256(WASM)


def _fresh_venv(where: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    return where / "bin" / "python"


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_NO_BUILD_ISOLATION")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    constraint = os.environ.get("CTXCOMPACT_PIP_CONSTRAINT")
    if constraint:
        env["PIP_CONSTRAINT"] = constraint
    return env


def _install_and_use(tmp_path: Path, target: str, cwd: Path, conv: Path, window: int) -> dict:
    """pip install target into a fresh venv (run from cwd), then compact conv with it
    from tmp_path, so that nothing can be imported from the checkout by accident."""
    env_dir = tmp_path / "venv"
    py = _fresh_venv(env_dir)
    env = _env()
    r = subprocess.run([str(py), "-m", "pip", "install", "--quiet", target], cwd=cwd, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, f"pip install {target} failed:\n{r.stdout}\n{r.stderr}"
    script = tmp_path / "use_it.py"
    script.write_text(SCRIPT)
    out = subprocess.run([str(py), str(script), str(conv), str(window)], check=True, capture_output=True,
                         text=True, cwd=tmp_path, env=env)
    got = json.loads(out.stdout)
    assert Path(got["file"]).resolve().is_relative_to(env_dir.resolve()), got["file"]
    return got


def _synthetic(tmp_path: Path) -> Path:
    p = tmp_path / "conversation.json"
    p.write_text(json.dumps({"messages": conversation(40)}))
    return p


def test_wheel_in_a_fresh_venv_compacts_a_trace(dist, tmp_path):
    traces = need_traces()
    trace = max(traces, key=lambda p: p.stat().st_size)
    got = _install_and_use(tmp_path, str(dist["wheel"]), tmp_path, trace, 64000)
    assert got["compacted"] is True and got["fallback"] is False
    assert got["after"] < got["before"]
    assert got["wasm_sha256"] == _sha256(WASM)


def test_sdist_installs_without_the_repository(dist, tmp_path):
    # A copy far from the checkout: pip unpacks it into a temp dir with no ../../wasm.
    sdist = tmp_path / "download" / dist["sdist"].name
    sdist.parent.mkdir()
    shutil.copy(dist["sdist"], sdist)
    got = _install_and_use(tmp_path, str(sdist), tmp_path, _synthetic(tmp_path), 16000)
    assert got["compacted"] is True and got["after"] < got["before"]
    assert got["wasm_sha256"] == _sha256(WASM)


def test_pip_install_the_directory(tmp_path):
    """`pip install ./bindings/python` from the repository root, as the README says."""
    got = _install_and_use(tmp_path, "./bindings/python", ROOT, _synthetic(tmp_path), 16000)
    assert got["compacted"] is True and got["after"] < got["before"]
    assert got["wasm_sha256"] == _sha256(WASM)


@pytest.fixture(scope="module")
def clean_clone(tmp_path_factory) -> Path:
    """A clean clone of this checkout's last commit: what a user's checkout is."""
    if not (ROOT / ".git").exists():
        pytest.skip(f"SKIPPED, NOT TESTED: {ROOT} is not a git checkout (git+file needs one)")
    dest = tmp_path_factory.mktemp("clone") / "ctxcompact"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True, capture_output=True)
    assert not (dest / "bindings" / "python" / "src" / "ctxcompact" / "ctxcompact.wasm").exists()
    return dest


def test_pip_install_git_file_subdirectory(tmp_path, clean_clone):
    target = f"git+file://{clean_clone}#subdirectory=bindings/python"
    got = _install_and_use(tmp_path, target, tmp_path, _synthetic(tmp_path), 16000)
    assert got["compacted"] is True and got["after"] < got["before"]
    assert got["wasm_sha256"] == _sha256(clean_clone / "wasm" / "ctxcompact.wasm")


def test_pip_install_the_directory_of_a_clean_clone(tmp_path, clean_clone):
    """No step before pip: a fresh clone has no module in src/ctxcompact/."""
    got = _install_and_use(tmp_path, "./bindings/python", clean_clone, _synthetic(tmp_path), 16000)
    assert got["compacted"] is True
    assert got["wasm_sha256"] == _sha256(clean_clone / "wasm" / "ctxcompact.wasm")
    assert subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=clean_clone, check=True,
                          capture_output=True, text=True).stdout == "", "the build left files in the checkout"


def test_build_without_the_module_fails_clearly(tmp_path):
    """Neither ../../wasm/ctxcompact.wasm nor an sdist's copy: the build stops, naming both."""
    proj = tmp_path / "a" / "b" / "python"
    proj.mkdir(parents=True)
    for f in ("pyproject.toml", "hatch_build.py", "README.md"):
        shutil.copy(HERE / f, proj / f)
    shutil.copytree(HERE / "src", proj / "src", ignore=shutil.ignore_patterns("ctxcompact.wasm*", "__pycache__"))
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "out"),
                        str(proj)], capture_output=True, text=True)
    assert r.returncode != 0
    text = r.stdout + r.stderr
    assert "the WebAssembly module is missing" in text, text
    assert str(tmp_path / "a" / "wasm" / "ctxcompact.wasm") in text, text
    assert str(proj / "src" / "ctxcompact" / "ctxcompact.wasm") in text, text


def test_damaged_sdist_copy_fails_the_build(tmp_path, dist):
    where = tmp_path / "x" / "y"  # no ../../wasm beside the unpacked sdist
    with tarfile.open(dist["sdist"]) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(where, filter="data")
        else:
            tar.extractall(where)
    (proj,) = [p for p in where.iterdir() if p.is_dir()]
    wasm = proj / "src" / "ctxcompact" / "ctxcompact.wasm"
    data = bytearray(wasm.read_bytes())
    data[len(data) // 2] ^= 0xFF
    wasm.write_bytes(bytes(data))
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "out"),
                        str(proj)], capture_output=True, text=True)
    assert r.returncode != 0
    assert "the source is damaged" in r.stdout + r.stderr
