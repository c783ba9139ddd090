"""Benchmark: Python end-to-end compact vs the native Go core, in one run.

    bash bindings/python/test.sh --copy-only      # once: the .wasm into the package
    bindings/python/build/venv/bin/python bindings/python/bench.py [--reps N] [--traces DIR]

For every shared trace (../shared/traces/*.json, key "messages") it times
``Compactor.compact(messages, summarize=..., force=True)`` from a Python list of dicts
to a Python list of dicts (compact.begin + compact.finish with a fixed summary; the
finish names the compaction by its ticket and leaves out the messages), and
splits the time into: serialization (json of the messages + envelope), copy into
wasm memory, wasm work (the two ctxc_call), reading + parsing the small refs
response, building the result list. The same request envelopes are then timed in
native Go (core.Call) by bench/native, so the ratio is measured side by side.
Finally: cold start (import + Compactor() + first call, fresh interpreter) with
the compiled-module cache disabled, then cold and warm with a cache directory.
Numbers are ms per MB of message JSON (median of --reps runs per trace, summed).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE / "src"))  # run against the source tree (with the copied .wasm)

import ctxcompact  # noqa: E402
from ctxcompact import _compactor as C  # noqa: E402
from ctxcompact import _runtime as R  # noqa: E402

SUMMARY = "Goal: the task. Progress: Done: steps so far. Next Steps: continue."
# As the JS and wazero benchmarks: force, a 32K window, the host summarizer.
CONFIG = {"model": {"context_length": 32000}}
CONFIG_JSON = C.dumps(CONFIG)
PHASES = ["serialize", "copy", "wasm", "read+parse", "build"]


def summarize_fixed(request: dict) -> str:
    return SUMMARY


def timed_compact(c: ctxcompact.Compactor, inst: R.Instance, messages: List[dict]) -> Dict[str, float]:
    """One compact, phase by phase, with the same code paths compact() uses."""
    t = {k: 0.0 for k in PHASES}
    pc = time.perf_counter
    store = inst.store

    def roundtrip(env: bytes):
        t0 = pc()
        p = inst.write(env)
        t1 = pc()
        r = inst._call(store, p, len(env))
        rl = inst._len(store)
        t2 = pc()
        out = ctypes.string_at(inst._base() + r, rl)  # p is the guest's now (ctxc_call_take)
        res = C.parse_response(out)
        t3 = pc()
        t["copy"] += t1 - t0
        t["wasm"] += t2 - t1
        t["read+parse"] += t3 - t2
        return res

    t0 = pc()
    msgs, _mj, parts, env, _timeout = c._begin(messages, summarize_fixed, True, None, CONFIG_JSON, None, None, None)
    t["serialize"] += pc() - t0
    r = roundtrip(env)
    if not r.get("done"):
        t0 = pc()
        env = c._finish_env(None, parts, r["state"], (SUMMARY, None))  # this instance kept it
        t["serialize"] += pc() - t0
        r = roundtrip(env)
    t0 = pc()
    res = C._result(msgs, r)
    t["build"] += pc() - t0
    t["compacted"] = bool(res.report["compacted"])
    return t


def envelopes_for(c: ctxcompact.Compactor, messages: List[dict]) -> List[bytes]:
    """The exact begin/finish envelopes compact() sends (recorded through the pool)."""
    sent: List[bytes] = []
    real = R.Pool.call

    def spy(self, envelope):
        sent.append(envelope)
        return real(self, envelope)

    R.Pool.call = spy  # type: ignore[method-assign]
    try:
        c.compact(messages, summarize=lambda r: SUMMARY, force=True, config=CONFIG)
    finally:
        R.Pool.call = real  # type: ignore[method-assign]
    return sent


def native(env_dir: Path, reps: int) -> Dict[str, float]:
    """ms per trace (begin+finish) in native Go: BenchmarkCompactTraces if the core has
    it is another view; here the same envelopes go through core.Call."""
    out = subprocess.run(
        ["go", "run", "./bindings/python/bench/native", "-reps", str(reps), str(env_dir)],
        cwd=ROOT, check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout)


def cold_start(cache: str) -> float:
    script = (
        "import time; t=time.perf_counter(); import ctxcompact; c=ctxcompact.Compactor(); c.info(); "
        "print(time.perf_counter()-t, c.module_source)"
    )
    env = dict(os.environ, CTXCOMPACT_CACHE_DIR=cache, PYTHONPATH=str(HERE / "src"))
    out = subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True)
    secs, _src = out.stdout.split()
    return float(secs) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--traces", default=str(ROOT.parent / "shared" / "traces"))
    ap.add_argument("--no-native", action="store_true")
    args = ap.parse_args()

    files = sorted(Path(args.traces).glob("*.json"))
    if not files:
        sys.exit(f"bench.py: no traces in {args.traces}")
    traces = [(f.name, json.loads(f.read_bytes())["messages"]) for f in files]

    c = ctxcompact.Compactor(max_instances=1)
    inst = R.Instance(c._loaded.module)  # a second instance for the phase-by-phase timing
    mb_total = 0.0
    e2e_total = 0.0
    phase_total = {k: 0.0 for k in PHASES}
    rows = []
    env_dir = Path(tempfile.mkdtemp(prefix="ctxcompact-bench-"))
    for i, (name, msgs) in enumerate(traces):
        # MB of compact UTF-8 JSON (what JSON.stringify would produce).
        mb = len(json.dumps(msgs, ensure_ascii=False, separators=(",", ":")).encode("utf-8")) / 1e6
        envs = envelopes_for(c, msgs)
        for j, e in enumerate(envs):
            (env_dir / f"{i:03d}-{j}.json").write_bytes(e)
        for _ in range(3):  # warm up (instance memory; the count cache is per instance)
            timed_compact(c, inst, msgs)
            c.compact(msgs, summarize=lambda r: SUMMARY, force=True, config=CONFIG)
        e2e, ph = [], {k: [] for k in PHASES}
        for _ in range(args.reps):
            t0 = time.perf_counter()
            c.compact(msgs, summarize=lambda r: SUMMARY, force=True, config=CONFIG)
            e2e.append(time.perf_counter() - t0)
        for _ in range(args.reps):
            t = timed_compact(c, inst, msgs)
            for k in PHASES:
                ph[k].append(t[k])
        compacted = t["compacted"]
        med = statistics.median(e2e) * 1000
        meds = {k: statistics.median(v) * 1000 for k, v in ph.items()}
        rows.append((name + ("" if compacted else " (nothing to compact)"), mb, med, meds))
        mb_total += mb
        e2e_total += med
        for k in PHASES:
            phase_total[k] += meds[k]

    print(f"ctxcompact {ctxcompact.__version__}, wasmtime {R.wasmtime_version()}, Python {sys.version.split()[0]}, "
          f"{len(traces)} traces, {mb_total:.2f} MB of message JSON, median of {args.reps}")
    print(f"{'trace':58s} {'MB':>6s} {'e2e ms':>8s} " + " ".join(f"{k:>10s}" for k in PHASES))
    for name, mb, med, meds in rows:
        print(f"{name[:58]:58s} {mb:6.3f} {med:8.2f} " + " ".join(f"{meds[k]:10.2f}" for k in PHASES))
    per_mb = e2e_total / mb_total
    print()
    print(f"Python end to end: {per_mb:.2f} ms/MB ({e2e_total:.1f} ms for {mb_total:.2f} MB)")
    for k in PHASES:
        print(f"  {k:11s} {phase_total[k] / mb_total:6.2f} ms/MB  ({100 * phase_total[k] / sum(phase_total.values()):4.1f}%)")

    if not args.no_native:
        nat = native(env_dir, args.reps)
        nat_total = sum(nat.values())
        print(f"native Go core.Call (same envelopes): {nat_total / mb_total:.2f} ms/MB")
        print(f"ratio Python end to end / native Go: {e2e_total / nat_total:.2f}x; "
              f"wasm work / native Go: {phase_total['wasm'] / nat_total:.2f}x")

    with tempfile.TemporaryDirectory() as d:
        nocache = statistics.median(cold_start("off") for _ in range(3))
        first = cold_start(d)
        warm = statistics.median(cold_start(d) for _ in range(5))
    print(f"cold start (import + Compactor() + info): no cache {nocache:.0f} ms; "
          f"empty cache {first:.0f} ms; warm cache {warm:.0f} ms")


if __name__ == "__main__":
    main()
