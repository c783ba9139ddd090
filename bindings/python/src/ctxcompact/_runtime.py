"""The WebAssembly runtime: load (and cache) the compiled module, run instances.

Everything that touches wasmtime lives here. One wasmtime Engine per process; one
compiled Module per (module sha256, cache dir), shared by every Compactor; one
Store + Instance per _Instance, never used by two threads at once (_Pool).
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Type, TypeVar, Union

import wasmtime

from ._errors import CompactError, ErrABIMismatch, ErrBadBinary, ErrClosed

#: The boundary version this package speaks (wasm/abi.json "abi_version").
ABI_VERSION = 2

#: wasm/abi.json "max_request_bytes": larger requests are refused before the copy.
MAX_REQUEST_BYTES = 256 << 20

#: Every export the module must have, with its signature (params, results); see wasm/abi.json.
EXPECTED_EXPORTS: Dict[str, Union[str, Tuple[Tuple[str, ...], Tuple[str, ...]]]] = {
    "_initialize": ((), ()),
    "memory": "memory",
    "ctxc_abi_version": ((), ("i32",)),
    "ctxc_alloc": (("i32",), ("i32",)),
    "ctxc_free": (("i32",), ()),
    "ctxc_call": (("i32", "i32"), ("i32",)),
    "ctxc_call_take": (("i32", "i32"), ("i32",)),
    "ctxc_result_len": ((), ("i32",)),
}

_WASI = "wasi_snapshot_preview1"
_TRAPS = (wasmtime.Trap, wasmtime.WasmtimeError)

_string_at = ctypes.string_at
_memmove = ctypes.memmove
_addressof = ctypes.addressof


def wasmtime_version() -> str:
    try:
        from importlib.metadata import version

        return version("wasmtime")
    except Exception:  # pragma: no cover - metadata missing in odd installs
        return getattr(wasmtime, "__version__", "unknown")


# --- the packaged module ----------------------------------------------------------


class WasmSource:
    """A module to load: its sha256 and a way to get its bytes. The bytes are only
    needed (and for the packaged module only read and verified) on a cache miss."""

    __slots__ = ("sha256", "_data", "_path")

    def __init__(self, sha256: str, data: Optional[bytes] = None, path: Optional[Path] = None) -> None:
        self.sha256 = sha256
        self._data = data
        self._path = path

    @classmethod
    def from_bytes(cls, data: bytes) -> "WasmSource":
        return cls(hashlib.sha256(data).hexdigest(), data=data)

    def read(self) -> bytes:
        if self._data is None:
            assert self._path is not None
            data = self._path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if digest != self.sha256:
                raise ErrBadBinary(f"packaged ctxcompact.wasm has sha256 {digest}, but {self.sha256} was recorded")
            self._data = data
        return self._data


def packaged_source() -> WasmSource:
    """The module shipped in this package. Its sha256 is the one recorded next to it
    when it was copied from wasm/ctxcompact.wasm; the bytes are checked against it
    whenever they are read (on a compiled-module cache miss)."""
    # The package directory itself, not importlib.resources (whose import costs
    # 10-15 ms of start-up): the module must be a file on disk anyway, for
    # reading it and for the compiled-module cache.
    pkg = Path(__file__).parent
    try:
        recorded = (pkg / "ctxcompact.wasm.sha256").read_text(encoding="ascii").split()[0]
        wasm = pkg / "ctxcompact.wasm"
        if not wasm.is_file():
            raise FileNotFoundError(str(wasm))
    except (OSError, IndexError) as e:
        raise ErrBadBinary(
            "ctxcompact.wasm is missing from the package (a source checkout needs "
            "`bash bindings/python/test.sh`, which copies it)",
            e,
        ) from e
    return WasmSource(recorded, path=wasm)


def packaged_wasm() -> Tuple[bytes, str]:
    """The packaged module's bytes (checked against the recorded sha256) and sha256."""
    src = packaged_source()
    return src.read(), src.sha256


# --- compiled-module cache ----------------------------------------------------------


CacheDir = Union[None, bool, str, "os.PathLike[str]"]


