"""ContextEngine: the method set of a Hermes-style context engine over ctxcompact.

One effect loop over the core's ``session.run`` (docs/SESSION.md): every sequence
of the engine (compress with the summarizer and the lossless archive, the recall
tools, provider-native compaction, usage, the trigger, the model switch, reset) is
the core's. This class keeps the engine state (one JSON object the core hands back
at the end of every sequence), sends it with each step, performs the effects the
core asks for (the summarizer's call, the recall store's SQL) and copies the
returned status into its fields.
"""

from __future__ import annotations

import copy
import json
import os
import re
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Generator, List, NoReturn, Optional, Sequence, Tuple, Union, cast

from ._check import (
    check_bool,
    check_callable,
    check_int,
    check_opt_int,
    check_opt_str,
    check_str,
    check_timeout,
    reject_unknown,
)
from ._compactor import (
    DEFAULT_TIMEOUT,
    Compactor,
    SyncSummarizer,
    _envelope,
    _messages_json,
    _own_trim,
    _result,
    _run_sync_summarizer,
    dumps,
    dumps_at,
    parse_response,
    pins_field,
    range_field,
)
from ._errors import CompactError, OptionError
from ._types import (
    ArchivedMessage,
    CompactReport,
    Config,
    EngineStatus,
    Message,
    NativeDecision,
    NativeErrorOutcome,
    NativeObservation,
    NativeRequest,
    NativeRoute,
    NativeSession,
    NativeTrimResult,
    RecallRange,
    UsageRecord,
)

if TYPE_CHECKING:  # pragma: no cover
    from ._recall import AnyRecallStore, RecallStore
    from ._recall_postgres import PostgresRecallStore

__all__ = ["ContextEngine", "CompactionEngine"]

_CTOR_OPTIONS = ("config", "summarize", "model", "context_length", "provider", "compactor", "state", "timeout",
                 "store", "session_id")
_COMPRESS_OPTIONS = ("messages", "current_tokens", "focus_topic", "force", "memory_context", "pins", "range")
_MODEL_OPTIONS = ("model", "context_length", "base_url", "api_key", "provider", "api_mode")
# Fields a deep copy shares with (or gets anew, not from) the original.
_SHARED_FIELDS = frozenset(("_lock", "_compactor", "_owns_compactor", "_store", "_store_arg", "_owns_store",
                            "_summarize", "_state", "_status"))


