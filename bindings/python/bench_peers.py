"""ctxcompact beside Hermes Agent's own compressor (hermes-agent from PyPI), in one run.

    bash bindings/python/test.sh --bench      # what ./build.sh bench runs (after bench/start.py)
    python bindings/python/bench_peers.py [--reps N] [--traces DIR]   # a venv with both installed

Two rows of issue 18's table, each printed as ours, peer, ratio, target, met?:

1. Start-up, in fresh interpreters (the bytecode and ctxcompact's compiled-module
   cache warm; one warm-up run each first): ``import ctxcompact;
   ctxcompact.Compactor()`` against ``from agent.context_compressor import
   ContextCompressor; ContextCompressor(...)`` (a window given, so no network probe).
   Median of --reps runs, ours and the peer alternating.
2. End to end on the shared traces (../shared/traces/*.json), lists of dicts in and
   out, the same 32K window for both: ``Compactor.compact(messages,
   summarize=fixed, force=True)`` against ``ContextCompressor.compress(messages)``.
   Neither calls a model: Hermes' summarizer call (``call_llm`` in
   agent.context_compressor) is replaced by a function returning a fixed text, and
   ours gets a host ``summarize`` callback returning the same text (the core builds
   the summary request, the binding calls the callback on its worker thread, the
   default ``timeout``), so both still serialize the middle into a prompt. The peer
   gets a fresh ContextCompressor for every call (it keeps the previous summary, so
   a reused one would do different work); "reused" times our compact on one
   Compactor against the peer's compress alone, "new per call" times
   ``Compactor(config)`` + compact + close against ContextCompressor(...) +
   compress (a closed Compactor leaves its idle instance to the next one; the line
   after it times the same on a fresh instance each time). Sum over the traces of
   each trace's median of --reps runs, ours and the peer alternating within each run.

No number here is asserted anywhere; the machine's load moves them (the header
prints it).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SUMMARY = ("## Goal\nThe task of the conversation.\n## Progress\nDone: the steps so far.\n"
           "## Next Steps\nContinue from the last message.")
WINDOW = 32000
CONFIG = {"model": {"context_length": WINDOW}}

OURS_START = ("import time; t=time.perf_counter(); import ctxcompact; c=ctxcompact.Compactor(); "
              "print(time.perf_counter()-t, c.module_source)")
PEER_START = ("import time; t=time.perf_counter(); from agent.context_compressor import ContextCompressor; "
              f"c=ContextCompressor(model='gpt-4o', config_context_length={WINDOW}, quiet_mode=True); "
              "print(time.perf_counter()-t, 'hermes')")


def row(what: str, ours: float, peer: float, unit: str, target: str, met: bool) -> None:
    print(f"{what:<44} ours {ours:9.1f} {unit}  peer {peer:9.1f} {unit}  ratio {ours / peer:5.2f}x  "
          f"target {target:<10} {'met' if met else 'NOT met'}")


def fresh(script: str, env: Dict[str, str]) -> Tuple[float, str]:
    out = subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True,
                         cwd=tempfile.gettempdir())
    secs, src = out.stdout.split()[-2:]
    return float(secs), src


def bench_start(reps: int, tmp: Path) -> None:
    env = dict(os.environ, CTXCOMPACT_CACHE_DIR=str(tmp / "module-cache"), HERMES_HOME=str(tmp / "hermes-home"))
    env.pop("PYTHONPATH", None)
    fresh(OURS_START, env)  # fills the module cache
    fresh(PEER_START, env)
    ours: List[float] = []
    peer: List[float] = []
    for _ in range(reps):
        secs, src = fresh(OURS_START, env)
        assert src == "cache", src
        ours.append(secs)
        peer.append(fresh(PEER_START, env)[0])
    o, p = statistics.median(ours) * 1000, statistics.median(peer) * 1000
    row("start-up: import + Compactor(), warm cache", o, p, "ms", "<= 1.00x", o <= p)
    print(f"{'':<44} fastest: ours {min(ours) * 1000:.1f} ms, peer {min(peer) * 1000:.1f} ms")
    # The first run after install: ours with an empty compiled-module cache (the
    # baseline compiler serves it; the process exits once the cache is written), the
    # peer's with no bytecode yet (a fresh PYTHONPYCACHEPREFIX: every module compiled).
    ours, peer = [], []
    for i in range(reps):
        secs, src = fresh(OURS_START, dict(env, CTXCOMPACT_CACHE_DIR=str(tmp / f"empty-{i}")))
        assert src in ("baseline", "compiled"), src
        ours.append(secs)
        peer.append(fresh(PEER_START, dict(env, PYTHONPYCACHEPREFIX=str(tmp / f"pyc-{i}")))[0])
    o, p = statistics.median(ours) * 1000, statistics.median(peer) * 1000
    row("first run after install (no caches)", o, p, "ms", "<= 1.00x", o <= p)


def load_traces(d: Path) -> List[Tuple[str, List[Dict[str, Any]]]]:
    out = []
    for f in sorted(d.glob("*.json")):
        doc = json.loads(f.read_text())
        msgs = doc.get("messages") if isinstance(doc, dict) else None
        if isinstance(msgs, list) and msgs:
            out.append((f.stem, msgs))
    return out


def stub_hermes_summarizer() -> None:
    """Hermes' compressor asks its auxiliary model through call_llm: answer with the
    fixed text instead (the shape its code reads: choices[0].message.content)."""
    import agent.context_compressor as hc

    answer = types.SimpleNamespace(choices=[types.SimpleNamespace(message=types.SimpleNamespace(content=SUMMARY))])

    def call_llm(**kwargs: Any) -> Any:
        return answer

    hc.call_llm = call_llm


def bench_e2e(reps: int, traces_dir: Path) -> None:
    import ctxcompact
    from agent.context_compressor import ContextCompressor

    stub_hermes_summarizer()
    traces = load_traces(traces_dir)
    size = sum(len(json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()) for _, m in traces)

    def summarize(request: Any) -> str:
        return SUMMARY

    def peer_new() -> Any:
        return ContextCompressor(model="gpt-4o", config_context_length=WINDOW, quiet_mode=True)

    reused = ctxcompact.Compactor(CONFIG)
    timers: Dict[str, Callable[[List[Dict[str, Any]]], Any]] = {
        "ours_reused": lambda m: reused.compact(m, summarize=summarize, force=True).messages,
        "ours_new": lambda m: _new_compact(ctxcompact, m, summarize),
        "ours_cold": lambda m: _new_compact(ctxcompact, m, summarize, cold=True),
    }
    medians: Dict[str, float] = {k: 0.0 for k in ("ours_reused", "ours_new", "ours_cold", "peer_compress",
                                                   "peer_new")}
    shrunk = {"ours": 0, "peer": 0}
    for name, msgs in traces:
        t: Dict[str, List[float]] = {k: [] for k in medians}
        for i in range(reps + 1):  # the first run of each is a warm-up, not counted
            for key, fn in timers.items():
                m = copy.deepcopy(msgs)
                t0 = time.perf_counter()
                out = fn(m)
                t[key].append(time.perf_counter() - t0)
                if i == 0 and key == "ours_reused":
                    shrunk["ours"] += len(out) < len(msgs)
            m = copy.deepcopy(msgs)
            t0 = time.perf_counter()
            pc = peer_new()
            t1 = time.perf_counter()
            out = pc.compress(m)
            t2 = time.perf_counter()
            t["peer_compress"].append(t2 - t1)
            t["peer_new"].append(t2 - t0)
            if i == 0:
                shrunk["peer"] += len(out) < len(msgs)
        for k in medians:
            medians[k] += statistics.median(t[k][1:])
    reused.close()
    mb = size / 1e6
    print(f"end to end on {len(traces)} traces ({mb:.2f} MB of message JSON), {WINDOW // 1000}K window; "
          f"compacted: ours {shrunk['ours']}/{len(traces)}, peer {shrunk['peer']}/{len(traces)}")
    o, p = medians["ours_reused"] * 1000, medians["peer_compress"] * 1000
    row("end to end, reused Compactor vs compress", o, p, "ms", "<= 0.30x", o <= 0.30 * p)
    o2, p2 = medians["ours_new"] * 1000, medians["peer_new"] * 1000
    row("end to end, new per call vs new + compress", o2, p2, "ms", "<= 0.50x", o2 <= 0.50 * p2)
    o3 = medians["ours_cold"] * 1000
    print(f"{'':<44} new per call on a fresh instance (no idle one of an earlier Compactor): ours {o3:.1f} ms, "
          f"ratio {o3 / p2:.2f}x")
    print(f"{'':<44} per MB: ours {o / mb:.1f} / {o2 / mb:.1f} ms, peer {p / mb:.1f} / {p2 / mb:.1f} ms")


def _new_compact(ctxcompact: Any, m: List[Dict[str, Any]], summarize: Any, cold: bool = False) -> Any:
    if cold:  # no idle instance of an earlier Compactor: a fresh one, as in a new process
        drop = getattr(ctxcompact._runtime, "drop_spares", None)
        if drop is not None:
            drop()
    c = ctxcompact.Compactor(CONFIG)
    try:
        return c.compact(m, summarize=summarize, force=True).messages
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--traces", default=str(ROOT.parent / "shared" / "traces"))
    ap.add_argument("--only", choices=("start", "e2e"))
    args = ap.parse_args()
    import ctxcompact
    from importlib.metadata import version

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"ctxcompact {ctxcompact.__version__} beside hermes-agent {version('hermes-agent')}, "
          f"wasmtime {version('wasmtime')}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {load:.1f}, median of {args.reps}")
    with tempfile.TemporaryDirectory(prefix="ctxcompact-peers-") as tmp:
        os.environ.setdefault("HERMES_HOME", str(Path(tmp) / "hermes-home"))  # the peer writes nothing to ~/.hermes
        if args.only in (None, "start"):
            bench_start(args.reps, Path(tmp))
        if args.only in (None, "e2e"):
            bench_e2e(args.reps, Path(args.traces))


if __name__ == "__main__":
    main()
