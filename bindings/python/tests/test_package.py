"""The package as shipped: version, ABI table, packaged module, public names."""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources

import ctxcompact
from ctxcompact import _runtime

from conftest import ROOT


def _go_version() -> str:
    text = (ROOT / "core" / "version.go").read_text()
    m = re.search(r'Version = "([^"]+)"', text)
    assert m, "core/version.go has no Version"
    return m.group(1)


def test_versions_agree_with_core(compactor):
    go = _go_version()
    assert ctxcompact.__version__ == go
    pyproject = (ROOT / "bindings" / "python" / "pyproject.toml").read_text()
    m = re.search(r'^version = "([^"]+)"', pyproject, re.M)
    assert m and m.group(1) == go
    assert compactor.info()["version"] == go


def test_abi_table_equals_abi_json():
    abi = json.loads((ROOT / "wasm" / "abi.json").read_text())
    assert _runtime.ABI_VERSION == abi["abi_version"] == ctxcompact.ABI_VERSION
    assert _runtime.MAX_REQUEST_BYTES == abi["max_request_bytes"]
    assert set(_runtime.EXPECTED_EXPORTS) == set(abi["exports"])
    for name, spec in abi["exports"].items():
        want = _runtime.EXPECTED_EXPORTS[name]
        if spec.get("kind") == "memory":
            assert want == "memory"
        else:
            assert want == (tuple(spec["params"]), tuple(spec["results"])), name


def test_packaged_wasm_is_the_committed_module():
    pkg = resources.files("ctxcompact")
    data = pkg.joinpath("ctxcompact.wasm").read_bytes()
    repo = (ROOT / "wasm" / "ctxcompact.wasm").read_bytes()
    assert hashlib.sha256(data).hexdigest() == hashlib.sha256(repo).hexdigest()
    recorded = pkg.joinpath("ctxcompact.wasm.sha256").read_text().split()[0]
    assert recorded == hashlib.sha256(repo).hexdigest()
    got, sha = _runtime.packaged_wasm()
    assert sha == recorded and got == repo


def test_module_error_codes_and_ops_match_abi_json(compactor):
    abi = json.loads((ROOT / "wasm" / "abi.json").read_text())
    info = compactor.info()
    assert info["name"] == "ctxcompact"
    assert info["error_codes"] == abi["error_codes"]
    assert set(abi["ops"]) <= set(info["ops"])


def test_public_names():
    assert len(set(ctxcompact.__all__)) == len(ctxcompact.__all__)
    for name in ctxcompact.__all__:
        assert hasattr(ctxcompact, name), name
    assert resources.files("ctxcompact").joinpath("py.typed").is_file()
    assert issubclass(ctxcompact.CompactError, Exception)
    # TypedDict keys are the wire names.
    assert "from" in ctxcompact.IndexRange.__annotations__
    assert "tool_call_id" not in ctxcompact.Config.__annotations__
    assert set(ctxcompact.Config.__annotations__) == {"compression", "prompt_caching", "model", "tokens", "context"}