class ContextEngine:
    """A context engine: decides when to compact and compacts (the Hermes engine
    method set; ``CompactionEngine``, the earlier name, is a subclass that only
    keeps the earlier positional order).

    ``ContextEngine(config=None, *, summarize=None, model=None,
    context_length=None, provider=None, compactor=None, state=None,
    timeout=120)``: ``config`` is the ctxcompact config (validated here, by the
    core's ``engine.start``); ``model``, ``context_length`` and ``provider`` fill
    its ``model`` section. ``summarize(request) -> str`` is a synchronous LLM call
    (None: the core's deterministic summarizer), given ``timeout`` seconds per
    compaction (see ``Compactor.compact``). Pass a ``compactor`` to share one (and
    its instances) between engines; its own config is not used (the engine's
    config is in its state). ``state=`` restores a session from the ``state`` of an
    earlier engine (it carries the config, so ``config`` and the model keywords
    may not be given with it).

    ``CompactionEngine`` (the earlier name) is this class with the earlier
    positional order, ``CompactionEngine(summarize, config, **same_keywords)``.

    Lossless recall: with ``{"context": {"engine": "lossless"}}`` in the config,
    every compaction's originals are archived in ``store`` (a ``RecallStore`` or a
    ``PostgresRecallStore``, or a path or store URL to open one, as
    ``ctxcompact.recall.open_store`` reads it; None: a store in memory) under
    ``session_id`` (None: a random id, or the one ``on_session_start`` gives), the
    summary names the archived range (``r1``, ``r2``, ...), and
    ``get_tool_schemas()`` / ``handle_tool_call()`` give the agent ``context_search``
    and ``context_expand``. In ``compressor`` mode (the default) ``store`` and
    ``session_id`` are kept but unused. Every engine also gives
    ``context_status`` and ``compact_now`` (docs/STEERING.md).

    Typical loop (what a host does)::

        engine.update_from_response(response.usage)      # after every LLM call
        if engine.should_compress():                      # before the next turn
            messages = engine.compress(messages)

    The engine is safe to call from several threads (a lock guards its state), but
    like any context engine it describes one session.
    """

    # Hermes engine fields, read directly by hosts: copied from the last status.
    # last_prompt_tokens, last_completion_tokens, last_total_tokens and
    # compression_count are properties over the state (a host may reset them by
    # assignment, as Hermes does); writing the others changes nothing in the core
    # (use update_model) and the next call overwrites them.
    threshold_tokens: int
    context_length: int
    threshold_percent: float
    threshold_rule: str
    model: str
    provider: str
    protect_first_n: int
    protect_last_n: int
    #: the breaker: tokens_after of the last compaction that did not fit, else None
    last_compaction_tokens: Optional[int]

    def __init__(
        self,
        config: Optional[Config] = None,
        *,
        summarize: Optional[SyncSummarizer] = None,
        model: Optional[str] = None,
        context_length: Optional[int] = None,
        provider: Optional[str] = None,
        compactor: Optional[Compactor] = None,
        state: Optional[Dict[str, Any]] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        store: Union[None, str, "os.PathLike[str]", "RecallStore", "PostgresRecallStore"] = None,
        session_id: Optional[str] = None,
        **unknown: NoReturn,
    ) -> None:
        reject_unknown(type(self).__name__, unknown, _CTOR_OPTIONS)
        self._store_arg = _check_store(store)
        self._store: Optional["AnyRecallStore"] = None
        self._owns_store = False
        session_id = check_opt_str("session_id", session_id)
        if session_id == "":
            raise OptionError("session_id must be a non-empty str", "/session_id")
        #: the session the archive is kept under (lossless mode).
        self.session_id: str = session_id if session_id is not None else "session-" + os.urandom(8).hex()
        self._summarize = check_callable("summarize", summarize)
        self._timeout = check_timeout("timeout", timeout)
        model = check_opt_str("model", model)
        context_length = check_opt_int("context_length", context_length)
        provider = check_opt_str("provider", provider)
        if compactor is not None and not isinstance(compactor, Compactor):
            raise OptionError(f"compactor must be a Compactor, not {type(compactor).__name__}", "/compactor")
        if state is not None:
            for name, v in (("config", config), ("model", model), ("context_length", context_length),
                            ("provider", provider)):
                if v is not None:
                    raise OptionError(f"{name} cannot be given with state (the state carries its config)", "/" + name)
            if not isinstance(state, dict):
                raise CompactError("invalid_state", f"state must be a dict, not {type(state).__name__}", "/state")
        self._owns_compactor = compactor is None
        self._compactor = compactor if compactor is not None else Compactor()
        self._lock = threading.RLock()
        self._state: Dict[str, Any] = {}
        self._awaiting_usage = False  # Hermes' last_prompt_tokens = -1 (see last_prompt_tokens)
        self._status: EngineStatus
        #: report and archived messages of the last compress() (for soft-archiving).
        self.last_report: Optional[CompactReport] = None
        self.last_archived: List[ArchivedMessage] = []
        #: the range the last compress() archived (lossless mode), else None.
        self.last_range: Optional[RecallRange] = None
        #: the reason of the last should_compress decision.
        self.last_should_compress_reason: Optional[str] = None
        #: how the last update_from_response read its usage object.
        self.last_usage: Optional[UsageRecord] = None
        #: the range id prepare_request last archived native drops under (lossless).
        self.last_native_archive: Optional[str] = None
        #: the native.policy decision of the last prepare_request, else None.
        self.last_native_decision: Optional[NativeDecision] = None
        #: the native.trim of the last prepare_request or apply_compaction that
        #: changed the messages (the dropped originals in ``dropped_messages``, the
        #: rewritten ones in ``rewritten``), else None.
        self.last_native_trim: Optional[NativeTrimResult] = None
        try:
            if state is not None:
                self._op(b"engine.status", [(b"state", dumps_at(state, "invalid_state", "/state", "state"))])
            else:
                cfg = _with_model(config, model, context_length, provider)
                params = [] if cfg is None else [(b"config", dumps_at(cfg, "invalid_config", "/config", "config"))]
                self._op(b"engine.start", params)
            if self.lossless:
                self.store  # open it now: a bad path fails here, not at the first compaction
        except BaseException:
            self.close()
            raise

    # -- the state and the core's ops -----------------------------------------------------

    def _op(self, op: bytes, parts: List[Tuple[bytes, bytes]]) -> Dict[str, Any]:
        """Run an engine op and adopt the state and status it returns."""
        r = cast(Dict[str, Any], self._compactor._run(op, parts))
        self._state = r["state"]
        self._set_status(r["status"])
        return r

    # -- session.run: the engine's sequences (docs/SESSION.md) -------------------------------

    def _session(self, event: str, fields: Sequence[Tuple[bytes, bytes]] = (),
                 perform: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 got: Optional[Dict[str, Any]] = None) -> Any:
        """Run ``event`` to its end over the core's ``session.run`` and return the
        sequence's result (None: none). Each step sends the event, the current
        state, the last step's resume and the effect's answer, then ``fields`` (the
        messages, when the event has them, last); ``perform(effect)`` does what the
        core asks for (default: the recall store's effects) and returns the answer's
        value, or raises _EffectFailed for an error answer; anything else it raises
        (a cancellation, a programming error) stops the sequence, nothing recorded.
        An archive is the store's (_archive, its range kept in ``got["range"]``),
        whatever ``perform`` is: its parts come from steps of their own. The steps
        after an archive read only their resume: the messages are not sent again.
        The lock is held for each step, never while an effect runs. A sequence the
        core ends as failed raises the failed effect's own error, with the core's
        message (the state is unchanged)."""
        if got is None:
            got = {}
        if perform is None:
            store_effect = got
            perform = lambda effect: self._perform(effect, store_effect)  # noqa: E731
        run = _SessionRun(self, event, fields)
        answer = b"null"
        cause: Optional[BaseException] = None
        while True:
            r = run.step(answer)
            failed = r.get("failed")
            if failed is not None:
                err = _effect_error(cause, failed)
                raise err from cause
            if r.get("done"):
                return run.result
            effect: Dict[str, Any] = r["effect"]
            try:
                if effect.get("type") == "archive":
                    run.send = None  # from now on: the resume says what the core needs
                    self._archive(run, effect, got)
                    ok = None
                else:
                    ok = perform(effect)
            except _EffectFailed as f:
                cause = f.__cause__
                answer = b'{"error":' + dumps({"code": f.code, "message": f.message}) + b"}"
            else:
                cause = None
                answer = b'{"ok":' + dumps(ok) + b"}"

    def _archive(self, run: "_SessionRun", first: Dict[str, Any], got: Dict[str, Any]) -> None:
        """An archive effect: the store writes its archive and those of the parts
        after it (docs/SESSION.md "An archive in parts") in one transaction. Each
        later part is the core's answer (ok null) to the part before, asked for by
        the store's iteration with that part's window of the event's messages; the
        last part's answer is left to the caller (None, or _EffectFailed "store"
        with the store's error), after the store committed or rolled back. A step
        that fails or does not give the next part ends the sequence with its own
        error (raised here, after the rollback, not answered)."""
        store, session = self.store, self.session_id  # the store has its own lock
        fatal: List[BaseException] = []
        last = [False]  # the part without next went to the store

        def parts() -> Generator[Dict[str, Any], None, None]:
            effect, part = first, 0
            while True:
                if effect.get("part") != part:
                    fatal.append(CompactError(
                        "internal", f"session.run asked for archive part {effect.get('part')!r} after part {part - 1}"))
                    raise fatal[0]
                nxt = effect.get("next")
                last[0] = nxt is None
                yield effect["archive"]
                if nxt is None:
                    return
                try:
                    run.send = run.window(nxt)
                    r = run.step(b'{"ok":null}')
                except BaseException as e:
                    fatal.append(e)
                    raise
                finally:
                    run.send = None
                effect = r.get("effect") or {}
                if r.get("done") or r.get("failed") is not None or effect.get("type") != "archive":
                    fatal.append(CompactError(
                        "internal", f"session.run stopped asking for an archive's parts after part {part}"))
                    raise fatal[0]
                part += 1

        it = parts()
        try:
            got["range"] = store.archive(session, it)
        except Exception as e:
            if fatal:
                raise fatal[0]
            raise _EffectFailed("store", str(e)) from e
        finally:
            it.close()
        if fatal:  # a store that went on after the error
            raise fatal[0]
        if not last[0]:
            raise CompactError("internal", "the recall store returned before it read an archive's last part")

    def _perform(self, effect: Dict[str, Any], got: Dict[str, Any]) -> Any:
        """An effect of the engine's sequences: the summarizer, or the recall store
        (an archive is _archive's)."""
        t = effect.get("type")
        if t == "summarize":
            return _summary_answer(_run_sync_summarizer(self._summarize, effect["request"], self._timeout))
        if t not in ("next_range_id", "search", "expand"):
            raise CompactError("internal", f"session.run asked for an unknown effect {t!r}")
        store, session = self.store, self.session_id  # the store has its own lock
        if t == "next_range_id":
            return _store_call(lambda: store.next_range_id(session))
        if t == "search":
            from ._recall import find_rows

            plan: Any = {"terms": effect.get("terms") or [], "fts": effect.get("fts") or "",
                         "like": effect.get("like") or []}
            hits, total = _store_call(lambda: find_rows(store, session, plan, int(effect["limit"])))
            return {"hits": hits, "total": total}
        return _store_call(lambda: store.expand_rows(session, effect["id"]))

    def _encode(self, value: Any, code: str, path: str, what: str) -> bytes:
        """A field's JSON: in a lossless session as UTF-8 (the archived originals are
        stored as the core copies them: readable, not \\u-escaped), else ASCII."""
        if self.lossless:
            return _dumps_utf8(value, code, path, what)
        return dumps_at(value, code, path, what)

    def _set_status(self, st: EngineStatus) -> None:
        self._status = st
        self.threshold_tokens = st["threshold_tokens"]
        self.context_length = st["context_length"]
        self.threshold_percent = st["threshold_percent"]
        self.threshold_rule = st["threshold_rule"]
        self.model = st["model"]
        self.provider = st["provider"]
        self.last_compaction_tokens = st["breaker_tokens"]
        comp = self.config.get("compression") or {}
        self.protect_first_n = int(comp.get("protect_first_n", 3))
        self.protect_last_n = int(comp.get("protect_last_n", 20))

    def _counter(self, key: str, value: Any) -> None:
        """A host's assignment to a counter field: written into the state, which the
        core then checks (engine.status; a negative count is invalid_state)."""
        n = check_int(key, value)
        with self._lock:
            st = dict(self._state)
            st[key] = n
            self._op(b"engine.status", [(b"state", dumps(st))])

    @property
    def last_prompt_tokens(self) -> int:
        """The last reported prompt tokens; -1 after a host assigned Hermes' sentinel
        (-1: "compaction just ran, awaiting real usage") until the next
        update_from_response, assignment or reset."""
        if self._awaiting_usage:
            return -1
        return self._status["last_prompt_tokens"]

    @last_prompt_tokens.setter
    def last_prompt_tokens(self, value: int) -> None:
        if value == -1 and type(value) is int:
            # Hermes' sentinel after its own compaction step: the state keeps the
            # estimate compress() recorded (the core's counts are never negative);
            # the field reads -1 until real usage arrives, as Hermes expects.
            with self._lock:
                self._awaiting_usage = True
            return
        self._counter("last_prompt_tokens", value)
        self._awaiting_usage = False

    @property
    def last_completion_tokens(self) -> int:
        return self._status["last_completion_tokens"]

    @last_completion_tokens.setter
    def last_completion_tokens(self, value: int) -> None:
        self._counter("last_completion_tokens", value)

    @property
    def last_total_tokens(self) -> int:
        return self._status["last_total_tokens"]

    @last_total_tokens.setter
    def last_total_tokens(self, value: int) -> None:
        self._counter("last_total_tokens", value)

    @property
    def compression_count(self) -> int:
        return self._status["compression_count"]

    @compression_count.setter
    def compression_count(self, value: int) -> None:
        self._counter("compression_count", value)

    @property
    def state(self) -> Dict[str, Any]:
        """The engine state (a copy): JSON, so a host can persist it and restore the
        session with ``ContextEngine(state=...)``."""
        with self._lock:
            return copy.deepcopy(self._state)

    @property
    def config(self) -> Config:
        """The config every call uses (the state's; change the model with
        update_model)."""
        return cast(Config, copy.deepcopy(self._state.get("config") or {}))

    @property
    def name(self) -> str:
        return "ctxcompact"

    @property
    def lossless(self) -> bool:
        """True when the config's ``context.engine`` is ``lossless``."""
        ctx = (self._state.get("config") or {}).get("context")
        return isinstance(ctx, dict) and ctx.get("engine") == "lossless"

    @property
    def store(self) -> "AnyRecallStore":
        """The recall store of lossless recall (opened on first use)."""
        with self._lock:
            if self._store is None:
                from ._recall import RecallStore
                from ._recall_postgres import PostgresRecallStore, open_store

                arg = self._store_arg
                if isinstance(arg, (RecallStore, PostgresRecallStore)):
                    self._store = arg
                elif isinstance(arg, str) and arg:  # a path or a store URL
                    self._store = open_store(arg, compactor=self._compactor)
                    self._owns_store = True
                else:
                    self._store = RecallStore(arg, compactor=self._compactor)
                    self._owns_store = True
            return self._store

    @property
    def compactor(self) -> Compactor:
        return self._compactor

    # -- Hermes engine surface ----------------------------------------------------------

    def update_model(
        self,
        model: str,
        context_length: int,
        base_url: Optional[str] = "",
        api_key: Optional[str] = "",
        provider: Optional[str] = "",
        api_mode: Optional[str] = "",
        **unknown: NoReturn,
    ) -> None:
        """Model switch or fallback (engine.update_model): the threshold is
        re-resolved for the new model and the breaker cleared. The parameter order
        is the Hermes engine's (pass ``provider=`` by keyword); ``base_url`` and
        ``api_mode`` are kept in the state, ``api_key`` is accepted for signature
        compatibility and never sent or stored."""
        reject_unknown("update_model", unknown, _MODEL_OPTIONS)
        parts = [(b"model", dumps(check_str("model", model))),
                 (b"context_length", dumps(check_int("context_length", context_length)))]
        for key, v in ((b"provider", provider), (b"base_url", base_url), (b"api_mode", api_mode)):
            s = check_opt_str(key.decode(), v)
            if s:
                parts.append((key, dumps(s)))
        check_opt_str("api_key", api_key)
        self._session("update_model", parts)

    def update_from_response(self, usage: Any, **unknown: NoReturn) -> None:
        """Record the API-reported usage of the last LLM call (engine.usage). The
        core reads OpenAI chat (``prompt_tokens``), OpenAI Responses
        (``input_tokens`` with ``input_tokens_details``), Anthropic (``input_tokens``
        plus cache reads and writes), AI SDK (``inputTokens`` / ``promptTokens``) and
        Gemini (``promptTokenCount``) usage; a dict, or an SDK object (pydantic
        ``model_dump(by_alias=True)``, so google-genai's ``usage_metadata`` gives its
        camelCase names; ``to_dict()``; or its attributes; None fields left out).
        None or {} records nothing. ``last_usage`` says how it was read."""
        reject_unknown("update_from_response", unknown, ("usage",))
        u = _usage_dict(usage)
        r = self._session("usage", [(b"usage", dumps_at(u, "invalid_request", "/usage", "usage"))]) or {}
        self.last_usage = cast(UsageRecord, r.get("usage"))
        self._awaiting_usage = False

    def should_compress_info(self, prompt_tokens: Optional[int] = None, **unknown: NoReturn) -> Tuple[bool, str]:
        """(should compact now, the core's reason)."""
        reject_unknown("should_compress", unknown, ("prompt_tokens",))
        pt = check_opt_int("prompt_tokens", prompt_tokens)
        r = self._session("should_compress", [] if pt is None else [(b"prompt_tokens", dumps(pt))])
        self.last_should_compress_reason = r.get("reason")
        return bool(r["should_compress"]), str(r.get("reason") or "")

    def should_compress(self, prompt_tokens: Optional[int] = None, **unknown: NoReturn) -> bool:
        """True when the prompt (default: the last reported one) reached the
        threshold and the breaker does not hold it back."""
        return self.should_compress_info(prompt_tokens, **unknown)[0]

    def compress(
        self,
        messages: List[Message],
        current_tokens: Optional[int] = None,
        focus_topic: Optional[str] = None,
        force: bool = False,
        memory_context: str = "",
        pins: Optional[Sequence[Union[int, str]]] = None,
        range: Optional[Dict[str, int]] = None,
        **unknown: NoReturn,
    ) -> List[Message]:
        """Compact messages with the state's config and return the new list
        (unchanged messages are the same objects). ``current_tokens`` (default: the
        last reported prompt tokens, when there are any) is the reported size the
        core prefers over its estimate. ``focus_topic`` and ``memory_context`` are
        added to the summary request by the core. The report is recorded in the
        state (compression count, the breaker); ``last_report`` and ``last_archived``
        hold it and the archived originals. ``pins`` (message indexes and tool call
        ids) are kept verbatim, never summarized or pruned, and stay pinned in the
        engine's later compactions (docs/STEERING.md "Pins")."""
        reject_unknown("compress", unknown, _COMPRESS_OPTIONS)
        force = check_bool("force", force)
        msgs, fields = self._compress_fields(messages, current_tokens, focus_topic, memory_context, pins)
        fields[:0] = [(b"output", b'"refs"')] + ([(b"force", b"true")] if force else [])
        span_field = range_field(range)
        if span_field is not None:
            fields.insert(0, span_field)
        # Lossless: the originals are archived before the report is recorded; a
        # failed archive raises here and records nothing (the caller keeps its input).
        got: Dict[str, Any] = {}
        r = self._session("compress", fields, got=got)
        res = _result(msgs, r)
        self.last_report = res.report
        self.last_archived = res.archived
        self.last_range = cast(Optional[RecallRange], got.get("range"))
        return res.messages

    def undo(self, messages: List[Message], **unknown: NoReturn) -> List[Message]:
        """Take the last compaction back (docs/STEERING.md "See and undo"):
        ``messages`` is the conversation as it is now, which must start with that
        compaction's result; returns the compaction's input (the archived originals
        in their places, the messages it returned unchanged as they are now), then
        what came after the result, as new objects. A compressor engine uses the
        last ``compress``'s ``last_archived`` (this process's), a lossless one its
        store's. Raises ``invalid_state`` when there is nothing to undo, the
        conversation changed, or the restored conversation does not fit."""
        reject_unknown("undo", unknown, ("messages",))
        msgs, mj = _messages_json(messages)
        if self.lossless:
            mj = _dumps_utf8(msgs, "invalid_messages", "/messages", "messages")
        fields: List[Tuple[bytes, bytes]] = []
        if not self.lossless and self.last_archived:
            fields.append((b"originals", _dumps_utf8([a["message"] for a in self.last_archived], "invalid_request", "/originals", "originals")))
        fields.append((b"messages", mj))
        r = self._session("undo", fields)
        self.last_archived = []
        return cast(List[Message], r["messages"])

    def _compress_fields(self, messages: List[Message], current_tokens: Optional[int], focus_topic: Optional[str],
                         memory_context: str, pins: Any = None) -> Tuple[List[Any], List[Tuple[bytes, bytes]]]:
        """The checked messages and the fields of a compress event, the messages last."""
        ct = check_opt_int("current_tokens", current_tokens)
        focus = check_opt_str("focus_topic", focus_topic)
        memory = check_str("memory_context", memory_context)
        msgs, mj = _messages_json(messages)
        if self.lossless:  # the archive keeps the originals' text as UTF-8
            mj = _dumps_utf8(msgs, "invalid_messages", "/messages", "messages")
        fields = [(b"summarizer", b'"builtin"' if self._summarize is None else b'"host"')]
        if ct is not None and ct > 0:  # else the session's last reported prompt tokens
            fields.append((b"prompt_tokens", dumps(ct)))
        if focus:
            fields.append((b"focus", dumps(focus)))
        if memory:
            fields.append((b"memory_context", dumps(memory)))
        pin_field = pins_field(pins)
        if pin_field is not None:
            fields.append(pin_field)
        fields.append((b"messages", mj))
        return msgs, fields

    def should_prepare(self, prompt_tokens: Optional[int] = None, **unknown: NoReturn) -> bool:
        """Whether to prepare the next compaction in the background now
        (docs/STEERING.md, "Compaction that never blocks"): the prompt (default:
        the last reported one) is at ``compression.prepare_ratio`` of the
        threshold but below it, and no compaction is prepared, or the one prepared
        is old. Start ``prepare_compaction`` then, in a thread, without waiting."""
        reject_unknown("should_prepare", unknown, ("prompt_tokens",))
        pt = check_opt_int("prompt_tokens", prompt_tokens)
        r = self._session("should_compress", [] if pt is None else [(b"prompt_tokens", dumps(pt))])
        return bool(r.get("prepare_compaction"))

    def prepare_compaction(
        self,
        messages: List[Message],
        current_tokens: Optional[int] = None,
        focus_topic: Optional[str] = None,
        memory_context: str = "",
        pins: Optional[Sequence[Union[int, str]]] = None,
        **unknown: NoReturn,
    ) -> Dict[str, Any]:
        """Summarize messages ahead of the trigger with the engine's summarizer and
        keep the compaction instead of applying it: the ``compress`` at the
        trigger splices it into the grown conversation (the same head and summary,
        everything after it verbatim) without calling the summarizer, when the
        conversation still starts with these messages. Safe to run in a thread
        beside the engine's other calls (the lock is held for each step, not while
        the summarizer runs). Returns ``{"prepared": {"messages", "head_end",
        "tail_start"} or None, "reason"}`` (None: nothing to summarize, the
        summarizer failed, or a compaction was recorded meanwhile)."""
        reject_unknown("prepare_compaction", unknown, ("messages", "current_tokens", "focus_topic", "memory_context", "pins"))
        _, fields = self._compress_fields(messages, current_tokens, focus_topic, memory_context, pins)
        fields.insert(0, (b"prepare", b"true"))
        return cast(Dict[str, Any], self._session("compress", fields))

    # -- provider-native compaction (native.*, issue 16) -------------------------------

    @property
    def native_route(self) -> NativeRoute:
        """The route native.policy reads: the config's ``model.provider`` and the
        ``base_url`` and ``api_mode`` update_model last set (empty ones left out).
        It names where requests go for the policy, whatever URL a client really
        uses (a test points its client at a loopback server)."""
        with self._lock:
            model = (self._state.get("config") or {}).get("model") or {}
            route: NativeRoute = {}
            if isinstance(model, dict) and model.get("provider"):
                route["provider"] = str(model["provider"])
            if self._state.get("base_url"):
                route["base_url"] = str(self._state["base_url"])
            if self._state.get("api_mode"):
                route["api_mode"] = str(self._state["api_mode"])
            return route

    @property
    def native_session(self) -> Optional[NativeSession]:
        """The session of provider-native compaction (a copy of ``state["native"]``),
        None before the first native call."""
        with self._lock:
            n = self._state.get("native")
            return cast(Optional[NativeSession], copy.deepcopy(n))

    def prepare_request(self, body: Dict[str, Any], *, tokens: Optional[int] = None, manual: bool = False,
                        **unknown: NoReturn) -> NativeRequest:
        """The request body for the engine's route, by native.prepare: a new dict
        (``body`` is not changed) with the decision applied: OpenAI's
        ``context_management`` set, or removed on the OpenAI routes where it must
        not go; Anthropic's ``compact_20260112`` edit merged into the body's own
        ``context_management`` edits (an older one replaced, yours kept; untouched
        with ``anthropic_native`` off); the body's ``input`` (Responses) or
        ``messages`` (Anthropic) trimmed of other issuers' compaction items and of
        what precedes the newest one (``trim`` has what was left out, for
        archiving; kept messages are your objects; ``trim`` is None when nothing
        was left out or rewritten). Send ``betas`` as the ``anthropic-beta``
        header beside yours. The decision's session is kept in
        ``state["native"]``.

        ``tokens`` is the prompt's current size (default: the last reported prompt
        tokens, none while awaiting real usage); ``manual`` a user's "compact now".
        With ``decision["compact_now"]`` on Anthropic on-demand,
        ``compaction_body`` is the compaction request to send (the body with
        ``compaction: {"type": "summarize"}``, without ``context_management``); swap
        its block in with ``apply_compaction``. On the app-server route start
        ``thread/compact/start``."""
        reject_unknown("prepare_request", unknown, ("body", "tokens", "manual"))
        if not isinstance(body, dict):
            raise OptionError(f"body must be a dict, not {type(body).__name__}", "/body")
        t = check_opt_int("tokens", tokens)
        manual = check_bool("manual", manual)
        key = "input" if isinstance(body.get("input"), list) else "messages" if isinstance(body.get("messages"), list) else ""
        items: List[Message] = body[key] if key else []
        fields: List[Tuple[bytes, bytes]] = []
        if t is not None:  # else the session's last prompt tokens
            fields.append((b"tokens", dumps(t)))
        if manual:
            fields.append((b"manual", b"true"))
        fields.append((b"body", self._encode(body, "invalid_request", "/body", "body")))
        res = cast(Dict[str, Any], self._session("prepare", fields))
        decision = cast(NativeDecision, res["decision"])
        self.last_native_decision = decision
        out: Dict[str, Any] = res["body"]
        t_res = res["trimmed"]
        trim: Optional[NativeTrimResult] = None
        if key and (t_res["dropped"] or t_res["rewritten"]):
            r: Dict[str, Any] = {"messages": out[key], "dropped": t_res["dropped"],
                                 "dropped_messages": t_res["dropped_messages"],
                                 "rewritten": t_res["rewritten"], "changed": True}
            _own_trim(items, r, False)
            out[key] = r["messages"]
            trim = cast(NativeTrimResult, r)
            self.last_native_trim = trim
        elif key:
            out[key] = items
        if t_res.get("archived_as"):
            # What the provider's compaction stands for now is kept in the store,
            # once (the session's archived keys say what was handed over).
            self.last_native_archive = t_res["archived_as"]
        compaction_body: Optional[Dict[str, Any]] = res["compaction_body"]
        if compaction_body is not None and key:
            compaction_body[key] = out[key]
        return NativeRequest(body=out, betas=list(res["betas"]), decision=decision, trim=trim,
                             compaction_body=compaction_body)

    def apply_compaction(self, messages: List[Message], response: Any, *, count: Optional[int] = None,
                         **unknown: NoReturn) -> NativeTrimResult:
        """Anthropic on-demand compaction: swap the block of a compaction request's
        ``response`` (its content, a single ``compaction`` block) in for the first
        ``count`` messages (default: all), the messages that request sent, with
        native.trim's ``replace``. The block is recorded (observe_response) first.
        The result's ``messages`` start with the assistant message holding the
        block, followed by the messages after ``count``; ``dropped_messages`` are
        the summarized originals, which a lossless engine archives
        (``last_native_archive``). Until the next response reports usage,
        ``last_prompt_tokens`` reads -1 (the old size no longer applies)."""
        reject_unknown("apply_compaction", unknown, ("messages", "response", "count"))
        if not isinstance(messages, list):
            raise CompactError("invalid_messages", "messages must be a list of message dicts", "/messages")
        n = None if count is None else check_int("count", count)
        resp = _json_object(response)
        content = resp.get("content") if isinstance(resp, dict) else None
        if not isinstance(content, list) or not any(
                isinstance(b, dict) and b.get("type") == "compaction" for b in content):
            raise OptionError("response must be an Anthropic message whose content holds a compaction block",
                              "/response/content")
        fields = [(b"response", self._encode(resp, "invalid_request", "/response", "response"))]
        if n is not None:
            fields.append((b"count", dumps(n)))
        fields.append((b"messages", self._encode(messages, "invalid_messages", "/messages", "messages")))
        r = cast(Dict[str, Any], self._session("apply_compaction", fields))
        archived_as = r.pop("archived_as", None)
        _own_trim(messages, r, True)
        if r["changed"]:
            self.last_native_trim = cast(NativeTrimResult, r)
        if archived_as:
            self.last_native_archive = archived_as
        self._awaiting_usage = True
        return cast(NativeTrimResult, r)

    def observe_response(self, response: Any, **unknown: NoReturn) -> NativeObservation:
        """Record the compaction items of a provider response (native.observe): a
        Responses ``output`` item or an Anthropic ``content`` block of type
        ``compaction`` gets the route as its issuer in the session. ``response`` is
        a dict or an SDK object (pydantic ``model_dump()``, ``to_dict()``)."""
        reject_unknown("observe_response", unknown, ("response",))
        resp = _json_object(response)
        return cast(NativeObservation, self._session("observe_response", [
            (b"response", dumps_at(resp, "invalid_request", "/response", "response"))]))

    def observe_error(self, status: int, body: Any, **unknown: NoReturn) -> NativeErrorOutcome:
        """An error answer of the provider (native.observe): a 400 that names
        ``context_management`` (or the compaction edit or beta) disables the route's
        mechanism for the session and says ``retry`` (prepare the request again:
        the field is then left out); Anthropic's transient
        ``compaction_unavailable`` says retry and disables nothing. ``body`` is the
        error body: a dict, its JSON text, or any text."""
        reject_unknown("observe_error", unknown, ("status", "body"))
        st = check_int("status", status)
        b = _json_object(body)
        if isinstance(b, (bytes, bytearray)):
            b = bytes(b).decode("utf-8", "replace")
        if isinstance(b, str):
            try:
                parsed = json.loads(b)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                b = parsed
        if not isinstance(b, (dict, str)):
            raise OptionError(f"body must be a dict or a str, not {type(b).__name__}", "/body")
        r = self._session("observe_error", [(b"status", dumps(st)),
                                             (b"body", dumps_at(b, "invalid_request", "/body", "body"))])
        return NativeErrorOutcome(retry=r["retry"], disabled=r["disabled"], reason=r["reason"])

    def observe_event(self, message: Dict[str, Any], messages_count: Optional[int] = None,
                      **unknown: NoReturn) -> NativeObservation:
        """An app-server JSON-RPC message (native.observe ``event``):
        ``item/started``/``item/completed`` of a ``contextCompaction`` item,
        ``thread/compacted``, ``turn/completed``, ``thread/compact/start``.
        ``messages_count`` (the transcript's length) is recorded as the boundary of
        a completed compaction; the transcript itself is never rewritten on this
        route."""
        reject_unknown("observe_event", unknown, ("message", "messages_count"))
        if not isinstance(message, dict):
            raise OptionError(f"message must be a dict, not {type(message).__name__}", "/event")
        mc = check_opt_int("messages_count", messages_count)
        fields = [(b"message", dumps_at(message, "invalid_request", "/message", "message"))]
        if mc is not None:
            fields.append((b"messages_count", dumps(mc)))
        return cast(NativeObservation, self._session("observe_event", fields))

    def get_status(self) -> EngineStatus:
        """The core's engine status (a copy): model, window, threshold and its rule,
        the last usage, usage_percent, compression_count, the breaker, and the last
        compaction's fits / fallback."""
        with self._lock:
            return cast(EngineStatus, dict(self._status))

    def on_session_reset(self) -> None:
        """/new or /reset (engine.reset): counters, usage, breaker and the last
        report back to zero; the config is kept."""
        self._session("reset")
        with self._lock:
            self._awaiting_usage = False
            self.last_report = None
            self.last_archived = []
            self.last_should_compress_reason = None
            self.last_usage = None

    # Optional parts of the engine surface, with neutral defaults.

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        """The host's session id becomes the one the archive is kept under (lossless
        mode). Nothing else is persisted here: the previous summary is found in the
        messages (a host that persists ``state`` restores it with ``state=``).
        ``boundary_reason="compression"`` (Hermes, after a compaction that gave the
        conversation a new session id) keeps the id: the conversation, and so its
        archive, goes on."""
        if kwargs.get("boundary_reason") == "compression":
            return
        if isinstance(session_id, str) and session_id:
            with self._lock:
                self.session_id = session_id

    def on_session_end(self, session_id: str, messages: List[Message]) -> None:
        """Nothing to flush."""

    def should_compress_preflight(self, messages: List[Message]) -> bool:
        """Hermes' rough pre-call check: off (the trigger is the reported usage)."""
        return False

    def should_defer_preflight_to_real_usage(self, rough_tokens: int) -> bool:
        return False

    def get_tool_schemas(self, format: str = "openai", **unknown: NoReturn) -> List[Dict[str, Any]]:
        """The engine's tools in the shape of ``format``: ``openai`` (chat
        completions), ``responses`` or ``anthropic``: ``context_status`` and
        ``compact_now`` (docs/STEERING.md), after lossless recall's
        ``context_search`` and ``context_expand`` in lossless mode."""
        reject_unknown("get_tool_schemas", unknown, ("format",))
        fmt = check_str("format", format)
        r = self._session("tools", [(b"format", dumps(fmt))])
        return cast(List[Dict[str, Any]], r["tools"])

    def handle_tool_call(self, name: str, args: Any = None, messages: Optional[List[Message]] = None,
                         **unknown: NoReturn) -> str:
        """Run a tool call of the agent and return its result, a JSON string:
        ``context_search {query, limit?}`` (hits newest first, with ids) or
        ``context_expand {id, max_tokens?}`` (the original messages). ``args`` is a
        dict or its JSON text. Bad arguments, an unknown id or an unknown tool are
        results too: ``{"error": "..."}``, never an exception. ``messages`` (the
        host's live conversation, which Hermes passes) is accepted and not needed:
        the archive holds what was compacted."""
        reject_unknown("handle_tool_call", unknown, ("name", "args", "messages"))
        if not isinstance(name, str):
            return _tool_error(f"the tool name must be a string, not {type(name).__name__}")
        try:
            a = b"null" if args is None else dumps(args)
        except (TypeError, ValueError, RecursionError):
            return _tool_error(f"{name}: arguments must be a JSON object")
        return cast(str, self._session("tool_call", [(b"name", dumps(name)), (b"arguments", a)]))

    def record_completed_compaction(self, *, used_fallback: bool = False, **unknown: Any) -> None:
        """Hermes calls this after a completed compaction boundary (when the engine
        class has it): after its own compaction step, which ``compress`` has
        recorded already (nothing more to do), and after the Codex app-server
        compacted its thread (``api_mode == "codex_app_server"``): that one is
        recorded in the native session as a completed app-server compaction (as a
        ``thread/compacted`` event), since the local transcript is not rewritten."""
        check_bool("used_fallback", used_fallback)
        if self.native_route.get("api_mode") == "codex_app_server":
            self.observe_event({"method": "thread/compacted", "params": {}})

    def has_content_to_compress(self, messages: List[Message]) -> bool:
        return len(messages) > self.protect_first_n + 1

    def __deepcopy__(self, memo: Dict[int, Any]) -> "ContextEngine":
        """A copy of the session (Hermes deep-copies a plugin's engine for every
        agent it builds): its own state, counters and last report, sharing this
        engine's summarizer, Compactor and store (which are not copyable, and are
        safe to share: each has its own lock). The copy does not own them: close
        this engine after its copies."""
        with self._lock:
            cls = type(self)
            new = cls.__new__(cls)
            store: Any = self._store if self._store is not None else self._store_arg
            ContextEngine.__init__(new, state=copy.deepcopy(self._state, memo), summarize=self._summarize,
                                   compactor=self._compactor, timeout=self._timeout, store=store,
                                   session_id=self.session_id)
            for key, value in self.__dict__.items():
                if key not in _SHARED_FIELDS:
                    new.__dict__[key] = copy.deepcopy(value, memo)
            return new

    def close(self) -> None:
        if getattr(self, "_owns_store", False) and self._store is not None:
            self._store.close()
            self._store = None
            self._owns_store = False
        if getattr(self, "_owns_compactor", False):
            self._compactor.close()

    def __enter__(self) -> "ContextEngine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class CompactionEngine(ContextEngine):
    """ContextEngine under its earlier name, with the earlier positional order:
    ``CompactionEngine(summarize=None, config=None, *, ...)`` (the keywords are
    ContextEngine's). Everything else is ContextEngine's."""

    def __init__(
        self,
        summarize: Optional[SyncSummarizer] = None,
        config: Optional[Config] = None,
        **options: Any,
    ) -> None:
        super().__init__(config, summarize=summarize, **options)


