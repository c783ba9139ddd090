"""What bindings/python/README.md and the repository README say of the package holds:
each documented constructor signature names the real parameters with their real
defaults, and the sdist route installs the file `python -m build` writes."""

from __future__ import annotations

import ast
import inspect
import os
import re
from pathlib import Path

import pytest

import ctxcompact
from ctxcompact import Compactor, ContextEngine, RecallStore

from conftest import ROOT

README = ROOT / "bindings" / "python" / "README.md"


def _documented(name: str) -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(r"`" + name + r"\(([^`]*)\)`", text)
    assert m, f"bindings/python/README.md gives no `{name}(...)` signature"
    return " ".join(m.group(1).split())


@pytest.mark.parametrize("cls", [Compactor, ContextEngine, RecallStore], ids=lambda c: c.__name__)
def test_documented_signature_is_the_real_one(cls):
    doc = _documented(cls.__name__)
    params = {n: p for n, p in inspect.signature(cls).parameters.items() if p.kind is not p.VAR_KEYWORD}
    named = {}
    for part in (x.strip() for x in doc.split(",")):
        if part == "*":
            continue
        name, _, default = part.partition("=")
        named[name.strip()] = default.strip()
    assert list(named) == list(params), f"README {cls.__name__}({doc}): parameters {list(named)}; real {list(params)}"
    for name, default in named.items():
        real = params[name].default
        if not default:
            assert real is inspect.Parameter.empty, f"{cls.__name__}: README gives {name} no default; it is {real!r}"
            continue
        try:
            value = ast.literal_eval(default)
        except (ValueError, SyntaxError):
            continue  # prose such as "512 MiB"
        assert value == real, f"{cls.__name__}: README says {name}={default}; it is {real!r}"


@pytest.mark.parametrize("readme", ["README.md", "bindings/python/README.md"])
def test_sdist_route_installs_what_build_writes(readme):
    """`python -m build [--sdist] bindings/python` writes bindings/python/dist/ (build's
    default outdir, where test.sh builds too); the next line installs that file."""
    lines = (ROOT / readme).read_text(encoding="utf-8").splitlines()
    k = next((i for i, l in enumerate(lines) if l.startswith("python -m build ")), None)
    assert k is not None, f"{readme} has no `python -m build` line"
    src = [w for w in lines[k].split("#")[0].split()[3:] if not w.startswith("-")]
    assert src == ["bindings/python"], lines[k]
    install = lines[k + 1].split("#")[0].split()
    assert install[:2] == ["pip", "install"], lines[k + 1]
    want = f"bindings/python/dist/ctxcompact-{ctxcompact.__version__}.tar.gz"
    assert install[2:] == [want], f"{readme}: {lines[k + 1]!r} does not install {want}"
    built = os.environ.get("CTXCOMPACT_SDIST")
    if built:  # test.sh built it there
        assert Path(built).resolve() == (ROOT / want).resolve()