def resolve_cache_dir(cache_dir: CacheDir) -> Optional[Path]:
    """None -> $CTXCOMPACT_CACHE_DIR, else $XDG_CACHE_HOME/ctxcompact, else
    ~/.cache/ctxcompact. False (or the env value "off") -> no cache. A path -> that."""
    if cache_dir is False:
        return None
    if cache_dir is None or cache_dir is True:
        env = os.environ.get("CTXCOMPACT_CACHE_DIR")
        if env is not None:
            if env.strip().lower() in ("", "off", "0", "false", "none"):
                return None
            return Path(env)
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
        return base / "ctxcompact"
    return Path(os.fspath(cache_dir))


def cache_file_name(module_sha256: str) -> str:
    """Key: module hash + wasmtime version + platform; a compiled module is only
    valid for the exact wasmtime build and CPU family that produced it."""
    plat = f"{sys.platform}-{_machine()}"
    return f"ctxcompact-{module_sha256[:32]}-wasmtime{wasmtime_version()}-{plat}.cwasm"


def _machine() -> str:
    import platform

    return platform.machine().lower() or "unknown"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _check_cache(path: Path) -> bool:
    """True if path holds a serialized module whose sha256 equals the one recorded
    in its sidecar file. wasmtime trusts what it deserializes (the code in it runs
    as is), so a truncated or altered file must be caught here, before wasmtime
    maps it; the file is then loaded with Module.deserialize_file (an mmap)."""
    try:
        want = _sidecar(path).read_text(encoding="ascii").strip()
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return False
            # Hash through an mmap: no 20 MB copy into a bytes object.
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                got = hashlib.sha256(mm).hexdigest()
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return len(want) == 64 and got == want


def _write_cache(path: Path, payload: bytes) -> bool:
    """Write atomically: each file goes to a temp file in the same directory, then
    os.replace. The module first, its digest last: a reader that sees a new module
    with an old digest refuses it and compiles. Any OS error (read-only dir, full
    disk) only means there is no cache: return False."""
    import tempfile  # only on a cache miss: it costs ~6 ms of start-up to import

    tmps: List[str] = []
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for target, data in ((path, payload), (_sidecar(path), hashlib.sha256(payload).hexdigest().encode())):
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".cwasm", dir=str(path.parent))
            tmps.append(tmp)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
            tmps.remove(tmp)
        return True
    except OSError:
        for tmp in tmps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False


# --- engine, module, linker ---------------------------------------------------------

_lock = threading.Lock()  # engine creation and module loading
_link_lock = threading.Lock()  # instantiation through the shared Linker
_engine: Optional[wasmtime.Engine] = None
_linker: Optional[wasmtime.Linker] = None
_baseline: Optional[Tuple[wasmtime.Engine, wasmtime.Linker]] = None
_baseline_tried = False
_modules: Dict[Tuple[str, Optional[str]], "LoadedModule"] = {}


def _new_linker(engine: wasmtime.Engine) -> wasmtime.Linker:
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    i32 = wasmtime.ValType.i32()
    linker.define_func(_HOST, "vocab_size", wasmtime.FuncType([i32, i32], [i32]), _vocab_size, access_caller=True)
    linker.define_func(_HOST, "vocab_read", wasmtime.FuncType([i32, i32, i32], [i32]), _vocab_read, access_caller=True)
    return linker


def _shared_engine() -> Tuple[wasmtime.Engine, wasmtime.Linker]:
    """The optimizing engine (Cranelift): what the compiled-module cache holds."""
    global _engine, _linker
    if _engine is None:
        engine = wasmtime.Engine()
        _engine, _linker = engine, _new_linker(engine)
    assert _linker is not None
    return _engine, _linker


#: wasmtime's C API value of its baseline compiler, Winch (wasmtime_strategy_t:
#: auto 0, cranelift 1, winch 2). wasmtime-py's Config.strategy accepts only the
#: first two, so it is set through the FFI, where its bindings name it; with a
#: wasmtime that does not, every compile is Cranelift's.
_WINCH = 2