class _SessionRun:
    """One event's sequence between its steps (host/session.go's sessionRun): the
    fields every step sends, the messages the next step sends (the event's at
    first; a window of them while an archive comes in parts; none after an
    archive), the last step's resume and the sequence's result."""

    def __init__(self, engine: ContextEngine, event: str, fields: Sequence[Tuple[bytes, bytes]]) -> None:
        self.engine = engine
        self.head = [(b"event", dumps(event))]
        self.fields = [f for f in fields if f[0] != b"messages"]
        #: the event's messages as the first step sends them.
        self.messages: Optional[bytes] = next((v for k, v in fields if k == b"messages"), None)
        self.send = self.messages
        self.resume: Optional[bytes] = None
        self.result: Any = None
        self._elems: Optional[List[Tuple[int, int]]] = None

    def step(self, answer: bytes) -> Dict[str, Any]:
        """Send answer (unless this is the first step) and return the core's reply:
        an effect to perform (its resume kept for the next step), a failure, or the
        end, whose state and status the engine takes."""
        e = self.engine
        with e._lock:
            parts = self.head + [(b"state", dumps(e._state))]
            if self.resume is not None:
                parts += [(b"resume", self.resume), (b"answer", answer)]
            parts += self.fields
            if self.send is not None:
                parts.append((b"messages", self.send))
            r, resume = _session_run(e._compactor, parts)
            failed = r.get("failed")
            if r.get("done") and failed is None:
                if not isinstance(r.get("state"), dict):
                    raise CompactError("internal", "session.run ended with no state")
                e._state = r["state"]
                e._set_status(r["status"])
        if "result" in r:
            self.result = r["result"]
        if failed is None and not r.get("done"):
            if not isinstance(r.get("effect"), dict) or r.get("resume") is None:
                raise CompactError("internal", "session.run neither ended nor asked for an effect")
            self.resume = resume if resume is not None else dumps(r["resume"])
        return r

    def window(self, nxt: Any) -> bytes:
        """The messages of an archive part's next: the event's messages [from, to),
        each element byte for byte as the first step sent it."""
        f = nxt.get("from") if isinstance(nxt, dict) else None
        t = nxt.get("to") if isinstance(nxt, dict) else None
        if type(f) is not int or type(t) is not int or not 0 <= f <= t:
            raise CompactError("internal", f"session.run asked for an archive part with a bad next {nxt!r}")
        if self.messages is None:
            raise CompactError("internal", "session.run asked for a window of messages the event does not have")
        if self._elems is None:
            self._elems = _array_elements(self.messages)
        if t > len(self._elems):
            raise CompactError("internal", f"an archive part names messages {f}-{t - 1}; the event has {len(self._elems)}")
        m = memoryview(self.messages)
        return b"[" + b",".join(m[a:b] for a, b in self._elems[f:t]) + b"]"


