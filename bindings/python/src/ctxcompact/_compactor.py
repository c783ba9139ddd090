"""Compactor: the idiomatic API over the wire contract (docs/OPS.md)."""

from __future__ import annotations

import contextvars
import itertools
import json
import os
import sys
import threading
import time
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    List,
    NoReturn,
    Optional,
    Sequence,
    Tuple,
    Union,
    cast,
)

from ._check import (
    check_bool,
    check_callable,
    check_int,
    check_opt_int,
    check_opt_str,
    check_timeout,
    reject_unknown,
    unencodable_error,
)
from ._errors import CompactError, ErrBadBinary, ErrClosed, OptionError
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
    Format,
    CompactReport,
    CompactResult,
    Config,
    HygieneResult,
    InfoResult,
    Message,
    NativeDecision,
    NativePrepared,
    NativeObservation,
    NativeRoute,
    NativeSession,
    NativeTrimReplace,
    NativeTrimResult,
    PruneResult,
    SanitizeResult,
    ShouldCompressResult,
    SummaryRequest,
    ThresholdResult,
    TokenCountResult,
    ValidateResult,
)

__all__ = ["Compactor", "SyncSummarizer", "AsyncSummarizer", "DEFAULT_TIMEOUT", "SummaryTimeout", "summary_time_left"]

#: A summarizer gets the summary request (send ``request["messages"]`` to an LLM
#: with ``request["max_tokens"]``) and returns the summary text.
SyncSummarizer = Callable[[SummaryRequest], str]
AsyncSummarizer = Callable[[SummaryRequest], Awaitable[str]]

# One encoder for every request: compact separators, NaN refused (not JSON).
# ensure_ascii=True and no circular check are the fastest settings of the C encoder
# (3.1 vs 5.7 ms/MB on the shared traces). Non-ASCII text goes as \uXXXX escapes:
# the core reads an escape as the character it stands for (token counts, truncation,
# the state fingerprint), so results equal those of raw UTF-8 input; a test checks
# it. A circular structure raises RecursionError instead of ValueError; on any
# failure _check.find_unencodable walks the value for the pointer of the bad part.
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

#: Seconds a summarizer may take before the compaction falls back to the
#: extractive summary (the CLI's 2 minutes); ``timeout=None`` waits forever.
DEFAULT_TIMEOUT = 120.0

#: The summary or the finish error the host sends: (summary, None) or (None, error)
#: where error is a string (fallback_code "error") or {"code", "message"}.
_Outcome = Tuple[Optional[str], Any]


def dumps(value: Any) -> bytes:
    """Compact JSON bytes, as sent to the core."""
    return _encode(value).encode("ascii")


def dumps_at(value: Any, code: str, path: str, what: str) -> bytes:
    """dumps, or a CompactError(code) whose path points at the part of value that
    JSON cannot hold (NaN, a cycle, an object, nesting too deep) below path."""
    try:
        return _encode(value).encode("ascii")
    except _ENCODE_ERRORS as e:
        raise unencodable_error(code, what, value, path, e) from e


def _messages_json(messages: Any) -> Tuple[List[Message], bytes]:
    if not isinstance(messages, list):
        if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
            raise CompactError("invalid_messages", "messages must be a list of message dicts", "/messages")
        messages = list(messages)
    return messages, dumps_at(messages, "invalid_messages", "/messages", "messages")


def _config_json(config: Any, path: str = "/config") -> bytes:
    if not isinstance(config, dict):
        raise CompactError("invalid_config", f"config must be a dict, not {type(config).__name__}", path)
    return dumps_at(config, "invalid_config", path, "config")


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


def _raise_error(err: Any) -> NoReturn:
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


#: The default ``max_instance_memory``: 64 MiB, as in JS and the Go host. An
#: instance stays under 20 MiB on conversations of a few MB; past the bound it is
#: dropped after its call (Go's memory in wasm never shrinks).
DEFAULT_MAX_INSTANCE_MEMORY = 64 << 20

_CTOR_OPTIONS = ("config", "cache_dir", "max_instances", "max_instance_memory", "wasm")
def _format_parts(format: Any, system: Any) -> List[Tuple[bytes, bytes]]:
    """The request fields of a call's message format and a format's top-level system."""
    parts: List[Tuple[bytes, bytes]] = []
    fmt = check_opt_str("format", format)
    if fmt is not None:
        parts.append((b"format", dumps(fmt)))
    if system is not None:
        parts.append((b"system", dumps_at(system, "invalid_messages", "/system", "system")))
    return parts


def _native_parts(route: Any, session: Any) -> List[Tuple[bytes, bytes]]:
    """The route and session fields of a native.* request (None: left out)."""
    parts: List[Tuple[bytes, bytes]] = []
    for key, v in ((b"route", route), (b"session", session)):
        if v is None:
            continue
        name = key.decode()
        if not isinstance(v, dict):
            raise OptionError(f"{name} must be a dict or None, not {type(v).__name__}", "/" + name)
        parts.append((key, dumps_at(v, "invalid_request", "/" + name, name)))
    return parts


def _native_ask(tokens: Optional[int], manual: bool) -> List[Tuple[bytes, bytes]]:
    """The tokens and manual parts of native.policy and native.prepare (checked)."""
    parts: List[Tuple[bytes, bytes]] = []
    t = check_opt_int("tokens", tokens)
    if t is not None:
        parts.append((b"tokens", dumps(t)))
    if check_bool("manual", manual):
        parts.append((b"manual", b"true"))
    return parts