def _baseline_engine() -> Optional[Tuple[wasmtime.Engine, wasmtime.Linker]]:
    """An engine with the baseline compiler, or None where this wasmtime has none.
    Winch compiles the module in about a fifth of Cranelift's time (0.7 s vs 3.2-3.8
    s on the 2-core machine) and runs it 1.1-1.5x slower, with the same results."""
    global _baseline, _baseline_tried
    if not _baseline_tried:
        _baseline_tried = True
        if os.environ.get("CTXCOMPACT_BASELINE_COMPILER", "").strip().lower() in ("off", "0", "false", "no"):
            return None
        try:
            from wasmtime import _ffi as ffi

            # Only where this wasmtime's C API names Winch (an unknown value could
            # abort the process rather than fail).
            names = [m.name for m in getattr(ffi, "wasmtime_strategy_enum", [])]
            if names.index("WASMTIME_STRATEGY_WINCH") != _WINCH:
                return None
            cfg = wasmtime.Config()
            ffi.wasmtime_config_strategy_set(cfg.ptr(), _WINCH)
            engine = wasmtime.Engine(cfg)
            _baseline = (engine, _new_linker(engine))
        except Exception:  # no such strategy, or an FFI this code does not know
            _baseline = None
    return _baseline


# --- the exact encodings' rank tables ------------------------------------------------
#
# The module has no BPE rank tables of its own (2.3 MB less to compile): when it first
# counts with o200k_base or cl100k_base it asks its host through the
# ctxcompact.vocab_size and vocab_read imports (wasm/abi.json "host_imports"). They are
# packaged beside the module (ctxcompact/vocab/<name>.bin, from the repository's
# core/internal/bpe/vocab) and read on first use; the guest checks each one's length
# and sum, so a damaged file is refused (invalid_config), never counted with.

_HOST = "ctxcompact"
_VOCAB_NAMES = ("o200k_base", "cl100k_base")
_vocab: Dict[str, bytes] = {}
_vocab_lock = threading.Lock()


def _vocabulary(name: str) -> Optional[bytes]:
    t = _vocab.get(name)
    if t is None and name in _VOCAB_NAMES:
        with _vocab_lock:
            t = _vocab.get(name)
            if t is None:
                try:
                    t = (Path(__file__).parent / "vocab" / f"{name}.bin").read_bytes()
                except OSError:
                    return None  # the guest reports the table missing
                _vocab[name] = t
    return t


def _caller_name(caller: Any, p: int, n: int) -> Tuple[Any, Optional[str]]:
    mem = caller.get("memory")
    if not isinstance(mem, wasmtime.Memory) or n < 0 or n > 64:
        return mem, None
    base = _addressof(mem.data_ptr(caller).contents)
    return mem, _string_at(base + (p & 0xFFFFFFFF), n).decode("utf-8", "replace")


def _vocab_size(caller: Any, p: int, n: int) -> int:
    _, name = _caller_name(caller, p, n)
    t = _vocabulary(name) if name is not None else None
    return -1 if t is None else len(t)


def _vocab_read(caller: Any, p: int, n: int, dst: int) -> int:
    mem, name = _caller_name(caller, p, n)
    t = _vocabulary(name) if name is not None else None
    if t is None:
        return -1
    dst &= 0xFFFFFFFF
    if dst + len(t) > mem.data_len(caller):
        return -1
    _memmove(_addressof(mem.data_ptr(caller).contents) + dst, t, len(t))
    return 0


class LoadedModule:
    """A compiled module plus how it was obtained (for tests and the benchmark)."""

    __slots__ = ("module", "sha256", "source", "cache_path", "spares", "_spare_lock", "engine", "linker", "caching")

    def __init__(self, module: wasmtime.Module, sha256: str, source: str, cache_path: Optional[Path],
                 engine: Optional[Tuple[wasmtime.Engine, wasmtime.Linker]] = None) -> None:
        self.module = module
        self.sha256 = sha256
        #: "cache" (deserialized from disk), "compiled" (cache miss, written),
        #: "compiled-uncached" (no cache dir, or it could not be written),
        #: "baseline" (cache miss: compiled by Winch for this process while
        #: Cranelift compiles the cache file in the background, see caching).
        self.source = source
        #: the engine and linker the module belongs to (None: the shared one)
        self.engine: Optional[wasmtime.Engine] = engine[0] if engine is not None else None
        self.linker: Optional[wasmtime.Linker] = engine[1] if engine is not None else None
        #: the thread writing the cache file after a baseline compile (None: none)
        self.caching: Optional[threading.Thread] = None
        self.cache_path = cache_path
        #: idle instances of closed pools, which the next pool takes before it
        #: creates one (see Pool.close).
        self.spares: List["Instance"] = []
        self._spare_lock = threading.Lock()

    def take_spare(self) -> Optional["Instance"]:
        with self._spare_lock:
            return self.spares.pop() if self.spares else None

    def keep_spare(self, inst: "Instance") -> bool:
        """Keep an idle instance for the next pool: at most MAX_SPARES, each at most
        SPARE_MAX_MEMORY bytes of linear memory. False: it was not kept."""
        if inst.memory_bytes() > SPARE_MAX_MEMORY:
            return False
        with self._spare_lock:
            if len(self.spares) >= MAX_SPARES:
                return False
            self.spares.append(inst)
            return True

    def drop_spares(self) -> int:
        """Release the kept instances (their memory goes back when wasmtime frees
        them); returns how many there were."""
        with self._spare_lock:
            n, self.spares = len(self.spares), []
        return n


