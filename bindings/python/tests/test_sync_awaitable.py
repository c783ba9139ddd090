"""A sync compaction (compact, ContextEngine.compress) given a summarizer that returns
an awaitable: an async def, or a sync function returning a coroutine (a summarizer
over an async SDK client). It cannot be awaited there: OptionError (a CompactError,
code invalid_request at /summarize, and a TypeError) naming acompact, raised rather
than a fallback, with the coroutine closed (no "never awaited" warning)."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from ctxcompact import CompactError, Compactor, ContextEngine, OptionError

from conftest import conversation

CONFIG = {"model": {"context_length": 16000}}


async def async_summarize(request):
    return "Goal: the task."


def returns_coroutine(request):
    return async_summarize(request)


@pytest.fixture(scope="module")
def compactor():
    c = Compactor(CONFIG)
    yield c
    c.close()


def _check(err: pytest.ExceptionInfo) -> None:
    e = err.value
    assert isinstance(e, OptionError) and isinstance(e, CompactError) and isinstance(e, TypeError)
    assert (e.code, e.path) == ("invalid_request", "/summarize")
    assert e.message.startswith("ctxcompact: summarize returned an awaitable")
    assert "await compactor.acompact(...)" in e.message


@pytest.mark.parametrize("summarize", [async_summarize, returns_coroutine], ids=["async-def", "returns-coroutine"])
@pytest.mark.parametrize("timeout", [120, None], ids=["worker-thread", "calling-thread"])
def test_compact_raises_naming_acompact(compactor, summarize, timeout):
    messages = conversation(30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a never-awaited coroutine warns: it must be closed
        with pytest.raises(OptionError) as err:
            compactor.compact(messages, summarize=summarize, force=True, timeout=timeout)
        gc.collect()
    _check(err)
    # The same summarizer is awaited by acompact.
    result = asyncio.run(compactor.acompact(messages, summarize=summarize, force=True))
    assert result.report["summarizer"] == "host" and not result.report["fallback_used"]


def test_context_engine_compress_raises_and_counts_nothing():
    engine = ContextEngine(CONFIG, summarize=async_summarize)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(OptionError) as err:
                engine.compress(conversation(30), force=True)
            gc.collect()
        _check(err)
        assert engine.compression_count == 0 and engine.last_report is None
    finally:
        engine.close()