def _own_trim(msgs: List[Message], r: Dict[str, Any], replaced: bool) -> None:
    """In place: native.trim's kept messages that it did not change become the
    caller's own objects again (the core returns copies), and dropped_messages and
    each rewritten entry's original are the caller's originals."""
    dropped = r.get("dropped") or []
    rewritten = r.setdefault("rewritten", [])
    gone = {d["index"] for d in dropped}
    changed = {w["index"] for w in rewritten}
    kept = [i for i in range(len(msgs)) if i not in gone]
    out = r["messages"]
    # With replace, the swapped-in message leads (unless a newer block dropped it).
    offset = len(out) - len(kept)
    if offset in (0, 1) and (offset == 0 or replaced):
        for k, i in enumerate(kept):
            if i not in changed:
                out[k + offset] = msgs[i]
    r["dropped_messages"] = [msgs[d["index"]] for d in dropped]
    for w in rewritten:
        w["original"] = msgs[w["index"]]


_COMPACT_OPTIONS = ("messages", "summarize", "force", "prompt_tokens", "config", "system", "format", "focus", "pins", "range",
                    "timeout")
#: At most this many merged per-call configs are remembered per Compactor.
_MERGE_MEMO = 64


class Compactor:
    """Runs the ctxcompact core (Go compiled to WebAssembly) on wasmtime.

    ``Compactor(config)`` loads the module once per process: the compiled code is
    cached on disk (``cache_dir``: default ``$CTXCOMPACT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/ctxcompact`` or ``~/.cache/ctxcompact``; ``False`` disables
    it), so only the first start on a machine pays the compile. The config is
    validated here (an ``invalid_config`` CompactError at ``/config/...``), not at
    the first call.

    Options are checked, never coerced: an unknown keyword or an option of the
    wrong type raises ``OptionError`` (a CompactError with code
    ``invalid_request`` and the option's path, e.g. ``/force``; also a TypeError).

    A ``config=`` passed to one call is merged over the Compactor's config by the
    core's ``config.merge`` (per section, key by key; a map such as
    ``model_thresholds`` replaces as a whole).

    Thread safety: a Compactor may be shared by threads. It keeps a small pool of
    wasm instances (``max_instances``, default min(4, CPUs)); each call takes one
    instance for its duration, so up to ``max_instances`` calls run in parallel
    (wasmtime releases the GIL while wasm runs) and further callers wait. Between
    ``compact.begin`` and ``compact.finish`` (while your summarizer runs) no
    instance is held. A call whose instance traps fails with ``CompactError``
    ``internal``; that instance is discarded and the next call gets a fresh one
    (the input that trapped is not retried). An instance whose linear memory grew
    past ``max_instance_memory`` bytes (default 64 MiB, as in JS and Go; None: no limit) is dropped
    after its call, so one huge request does not pin its memory for the life of
    the process.
    """

    def __init__(
        self,
        config: Optional[Config] = None,
        *,
        cache_dir: CacheDir = None,
        max_instances: Optional[int] = None,
        max_instance_memory: Optional[int] = DEFAULT_MAX_INSTANCE_MEMORY,
        wasm: Union[None, bytes, str, "os.PathLike[str]"] = None,
        **unknown: NoReturn,
    ) -> None:
        reject_unknown("Compactor", unknown, _CTOR_OPTIONS)
        max_instances = check_opt_int("max_instances", max_instances)
        max_instance_memory = check_opt_int("max_instance_memory", max_instance_memory)
        if max_instances is not None and max_instances < 1:
            raise OptionError("max_instances must be at least 1", "/max_instances")
        if config is not None:
            _config_json(config)  # a bad type fails before the module is loaded
        if wasm is None:
            source = packaged_source()
        elif isinstance(wasm, (bytes, bytearray, memoryview)):
            source = WasmSource.from_bytes(bytes(wasm))
        else:
            try:
                with open(wasm, "rb") as f:
                    source = WasmSource.from_bytes(f.read())
            except OSError as e:  # as in JS: no module is a bad module
                raise ErrBadBinary(f"cannot read the module at {os.fspath(wasm)}: {e.strerror or e}", e) from e
        if max_instances is None:
            max_instances = max(1, min(4, os.cpu_count() or 1))
        self._loaded: LoadedModule = load_module(source, resolve_cache_dir(cache_dir))
        self._pool: Optional[Pool] = Pool(self._loaded, max_instances, max_instance_memory)
        self._config: Config = {}
        self._config_json = b"{}"
        self._merged: Dict[bytes, bytes] = {}
        try:
            self.config = config if config is not None else {}
        except BaseException:
            self.close()  # a bad config: do not keep the instances
            raise

    # -- configuration and lifecycle --------------------------------------------------

    @property
    def config(self) -> Config:
        """The default config of every op. Setting it validates it in the core
        (``invalid_config`` at ``/config/...``) and serializes a copy."""
        return self._config

    @config.setter
    def config(self, value: Config) -> None:
        cj = _config_json(value)
        if cj != b"{}":
            self._validate_config(cj)
        self._config_json = cj
        self._merged = {}
        self._config = value

    def _validate_config(self, cj: bytes) -> None:
        """config.merge with the config alone validates it (errors at /config/...).
        A module without config.merge: threshold.resolve parses it as fully."""
        try:
            self._run(b"config.merge", [(b"config", cj)])
        except CompactError as e:
            if e.code != "unknown_op":
                raise
            self._run(b"threshold.resolve", [(b"config", cj)])

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
        """The config JSON of one call: the Compactor's, or the call's merged over
        it by the core (config.merge; errors at /config/..., the call's own keys).
        Merges are remembered per (call config) until the Compactor's config
        changes."""
        if config is None:
            return self._config_json
        cj = _config_json(config)
        base = self._config_json
        if base == b"{}" or cj == b"{}":
            # Nothing to merge: the op validates the call's config itself.
            return cj if base == b"{}" else base
        merged = self._merged.get(cj)
        if merged is None:
            r = self._run(b"config.merge", [(b"base", base), (b"config", cj)])
            merged = dumps(r["config"])
            if len(self._merged) >= _MERGE_MEMO:
                self._merged = {}
            self._merged[cj] = merged
        return merged

    def merge_config(self, config: Optional[Config] = None) -> Config:
        """The config a call with ``config=config`` uses: config.merge of it over
        the Compactor's config (validated)."""
        cj = self._cfg(config)
        return cast(Config, _loads(cj))

    # -- raw calls -----------------------------------------------------------------------

    def call_bytes(self, envelope: bytes) -> bytes:
        """Send a raw request envelope ``{"op": ..., ...}`` (UTF-8 JSON bytes) and
        return the raw response envelope bytes (``{"result": ...}`` or
        ``{"error": ...}``): no parsing either way. An empty envelope is the
        core's ``invalid_json``."""
        return self._p().call(bytes(envelope))

    def call(self, op: str, params: Optional[Dict[str, Any]] = None) -> Any:
        """Run any op with params as given (no defaults added) and return its result,
        or raise CompactError. ``call("info")`` lists the ops this module has."""
        env = dict(params or {})
        env["op"] = op
        return parse_response(self._p().call(dumps_at(env, "invalid_request", "", "params")))

    def _run(self, op: bytes, parts: Sequence[Tuple[bytes, bytes]]) -> Any:
        return parse_response(self._p().call(_envelope(op, parts)))

    # -- pure ops ------------------------------------------------------------------------

    def info(self, **unknown: NoReturn) -> InfoResult:
        reject_unknown("info", unknown, ())
        return cast(InfoResult, self._run(b"info", ()))

    def resolve_threshold(self, config: Optional[Config] = None, **unknown: NoReturn) -> ThresholdResult:
        """threshold.resolve: the effective fraction, threshold_tokens, budgets and
        which rule decided them."""
        reject_unknown("resolve_threshold", unknown, ("config",))
        return cast(ThresholdResult, self._run(b"threshold.resolve", [(b"config", self._cfg(config))]))

    def should_compress(
        self,
        prompt_tokens: int,
        *,
        last_compaction_tokens: Optional[int] = None,
        config: Optional[Config] = None,
        **unknown: NoReturn,
    ) -> ShouldCompressResult:
        """should_compress: ``prompt_tokens >= threshold_tokens``, with the breaker:
        pass the tokens_after of a compaction that did not fit as
        ``last_compaction_tokens`` so a repeated trigger does not loop."""
        reject_unknown("should_compress", unknown, ("prompt_tokens", "last_compaction_tokens", "config"))
        parts = [(b"config", self._cfg(config)), (b"prompt_tokens", dumps(check_int("prompt_tokens", prompt_tokens)))]
        lct = check_opt_int("last_compaction_tokens", last_compaction_tokens)
        if lct is not None:
            parts.append((b"last_compaction_tokens", dumps(lct)))
        return cast(ShouldCompressResult, self._run(b"should_compress", parts))

    def hygiene_check(
        self,
        messages: Sequence[Message],
        prompt_tokens: Optional[int] = None,
        *,
        config: Optional[Config] = None,
        **unknown: NoReturn,
    ) -> HygieneResult:
        """hygiene.check: the gateway safety net (85% of the window by default)."""
        reject_unknown("hygiene_check", unknown, ("messages", "prompt_tokens", "config"))
        pt = check_opt_int("prompt_tokens", prompt_tokens)
        _, mj = _messages_json(messages)
        parts = [(b"config", self._cfg(config)), (b"messages", mj)]
        if pt is not None:
            parts.append((b"prompt_tokens", dumps(pt)))
        return cast(HygieneResult, self._run(b"hygiene.check", parts))

    def count_tokens(
        self,
        messages: Sequence[Message],
        encoding: Optional[str] = None,
        *,
        config: Optional[Config] = None,
        format: Optional[Format] = None,
        system: Any = None,
        **unknown: NoReturn,
    ) -> TokenCountResult:
        """tokens.count: total and per-message token counts."""
        reject_unknown("count_tokens", unknown, ("messages", "encoding", "config", "format", "system"))
        enc = check_opt_str("encoding", encoding)
        _, mj = _messages_json(messages)
        parts = [(b"config", self._cfg(config)), (b"messages", mj)] + _format_parts(format, system)
        if enc is not None:
            parts.append((b"encoding", dumps(enc)))
        return cast(TokenCountResult, self._run(b"tokens.count", parts))

    def prune(
        self,
        messages: Sequence[Message],
        *,
        config: Optional[Config] = None,
        format: Optional[Format] = None,
        system: Any = None,
        **unknown: NoReturn,
    ) -> PruneResult:
        """prune: old tool outputs become placeholders. Unchanged messages in the
        result are your own objects; ``archived`` holds the originals of pruned ones."""
        reject_unknown("prune", unknown, ("messages", "config", "format", "system"))
        msgs, mj = _messages_json(messages)
        parts = [(b"output", b'"refs"'), (b"config", self._cfg(config))] + _format_parts(format, system)
        r = self._run(b"prune", parts + [(b"messages", mj)])
        resolve_refs(msgs, r)
        return cast(PruneResult, r)

    def sanitize(
        self, messages: Sequence[Message], *, format: Optional[Format] = None, **unknown: NoReturn
    ) -> SanitizeResult:
        """sanitize: drop tool results whose call is gone, stub calls whose result is
        gone."""
        reject_unknown("sanitize", unknown, ("messages", "format"))
        msgs, mj = _messages_json(messages)
        r = self._run(b"sanitize", [(b"output", b'"refs"')] + _format_parts(format, None) + [(b"messages", mj)])
        resolve_refs(msgs, r)
        return cast(SanitizeResult, r)

    def validate(
        self,
        messages: Sequence[Message],
        *,
        format: Optional[Format] = None,
        provider: Optional[str] = None,
        config: Optional[Config] = None,
        **unknown: NoReturn,
    ) -> ValidateResult:
        """validate: problems with a message list (never raises for bad messages).
        ``provider`` ("anthropic", "openai", "gemini") names the provider whose rules
        AI SDK messages are checked against (docs/RULES.md); other formats go to their
        own. Without it, the provider the config's ``model.provider`` names (the
        Compactor's, or ``config`` merged over it)."""
        reject_unknown("validate", unknown, ("messages", "format", "provider", "config"))
        parts = _format_parts(format, None)
        prov = check_opt_str("provider", provider)
        if prov is not None:
            parts.append((b"provider", dumps(prov)))
        parts.append((b"config", self._cfg(config)))
        _, mj = _messages_json(messages)
        return cast(ValidateResult, self._run(b"validate", parts + [(b"messages", mj)]))

    # -- prompt caching and calibration (params as in docs/OPS.md) -----------------------

    def _with(self, op: bytes, messages: Optional[Sequence[Message]], params: Dict[str, Any]) -> Any:
        """An op whose params go as they are (the core checks their names and types),
        with the Compactor's config, or the call's ``config`` merged over it."""
        parts: List[Tuple[bytes, bytes]] = [(b"config", self._cfg(params.pop("config", None)))]
        for k, v in params.items():
            if v is not None:
                parts.append((k.encode("utf-8"), dumps_at(v, "invalid_request", "/" + k, k)))
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
        params["prompt_tokens"] = check_int("prompt_tokens", prompt_tokens)
        return cast(Dict[str, Any], self._with(b"tokens.calibrate", messages, params))

    # -- provider-native compaction (native.*) ------------------------------------------

    def native_policy(
        self,
        *,
        route: Optional[NativeRoute] = None,
        session: Optional[NativeSession] = None,
        tokens: Optional[int] = None,
        manual: bool = False,
        config: Optional[Config] = None,
        **unknown: NoReturn,
    ) -> NativeDecision:
        """native.policy: what the next request to ``route`` should carry for
        provider-native compaction (OpenAI ``context_management``, an Anthropic
        compaction edit or beta, the app-server's initiator) and why, for the
        model of the config (``config`` merged over the Compactor's). ``session``
        is the one the last native op returned (None: a fresh one); ``tokens`` is
        the prompt's current size, ``manual`` a user's "compact now". Keep the
        returned ``session``."""
        reject_unknown("native_policy", unknown, ("route", "session", "tokens", "manual", "config"))
        parts = [(b"config", self._cfg(config))] + _native_parts(route, session) + _native_ask(tokens, manual)
        return cast(NativeDecision, self._run(b"native.policy", parts))

    def native_prepare(
        self,
        body: Dict[str, Any],
        *,
        route: Optional[NativeRoute] = None,
        session: Optional[NativeSession] = None,
        tokens: Optional[int] = None,
        manual: bool = False,
        config: Optional[Config] = None,
        **unknown: NoReturn,
    ) -> NativePrepared:
        """native.prepare: native_policy's decision applied to the request body
        about to be sent: OpenAI's field set (or removed where it must not go),
        Anthropic's compaction edit merged into the body's own edits, the body's
        ``input`` or ``messages`` trimmed (``trimmed`` lists what was left out, for
        archiving), and the body of an on-demand compaction due now
        (``compaction_body``). The result's body is a new dict (copies)."""
        reject_unknown("native_prepare", unknown, ("body", "route", "session", "tokens", "manual", "config"))
        if not isinstance(body, dict):
            raise OptionError(f"body must be a dict, not {type(body).__name__}", "/body")
        parts = [(b"config", self._cfg(config))] + _native_parts(route, session) + _native_ask(tokens, manual)
        parts.append((b"body", dumps_at(body, "invalid_request", "/body", "body")))
        return cast(NativePrepared, self._run(b"native.prepare", parts))

    def native_observe(
        self,
        *,
        route: Optional[NativeRoute] = None,
        session: Optional[NativeSession] = None,
        response: Optional[Dict[str, Any]] = None,
        error: Optional[Dict[str, Any]] = None,
        event: Optional[Dict[str, Any]] = None,
        messages_count: Optional[int] = None,
        config: Optional[Config] = None,
        **unknown: NoReturn,
    ) -> NativeObservation:
        """native.observe: the next session after exactly one of ``response`` (the
        provider's response object, as JSON: compaction items are recorded with
        their issuer), ``error`` (``{"status": int, "body": object or str}``: a
        rejection of the field disables it for the session and says to retry) or
        ``event`` (an app-server JSON-RPC message ``{"method", "params"}``;
        ``messages_count`` is recorded as the boundary of a completed compaction)."""
        reject_unknown("native_observe", unknown,
                       ("route", "session", "response", "error", "event", "messages_count", "config"))
        given = [(k, v) for k, v in (("response", response), ("error", error), ("event", event)) if v is not None]
        if len(given) != 1:
            names = ", ".join(k for k, _ in given) or "none"
            raise OptionError(f"native_observe takes exactly one of response, error, event (got {names})",
                              "/" + (given[1][0] if len(given) > 1 else "response"))
        key, value = given[0]
        if not isinstance(value, dict):
            raise OptionError(f"{key} must be a dict, not {type(value).__name__}", "/" + key)
        parts = [(b"config", self._cfg(config))] + _native_parts(route, session)
        parts.append((key.encode("ascii"), dumps_at(value, "invalid_request", "/" + key, key)))
        mc = check_opt_int("messages_count", messages_count)
        if mc is not None:
            parts.append((b"messages_count", dumps(mc)))
        return cast(NativeObservation, self._run(b"native.observe", parts))

    def native_trim(
        self,
        messages: Sequence[Message],
        *,
        format: Optional[Format] = None,
        session: Optional[NativeSession] = None,
        route: Optional[NativeRoute] = None,
        drop_before_newest: Optional[bool] = None,
        replace: Optional[NativeTrimReplace] = None,
        **unknown: NoReturn,
    ) -> NativeTrimResult:
        """native.trim: the messages to send around provider-native compaction
        items. ``replace`` (``{"count", "message"}``) first swaps messages[0:count]
        for message (Anthropic on-demand compaction); items recorded in
        ``session`` from another issuer than ``route``'s are removed; with
        ``drop_before_newest`` (the core's default: True) what precedes the newest
        compaction item is dropped. Every input index is kept or in ``dropped``;
        ``dropped_messages`` are the dropped originals (archive them)."""
        reject_unknown("native_trim", unknown,
                       ("messages", "format", "session", "route", "drop_before_newest", "replace"))
        msgs, mj = _messages_json(messages)
        parts = _format_parts(format, None) + _native_parts(route, session)
        if drop_before_newest is not None:
            parts.append((b"drop_before_newest", b"true" if check_bool("drop_before_newest", drop_before_newest)
                           else b"false"))
        if replace is not None:
            if not isinstance(replace, dict):
                raise OptionError(f"replace must be a dict, not {type(replace).__name__}", "/replace")
            parts.append((b"replace", dumps_at(replace, "invalid_request", "/replace", "replace")))
        r = self._run(b"native.trim", parts + [(b"messages", mj)])
        _own_trim(msgs, r, replace is not None)
        return cast(NativeTrimResult, r)

    # -- compaction ------------------------------------------------------------------------

    def _begin(
        self,
        messages: Sequence[Message],
        summarize: Any,
        force: Any,
        prompt_tokens: Any,
        config_json: bytes,
        system: Any,
        format: Any,
        timeout: Any,
        archive_id: Optional[str] = None,
        focus: Any = None,
        pins: Any = None,
        span: Any = None,
    ) -> Tuple[List[Message], bytes, List[Tuple[bytes, bytes]], bytes, Optional[float]]:
        """Check the options (no coercion) and build the compact.begin envelope:
        (messages, their JSON, the params shared by begin and finish, the begin
        envelope, the timeout in seconds)."""
        check_callable("summarize", summarize)
        force = check_bool("force", force)
        pt = check_opt_int("prompt_tokens", prompt_tokens)
        fmt = check_opt_str("format", format)
        foc = check_opt_str("focus", focus)
        to = check_timeout("timeout", timeout)
        msgs, mj = _messages_json(messages)
        host = summarize is not None
        parts = [
            (b"output", b'"refs"'),
            (b"summarizer", b'"host"' if host else b'"builtin"'),
            (b"config", config_json),
        ]
        if force:
            parts.append((b"force", b"true"))
        if pt is not None:
            parts.append((b"prompt_tokens", dumps(pt)))
        if system is not None:
            parts.append((b"system", dumps_at(system, "invalid_messages", "/system", "system")))
        if fmt is not None:
            parts.append((b"format", dumps(fmt)))
        if foc is not None:
            parts.append((b"focus", dumps(foc)))
        pin_field = pins_field(pins)
        if pin_field is not None:
            parts.append(pin_field)
        span_field = range_field(span)
        if span_field is not None:
            parts.append(span_field)
        if archive_id is not None:  # lossless recall: the summary names its range
            parts.append((b"archive_id", dumps(archive_id)))
        if host:  # finish may then leave out the messages (see _finish_env)
            parts.append((b"ticket", _new_ticket()))
        return msgs, mj, parts, _envelope(b"compact.begin", parts + [(b"messages", mj)]), to

    @staticmethod
    def _finish_env(mj: Optional[bytes], parts: List[Tuple[bytes, bytes]], state: Any, outcome: _Outcome) -> bytes:
        """The finish envelope: the same params as begin (its ticket among them), plus
        state and summary or error, and the same messages bytes (joined, not
        re-encoded) unless mj is None. Without them, the instance that began the
        compaction finishes the one it kept; any other answers invalid_state at
        /messages (_not_kept), and the whole envelope goes."""
        summary, error = outcome
        tail = [(b"state", dumps(state))]
        if error is not None:
            tail.append((b"error", dumps(error)))
        else:
            tail.append((b"summary", dumps(summary)))
        if mj is None:
            return _envelope(b"compact.finish", parts + tail)
        return _envelope(b"compact.finish", parts + tail + [(b"messages", mj)])

    def _finish(self, mj: bytes, parts: List[Tuple[bytes, bytes]], state: Any, outcome: _Outcome) -> Any:
        """compact.finish, without the messages first (the pool hands back the
        instance that ran begin when no other call took it since)."""
        pool = self._p()
        try:
            return parse_response(pool.call(self._finish_env(None, parts, state, outcome)))
        except CompactError as e:
            if not _not_kept(e):
                raise
        return parse_response(pool.call(self._finish_env(mj, parts, state, outcome)))

    async def _afinish(self, mj: bytes, parts: List[Tuple[bytes, bytes]], state: Any, outcome: _Outcome) -> Any:
        """_finish from a coroutine."""
        try:
            return await self._arun_env(self._finish_env(None, parts, state, outcome))
        except CompactError as e:
            if not _not_kept(e):
                raise
        return await self._arun_env(self._finish_env(mj, parts, state, outcome))

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
        format: Optional[Format] = None,
        focus: Optional[str] = None,
        pins: Optional[Sequence[Union[int, str]]] = None,
        range: Optional[Dict[str, int]] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        **unknown: NoReturn,
    ) -> CompactResult:
        """Compact messages if they are over the threshold (or ``force``).

        ``summarize(request) -> str`` is called at most once, with the summary
        request, when the middle of the conversation must be summarized; without it
        the core's deterministic extractive summarizer is used. If it raises,
        returns an empty string or not a string, or does not answer within
        ``timeout`` seconds (default 120; None: wait forever), the deterministic
        summary is used instead: ``report["fallback_used"]`` is true and
        ``report["fallback_code"]`` says why (``timeout``, ``error``, ``empty``,
        ``cancelled``, ``too_long``). With a timeout the summarizer runs in a
        worker thread (a daemon thread, with a copy of the caller's contextvars);
        one that hangs is abandoned, not stopped: Python cannot kill a thread, so
        it keeps whatever it holds until it returns. ``timeout=None`` runs it in
        the calling thread. A summarizer that returns an awaitable (an ``async
        def``, or one over an async SDK client) raises OptionError at /summarize:
        use ``acompact``.

        ``prompt_tokens`` is the API-reported prompt size of the last response,
        preferred over the estimate. ``config`` is merged over the Compactor's. For
        the Anthropic Messages layout pass the top-level ``system`` (and ``format=
        "anthropic"``, else detected): the result's ``system`` carries the note.
        ``focus`` is what to keep in detail (at most 1,000 bytes): the summary
        request asks for it, and the builtin summary and the facts index put what
        matches it first (docs/STEERING.md). ``pins`` (message indexes and tool
        call ids) are kept verbatim, never summarized or pruned (docs/STEERING.md
        "Pins"). ``range`` (``{"from": i, "to": j}``) summarizes exactly those
        messages, whatever the trigger (a range compaction).
        """
        reject_unknown("compact", unknown, _COMPACT_OPTIONS)
        return self._compact(messages, summarize, force, prompt_tokens, self._cfg(config), system, format, timeout,
                             focus=focus, pins=pins, span=range)

    def _compact(
        self,
        messages: Sequence[Message],
        summarize: Any,
        force: Any,
        prompt_tokens: Any,
        config_json: bytes,
        system: Any = None,
        format: Any = None,
        timeout: Any = DEFAULT_TIMEOUT,
        archive_id: Optional[str] = None,
        focus: Any = None,
        pins: Any = None,
        span: Any = None,
    ) -> CompactResult:
        """compact with the config JSON as given (the engine passes its state's, and
        in lossless mode the ``archive_id`` of compact.begin/finish)."""
        msgs, mj, parts, env, to = self._begin(
            messages, summarize, force, prompt_tokens, config_json, system, format, timeout, archive_id, focus, pins, span
        )
        r = parse_response(self._p().call(env))
        if r.get("done"):
            return _result(msgs, r)
        outcome = _run_sync_summarizer(summarize, r["summary_request"], to)
        return _result(msgs, self._finish(mj, parts, r["state"], outcome))

    async def acompact(
        self,
        messages: Sequence[Message],
        summarize: Union[AsyncSummarizer, SyncSummarizer, None] = None,
        force: bool = False,
        prompt_tokens: Optional[int] = None,
        *,
        config: Optional[Config] = None,
        system: Any = None,
        format: Optional[Format] = None,
        focus: Optional[str] = None,
        pins: Optional[Sequence[Union[int, str]]] = None,
        range: Optional[Dict[str, int]] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        **unknown: NoReturn,
    ) -> CompactResult:
        """``compact`` for an async summarizer (``async def summarize(request) ->
        str``); a plain function works too and runs in a worker thread, as in
        ``compact``. The summarizer is awaited as its own task for at most
        ``timeout`` seconds; then it is cancelled and the extractive summary used
        (``fallback_code`` "timeout"). A summarizer that raises CancelledError
        while this call is not cancelled gives ``fallback_code`` "cancelled".
        Cancelling the task that awaits ``acompact`` cancels the summarizer and
        raises CancelledError here: no compaction is finished.

        The wasm work of a request of ``OFFLOAD_BYTES`` (256 KiB) or more runs in
        the event loop's default executor so the loop stays responsive; smaller
        ones run inline. No instance is held while the summarizer is awaited."""
        reject_unknown("acompact", unknown, _COMPACT_OPTIONS)
        msgs, mj, parts, env, to = self._begin(
            messages, summarize, force, prompt_tokens, self._cfg(config), system, format, timeout, focus=focus, pins=pins, span=range
        )
        r = await self._arun_env(env)
        if r.get("done"):
            return _result(msgs, r)
        outcome = await _run_async_summarizer(summarize, r["summary_request"], to)
        return _result(msgs, await self._afinish(mj, parts, r["state"], outcome))


