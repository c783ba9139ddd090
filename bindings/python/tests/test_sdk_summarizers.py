"""ctxcompact.summarizers with the real openai and anthropic SDKs (pinned in
test.sh), pointed at the loopback model (examples/agent-loop/python/loopback.py):
what the SDK sent, and how errors, rate limits and timeouts end (retries off with
the SDKs' own max_retries=0, except where the client's own retries are tested)."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
from typing import Any, Callable, Dict, List, Tuple

import pytest

import ctxcompact
from ctxcompact import OptionError
from ctxcompact.summarizers import (
    SummaryTimeout,
    anthropic_summarizer,
    openai_summarizer,
    summary_time_left,
)

from conftest import ROOT

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

sys.path.insert(0, str(ROOT / "examples" / "agent-loop" / "python"))
import loopback  # noqa: E402

TRACE = ROOT / "examples" / "astropy-12907.json"
WINDOW = {"model": {"context_length": 16000}}


@pytest.fixture(scope="module")
def messages() -> List[Dict[str, Any]]:
    with open(TRACE, "rb") as f:
        return json.load(f)["messages"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def compactor():
    c = ctxcompact.Compactor(WINDOW)
    yield c
    c.close()


@pytest.fixture
def model():
    with loopback.LoopbackModel(TRACE) as m:
        yield m


# The three APIs: (name, make a summarizer from a loopback and options, the path).
def _openai(m: Any, is_async: bool, api: str, **kw: Any) -> Any:
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    client = cls(base_url=m.openai_base_url, api_key="loopback", max_retries=kw.pop("max_retries", 0), **kw.pop("client", {}))
    return openai_summarizer(client, api=api, **{"model": "summary-model", **kw})


def _anthropic(m: Any, is_async: bool, api: str, **kw: Any) -> Any:
    cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
    client = cls(base_url=m.base_url, api_key="loopback", max_retries=kw.pop("max_retries", 0), **kw.pop("client", {}))
    return anthropic_summarizer(client, **{"model": "summary-model", **kw})


APIS = {
    "chat": (_openai, "chat", "/v1/chat/completions"),
    "responses": (_openai, "responses", "/v1/responses"),
    "anthropic": (_anthropic, "", "/v1/messages"),
}
CASES = [(name, is_async) for name in APIS for is_async in (False, True)]
IDS = [f"{n}-{'async' if a else 'sync'}" for n, a in CASES]


def make(m: Any, name: str, is_async: bool, **kw: Any) -> Any:
    mk, api, _ = APIS[name]
    return mk(m, is_async, api, **kw)


def spy(summarize: Any, seen: List[Any]) -> Any:
    """summarize, recording the summary request the core made."""
    if inspect.iscoroutinefunction(summarize):

        async def a(request: Any) -> str:
            seen.append(request)
            return await summarize(request)  # type: ignore[no-any-return]

        return a

    def s(request: Any) -> str:
        seen.append(request)
        return summarize(request)  # type: ignore[no-any-return]

    return s


def compact(compactor: Any, messages: Any, summarize: Any, is_async: bool, **kw: Any) -> Any:
    if is_async:
        return asyncio.run(compactor.acompact(messages, summarize=summarize, **kw))
    return compactor.compact(messages, summarize=summarize, **kw)


def system_and_user(request: Any) -> Tuple[str, str]:
    (s,) = [m["content"] for m in request["messages"] if m["role"] == "system"]
    (u,) = [m["content"] for m in request["messages"] if m["role"] == "user"]
    return s, u


# --- what the SDK sent -------------------------------------------------------------------


@pytest.mark.parametrize("name,is_async", CASES, ids=IDS)
def test_sends_template_size_and_middle(name, is_async, model, compactor, messages):
    seen: List[Any] = []
    res = compact(compactor, messages, spy(make(model, name, is_async), seen), is_async)
    rep = res.report
    assert rep["compacted"] is True and rep["summarizer"] == "host"
    assert rep["fallback_used"] is False, rep.get("fallback_reason")
    (req,) = seen
    system, user = system_and_user(req)
    assert system.startswith("You summarize the earlier part of a long conversation")
    mid = req["middle"]
    assert "<turns>" in user and f"[#{mid['from']} " in user and f"[#{mid['to'] - 1} " in user

    (got,) = model.requests
    assert got.path == APIS[name][2] and got.kind == "summary"
    body = got.body
    assert body["model"] == "summary-model"
    if name == "chat":
        assert body["messages"] == [{"role": "system", "content": system}, {"role": "user", "content": user}]
        assert body["max_tokens"] == req["max_tokens"] and "max_completion_tokens" not in body
    elif name == "responses":
        assert body["instructions"] == system and body["input"] == user
        assert body["max_output_tokens"] == req["max_tokens"]
        assert body["store"] is False
    else:
        assert body["system"] == system
        assert body["messages"] == [{"role": "user", "content": user}]
        assert body["max_tokens"] == req["max_tokens"]
    assert not ({"temperature", "stream", "tools"} & set(body))
    # The compaction's time left went as the per-request timeout (the client's
    # default read timeout is 600 s; the compaction's is 120 s).
    assert 0 < float(got.headers["x-stainless-read-timeout"]) <= 120
    assert got.headers["x-stainless-async"] != "false" if is_async else got.headers["x-stainless-async"] == "false"
    # The loopback's summary is in the result, as the summary message.
    summary = loopback.summary_text("astropy-12907", user.count("\n[#"))
    assert any(isinstance(m.get("content"), str) and summary in m["content"] for m in res.messages)


@pytest.mark.parametrize("model_name,param", [("gpt-5-mini", "max_completion_tokens"), ("o3", "max_completion_tokens"),
                                              ("o4-mini", "max_completion_tokens"), ("gpt-4.1", "max_tokens"),
                                              ("summary-model", "max_tokens")])
def test_chat_size_parameter_by_model(model_name, param, model, compactor, messages):
    # Not the configured summary model: the loopback knows the request by its template.
    res = compactor.compact(messages, summarize=make(model, "chat", False, model=model_name))
    assert res.report["fallback_used"] is False
    (got,) = model.requests
    assert got.kind == "summary" and got.body["model"] == model_name
    other = {"max_tokens", "max_completion_tokens"} - {param}
    assert got.body[param] > 0 and not (other & set(got.body))


@pytest.mark.parametrize("name", list(APIS))
def test_max_tokens_option_overrides_the_request(name, model, compactor, messages):
    compactor.compact(messages, summarize=make(model, name, False, max_tokens=321))
    body = model.requests[0].body
    size = {"chat": "max_tokens", "responses": "max_output_tokens", "anthropic": "max_tokens"}[name]
    assert body[size] == 321


def test_client_timeout_shorter_than_the_compaction_stays(model, compactor, messages):
    compactor.compact(messages, summarize=make(model, "chat", False, client={"timeout": 7.5}))
    assert float(model.requests[0].headers["x-stainless-read-timeout"]) == 7.5


def test_no_timeout_passes_none_of_ours(model, compactor, messages):
    compactor.compact(messages, summarize=make(model, "anthropic", False), timeout=None)
    assert float(model.requests[0].headers["x-stainless-read-timeout"]) == 600  # the client's default


# --- failures: the fallback ----------------------------------------------------------------

ERRORS = {
    "chat": {429: "RateLimitError", 500: "InternalServerError", 400: "BadRequestError"},
    "responses": {429: "RateLimitError", 500: "InternalServerError", 400: "BadRequestError"},
    "anthropic": {429: "RateLimitError", 500: "InternalServerError", 400: "BadRequestError"},
}


@pytest.mark.parametrize("status", [429, 500, 400])
@pytest.mark.parametrize("name,is_async", CASES, ids=IDS)
def test_api_error_falls_back(name, is_async, status, model, compactor, messages):
    model.fail(status, retry_after="0.01" if status == 429 else None, message="loopback says no")
    res = compact(compactor, messages, make(model, name, is_async), is_async)
    rep = res.report
    assert rep["compacted"] is True
    assert rep["fallback_used"] is True and rep["fallback_code"] == "error"
    assert ERRORS[name][status] in rep["fallback_reason"] and "loopback says no" in rep["fallback_reason"]
    assert [r.kind for r in model.requests] == ["error"]  # max_retries=0: one request, no retry of ours


@pytest.mark.parametrize("name,is_async", CASES, ids=IDS)
def test_the_clients_own_retries_are_used_and_bounded(name, is_async, model, compactor, messages):
    model.fail(429, times=1, retry_after="0.01")
    res = compact(compactor, messages, make(model, name, is_async, max_retries=2), is_async)
    assert res.report["fallback_used"] is False
    assert [r.kind for r in model.requests] == ["error", "summary"]
    assert model.requests[1].headers["x-stainless-retry-count"] == "1"

    model.requests.clear()
    model.fail(429, times=100, retry_after="0.01")
    res = compact(compactor, messages, make(model, name, is_async, max_retries=2), is_async)
    assert res.report["fallback_code"] == "error"
    assert len(model.requests) == 3  # the first try and the client's 2 retries, nothing more


@pytest.mark.parametrize("name,is_async", CASES, ids=IDS)
def test_empty_answer_is_fallback_empty(name, is_async, model, compactor, messages):
    model.summary = ""
    res = compact(compactor, messages, make(model, name, is_async), is_async)
    assert res.report["fallback_used"] is True and res.report["fallback_code"] == "empty"


@pytest.mark.parametrize("name,is_async", CASES, ids=IDS)
def test_slow_model_is_fallback_timeout(name, is_async, model, compactor, messages):
    model.delay = 30  # close() wakes it: the test does not wait for it
    res = compact(compactor, messages, make(model, name, is_async), is_async, timeout=0.5)
    assert res.report["fallback_used"] is True and res.report["fallback_code"] == "timeout"
    (got,) = model.requests
    # The SDK was told the time left, so its request ends too (not after 600 s).
    assert 0 < float(got.headers["x-stainless-read-timeout"]) <= 0.5


def test_sdk_timeout_at_the_deadline_is_summary_timeout(model):
    """Called directly (no compaction racing it): the SDK's own timeout error, when
    the timeout was the compaction's time left, becomes SummaryTimeout."""
    model.delay = 30
    summarize = make(model, "chat", False)
    request = {"messages": [{"role": "system", "content": "You summarize."}, {"role": "user", "content": "[#1 user\nhi"}],
               "max_tokens": 10, "target_tokens": 5, "iterative": False, "middle": {"from": 1, "to": 2}}
    from ctxcompact import _compactor

    token = _compactor._deadline.set(_compactor.time.monotonic() + 0.3)
    try:
        with pytest.raises(SummaryTimeout, match="ran out of the compaction's time") as e:
            summarize(request)
    finally:
        _compactor._deadline.reset(token)
    assert type(e.value.__cause__).__name__ == "APITimeoutError"
    # A client timeout shorter than the compaction's is the client's, and a timeout all
    # the same: SummaryTimeout, as JS reports the client's timeout as a TimeoutError.
    model.requests.clear()
    short = make(model, "chat", False, client={"timeout": 0.2})
    token = _compactor._deadline.set(_compactor.time.monotonic() + 60)
    try:
        with pytest.raises(SummaryTimeout, match="the client's own timeout") as e:
            short(request)
    finally:
        _compactor._deadline.reset(token)
    assert type(e.value.__cause__).__name__ == "APITimeoutError"