#: Idle instances a closed Compactor leaves for the next one (per module), and the
#: largest linear memory such an instance may have. A new Compactor then starts on
#: a warm instance: no instantiation, memory already grown, token counts cached.
MAX_SPARES = 2
SPARE_MAX_MEMORY = 64 << 20


def drop_spares() -> int:
    """Release the idle instances every closed Compactor left (see MAX_SPARES)."""
    with _lock:
        loaded = list(_modules.values())
    return sum(m.drop_spares() for m in loaded)


def load_module(source: WasmSource, cache_dir: Optional[Path], *, memo: bool = True, baseline: bool = True) -> LoadedModule:
    """Deserialize the compiled module from the cache, or compile it (and cache it).
    Once per process per (sha256, cache_dir) unless memo=False (tests, benchmark).

    On a cache miss with a cache directory and baseline true, the module is compiled
    by the baseline compiler (Winch) for this process, which can start in a fraction
    of the time, and a background thread compiles it with Cranelift into the cache,
    so later processes load the optimized code (source "baseline"; LoadedModule.
    caching is that thread; the interpreter waits for it at exit, so even a short
    first run leaves the cache filled). Without Winch, or baseline false, Cranelift
    compiles it here, as before."""
    key = (source.sha256, str(cache_dir) if cache_dir is not None else None)
    with _lock:
        if memo and key in _modules:
            return _modules[key]
        engine, _ = _shared_engine()
        loaded = _load_uncached(engine, source, cache_dir, baseline)
        if memo:
            _modules[key] = loaded
        return loaded


def _load_uncached(engine: wasmtime.Engine, source: WasmSource, cache_dir: Optional[Path], baseline: bool = False) -> LoadedModule:
    path = cache_dir / cache_file_name(source.sha256) if cache_dir is not None else None
    if path is not None and _check_cache(path):
        try:
            module = wasmtime.Module.deserialize_file(engine, str(path))
            check_module(module)
            return LoadedModule(module, source.sha256, "cache", path)
        except (wasmtime.WasmtimeError, ErrBadBinary):
            pass  # stale or foreign: compile and overwrite below
    wasm = source.read()
    fast = _baseline_engine() if baseline and path is not None else None
    if fast is not None:
        try:
            quick = wasmtime.Module(fast[0], wasm)
            check_module(quick)
        except (wasmtime.WasmtimeError, ErrBadBinary):
            pass  # let Cranelift compile it and say what is wrong
        else:
            loaded = LoadedModule(quick, source.sha256, "baseline", path, fast)
            loaded.caching = threading.Thread(target=_compile_into_cache, args=(engine, wasm, path),
                                              name="ctxcompact-cache", daemon=False)
            loaded.caching.start()
            return loaded
    try:
        module = wasmtime.Module(engine, wasm)
    except wasmtime.WasmtimeError as e:
        raise ErrBadBinary(f"the module does not compile: {e}", e) from e
    check_module(module)
    state = "compiled-uncached"
    if path is not None:
        try:
            if _write_cache(path, bytes(module.serialize())):
                state = "compiled"
        except wasmtime.WasmtimeError:
            pass
    return LoadedModule(module, source.sha256, state, path)