def pins_field(pins: Any) -> Optional[Tuple[bytes, bytes]]:
    """The pins param of a compaction (None for none), checked: message indexes
    (ints, not bools) and tool call ids (non-empty strings)."""
    if pins is None:
        return None
    if isinstance(pins, (str, bytes)) or not isinstance(pins, (list, tuple)) or not all(
        (type(p) is int and p >= 0) or (isinstance(p, str) and p) for p in pins
    ):
        raise OptionError(f"pins must be a list of message indexes and tool call ids, not {pins!r}", "/pins")
    return (b"pins", dumps(list(pins)))


def range_field(span: Any) -> Optional[Tuple[bytes, bytes]]:
    """The range param of a range compaction (None for none): ``{"from": i,
    "to": j}``, checked by the core."""
    if span is None:
        return None
    if not isinstance(span, dict):
        raise OptionError(f'range must be {{"from": i, "to": j}}, not {span!r}', "/range")
    return (b"range", dumps(span))


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


# --- summarizer outcomes ------------------------------------------------------------------


class SummaryTimeout(TimeoutError):
    """Raised by a summarizer whose LLM call timed out (the ready summarizers raise
    it when the SDK's per-request timeout expires: the compaction's time left, or
    the client's own shorter one): the fallback_code is "timeout", as when the
    compaction stops waiting itself, not "error". Any TimeoutError a summarizer
    raises counts the same, as a TimeoutError does in JS."""