@pytest.mark.parametrize("name,is_async", CASES, ids=IDS)
def test_client_timeout_is_fallback_timeout(name, is_async, model, compactor, messages):
    """The client's own timeout, long before the compaction's: fallback_code
    "timeout" (not "error"), the code JS and Go give a client-side timeout."""
    model.delay = 30  # close() wakes it: the test does not wait for it
    res = compact(compactor, messages, make(model, name, is_async, client={"timeout": 0.2}), is_async, timeout=60)
    assert res.report["fallback_used"] is True and res.report["fallback_code"] == "timeout"
    assert "the client's own timeout" in res.report["fallback_reason"]


def test_summary_time_left(compactor, messages):
    got: List[Any] = []

    def summarize(request: Any) -> str:
        got.append(summary_time_left())
        return "## Goal\nx"

    async def asummarize(request: Any) -> str:
        got.append(summary_time_left())
        return "## Goal\nx"

    assert summary_time_left() is None
    compactor.compact(messages, summarize=summarize, timeout=50)
    compactor.compact(messages, summarize=summarize, timeout=None)
    asyncio.run(compactor.acompact(messages, summarize=asummarize, timeout=40))
    asyncio.run(compactor.acompact(messages, summarize=summarize, timeout=30))
    assert 0 < got[0] <= 50 and got[1] is None and 0 < got[2] <= 40 and 0 < got[3] <= 30
    assert summary_time_left() is None  # reset after each call