def _session_run(compactor: Compactor, parts: Sequence[Tuple[bytes, bytes]]) -> Tuple[Dict[str, Any], Optional[bytes]]:
    """One session.run step: the core's reply, and its resume as the core wrote it
    (sent back unchanged, as docs/SESSION.md asks: an archive's summary row is
    copied from it byte for byte)."""
    return _session_reply(compactor._p().call(_envelope(b"session.run", parts)))


_DECODER = json.JSONDecoder()
_REPLY = '{"result":{'


def _session_reply(out: bytes) -> Tuple[Dict[str, Any], Optional[bytes]]:
    """A session.run response envelope: the reply (its members read one by one,
    each parsed once) and the resume's bytes; an error envelope raises its
    CompactError. Anything but the core's compact reply is parsed whole, the
    resume None."""
    text = out.decode("utf-8")
    if not text.startswith(_REPLY):
        return cast(Dict[str, Any], parse_response(out)), None
    reply: Dict[str, Any] = {}
    resume: Optional[bytes] = None
    i = len(_REPLY)
    try:
        while text[i] == '"':
            key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
            if text[i] != ":":
                break
            start = i + 1
            reply[key], i = _DECODER.raw_decode(text, start)
            if key == "resume":
                resume = text[start:i].encode("utf-8")
            if text[i] != ",":
                break
            i += 1
        if text[i:] == "}}":
            return reply, resume
    except (IndexError, ValueError):
        pass
    return cast(Dict[str, Any], parse_response(out)), None