#: The time.monotonic() deadline of the summarizer running in this context (None:
#: no timeout). Set around each summarizer call; worker threads and asyncio tasks
#: get it with their copy of the caller's contextvars.
_deadline: "contextvars.ContextVar[Optional[float]]" = contextvars.ContextVar("ctxcompact_summary_deadline", default=None)


def summary_time_left() -> Optional[float]:
    """Seconds left for the summarizer running in this context before the
    compaction falls back (may be <= 0 once passed); None when it has no timeout
    or when called outside a summarizer. A summarizer passes it on as its LLM
    call's timeout."""
    d = _deadline.get()
    return None if d is None else d - time.monotonic()


def _describe(e: BaseException) -> str:
    text = str(e)
    return f"summarizer raised {type(e).__name__}: {text}" if text else f"summarizer raised {type(e).__name__}"


def _is_cancel(e: BaseException) -> bool:
    """asyncio.CancelledError or concurrent.futures.CancelledError (looked up only
    if loaded: a summarizer that raised one has imported its module)."""
    for name in ("asyncio", "concurrent.futures"):
        mod = sys.modules.get(name)
        if mod is not None and isinstance(e, mod.CancelledError):
            return True
    return False


def _raised(e: BaseException) -> _Outcome:
    """The finish error for a summarizer that raised e; KeyboardInterrupt,
    SystemExit and the like are not summarizer failures and propagate."""
    if _is_cancel(e):
        return None, {"code": "cancelled", "message": _describe(e)}
    if isinstance(e, TimeoutError):  # SummaryTimeout, socket timeouts, asyncio's (3.11+)
        return None, {"code": "timeout", "message": _describe(e)}
    if isinstance(e, Exception):
        return None, _describe(e)
    raise e


