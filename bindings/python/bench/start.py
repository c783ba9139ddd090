"""Start-up benchmark: compiling the module vs loading it from the compiled-module
cache, in process and in a fresh interpreter. It prints numbers and the targets
beside them; nothing here fails on time (the tests check only what each load did).

    bash bindings/python/test.sh --bench        # what ./build.sh bench runs
    python bindings/python/bench/start.py [--reps N]   # any Python with ctxcompact installed
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ctxcompact
from ctxcompact import _runtime as R

SCRIPT = (
    "import time; t=time.perf_counter(); import ctxcompact; c=ctxcompact.Compactor(); c.info(); "
    "print(c.module_source, time.perf_counter()-t)"
)


def fresh_process(cache: str, baseline: bool = True) -> tuple[str, float]:
    env = dict(os.environ, CTXCOMPACT_CACHE_DIR=cache)
    if not baseline:
        env["CTXCOMPACT_BASELINE_COMPILER"] = "off"
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=True, capture_output=True, text=True)
    src, secs = out.stdout.split()
    return src, float(secs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    print(f"ctxcompact {ctxcompact.__version__} from {Path(ctxcompact.__file__).parent}, "
          f"wasmtime {R.wasmtime_version()}, Python {sys.version.split()[0]}, median of {args.reps}")
    with tempfile.TemporaryDirectory(prefix="ctxcompact-start-") as tmp:
        colds, warms = [], []
        for i in range(args.reps):
            d = Path(tmp) / f"in-process-{i}"
            t0 = time.perf_counter()
            loaded = R.load_module(R.packaged_source(), d, memo=False, baseline=False)
            colds.append(time.perf_counter() - t0)
            assert loaded.source == "compiled", loaded.source
            t0 = time.perf_counter()
            loaded = R.load_module(R.packaged_source(), d, memo=False)
            warms.append(time.perf_counter() - t0)
            assert loaded.source == "cache", loaded.source
        cold, warm = statistics.median(colds), statistics.median(warms)
        print(f"in process: compile {cold * 1000:8.1f} ms, load from cache {warm * 1000:7.1f} ms, "
              f"ratio {cold / warm:5.1f}x (target >= 5x)")

        baselines = []
        for i in range(args.reps):
            t0 = time.perf_counter()
            loaded = R.load_module(R.packaged_source(), Path(tmp) / f"baseline-{i}", memo=False)
            baselines.append(time.perf_counter() - t0)
            assert loaded.source == "baseline", loaded.source
            assert loaded.caching is not None
            loaded.caching.join()  # not timed: the cache is written in the background
        print(f"in process, a cache miss: Cranelift {cold * 1000:8.1f} ms, the baseline compiler (Winch, "
              f"Cranelift then filling the cache in the background) {statistics.median(baselines) * 1000:7.1f} ms")

        src, uncached = fresh_process("off")
        assert src == "compiled-uncached", src
        src, first_cranelift = fresh_process(str(Path(tmp) / "fresh-cranelift"), baseline=False)
        assert src == "compiled", src
        firsts = []
        for i in range(args.reps):
            src, secs = fresh_process(str(Path(tmp) / f"fresh-{i}"))
            assert src == "baseline", src
            firsts.append(secs)
        first = statistics.median(firsts)
        print(f"fresh interpreter, the first run after install (empty cache), import + Compactor() + info(): "
              f"{first * 1000:.0f} ms median (min {min(firsts) * 1000:.0f}; Cranelift in the call, as before: "
              f"{first_cranelift * 1000:.0f} ms)")
        cache = str(Path(tmp) / "fresh-0")
        starts = []
        for _ in range(args.reps):
            src, secs = fresh_process(cache)
            assert src == "cache", src
            starts.append(secs)
        print(f"fresh interpreter, import + Compactor() + info(): no cache (off) {uncached * 1000:.0f} ms, "
              f"warm cache median {statistics.median(starts) * 1000:.0f} ms "
              f"(min {min(starts) * 1000:.0f}; target < 300 ms)")


if __name__ == "__main__":
    main()
