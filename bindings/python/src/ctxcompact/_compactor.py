"""Compactor: the idiomatic API over the wire contract (docs/OPS.md)."""

from __future__ import annotations

import itertools
import json
import os
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
    cast,
)

from ._errors import CompactError, ErrClosed
from ._runtime import (
    CacheDir,
    LoadedModule,
    Pool,
    WasmSource,
    load_module,
    packaged_source,
    resolve_cache_dir,
)
from ._types import (
    ArchivedMessage,
    CompactReport,
    CompactResult,
    Config,
    HygieneResult,
    InfoResult,
    Message,
    PruneResult,
    SanitizeResult,
    ShouldCompressResult,
    SummaryRequest,
    ThresholdResult,
    TokenCountResult,
    ValidateResult,
)

__all__ = ["Compactor", "SyncSummarizer", "AsyncSummarizer"]

#: A summarizer gets the summary request (send ``request["messages"]`` to an LLM
#: with ``request["max_tokens"]``) and returns the summary text.
SyncSummarizer = Callable[[SummaryRequest], str]
AsyncSummarizer = Callable[[SummaryRequest], Awaitable[str]]

# One encoder for every request: compact separators, NaN refused (not JSON).
# ensure_ascii=True and no circular check are the fastest settings of the C encoder
# (3.1 vs 5.7 ms/MB on the shared traces). Non-ASCII text goes as \uXXXX escapes:
# the core reads an escape as the character it stands for (token counts, truncation,
# the state fingerprint), so results equal those of raw UTF-8 input; a test checks
# it. A circular structure raises RecursionError instead of ValueError.
_encode = json.JSONEncoder(
    ensure_ascii=True, separators=(",", ":"), check_circular=False, allow_nan=False
).encode
_ENCODE_ERRORS = (TypeError, ValueError, RecursionError)
_loads = json.loads

# Tickets name this process's compactions in flight (unique within the process,
# where the wasm instances live): a random prefix and a counter.
_TICKET_PREFIX = os.urandom(6).hex()
_ticket_numbers = itertools.count(1)


def _new_ticket() -> bytes:
    return dumps(f"{_TICKET_PREFIX}-{next(_ticket_numbers)}")


def _not_kept(e: CompactError) -> bool:
    """The error of a finish without messages on an instance that does not keep
    the compaction: send the whole finish instead."""
    return e.code == "invalid_state" and e.path == "/messages"


#: acompact runs requests at least this big in the loop's default executor.
OFFLOAD_BYTES = 256 << 10


def dumps(value: Any) -> bytes:
    """Compact JSON bytes, as sent to the core."""
    return _encode(value).encode("ascii")


def _messages_json(messages: Any) -> Tuple[List[Message], bytes]:
    if not isinstance(messages, list):
        if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
            raise CompactError("invalid_messages", "messages must be a list of message dicts", "/messages")
        messages = list(messages)
    try:
        return messages, _encode(messages).encode("ascii")
    except _ENCODE_ERRORS as e:
        raise CompactError("invalid_messages", f"messages are not JSON-serializable: {e}", "/messages") from e


def _envelope(op: bytes, parts: Sequence[Tuple[bytes, bytes]]) -> bytes:
    """{"op":op, k1:v1, ...} from already-serialized values, with one join (the
    messages JSON is copied once, never re-encoded)."""
    chunks = [b'{"op":"', op, b'"']
    for k, v in parts:
        chunks.append(b',"')
        chunks.append(k)
        chunks.append(b'":')
        chunks.append(v)
    chunks.append(b"}")
    return b"".join(chunks)


def _raise_error(err: Any) -> "NoReturn":  # type: ignore[name-defined]  # noqa: F821
    if not isinstance(err, dict):
        raise CompactError("internal", f"malformed error envelope: {err!r}")
    raise CompactError(str(err.get("code", "internal")), str(err.get("message", "")), str(err.get("path", "")))


def parse_response(out: bytes) -> Any:
    """The result of a response envelope, or raise CompactError."""
    try:
        env = _loads(out)
    except ValueError as e:
        raise CompactError("internal", f"the module returned invalid JSON: {e}") from e
    if "result" in env:
        return env["result"]
    _raise_error(env.get("error"))


def resolve_refs(messages: List[Message], result: Dict[str, Any]) -> None:
    """In place: replace integer refs in result["messages"] with the caller's own
    objects and give every archived entry its original message (also the caller's)."""
    out = result.get("messages")
    if out is not None:
        result["messages"] = [messages[x] if x.__class__ is int else x for x in out]
    for a in result.get("archived") or ():
        if "message" not in a:
            a["message"] = messages[a["index"]]