#: A JSON string (escapes and all) or a bracket or comma: what _array_elements reads.
_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]', re.S)
_JSON_SPACE = b" \t\n\r"


def _array_elements(b: bytes) -> List[Tuple[int, int]]:
    """The [start, end) byte offsets of the elements of the JSON array b: a scan
    that skips strings and counts brackets, so an element is its own bytes,
    untouched (the core checks a window's bytes). [] when b is no array."""
    elems: List[Tuple[int, int]] = []
    depth, start = 0, 0
    for m in _JSON_TOKEN.finditer(b):
        c = b[m.start()]
        if c == 0x22:  # a string
            continue
        if depth == 0:
            if c != 0x5B:  # [
                return []
            depth, start = 1, m.end()
        elif depth == 1 and c in (0x2C, 0x5D):  # , ]
            a, z = start, m.start()
            while a < z and b[a] in _JSON_SPACE:
                a += 1
            while z > a and b[z - 1] in _JSON_SPACE:
                z -= 1
            if a < z or c == 0x2C:
                elems.append((a, z))
            if c == 0x5D:
                return elems
            start = m.end()
        elif c in (0x5B, 0x7B):  # [ {
            depth += 1
        elif c != 0x2C:
            depth -= 1
    return elems


def _check_store(store: Any) -> Any:
    if store is None or isinstance(store, (str, os.PathLike)):
        return store
    from ._recall import RecallStore
    from ._recall_postgres import PostgresRecallStore

    if isinstance(store, (RecallStore, PostgresRecallStore)):
        return store
    raise OptionError(
        f"store must be a path, a store URL, a RecallStore or a PostgresRecallStore, not {type(store).__name__}", "/store")