def _compile_into_cache(engine: wasmtime.Engine, wasm: bytes, path: Path) -> None:
    """The background half of a baseline load: Cranelift compiles the module and the
    result goes into the cache (atomically), for the next process. Nothing here can
    fail the process: an error only means the next one compiles again."""
    try:
        module = wasmtime.Module(engine, wasm)
        _write_cache(path, bytes(module.serialize()))
    except Exception:  # pragma: no cover - a full disk, a wasmtime error
        pass


def check_module(module: wasmtime.Module) -> None:
    """Imports: WASI preview1 only. Exports: every one of EXPECTED_EXPORTS, with its
    signature. Raises ErrBadBinary naming the first problem."""
    for imp in module.imports:
        if imp.module != _WASI and not (imp.module == _HOST and imp.name in ("vocab_size", "vocab_read")):
            raise ErrBadBinary(f"the module imports {imp.module}.{imp.name}; only {_WASI} and {_HOST}.vocab_size/vocab_read are provided")
    have = {e.name: e.type for e in module.exports}
    for name, want in EXPECTED_EXPORTS.items():
        ty = have.get(name)
        if ty is None:
            raise ErrBadBinary(f"the module does not export {name}")
        if want == "memory":
            if not isinstance(ty, wasmtime.MemoryType):
                raise ErrBadBinary(f"export {name} is not a memory")
            continue
        if not isinstance(ty, wasmtime.FuncType):
            raise ErrBadBinary(f"export {name} is not a function")
        sig = (tuple(str(p) for p in ty.params), tuple(str(r) for r in ty.results))
        if sig != want:
            raise ErrBadBinary(f"export {name} has signature {sig}, want {want}")


# --- one instance ---------------------------------------------------------------------


class Instance:
    """One Store + instance of the module. Single-threaded: the pool hands each to
    one thread at a time. After a trap it is corrupt and must be dropped."""

    __slots__ = ("store", "_mem", "_alloc", "_call", "_len", "calls")

    def __init__(self, module: wasmtime.Module, compiled_by: Optional[Tuple[wasmtime.Engine, wasmtime.Linker]] = None) -> None:
        engine, linker = compiled_by if compiled_by is not None else _shared_engine()
        store = wasmtime.Store(engine)
        # An empty WasiConfig: no files, no env, no args, stdio closed.
        store.set_wasi(wasmtime.WasiConfig())
        with _link_lock:  # the shared Linker: instantiate from one thread at a time
            inst = linker.instantiate(store, module)
        ex = inst.exports(store)
        self.store = store
        self._mem = _export(ex, "memory", wasmtime.Memory)
        self._alloc = _export(ex, "ctxc_alloc", wasmtime.Func)
        # ctxc_call_take: the request buffer is the guest's after the call (never
        # written, passed or freed again here), so a compact.begin keeps it for
        # compact.finish without a copy.
        self._call = _export(ex, "ctxc_call_take", wasmtime.Func)
        self._len = _export(ex, "ctxc_result_len", wasmtime.Func)
        self.calls = 0
        _export(ex, "_initialize", wasmtime.Func)(store)
        got = _export(ex, "ctxc_abi_version", wasmtime.Func)(store)
        if got != ABI_VERSION:
            raise ErrABIMismatch(got, ABI_VERSION)

    def _base(self) -> int:
        return _addressof(self._mem.data_ptr(self.store).contents)

    # Pointers cross the boundary as i32, which wasmtime gives back signed: a buffer
    # above 2 GiB arrives negative. Pass the value back as it came; mask it to
    # address memory.

    def write(self, data: bytes) -> int:
        """Allocate a guest buffer and copy data into it with one memmove. Returns
        the pointer as the guest gave it."""
        n = len(data)
        # An empty request gets a 1-byte buffer (ctxc_alloc(0) gives no pointer),
        # so the core answers it: invalid_json, as for any other bad JSON text.
        p: int = self._alloc(self.store, n or 1)
        addr = p & 0xFFFFFFFF
        if not addr:
            raise CompactError("input_too_large", f"the module could not allocate {n} bytes for the request")
        if addr + n > self._mem.data_len(self.store):  # pragma: no cover - guest bug
            raise CompactError("internal", "guest buffer lies outside linear memory")
        _memmove(self._base() + addr, data, n)
        return p

    def run(self, p: int, n: int) -> bytes:
        """Call the core on the request at p, which passes to the guest, and copy the
        response out."""
        store = self.store
        r: int = self._call(store, p, n)
        rl: int = self._len(store)
        addr = r & 0xFFFFFFFF
        if not addr or rl <= 0 or addr + rl > self._mem.data_len(store):
            raise CompactError("internal", "the module returned no response")
        out = _string_at(self._base() + addr, rl)
        self.calls += 1
        return out

    def call(self, envelope: bytes) -> bytes:
        return self.run(self.write(envelope), len(envelope))

    def memory_bytes(self) -> int:
        return self._mem.data_len(self.store)