def _timed_out(timeout: float) -> _Outcome:
    ms = timeout * 1000
    n = f"{int(ms)}" if ms == int(ms) else f"{ms:g}"
    return None, {"code": "timeout", "message": f"the summarizer did not answer within {n} ms"}


def _check_summary(out: Any) -> _Outcome:
    """A summary goes to the core as it is, even when empty (the core's
    fallback_code "empty" then); anything but a str is the summarizer's error."""
    if not isinstance(out, str):
        return None, f"summarizer returned {type(out).__name__}, not str"
    return out, None


class _Job:
    """One summarizer call for a worker thread: fn(arg) in ctx, then done(job)."""

    __slots__ = ("fn", "arg", "ctx", "done", "ok", "value")

    def __init__(self, fn: Callable[[Any], Any], arg: Any, done: Callable[["_Job"], None]) -> None:
        import contextvars

        self.fn = fn
        self.arg = arg
        self.ctx = contextvars.copy_context()  # the caller's contextvars
        self.done = done
        self.ok = False
        self.value: Any = None

    def run(self) -> None:
        try:
            self.value = self.ctx.run(self.fn, self.arg)
            self.ok = True
        except BaseException as e:  # handed to the caller
            self.value = e


#: Idle summarizer threads, reused (starting a thread per call costs 0.1-0.2 ms).
#: A thread whose summarizer hangs past its timeout is not idle: it is abandoned
#: until the summarizer returns, then comes back here (at most _MAX_IDLE stay).
_idle: List["_Worker"] = []
_idle_lock = threading.Lock()
_MAX_IDLE = 4


