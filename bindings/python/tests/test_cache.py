"""The compiled-module cache: cold vs warm, corrupt or unwritable cache, overrides.

Compiling the module takes seconds, so the suite compiles it only a few times: once
for a known-good cache file (copied where needed), once per recovery path. What each
load did is checked by its source ("compiled", "cache", ...), never by its time: the
cold and warm start times are measured by bench/start.py (./build.sh bench)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest
import wasmtime

from ctxcompact import Compactor, _runtime


def _load(cache_dir, baseline=False):
    return _runtime.load_module(_runtime.packaged_source(), _runtime.resolve_cache_dir(cache_dir), memo=False, baseline=baseline)


@pytest.fixture(scope="module")
def good_cache(tmp_path_factory):
    d = tmp_path_factory.mktemp("good")
    loaded = _load(d)
    assert loaded.source == "compiled"
    p = loaded.cache_path
    return {"dir": d, "name": p.name, "blob": p.read_bytes(), "digest": _runtime._sidecar(p).read_bytes(),
            "sha256": loaded.sha256}


def _install(dir_, good):
    dir_.mkdir(parents=True, exist_ok=True)
    path = dir_ / good["name"]
    path.write_bytes(good["blob"])
    _runtime._sidecar(path).write_bytes(good["digest"])
    return path


def test_cold_then_warm(good_cache):
    d = good_cache["dir"]
    assert sorted(f.name for f in d.iterdir()) == [good_cache["name"], good_cache["name"] + ".sha256"]
    assert _runtime.wasmtime_version() in good_cache["name"]
    assert good_cache["sha256"][:32] in good_cache["name"]
    warm = _load(d)
    assert warm.source == "cache"
    assert warm.cache_path == d / good_cache["name"]
    assert d.joinpath(good_cache["name"]).read_bytes() == good_cache["blob"], "a cache hit rewrote the file"
    assert b'"name":"ctxcompact"' in _runtime.Instance(warm.module).call(b'{"op":"info"}')


@pytest.mark.parametrize("damage", ["truncate", "flip-byte", "empty", "no-digest", "bad-digest"])
def test_damaged_cache_files_are_refused_before_wasmtime_sees_them(tmp_path, good_cache, damage):
    path = _install(tmp_path, good_cache)
    assert _runtime._check_cache(path)
    blob = good_cache["blob"]
    if damage == "truncate":
        path.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip-byte":
        b = bytearray(blob)
        b[len(b) // 2] ^= 0xFF
        path.write_bytes(bytes(b))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "no-digest":
        _runtime._sidecar(path).unlink()
    else:
        _runtime._sidecar(path).write_text("0" * 64)
    assert not _runtime._check_cache(path)


def test_corrupt_cache_is_recompiled_and_overwritten(tmp_path, good_cache):
    path = _install(tmp_path, good_cache)
    # Garbage that passes the digest check: wasmtime itself must refuse it, and the
    # loader then compiles and overwrites the file.
    junk = b"\x7fELF" + os.urandom(4096)
    path.write_bytes(junk)
    _runtime._sidecar(path).write_text(hashlib.sha256(junk).hexdigest())
    assert _runtime._check_cache(path)
    with pytest.raises(wasmtime.WasmtimeError):
        wasmtime.Module.deserialize_file(_runtime._shared_engine()[0], str(path))
    again = _load(tmp_path)
    assert again.source == "compiled"
    assert again.cache_path == path
    assert _runtime._check_cache(path) and path.read_bytes() != junk
    assert _load(tmp_path).source == "cache"
    assert b"ctxcompact" in _runtime.Instance(again.module).call(b'{"op":"info"}')


def test_atomic_write_leaves_no_temp_files(tmp_path, good_cache):
    name = good_cache["name"]
    assert _runtime._write_cache(tmp_path / "sub" / name, good_cache["blob"])
    assert (tmp_path / "sub" / name).read_bytes() == good_cache["blob"]
    assert _runtime._sidecar(tmp_path / "sub" / name).read_bytes() == good_cache["digest"]
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == [name, name + ".sha256"]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert _runtime._write_cache(blocker / name, good_cache["blob"]) is False


def test_unwritable_cache_dir_just_compiles(tmp_path):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    loaded = _load(blocker / "sub")  # mkdir under a regular file fails, like a read-only dir
    assert loaded.source == "compiled-uncached"
    assert b"ctxcompact" in _runtime.Instance(loaded.module).call(b'{"op":"info"}')


def test_cache_disabled(tmp_path):
    c = Compactor(cache_dir=False)
    assert c.module_source == "compiled-uncached"
    assert c.info()["name"] == "ctxcompact"


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("CTXCOMPACT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _runtime.resolve_cache_dir(None) == tmp_path / "xdg" / "ctxcompact"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _runtime.resolve_cache_dir(None) == tmp_path / "home" / ".cache" / "ctxcompact"
    monkeypatch.setenv("CTXCOMPACT_CACHE_DIR", str(tmp_path / "env"))
    assert _runtime.resolve_cache_dir(None) == tmp_path / "env"
    assert _runtime.resolve_cache_dir(tmp_path / "arg") == tmp_path / "arg"
    assert _runtime.resolve_cache_dir(str(tmp_path / "arg")) == tmp_path / "arg"
    assert _runtime.resolve_cache_dir(False) is None
    for off in ("off", "", "0"):
        monkeypatch.setenv("CTXCOMPACT_CACHE_DIR", off)
        assert _runtime.resolve_cache_dir(None) is None


def test_compactor_uses_the_cache_dir_argument(tmp_path, good_cache):
    _install(tmp_path / "c", good_cache)
    c = Compactor(cache_dir=tmp_path / "c")
    assert c.module_source == "cache"
    assert c.info()["name"] == "ctxcompact"


def test_warm_start_in_a_fresh_process(tmp_path, good_cache):
    """A new interpreter with a warm cache: import + Compactor() + first call load the
    module from the cache (how long that takes: bench/start.py)."""
    _install(tmp_path, good_cache)
    env = dict(os.environ, CTXCOMPACT_CACHE_DIR=str(tmp_path))
    script = "import ctxcompact; c=ctxcompact.Compactor(); print(c.module_source, c.info()['name'])"
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.split() == ["cache", "ctxcompact"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [good_cache["name"], good_cache["name"] + ".sha256"]


def test_a_cache_miss_starts_on_the_baseline_compiler_and_fills_the_cache(tmp_path):
    """Winch compiles the module for this process; Cranelift's compile goes into the
    cache in the background, and the next load takes it from there."""
    if _runtime._baseline_engine() is None:
        pytest.skip("this wasmtime has no baseline compiler (Winch)")
    first = _load(tmp_path, baseline=True)
    assert first.source == "baseline"
    assert b'"name":"ctxcompact"' in _runtime.Instance(first.module, (first.engine, first.linker)).call(b'{"op":"info"}')
    assert first.caching is not None
    first.caching.join(120)
    assert not first.caching.is_alive()
    assert _runtime._check_cache(first.cache_path)
    again = _load(tmp_path, baseline=True)
    assert again.source == "cache" and again.caching is None


def test_the_baseline_compiler_counts_as_cranelift_does(tmp_path, good_cache):
    """The same request, the same bytes, whichever compiler made the code."""
    if _runtime._baseline_engine() is None:
        pytest.skip("this wasmtime has no baseline compiler (Winch)")
    quick = _load(tmp_path / "b", baseline=True)
    opt = _load(_install(tmp_path / "c", good_cache).parent)
    assert (quick.source, opt.source) == ("baseline", "cache")
    req = (b'{"op":"compact.begin","force":true,"summarizer":"builtin","config":{"model":{"context_length":8000},'
           b'"tokens":{"encoding":"o200k_base"}},"messages":' +
           __import__("json").dumps([{"role": "user", "content": "port the parser"}] +
                                    [{"role": "assistant" if k % 2 else "user", "content": f"step {k}: " + "lexer.py tokens " * 200}
                                     for k in range(30)]).encode() + b'}')
    a = _runtime.Instance(quick.module, (quick.engine, quick.linker)).call(req)
    b = _runtime.Instance(opt.module).call(req)
    assert a == b and b'"compacted":true' in a
    quick.caching.join(120)


def test_a_first_run_in_a_fresh_process_leaves_the_cache_filled(tmp_path):
    """The interpreter waits for the cache to be written before it exits, so the
    next process loads the optimized code."""
    if _runtime._baseline_engine() is None:
        pytest.skip("this wasmtime has no baseline compiler (Winch)")
    env = dict(os.environ, CTXCOMPACT_CACHE_DIR=str(tmp_path))
    script = "import ctxcompact; c=ctxcompact.Compactor(); print(c.module_source, c.info()['name'])"
    sources = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        sources.append(out.stdout.split())
    assert sources == [["baseline", "ctxcompact"], ["cache", "ctxcompact"]]
    env["CTXCOMPACT_BASELINE_COMPILER"] = "off"
    for f in tmp_path.iterdir():
        f.unlink()
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["compiled", "ctxcompact"], "off: Cranelift compiles it in the call, as before"