_E = TypeVar("_E")


def _export(ex: Any, name: str, kind: Type[_E]) -> _E:
    item = ex[name]
    if not isinstance(item, kind):  # pragma: no cover - check_module ran first
        raise ErrBadBinary(f"export {name} is not a {kind.__name__}")
    return item


# --- a pool of instances ----------------------------------------------------------------


class Pool:
    """Instances handed out one thread at a time. Up to max_size are created lazily;
    a thread that finds none free and the pool full waits. A call whose instance
    traps fails with CompactError("internal"); the instance is dropped and the next
    call gets a fresh one (no hidden retry of the input that trapped)."""

    def __init__(self, loaded: LoadedModule, max_size: int, max_memory: Optional[int] = None) -> None:
        if max_size < 1:
            raise ValueError("max_instances must be at least 1")
        self.loaded = loaded
        self.max_size = max_size
        #: an instance whose linear memory grew past this many bytes (Go never gives
        #: memory back) is dropped after its call; the next call makes a fresh one.
        self.max_memory = max_memory
        #: number of instances dropped for their memory size (observable in tests)
        self.recycled = 0
        self._free: List[Instance] = []
        self._count = 0
        self._cv = threading.Condition(threading.Lock())
        self._closed = False
        #: number of instances dropped after a trap (observable in tests)
        self.replaced = 0
        self._put(self._new())  # fail fast: ABI mismatch etc. surface in the constructor

    def _new(self) -> Instance:
        with self._cv:
            if self._closed:
                raise ErrClosed()
            self._count += 1
        spare = self.loaded.take_spare()
        if spare is not None:
            return spare
        try:
            ld = self.loaded
            return Instance(ld.module, (ld.engine, ld.linker) if ld.engine is not None and ld.linker is not None else None)
        except BaseException as e:
            with self._cv:
                self._count -= 1
                self._cv.notify()
            if isinstance(e, _TRAPS):
                raise ErrBadBinary(f"the module failed to start: {e}", e) from e
            raise

    def take(self) -> Instance:
        with self._cv:
            while True:
                if self._closed:
                    raise ErrClosed()
                if self._free:
                    return self._free.pop()
                if self._count < self.max_size:
                    break
                self._cv.wait()
        return self._new()

    def _put(self, inst: Instance) -> None:
        with self._cv:
            if self._closed:
                self._count -= 1
                return
            self._free.append(inst)
            self._cv.notify()

    def _drop(self, inst: Instance) -> None:
        with self._cv:
            self._count -= 1
            self.replaced += 1
            self._cv.notify()

    def call(self, envelope: bytes) -> bytes:
        """Run one request envelope; returns the response envelope bytes."""
        if len(envelope) > MAX_REQUEST_BYTES:
            raise CompactError(
                "input_too_large", f"request is {len(envelope)} bytes; the limit is {MAX_REQUEST_BYTES}"
            )
        inst = self.take()
        try:
            out = inst.call(envelope)
        except _TRAPS as e:
            self._drop(inst)
            raise CompactError(
                "internal", f"the wasm instance trapped and was replaced (the next call gets a fresh one): {e}"
            ) from e
        except BaseException:
            self._put(inst)
            raise
        if self.max_memory is not None and inst.memory_bytes() > self.max_memory:
            with self._cv:
                self._count -= 1
                self.recycled += 1
                self._cv.notify()
        else:
            self._put(inst)
        return out

    def instances(self) -> int:
        with self._cv:
            return self._count

    def close(self) -> None:
        """No more calls. The idle instances go to the module's spares (the next
        pool's first instances), up to MAX_SPARES; the rest are released."""
        with self._cv:
            self._closed = True
            self._count -= len(self._free)
            free, self._free = self._free, []
            self._cv.notify_all()
        for inst in free:
            self.loaded.keep_spare(inst)