def _tool_error(message: str) -> str:
    return json.dumps({"error": message})


class _EffectFailed(Exception):
    """An effect's failure, the answer {"error": {code, message}} of session.run: a
    summarizer's (its fallback code) or a store's ("store", its exception as the
    cause)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _summary_answer(outcome: Tuple[Optional[str], Any]) -> str:
    """A summarizer's outcome as the answer to a summarize effect: the summary, or
    _EffectFailed with compact.finish's error (a str is code "error")."""
    summary, error = outcome
    if error is None:
        return cast(str, summary)
    if isinstance(error, dict):
        raise _EffectFailed(str(error.get("code") or "error"), str(error.get("message") or ""))
    raise _EffectFailed("error", str(error))


def _store_call(fn: Callable[[], Any]) -> Any:
    """A store effect: its value, or _EffectFailed "store" caused by the store's error."""
    try:
        return fn()
    except Exception as e:
        raise _EffectFailed("store", str(e)) from e


def _effect_error(cause: Optional[BaseException], failed: Dict[str, Any]) -> BaseException:
    """The error of a sequence the core ended as failed: the failed effect's own
    exception (its class and attributes), with the core's message."""
    message = str(failed.get("message") or "")
    if cause is None:
        return CompactError("internal", message)
    try:
        e = type(cause).__new__(type(cause))
        e.__dict__.update(cause.__dict__)
        e.args = (message,)
        if isinstance(e, CompactError):
            e.message = message
        return e
    except Exception:
        return CompactError("internal", message)


