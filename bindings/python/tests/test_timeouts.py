"""Summarizer timeouts and cancellation (issue 13 item 13): a hung summarizer is
timed out and the compaction falls back to the extractive summary with
fallback_code "timeout"; a summarizer that cancels itself gives "cancelled"; the
caller's own cancellation of acompact propagates and finishes nothing. No test
asserts on wall time: a hung summarizer waits on an event the test sets at the end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading

import pytest

from ctxcompact import DEFAULT_TIMEOUT, Compactor
from ctxcompact import _compactor

from conftest import conversation

SMALL = {"model": {"name": "test-model", "context_length": 32000}, "compression": {"small_context_floor": 0}}
SUMMARY = "Goal: set up FastAPI. Progress: 8/10 tests pass. Next Steps: fix 2 tests."


@pytest.fixture(scope="module")
def c():
    comp = Compactor(SMALL)
    yield comp
    comp.close()


@pytest.fixture
def release():
    ev = threading.Event()
    yield ev
    ev.set()  # the abandoned summarizer threads end


@pytest.fixture
def finishes(monkeypatch):
    """The compact.finish envelopes sent."""
    sent = []
    real = Compactor._finish_env

    def spy(mj, parts, state, outcome):
        sent.append(outcome)
        return real(mj, parts, state, outcome)

    monkeypatch.setattr(Compactor, "_finish_env", staticmethod(spy))
    return sent


def test_the_default_timeout_is_two_minutes():
    assert DEFAULT_TIMEOUT == 120.0
    import inspect

    for fn in (Compactor.compact, Compactor.acompact):
        assert inspect.signature(fn).parameters["timeout"].default == 120.0


def test_a_hung_sync_summarizer_times_out(c, release, finishes):
    started = threading.Event()

    def hang(request):
        started.set()
        release.wait()
        return "too late"

    res = c.compact(conversation(), summarize=hang, timeout=0.05)
    rep = res.report
    assert started.is_set()
    assert (rep["compacted"], rep["fallback_used"], rep["fallback_code"]) == (True, True, "timeout")
    assert "50 ms" in rep["fallback_reason"]
    assert finishes[-1] == (None, {"code": "timeout", "message": "the summarizer did not answer within 50 ms"})
    # The abandoned thread is still running, named so it can be recognised.
    assert any(t.name == "ctxcompact-summarizer" and t.daemon for t in threading.enumerate())
    assert "Set up a FastAPI project" in str(res.messages), "the extractive summary keeps the requests"


def test_a_hung_async_summarizer_times_out_and_is_cancelled(c):
    cancelled = []

    async def hang(request):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    res = asyncio.run(c.acompact(conversation(), summarize=hang, timeout=0.05))
    assert (res.report["fallback_used"], res.report["fallback_code"]) == (True, "timeout")
    assert cancelled == [True], "the summarizer task is cancelled at the timeout"


def test_a_hung_plain_function_in_acompact_times_out(c, release):
    async def main():
        ticks = []

        async def ticker():
            while True:
                ticks.append(1)
                await asyncio.sleep(0)

        t = asyncio.ensure_future(ticker())
        res = await c.acompact(conversation(), summarize=lambda r: release.wait() and "late", timeout=0.05)
        t.cancel()
        return res, ticks

    res, ticks = asyncio.run(main())
    assert res.report["fallback_code"] == "timeout"
    assert ticks, "the loop kept running while the plain summarizer hung in its thread"


def test_a_summarizer_in_time_is_used(c, finishes):
    res = c.compact(conversation(), summarize=lambda r: SUMMARY, timeout=30)
    assert (res.report["fallback_used"], res.report["fallback_code"]) == (False, "")
    assert finishes[-1] == (SUMMARY, None)
    res = asyncio.run(c.acompact(conversation(), summarize=_async_returning(SUMMARY), timeout=30))
    assert res.report["fallback_code"] == ""


def _async_returning(text):
    async def summarize(request):
        await asyncio.sleep(0)
        return text

    return summarize


def test_sync_summarizers_run_in_a_worker_thread_with_the_callers_contextvars(c):
    var = contextvars.ContextVar("var", default="unset")
    var.set("caller")
    seen = []

    def summarize(request):
        seen.append((threading.current_thread().name, var.get()))
        return SUMMARY

    c.compact(conversation(), summarize=summarize)
    assert seen == [("ctxcompact-summarizer", "caller")]
    # timeout=None: in the calling thread, never timed out.
    c.compact(conversation(), summarize=summarize, timeout=None)
    assert seen[-1] == (threading.current_thread().name, "caller")


@pytest.mark.parametrize("exc", [concurrent.futures.CancelledError, asyncio.CancelledError])
def test_a_sync_summarizer_that_reports_cancellation_gives_cancelled(c, exc, finishes):
    def summarize(request):
        raise exc()

    for timeout in (5, None):
        res = c.compact(conversation(), summarize=summarize, timeout=timeout)
        assert (res.report["fallback_used"], res.report["fallback_code"]) == (True, "cancelled")
        assert finishes[-1][1]["code"] == "cancelled"


def test_an_async_summarizer_that_cancels_itself_gives_cancelled(c):
    async def summarize(request):
        raise asyncio.CancelledError()

    async def main():
        res = await c.acompact(conversation(), summarize=summarize)
        # The caller's task is not cancelled: it goes on.
        await asyncio.sleep(0)
        return res

    res = asyncio.run(main())
    assert (res.report["fallback_used"], res.report["fallback_code"]) == (True, "cancelled")


def test_cancelling_acompact_propagates_and_finishes_nothing(c, finishes):
    entered = asyncio.Event
    state = {}

    async def summarize(request):
        state["entered"].set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            state["summarizer_cancelled"] = True
            raise

    async def main():
        state["entered"] = entered()
        task = asyncio.ensure_future(c.acompact(conversation(), summarize=summarize))
        await state["entered"].wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return task

    task = asyncio.run(main())
    assert task.cancelled()
    assert state.get("summarizer_cancelled") is True
    assert finishes == [], "no compact.finish is sent for a cancelled call"


def test_cancelling_acompact_while_a_plain_summarizer_runs(c, release, finishes):
    async def main():
        started = threading.Event()

        def summarize(request):
            started.set()
            release.wait()
            return SUMMARY

        task = asyncio.ensure_future(c.acompact(conversation(), summarize=summarize))
        while not started.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert finishes == []


def test_a_raising_summarizer_gives_error_and_an_empty_one_empty(c):
    def boom(request):
        raise RuntimeError("rate limited")

    rep = c.compact(conversation(), summarize=boom).report
    assert (rep["fallback_code"], "rate limited" in rep["fallback_reason"]) == ("error", True)
    rep = c.compact(conversation(), summarize=lambda r: "  \n").report
    assert (rep["fallback_used"], rep["fallback_code"]) == (True, "empty")
    rep = c.compact(conversation(), summarize=lambda r: 42).report
    assert (rep["fallback_used"], rep["fallback_code"]) == (True, "error")
    rep = asyncio.run(c.acompact(conversation(), summarize=_async_returning(""))).report
    assert rep["fallback_code"] == "empty"


def test_keyboard_interrupt_in_a_summarizer_is_not_a_fallback(c, finishes):
    def summarize(request):
        raise KeyboardInterrupt

    for timeout in (5, None):
        with pytest.raises(KeyboardInterrupt):
            c.compact(conversation(), summarize=summarize, timeout=timeout)
    assert finishes == []


def test_timeout_message_formats_fractions():
    assert _compactor._timed_out(0.0125)[1]["message"] == "the summarizer did not answer within 12.5 ms"
    assert _compactor._timed_out(120)[1]["message"] == "the summarizer did not answer within 120000 ms"


def test_summarizer_threads_are_reused(c, release):
    idents = set()

    def summarize(request):
        idents.add(threading.get_ident())
        return SUMMARY

    for _ in range(6):
        c.compact(conversation(), summarize=summarize)
    assert len(idents) == 1, "one idle thread serves consecutive calls"
    # A hung one is abandoned: the next call gets another thread.
    hung = []

    def hang(request):
        hung.append(threading.get_ident())
        release.wait()
        return "late"

    assert c.compact(conversation(), summarize=hang, timeout=0.05).report["fallback_code"] == "timeout"
    after = []
    c.compact(conversation(), summarize=lambda r: after.append(threading.get_ident()) or SUMMARY)
    assert hung and after and after[0] != hung[0]
    assert len(_compactor._idle) <= _compactor._MAX_IDLE