# --- the engine ------------------------------------------------------------------------------


def test_context_engine_with_openai_summarizer(model, messages):
    client = openai.OpenAI(base_url=model.openai_base_url, api_key="loopback", max_retries=0)
    with ctxcompact.ContextEngine(model="agent-model", context_length=16000,
                                  summarize=openai_summarizer(client, model="summary-model")) as engine:
        out = engine.compress(messages)
    assert engine.last_report["summarizer"] == "host" and engine.last_report["fallback_used"] is False
    assert len(out) < len(messages)
    # The trace is far above the 16K window: its middle comes in chunks that fit it.
    chunks = engine.last_report.get("summary_chunks", 1)
    assert chunks > 1
    assert [r.kind for r in model.requests] == ["summary"] * chunks


def test_async_client_summarizer_needs_acompact(model, compactor, messages):
    with pytest.raises(TypeError, match="acompact"):
        compactor.compact(messages, summarize=make(model, "chat", True))


# --- options -----------------------------------------------------------------------------------


def _client() -> Any:
    return openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x")


@pytest.mark.parametrize(
    "call,path",
    [
        (lambda: openai_summarizer(_client(), model="m", api="completions"), "/api"),
        (lambda: openai_summarizer(_client(), model=""), "/model"),
        (lambda: openai_summarizer(_client(), model=None), "/model"),
        (lambda: openai_summarizer(_client(), model="m", max_tokens=0), "/max_tokens"),
        (lambda: openai_summarizer(_client(), model="m", max_tokens=True), "/max_tokens"),
        (lambda: openai_summarizer(_client(), model="m", max_tokens="500"), "/max_tokens"),
        (lambda: openai_summarizer(None, model="m"), "/client"),
        (lambda: openai_summarizer(object(), model="m", api="responses"), "/client"),
        (lambda: anthropic_summarizer(_client(), model="claude"), "/client"),  # an OpenAI client
        (lambda: anthropic_summarizer(anthropic.Anthropic(api_key="x"), model="c", max_tokens=-1), "/max_tokens"),
        (lambda: openai_summarizer(_client(), model="m", maxTokens=4), "/maxTokens"),
        (lambda: anthropic_summarizer(anthropic.Anthropic(api_key="x"), model="c", maxTokens=4), "/maxTokens"),
        (lambda: openai_summarizer(_client(), model="m", apii="chat"), "/apii"),
    ],
)
def test_bad_options(call: Callable[[], Any], path: str):
    with pytest.raises(OptionError) as e:
        call()
    assert e.value.path == path and e.value.code == "invalid_request"
    assert str(e.value).startswith("ctxcompact: ")


def test_unknown_option_names_the_closest():
    """A camelCase option (the JS spelling) is an OptionError, as in JS, that names
    the Python one; not the plain TypeError Python raises for an unknown keyword."""
    with pytest.raises(OptionError, match="did you mean 'max_tokens'"):
        openai_summarizer(_client(), model="m", maxTokens=4)
    with pytest.raises(OptionError, match="did you mean 'max_tokens'"):
        anthropic_summarizer(anthropic.Anthropic(api_key="x"), model="c", maxTokens=4)


def test_sdks_are_not_imported_with_the_module():
    code = "import sys, ctxcompact.summarizers; print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