def _dumps_utf8(value: Any, code: str, path: str, what: str) -> bytes:
    """JSON with non-ASCII text as UTF-8; a string with a lone surrogate, which
    UTF-8 cannot hold, goes \\u-escaped."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError, RecursionError):
        return dumps_at(value, code, path, what)


def _with_model(config: Any, model: Optional[str], context_length: Optional[int],
                provider: Optional[str]) -> Any:
    """config with the model keywords set in its model section (a copy; a config
    that is not a dict goes as it is, for the core to refuse)."""
    if model is None and context_length is None and not provider:
        return config
    if config is not None and not isinstance(config, dict):
        return config
    cfg = copy.deepcopy(dict(config or {}))
    m = cfg.get("model")
    m = dict(m) if isinstance(m, dict) else ({} if m is None else m)
    if isinstance(m, dict):
        if model is not None:
            m["name"] = model
        if context_length is not None:
            m["context_length"] = context_length
        if provider:
            m["provider"] = provider
    cfg["model"] = m
    return cfg


def _json_object(value: Any) -> Any:
    """A response or error body as JSON: dicts, lists and strings as they are; an
    SDK object through model_dump (pydantic, None fields left out) or to_dict."""
    if value is None or isinstance(value, (dict, list, str, bytes, bytearray, int, float, bool)):
        return value
    return _usage_dict(value)


def _usage_dict(usage: Any) -> Any:
    """A usage object as JSON: dicts as they are; SDK objects through model_dump
    (pydantic, by alias), to_dict, or their attributes, without None fields."""
    if usage is None or isinstance(usage, dict):
        return usage
    for name in ("model_dump", "to_dict", "dict"):
        fn: Optional[Callable[..., Any]] = getattr(usage, name, None)
        if callable(fn):
            try:
                # by_alias: google-genai's usage_metadata has camelCase aliases
                # (promptTokenCount), the names the core reads.
                d = fn(by_alias=True, exclude_none=True) if name == "model_dump" else fn()
            except TypeError:
                d = fn()
            if isinstance(d, dict):
                return {k: v for k, v in d.items() if v is not None}
    attrs = getattr(usage, "__dict__", None)
    if isinstance(attrs, dict):
        return {k: _usage_dict(v) if hasattr(v, "__dict__") else v for k, v in attrs.items()
                if v is not None and not k.startswith("_")}
    return usage  # not an object: the core answers invalid_request at /usage
