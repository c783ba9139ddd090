"""A Compactor shared by threads: a pool of instances, results identical to serial."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from ctxcompact import Compactor

from conftest import conversation

SMALL = {"model": {"context_length": 32000}, "compression": {"small_context_floor": 0}}


def test_threads_share_one_compactor():
    c = Compactor(max_instances=2)
    inputs = [conversation(n_turns=30 + i % 5) for i in range(16)]
    summaries = [f"summary number {i}" for i in range(16)]
    serial = [c.compact(m, summarize=lambda r, s=s: s, config=SMALL) for m, s in zip(inputs, summaries)]
    seen_threads = set()
    lock = threading.Lock()

    def work(i):
        with lock:
            seen_threads.add(threading.get_ident())
        return c.compact(inputs[i], summarize=lambda r: summaries[i], config=SMALL)

    with ThreadPoolExecutor(max_workers=8) as ex:
        parallel = list(ex.map(work, range(16)))
    assert len(seen_threads) > 1
    for a, b in zip(serial, parallel):
        assert a.messages == b.messages
        assert a.report == b.report
        assert b.report["compacted"] and not b.report["fallback_used"]
    # Each result's unchanged messages are the objects of its own input.
    for i, r in enumerate(parallel):
        own = {id(m) for m in inputs[i]}
        assert any(id(m) in own for m in r.messages)
        others = {id(m) for j, inp in enumerate(inputs) if j != i for m in inp}
        assert not any(id(m) in others for m in r.messages)
    assert 1 <= c._pool.instances() <= 2


def test_pure_ops_from_many_threads():
    c = Compactor(max_instances=3)
    msgs = conversation()
    want = c.count_tokens(msgs)

    def work(_):
        return c.count_tokens(msgs)

    with ThreadPoolExecutor(max_workers=6) as ex:
        got = list(ex.map(work, range(60)))
    assert all(g == want for g in got)
    assert c._pool.instances() <= 3