class _Worker:
    __slots__ = ("job", "go")

    def __init__(self) -> None:
        self.job: Optional[_Job] = None
        self.go = threading.Event()
        threading.Thread(target=self._loop, name="ctxcompact-summarizer", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self.go.wait()
            self.go.clear()
            job, self.job = self.job, None
            if job is None:  # pragma: no cover - go is only set with a job
                continue
            job.run()
            # Idle again before the caller hears of it, so its next call (often
            # right away) finds this thread instead of starting one.
            with _idle_lock:
                stay = len(_idle) < _MAX_IDLE
                if stay:
                    _idle.append(self)
            job.done(job)
            if not stay:
                return


def _submit(job: _Job) -> None:
    """Run job on an idle summarizer thread (a new one when none is idle)."""
    with _idle_lock:
        w = _idle.pop() if _idle else None
    if w is None:
        w = _Worker()
    w.job = job
    w.go.set()


def _in_thread(fn: Callable[[Any], Any], arg: Any, timeout: float) -> Optional[Tuple[bool, Any]]:
    """fn(arg) on a summarizer thread (a daemon thread, with a copy of the caller's
    contextvars): (True, result) or (False, exception), or None when it did not
    return within timeout seconds (the thread is abandoned: it runs on until fn
    returns)."""
    finished = threading.Event()
    job = _Job(fn, arg, lambda j: finished.set())
    _submit(job)
    if not finished.wait(timeout):
        return None
    return job.ok, job.value


def _run_sync_summarizer(summarize: Any, request: SummaryRequest, timeout: Optional[float]) -> _Outcome:
    # The deadline is in the context the summarizer runs in (the worker thread's
    # job copies it), for summary_time_left().
    token = _deadline.set(None if timeout is None else time.monotonic() + timeout)
    try:
        return _sync_outcome(summarize, request, timeout)
    finally:
        _deadline.reset(token)


def _sync_outcome(summarize: Any, request: SummaryRequest, timeout: Optional[float]) -> _Outcome:
    if timeout is None:
        try:
            out = summarize(request)
        except BaseException as e:
            return _raised(e)
    else:
        got = _in_thread(summarize, request, timeout)
        if got is None:
            return _timed_out(timeout)
        ok, out = got
        if not ok:
            return _raised(out)
    if _isawaitable(out):
        close = getattr(out, "close", None)
        if close is not None:
            close()  # do not leak a never-awaited coroutine warning
        # A programming error, not an LLM failure: raised, not a fallback.
        raise OptionError(
            "summarize returned an awaitable (an async summarizer, or one over an async SDK client), "
            "which compact() and ContextEngine.compress() cannot await: use `await compactor.acompact(...)` "
            "or a sync summarizer",
            "/summarize",
        )
    return _check_summary(out)


def _is_async_callable(fn: Any) -> bool:
    import inspect  # asyncio has imported it already

    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


async def _run_async_summarizer(summarize: Any, request: SummaryRequest, timeout: Optional[float]) -> _Outcome:
    """Await the summarizer as its own task, at most timeout seconds. A plain
    function runs in a worker thread (when there is a timeout), an awaitable it
    returns is awaited in the loop within what is left of the timeout. The
    deadline is set in the context the task and the thread copy (summary_time_left)."""
    token = _deadline.set(None if timeout is None else time.monotonic() + timeout)
    try:
        return await _async_outcome(summarize, request, timeout)
    finally:
        _deadline.reset(token)


async def _async_outcome(summarize: Any, request: SummaryRequest, timeout: Optional[float]) -> _Outcome:
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    if _is_async_callable(summarize):
        try:
            aw: Any = summarize(request)
        except BaseException as e:
            return _raised(e)
    elif timeout is None:
        try:
            aw = summarize(request)
        except BaseException as e:
            return _raised(e)
        if not _isawaitable(aw):
            return _check_summary(aw)
    else:
        fut: "asyncio.Future[Any]" = loop.create_future()

        def settle(ok: bool, v: Any) -> None:
            if not fut.done():
                if ok:
                    fut.set_result(v)
                else:
                    fut.set_exception(v)

        def done(job: _Job) -> None:
            try:
                loop.call_soon_threadsafe(settle, job.ok, job.value)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        _submit(_Job(summarize, request, done))
        outcome = await _await_for(fut, deadline, timeout)
        if outcome is not None:
            return outcome
        aw = fut.result()
    if not _isawaitable(aw):
        return _check_summary(aw)
    task = asyncio.ensure_future(aw)
    outcome = await _await_for(task, deadline, timeout)
    if outcome is not None:
        return outcome
    return _check_summary(task.result())


async def _await_for(fut: Any, deadline: Optional[float], timeout: Optional[float]) -> Optional[_Outcome]:
    """Wait for fut until deadline. None when it has a result (fut.result() then
    returns it); else the outcome: timeout (fut cancelled), cancelled (fut was
    cancelled by the summarizer itself) or the summarizer's error. When the task
    running this is cancelled (the caller's cancellation), fut is cancelled too
    and CancelledError propagates."""
    import asyncio

    loop = asyncio.get_running_loop()
    left = None if deadline is None else max(0.0, deadline - loop.time())
    try:
        done, _ = await asyncio.wait({fut}, timeout=left)
    except BaseException:
        fut.cancel()
        raise
    if not done:
        fut.cancel()
        assert timeout is not None
        return _timed_out(timeout)
    if fut.cancelled():
        return None, {"code": "cancelled", "message": "the summarizer was cancelled"}
    exc = fut.exception()
    if exc is not None:
        return _raised(exc)
    return None
