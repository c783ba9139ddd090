"""Ready summarizers for the official OpenAI and Anthropic Python SDKs.

Give them the client you already have; they return what ``Compactor.compact`` /
``acompact`` and ``ContextEngine(summarize=...)`` take::

    import openai
    from ctxcompact import ContextEngine
    from ctxcompact.summarizers import openai_summarizer

    engine = ContextEngine(config, summarize=openai_summarizer(openai.OpenAI(), model="gpt-4.1-mini"))

A sync client (``openai.OpenAI``, ``anthropic.Anthropic``) gives a plain function,
for ``compact`` and ``ContextEngine``; an async client (``openai.AsyncOpenAI``,
``anthropic.AsyncAnthropic``) gives an ``async def`` function, for ``acompact``.

Each call sends the summary request's system text (the core's template) in the
API's system slot (chat: a system message; Responses: ``instructions``;
Anthropic: ``system``) and its user text (the serialized middle of the
conversation) as the user message, and asks for the summary's size in the API's
own parameter: ``max_tokens`` (chat), ``max_completion_tokens`` (chat, for the
reasoning models whose names match ``^(o\\d|gpt-5)``), ``max_output_tokens``
(Responses), ``max_tokens`` (Anthropic). That size is the request's
``max_tokens`` unless ``max_tokens=`` is given here. A Responses call sends
``store=False``: the summary is not kept on the server, as nothing asks for it.

The compaction's remaining time (``summary_time_left()``) is passed as the SDK's
per-request ``timeout`` (never longer than the client's own). An API error
(4xx/5xx, connection) is raised as the SDK raised it, which the compaction turns
into its fallback (``fallback_code`` "error"); the SDK's timeout, whether it was
the compaction's time left or the client's own shorter one, is raised as
``SummaryTimeout`` (``fallback_code`` "timeout", as in JS and Go); an empty answer
gives "empty". An unknown keyword option (``maxTokens=``) is an ``OptionError``
naming the closest valid one.
Retries are the client's own (``max_retries``, bounded); none are added here.

The SDKs are optional (``pip install 'ctxcompact[openai]'`` or
``'ctxcompact[anthropic]'``): this module imports neither.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union, overload

from ._check import _describe, reject_unknown
from ._compactor import AsyncSummarizer, SummaryTimeout, SyncSummarizer, summary_time_left
from ._errors import OptionError
from ._types import SummaryRequest

if TYPE_CHECKING:  # pragma: no cover - types only, the SDKs stay optional
    from anthropic import Anthropic, AsyncAnthropic
    from openai import AsyncOpenAI, OpenAI

__all__ = [
    "openai_summarizer",
    "anthropic_summarizer",
    "summary_time_left",
    "SummaryTimeout",
    "REASONING_MODEL",
]

#: Chat models that take ``max_completion_tokens`` instead of ``max_tokens``.
REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")

#: Anthropic requires max_tokens: used when the request has none (<= 0) and no
#: ``max_tokens=`` was given.
_ANTHROPIC_DEFAULT_MAX_TOKENS = 4096

_APIS = ("chat", "responses")


# --- options -------------------------------------------------------------------------------


def _check_model(model: Any) -> str:
    if not isinstance(model, str) or not model:
        raise OptionError(f"model must be a non-empty string (the model's name), not {_describe(model)}", "/model")
    return model


def _check_max_tokens(v: Any) -> Optional[int]:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise OptionError(f"max_tokens must be a positive integer or None, not {_describe(v)}", "/max_tokens")
    if v <= 0:
        raise OptionError(f"max_tokens must be a positive integer or None, not {v!r}", "/max_tokens")
    return v


def _endpoint(client: Any, path: Tuple[str, ...], sdk: str, where: str) -> Any:
    """client.<path...>.create, or an OptionError naming what was expected."""
    obj = client
    for name in path:
        obj = getattr(obj, name, None)
        if obj is None:
            break
    create = getattr(obj, "create", None) if obj is not None else None
    if client is None or not callable(create):
        raise OptionError(
            f"client must be {sdk} client with {where}.create (got {_describe(client)})", "/client"
        )
    return create


def _is_async(client: Any, create: Any) -> bool:
    """An async client: the SDKs' async clients derive from their AsyncAPIClient;
    anything else is async when its create method is a coroutine function."""
    for cls in type(client).__mro__:
        if cls.__name__ == "AsyncAPIClient":
            return True
        if cls.__name__ == "SyncAPIClient":
            return False
    import inspect

    return inspect.iscoroutinefunction(create)


# --- the request -----------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _split(request: SummaryRequest) -> Tuple[str, List[Dict[str, str]]]:
    """(the system text, the other messages as {role, content}) of a request."""
    system: List[str] = []
    rest: List[Dict[str, str]] = []
    for m in request["messages"]:
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(_text(m.get("content")))
        else:
            rest.append({"role": str(role), "content": _text(m.get("content"))})
    return "\n\n".join(system), rest


def _size(request: SummaryRequest, override: Optional[int]) -> Optional[int]:
    if override is not None:
        return override
    n = request.get("max_tokens")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def _timeout(client: Any) -> Tuple[Any, bool]:
    """(the per-request timeout to pass, or None to pass none; whether it is the
    compaction's time left). The client's own timeout stays when it is shorter;
    an httpx-style Timeout (connect/read/write/pool) has each part bounded."""
    left = summary_time_left()
    if left is None:
        return None, False
    if left <= 0:
        raise SummaryTimeout("ctxcompact: no time left for the summarizer's request")
    own = getattr(client, "timeout", None)
    if own is None:
        return left, True
    if isinstance(own, (int, float)) and not isinstance(own, bool):
        return (left, True) if left < own else (None, False)
    parts = {k: getattr(own, k, None) for k in ("connect", "read", "write", "pool")}
    if all(isinstance(v, (int, float)) or v is None for v in parts.values()) and any(
        v is not None for v in parts.values()
    ):
        read = parts["read"]
        if read is not None and read <= left:
            return None, False  # the client gives up first anyway
        bounded = {k: left if v is None or v > left else v for k, v in parts.items()}
        try:
            return type(own)(**bounded), True
        except Exception:  # not constructible that way: a plain number of seconds
            return left, True
    return left, True


def _timed_out(e: BaseException) -> bool:
    """The SDK's timeout error (openai/anthropic APITimeoutError)."""
    return type(e).__name__ == "APITimeoutError"


def _ran_out(e: BaseException, ours: bool) -> SummaryTimeout:
    """The SummaryTimeout of the SDK's timeout e: the compaction's time left when
    that was the per-request timeout (ours), else the client's own."""
    if ours:
        return SummaryTimeout(f"ctxcompact: the summarizer's request ran out of the compaction's time ({e})")
    return SummaryTimeout(f"ctxcompact: the summarizer's request timed out (the client's own timeout): {e}")


# --- answers ---------------------------------------------------------------------------------


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _chat_summary(resp: Any) -> str:
    choices = _field(resp, "choices")
    if not choices:
        raise RuntimeError("ctxcompact: the chat completion has no choices")
    message = _field(choices[0], "message")
    content = _field(message, "content")
    if not content:
        refusal = _field(message, "refusal")
        if refusal:
            raise RuntimeError(f"ctxcompact: the model refused to summarize: {refusal}")
        return ""  # fallback_code "empty"
    return _text(content)


def _responses_summary(resp: Any) -> str:
    text = _field(resp, "output_text")
    if isinstance(text, str):
        return text
    parts: List[str] = []
    for item in _field(resp, "output") or []:
        if _field(item, "type") == "message":
            for c in _field(item, "content") or []:
                if _field(c, "type") == "output_text" and isinstance(_field(c, "text"), str):
                    parts.append(_field(c, "text"))
    return "".join(parts)


def _anthropic_summary(resp: Any) -> str:
    parts: List[str] = []
    for block in _field(resp, "content") or []:
        if _field(block, "type") == "text" and isinstance(_field(block, "text"), str):
            parts.append(_field(block, "text"))
    return "".join(parts)


# --- the summarizers ---------------------------------------------------------------------------


def _openai_kwargs(request: SummaryRequest, model: str, api: str, max_tokens: Optional[int]) -> Dict[str, Any]:
    system, rest = _split(request)
    size = _size(request, max_tokens)
    kw: Dict[str, Any] = {"model": model}
    if api == "responses":
        if system:
            kw["instructions"] = system
        users = [m for m in rest if m["role"] == "user"]
        kw["input"] = users[0]["content"] if len(rest) == 1 and users else rest
        if size is not None:
            kw["max_output_tokens"] = size
        kw["store"] = False  # a summary is not kept on the server: nothing asks for it later
    else:
        kw["messages"] = ([{"role": "system", "content": system}] if system else []) + rest
        if size is not None:
            kw["max_completion_tokens" if REASONING_MODEL.match(model) else "max_tokens"] = size
    return kw


def _anthropic_kwargs(request: SummaryRequest, model: str, max_tokens: Optional[int]) -> Dict[str, Any]:
    system, rest = _split(request)
    size = _size(request, max_tokens)
    kw: Dict[str, Any] = {
        "model": model,
        "messages": rest,
        "max_tokens": _ANTHROPIC_DEFAULT_MAX_TOKENS if size is None else size,
    }
    if system:
        kw["system"] = system
    return kw


def _make(create: Any, client: Any, build: Any, read: Any, is_async: bool) -> Union[SyncSummarizer, AsyncSummarizer]:
    if is_async:

        async def asummarize(request: SummaryRequest) -> str:
            kw = build(request)
            to, ours = _timeout(client)
            if to is not None:
                kw["timeout"] = to
            try:
                resp = await create(**kw)
            except Exception as e:
                if _timed_out(e):
                    raise _ran_out(e, ours) from e
                raise
            return str(read(resp))

        return asummarize

    def summarize(request: SummaryRequest) -> str:
        kw = build(request)
        to, ours = _timeout(client)
        if to is not None:
            kw["timeout"] = to
        try:
            resp = create(**kw)
        except Exception as e:
            if _timed_out(e):
                raise _ran_out(e, ours) from e
            raise
        return str(read(resp))

    return summarize


@overload
def openai_summarizer(
    client: "AsyncOpenAI", *, model: str, api: str = "chat", max_tokens: Optional[int] = None
) -> AsyncSummarizer: ...
@overload
def openai_summarizer(
    client: "OpenAI", *, model: str, api: str = "chat", max_tokens: Optional[int] = None
) -> SyncSummarizer: ...
@overload
def openai_summarizer(
    client: Any, *, model: str, api: str = "chat", max_tokens: Optional[int] = None
) -> Union[SyncSummarizer, AsyncSummarizer]: ...
def openai_summarizer(
    client: Any, *, model: str, api: str = "chat", max_tokens: Optional[int] = None, **unknown: Any
) -> Union[SyncSummarizer, AsyncSummarizer]:
    """A summarizer that calls the OpenAI API through ``client`` (``openai.OpenAI``
    or ``openai.AsyncOpenAI``, or a compatible client such as ``AzureOpenAI``).

    ``api="chat"`` (default) calls ``client.chat.completions.create`` (POST
    /v1/chat/completions) and reads ``choices[0].message.content``;
    ``api="responses"`` calls ``client.responses.create`` (POST /v1/responses)
    with the template as ``instructions`` and reads ``output_text``.
    ``max_tokens`` (a positive int) replaces the size the compaction asks for.
    A sync client gives a function for ``compact``/``ContextEngine``, an async
    one an ``async def`` for ``acompact``. Another keyword (``maxTokens=``) is an
    ``OptionError`` naming the closest valid one.
    """
    reject_unknown("openai_summarizer", unknown, ("model", "api", "max_tokens"))
    model = _check_model(model)
    if api not in _APIS:
        raise OptionError(f"api must be 'chat' or 'responses', not {_describe(api)}", "/api")
    size = _check_max_tokens(max_tokens)
    if api == "responses":
        create = _endpoint(client, ("responses",), "an openai", "responses")
        read: Any = _responses_summary
    else:
        create = _endpoint(client, ("chat", "completions"), "an openai", "chat.completions")
        read = _chat_summary

    def build(request: SummaryRequest) -> Dict[str, Any]:
        return _openai_kwargs(request, model, api, size)

    return _make(create, client, build, read, _is_async(client, create))


@overload
def anthropic_summarizer(client: "AsyncAnthropic", *, model: str, max_tokens: Optional[int] = None) -> AsyncSummarizer: ...
@overload
def anthropic_summarizer(client: "Anthropic", *, model: str, max_tokens: Optional[int] = None) -> SyncSummarizer: ...
@overload
def anthropic_summarizer(
    client: Any, *, model: str, max_tokens: Optional[int] = None
) -> Union[SyncSummarizer, AsyncSummarizer]: ...
def anthropic_summarizer(
    client: Any, *, model: str, max_tokens: Optional[int] = None, **unknown: Any
) -> Union[SyncSummarizer, AsyncSummarizer]:
    """A summarizer that calls the Anthropic Messages API (POST /v1/messages)
    through ``client`` (``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic``)
    with the template as ``system``; the summary is the answer's text blocks,
    joined. ``max_tokens`` (a positive int) replaces the size the compaction asks
    for (Anthropic requires one: 4096 when neither gives it). A sync client gives
    a function for ``compact``/``ContextEngine``, an async one an ``async def``
    for ``acompact``. Another keyword (``maxTokens=``) is an ``OptionError``
    naming the closest valid one.
    """
    reject_unknown("anthropic_summarizer", unknown, ("model", "max_tokens"))
    model = _check_model(model)
    size = _check_max_tokens(max_tokens)
    create = _endpoint(client, ("messages",), "an anthropic", "messages")

    def build(request: SummaryRequest) -> Dict[str, Any]:
        return _anthropic_kwargs(request, model, size)

    return _make(create, client, build, _anthropic_summary, _is_async(client, create))