class Compactor:
    """Runs the ctxcompact core (Go compiled to WebAssembly) on wasmtime.

    ``Compactor(config)`` loads the module once per process: the compiled code is
    cached on disk (``cache_dir``: default ``$CTXCOMPACT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/ctxcompact`` or ``~/.cache/ctxcompact``; ``False`` disables
    it), so only the first start on a machine pays the ~2 s compile.

    Thread safety: a Compactor may be shared by threads. It keeps a small pool of
    wasm instances (``max_instances``, default min(4, CPUs)); each call takes one
    instance for its duration, so up to ``max_instances`` calls run in parallel
    (wasmtime releases the GIL while wasm runs) and further callers wait. Between
    ``compact.begin`` and ``compact.finish`` (while your summarizer runs) no
    instance is held. A trapped instance is dropped and the request retried once on
    a fresh one. An instance whose linear memory grew past ``max_instance_memory``
    bytes (default 512 MiB; None: no limit) is dropped after its call, so one huge
    request does not pin its memory for the life of the process.
    """

    def __init__(
        self,
        config: Optional[Config] = None,
        *,
        cache_dir: CacheDir = None,
        max_instances: Optional[int] = None,
        max_instance_memory: Optional[int] = 512 << 20,
        wasm: Union[None, bytes, str, "os.PathLike[str]"] = None,
    ) -> None:
        if wasm is None:
            source = packaged_source()
        elif isinstance(wasm, (bytes, bytearray, memoryview)):
            source = WasmSource.from_bytes(bytes(wasm))
        else:
            with open(wasm, "rb") as f:
                source = WasmSource.from_bytes(f.read())
        if max_instances is None:
            max_instances = max(1, min(4, os.cpu_count() or 1))
        self._loaded: LoadedModule = load_module(source, resolve_cache_dir(cache_dir))
        self._pool: Optional[Pool] = Pool(self._loaded, max_instances, max_instance_memory)
        self._config: Config = {}
        self._config_json = b"{}"
        self.config = config or {}

    # -- configuration and lifecycle --------------------------------------------------

    @property
    def config(self) -> Config:
        """The default config of every op (a copy is serialized when set)."""
        return self._config

    @config.setter
    def config(self, value: Config) -> None:
        if not isinstance(value, dict):
            raise CompactError("invalid_config", "config must be a dict", "/config")
        try:
            self._config_json = dumps(value)
        except _ENCODE_ERRORS as e:
            raise CompactError("invalid_config", f"config is not JSON-serializable: {e}", "/config") from e
        self._config = value

    @property
    def module_source(self) -> str:
        """How the compiled module was obtained: "cache", "compiled" (and cached) or
        "compiled-uncached"."""
        return self._loaded.source

    def close(self) -> None:
        """Release the wasm instances; later calls raise ErrClosed."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> "Compactor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _p(self) -> Pool:
        pool = self._pool
        if pool is None:
            raise ErrClosed()
        return pool

    def _cfg(self, config: Optional[Config]) -> bytes:
        if config is None:
            return self._config_json
        try:
            return dumps(config)
        except _ENCODE_ERRORS as e:
            raise CompactError("invalid_config", f"config is not JSON-serializable: {e}", "/config") from e

    # -- raw calls -----------------------------------------------------------------------

    def call_bytes(self, envelope: bytes) -> bytes:
        """Send a raw request envelope ``{"op": ..., ...}`` (UTF-8 JSON bytes) and
        return the raw response envelope bytes (``{"result": ...}`` or
        ``{"error": ...}``): no parsing either way."""
        return self._p().call(bytes(envelope))

    def call(self, op: str, params: Optional[Dict[str, Any]] = None) -> Any:
        """Run any op with params as given (no defaults added) and return its result,
        or raise CompactError. ``call("info")`` lists the ops this module has."""
        env = dict(params or {})
        env["op"] = op
        try:
            body = dumps(env)
        except _ENCODE_ERRORS as e:
            raise CompactError("invalid_request", f"params are not JSON-serializable: {e}") from e
        return parse_response(self._p().call(body))

    def _run(self, op: bytes, parts: Sequence[Tuple[bytes, bytes]]) -> Any:
        return parse_response(self._p().call(_envelope(op, parts)))

    # -- pure ops ------------------------------------------------------------------------

    def info(self) -> InfoResult:
        return cast(InfoResult, self._run(b"info", ()))

    def resolve_threshold(self, config: Optional[Config] = None) -> ThresholdResult:
        """threshold.resolve: the effective fraction, threshold_tokens, budgets and
        which rule decided them."""
        return cast(ThresholdResult, self._run(b"threshold.resolve", [(b"config", self._cfg(config))]))

    def should_compress(
        self,
        prompt_tokens: int,
        *,
        last_compaction_tokens: Optional[int] = None,
        config: Optional[Config] = None,
    ) -> ShouldCompressResult:
        """should_compress: ``prompt_tokens >= threshold_tokens``, with the breaker:
        pass the tokens_after of a compaction that did not fit as
        ``last_compaction_tokens`` so a repeated trigger does not loop."""
        parts = [(b"config", self._cfg(config)), (b"prompt_tokens", dumps(prompt_tokens))]
        if last_compaction_tokens is not None:
            parts.append((b"last_compaction_tokens", dumps(last_compaction_tokens)))
        return cast(ShouldCompressResult, self._run(b"should_compress", parts))

    def hygiene_check(
        self, messages: Sequence[Message], prompt_tokens: Optional[int] = None, *, config: Optional[Config] = None
    ) -> HygieneResult:
        """hygiene.check: the gateway safety net (85% of the window by default)."""
        _, mj = _messages_json(messages)
        parts = [(b"config", self._cfg(config)), (b"messages", mj)]
        if prompt_tokens is not None:
            parts.append((b"prompt_tokens", dumps(prompt_tokens)))
        return cast(HygieneResult, self._run(b"hygiene.check", parts))

    def count_tokens(
        self, messages: Sequence[Message], encoding: Optional[str] = None, *, config: Optional[Config] = None
    ) -> TokenCountResult:
        """tokens.count: total and per-message token counts."""
        _, mj = _messages_json(messages)
        parts = [(b"config", self._cfg(config)), (b"messages", mj)]
        if encoding is not None:
            parts.append((b"encoding", dumps(encoding)))
        return cast(TokenCountResult, self._run(b"tokens.count", parts))

    def prune(self, messages: Sequence[Message], *, config: Optional[Config] = None) -> PruneResult:
        """prune: old tool outputs become placeholders. Unchanged messages in the
        result are your own objects; ``archived`` holds the originals of pruned ones."""
        msgs, mj = _messages_json(messages)
        r = self._run(b"prune", [(b"output", b'"refs"'), (b"config", self._cfg(config)), (b"messages", mj)])
        resolve_refs(msgs, r)
        return cast(PruneResult, r)

    def sanitize(self, messages: Sequence[Message]) -> SanitizeResult:
        """sanitize: drop tool results whose call is gone, stub calls whose result is
        gone."""
        msgs, mj = _messages_json(messages)
        r = self._run(b"sanitize", [(b"output", b'"refs"'), (b"messages", mj)])
        resolve_refs(msgs, r)
        return cast(SanitizeResult, r)

    def validate(self, messages: Sequence[Message]) -> ValidateResult:
        """validate: problems with a message list (never raises for bad messages)."""
        _, mj = _messages_json(messages)
        return cast(ValidateResult, self._run(b"validate", [(b"messages", mj)]))

    # -- prompt caching and calibration (params as in docs/OPS.md) -----------------------

    def _with(self, op: bytes, messages: Optional[Sequence[Message]], params: Dict[str, Any]) -> Any:
        parts: List[Tuple[bytes, bytes]] = []
        if "config" not in params:
            parts.append((b"config", self._config_json))
        try:
            for k, v in params.items():
                if v is not None:
                    parts.append((k.encode("utf-8"), dumps(v)))
        except _ENCODE_ERRORS as e:
            raise CompactError("invalid_request", f"params are not JSON-serializable: {e}") from e
        if messages is not None:
            parts.append((b"messages", _messages_json(messages)[1]))
        return self._run(op, parts)

    def cache_apply(self, messages: Sequence[Message], **params: Any) -> Dict[str, Any]:
        """cache.apply: place prompt-cache breakpoints (system_and_3); params such as
        ``system``, ``layout``, ``cache_ttl`` go to the op as they are. The caller's
        messages are not mutated."""
        return cast(Dict[str, Any], self._with(b"cache.apply", messages, params))

    def cache_policy(self, **params: Any) -> Dict[str, Any]:
        """cache.policy: whether prompt caching applies to a model/provider, and why."""
        return cast(Dict[str, Any], self._with(b"cache.policy", None, params))

    def cache_simulate(self, messages: Sequence[Message], **params: Any) -> Dict[str, Any]:
        """cache.simulate: replay a conversation against a model of the provider's
        prompt cache and price it."""
        return cast(Dict[str, Any], self._with(b"cache.simulate", messages, params))

    def calibrate(self, messages: Sequence[Message], prompt_tokens: int, **params: Any) -> Dict[str, Any]:
        """tokens.calibrate: the factor between the estimate and an API-reported
        prompt size (use it as ``config["tokens"]["calibration"]``)."""
        params["prompt_tokens"] = prompt_tokens
        return cast(Dict[str, Any], self._with(b"tokens.calibrate", messages, params))

    # -- compaction ------------------------------------------------------------------------

    def _compact_parts(
        self,
        config: Optional[Config],
        force: bool,
        prompt_tokens: Optional[int],
        host: bool,
        system: Any = None,
        format: Optional[str] = None,
    ) -> List[Tuple[bytes, bytes]]:
        parts = [
            (b"output", b'"refs"'),
            (b"summarizer", b'"host"' if host else b'"builtin"'),
            (b"config", self._cfg(config)),
        ]
        if force:
            parts.append((b"force", b"true"))
        if prompt_tokens is not None:
            parts.append((b"prompt_tokens", dumps(int(prompt_tokens))))
        if system is not None:
            parts.append((b"system", dumps(system)))
        if format is not None:
            parts.append((b"format", dumps(format)))
        return parts

    def _begin_env(
        self,
        messages: Sequence[Message],
        config: Optional[Config],
        force: bool,
        prompt_tokens: Optional[int],
        host: bool,
        system: Any = None,
        format: Optional[str] = None,
    ) -> Tuple[List[Message], bytes, List[Tuple[bytes, bytes]], bytes]:
        msgs, mj = _messages_json(messages)
        parts = self._compact_parts(config, force, prompt_tokens, host, system, format)
        if host:  # finish may then leave out the messages (see _finish_env)
            parts.append((b"ticket", _new_ticket()))
        return msgs, mj, parts, _envelope(b"compact.begin", parts + [(b"messages", mj)])

    @staticmethod
    def _finish_env(
        mj: Optional[bytes], parts: List[Tuple[bytes, bytes]], state: Any, summary: Optional[str], error: Optional[str]
    ) -> bytes:
        """The finish envelope: the same params as begin (its ticket among them), plus
        state and summary or error, and the same messages bytes (joined, not
        re-encoded) unless mj is None. Without them, the instance that began the
        compaction finishes the one it kept; any other answers invalid_state at
        /messages (_not_kept), and the whole envelope goes."""
        tail = [(b"state", dumps(state))]
        if error is not None:
            tail.append((b"error", dumps(error)))
        else:
            tail.append((b"summary", dumps(summary)))
        if mj is None:
            return _envelope(b"compact.finish", parts + tail)
        return _envelope(b"compact.finish", parts + tail + [(b"messages", mj)])

    def _finish(self, mj: bytes, parts: List[Tuple[bytes, bytes]], state: Any, summary: Optional[str], error: Optional[str]) -> Any:
        """compact.finish, without the messages first (the pool hands back the
        instance that ran begin when no other call took it since)."""
        pool = self._p()
        try:
            return parse_response(pool.call(self._finish_env(None, parts, state, summary, error)))
        except CompactError as e:
            if not _not_kept(e):
                raise
        return parse_response(pool.call(self._finish_env(mj, parts, state, summary, error)))

    async def _afinish(self, mj: bytes, parts: List[Tuple[bytes, bytes]], state: Any, summary: Optional[str], error: Optional[str]) -> Any:
        """_finish from a coroutine."""
        try:
            return await self._arun_env(self._finish_env(None, parts, state, summary, error))
        except CompactError as e:
            if not _not_kept(e):
                raise
        return await self._arun_env(self._finish_env(mj, parts, state, summary, error))

    async def _arun_env(self, env: bytes) -> Any:
        """Run an envelope from a coroutine: big requests in the loop's default
        executor (wasmtime releases the GIL while wasm runs), so the event loop stays
        responsive; small ones inline, where a thread hop would cost more."""
        pool = self._p()
        if len(env) >= OFFLOAD_BYTES:
            import asyncio  # not at module level: it costs start-up time for sync users

            loop = asyncio.get_running_loop()
            out = await loop.run_in_executor(None, pool.call, env)
        else:
            out = pool.call(env)
        return parse_response(out)

    def compact(
        self,
        messages: Sequence[Message],
        summarize: Optional[SyncSummarizer] = None,
        force: bool = False,
        prompt_tokens: Optional[int] = None,
        *,
        config: Optional[Config] = None,
        system: Any = None,
        format: Optional[str] = None,
    ) -> CompactResult:
        """Compact messages if they are over the threshold (or ``force``).

        ``summarize(request) -> str`` is called at most once, with the summary
        request, when the middle of the conversation must be summarized; without it
        the core's deterministic extractive summarizer is used. If it raises or
        returns an empty string, the deterministic summary is used instead and
        ``report["fallback_used"]`` is true. ``prompt_tokens`` is the API-reported
        prompt size of the last response, preferred over the estimate. For the
        Anthropic Messages layout pass the top-level ``system`` (and ``format=
        "anthropic"``, else detected): the result's ``system`` carries the note.
        """
        msgs, mj, parts, env = self._begin_env(messages, config, force, prompt_tokens, summarize is not None, system, format)
        r = parse_response(self._p().call(env))
        if r.get("done"):
            return _result(msgs, r)
        summary, error = _run_sync_summarizer(summarize, r["summary_request"])
        return _result(msgs, self._finish(mj, parts, r["state"], summary, error))

    async def acompact(
        self,
        messages: Sequence[Message],
        summarize: Union[AsyncSummarizer, SyncSummarizer, None] = None,
        force: bool = False,
        prompt_tokens: Optional[int] = None,
        *,
        config: Optional[Config] = None,
        system: Any = None,
        format: Optional[str] = None,
    ) -> CompactResult:
        """``compact`` for an async summarizer (``async def summarize(request) ->
        str``; a plain function works too). The wasm work of a request of
        ``OFFLOAD_BYTES`` (256 KiB) or more runs in the event loop's default executor
        so the loop stays responsive; smaller ones run inline. No instance is held
        while the summarizer is awaited."""
        msgs, mj, parts, env = self._begin_env(messages, config, force, prompt_tokens, summarize is not None, system, format)
        r = await self._arun_env(env)
        if r.get("done"):
            return _result(msgs, r)
        request = r["summary_request"]
        summary: Optional[str] = None
        error: Optional[str] = None
        try:
            out: Any = summarize(request)  # type: ignore[misc]
            if _isawaitable(out):
                out = await out
            summary, error = _check_summary(out)
        except Exception as e:  # the fallback covers any summarizer failure
            error = _describe(e)
        return _result(msgs, await self._afinish(mj, parts, r["state"], summary, error))


def _isawaitable(x: Any) -> bool:
    # inspect.isawaitable without importing inspect (it costs ~25 ms at start-up).
    return hasattr(type(x), "__await__") or type(x).__name__ == "generator" and bool(
        getattr(getattr(x, "gi_code", None), "co_flags", 0) & 0x100
    )


def _result(msgs: List[Message], r: Dict[str, Any]) -> CompactResult:
    resolve_refs(msgs, r)
    return CompactResult(
        messages=r["messages"],
        report=cast(CompactReport, r.get("report") or {}),
        archived=cast(List[ArchivedMessage], r.get("archived") or []),
        system=r.get("system"),
    )


def _describe(e: BaseException) -> str:
    text = str(e)
    return f"summarizer raised {type(e).__name__}: {text}" if text else f"summarizer raised {type(e).__name__}"


def _check_summary(out: Any) -> Tuple[Optional[str], Optional[str]]:
    if not isinstance(out, str):
        return None, f"summarizer returned {type(out).__name__}, not str"
    if not out.strip():
        return None, "summarizer returned an empty summary"
    return out, None


def _run_sync_summarizer(summarize: Optional[SyncSummarizer], request: SummaryRequest) -> Tuple[Optional[str], Optional[str]]:
    if summarize is None:  # pragma: no cover - the core only asks when summarizer is "host"
        return None, "no summarizer was given"
    try:
        out = summarize(request)
    except Exception as e:
        return None, _describe(e)
    if _isawaitable(out):
        close = getattr(out, "close", None)
        if close is not None:
            close()  # do not leak a never-awaited coroutine warning
        raise TypeError("ctxcompact: summarize returned an awaitable; use `await compactor.acompact(...)`")
    return _check_summary(out)
