"""ContextEngine: the method set of a Hermes-style context engine over ctxcompact.

A thin wrapper over the core's ``engine.*`` ops: the rules (usage normalisation
for OpenAI, Responses, Anthropic, AI SDK and Gemini usage objects, the breaker, the
model switch, the status) are the core's, the same in every runtime. This class
keeps the engine state (one JSON object the core hands back after every op),
sends it with each call and copies the returned status into its fields.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, NoReturn, Optional, Tuple, Union, cast

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
from ._compactor import DEFAULT_TIMEOUT, Compactor, SyncSummarizer, _own_trim, dumps, dumps_at
from ._errors import CompactError, OptionError
from ._types import (
    ArchivedMessage,
    ArchiveRows,
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
    SummaryRequest,
    UsageRecord,
)

if TYPE_CHECKING:  # pragma: no cover
    from ._recall import RecallStore

__all__ = ["ContextEngine", "CompactionEngine"]

#: Archived messages per recall.archive call of a lossless engine (as in JS and Go).
ARCHIVE_BATCH = 8192

_CTOR_OPTIONS = ("config", "summarize", "model", "context_length", "provider", "compactor", "state", "timeout",
                 "store", "session_id")
_COMPRESS_OPTIONS = ("messages", "current_tokens", "focus_topic", "force", "memory_context")
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
    every compaction's originals are archived in ``store`` (a ``RecallStore``, or a
    path to open one; None: a store in memory) under ``session_id`` (None: a random
    id, or the one ``on_session_start`` gives), the summary names the archived range
    (``r1``, ``r2``, ...), and ``get_tool_schemas()`` / ``handle_tool_call()`` give
    the agent ``context_search`` and ``context_expand``. In ``compressor`` mode (the
    default) ``store`` and ``session_id`` are kept but unused, and there are no tools.

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
        store: Union[None, str, "os.PathLike[str]", "RecallStore"] = None,
        session_id: Optional[str] = None,
        **unknown: NoReturn,
    ) -> None:
        reject_unknown(type(self).__name__, unknown, _CTOR_OPTIONS)
        self._store_arg = _check_store(store)
        self._store: Optional["RecallStore"] = None
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

    def _with_state(self, op: bytes, parts: List[Tuple[bytes, bytes]]) -> Dict[str, Any]:
        return self._op(op, [(b"state", dumps(self._state))] + parts)

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
    def store(self) -> "RecallStore":
        """The RecallStore of lossless recall (opened on first use)."""
        with self._lock:
            if self._store is None:
                from ._recall import RecallStore

                arg = self._store_arg
                if isinstance(arg, RecallStore):
                    self._store = arg
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
        with self._lock:
            self._with_state(b"engine.update_model", parts)

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
        with self._lock:
            r = self._with_state(b"engine.usage", [(b"usage", dumps_at(u, "invalid_request", "/usage", "usage"))])
            self.last_usage = cast(UsageRecord, r.get("usage"))
            self._awaiting_usage = False

    def should_compress_info(self, prompt_tokens: Optional[int] = None, **unknown: NoReturn) -> Tuple[bool, str]:
        """(should compact now, the core's reason)."""
        reject_unknown("should_compress", unknown, ("prompt_tokens",))
        pt = check_opt_int("prompt_tokens", prompt_tokens)
        with self._lock:
            r = self._with_state(b"engine.should_compress", [] if pt is None else [(b"prompt_tokens", dumps(pt))])
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
        **unknown: NoReturn,
    ) -> List[Message]:
        """Compact messages with the state's config and return the new list
        (unchanged messages are the same objects). ``current_tokens`` (default: the
        last reported prompt tokens, when there are any) is the reported size the
        core prefers over its estimate. ``focus_topic`` and ``memory_context`` are
        added to the summarizer's instructions. The report goes to engine.record
        (compression count, the breaker); ``last_report`` and ``last_archived`` hold
        it and the archived originals."""
        reject_unknown("compress", unknown, _COMPRESS_OPTIONS)
        ct = check_opt_int("current_tokens", current_tokens)
        focus = check_opt_str("focus_topic", focus_topic)
        memory = check_str("memory_context", memory_context)
        force = check_bool("force", force)
        with self._lock:
            tokens = self.last_prompt_tokens if ct is None else ct
            summarize = self._summarize
            if summarize is not None and (focus or memory):
                summarize = _with_extras(summarize, focus, memory)
            cfg = dumps(self._state.get("config") or {})
            archive_id = self.store.next_range_id(self.session_id) if self.lossless else None
            res = self._compactor._compact(
                messages, summarize, force, tokens if tokens > 0 else None, cfg, timeout=self._timeout,
                archive_id=archive_id,
            )
            rng = None
            if archive_id is not None and res.archived:
                # Before engine.record: a compaction whose originals could not be
                # archived raises here and is not counted (the caller keeps its input).
                rng = self._archive(archive_id, messages, res.messages, res.report, res.archived)
            self.last_report = res.report
            self.last_archived = res.archived
            self.last_range = rng
            self._with_state(b"engine.record", [(b"report", dumps(res.report))])
            return res.messages

    def _archive(self, range_id: str, messages: List[Message], out: List[Message], report: CompactReport,
                 archived: List[ArchivedMessage]) -> RecallRange:
        """recall.archive (the rows, from the originals the result's archived
        entries carry) and one INSERT transaction in the store. The result's
        messages go as refs where they are the caller's (the input index), so the
        core finds the summary message among the new ones without a copy of the rest."""
        index = {id(m): i for i, m in enumerate(messages)}
        refs = [index.get(id(m), m) for m in out]
        head = [(b"session", dumps(self.session_id)), (b"range_id", dumps(range_id)), (b"report", dumps(report))]
        # In batches of ARCHIVE_BATCH archived messages (a row depends on its message
        # alone; the last batch gets the output messages, for the summary's row): one
        # call over 1.4M messages grew the instance past 3 GB.
        rows: Optional[ArchiveRows] = None
        for start in range(0, len(archived), ARCHIVE_BATCH):
            parts = head + [(b"archived", _dumps_utf8(archived[start:start + ARCHIVE_BATCH], "/archived"))]
            if start + ARCHIVE_BATCH >= len(archived):
                parts.append((b"messages", _dumps_utf8(refs, "/messages")))
            part = cast(ArchiveRows, self._compactor._run(b"recall.archive", parts))
            if rows is None:
                rows = part
                continue
            rng, more = rows["range"], part["range"]
            rng["from_index"] = min(rng["from_index"], more["from_index"])
            rng["to_index"] = max(rng["to_index"], more["to_index"])
            if more["summary"]:
                rng["summary"] = more["summary"]
            rows["rows"].extend(part["rows"])
        assert rows is not None  # compress archives only when something was archived
        return self.store.archive(self.session_id, rows)

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

    def _native_parts(self) -> List[Tuple[bytes, bytes]]:
        parts = [(b"config", dumps(self._state.get("config") or {})), (b"route", dumps(self.native_route))]
        session = self._state.get("native")
        if session is not None:
            parts.append((b"session", dumps(session)))
        return parts

    def _adopt_session(self, session: Any) -> None:
        """Keep the session a native op returned in the state (the engine ops carry
        it from then on; the next one validates it)."""
        if session is None:
            self._state.pop("native", None)
        else:
            self._state["native"] = session

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
        archiving; kept messages are your objects; a list without compaction items
        is not even sent to the core). Send ``betas`` as the ``anthropic-beta``
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
        with self._lock:
            if t is None and self.last_prompt_tokens > 0:
                t = self.last_prompt_tokens
            key = "input" if isinstance(body.get("input"), list) else "messages" if isinstance(body.get("messages"), list) else ""
            items: List[Message] = body[key] if key else []
            carries = bool(key) and _native_format(key, items) is not None
            sent = body if not key or carries else {**body, key: []}
            parts = self._native_parts()
            if t is not None:
                parts.append((b"tokens", dumps(t)))
            if manual:
                parts.append((b"manual", b"true"))
            parts.append((b"body", dumps_at(sent, "invalid_request", "/body", "body")))
            res = self._compactor._run(b"native.prepare", parts)
            decision = cast(NativeDecision, res["decision"])
            self._adopt_session(decision["session"])
            self.last_native_decision = decision
            out: Dict[str, Any] = res["body"]
            trim: Optional[NativeTrimResult] = None
            if key and carries:
                t_res = res["trimmed"]
                r: Dict[str, Any] = {"messages": out[key], "dropped": t_res["dropped"],
                                     "dropped_messages": t_res["dropped_messages"],
                                     "rewritten": t_res["rewritten"],
                                     "changed": bool(t_res["dropped"] or t_res["rewritten"])}
                _own_trim(items, r, False)
                out[key] = r["messages"]
                trim = cast(NativeTrimResult, r)
                if r["changed"]:
                    self.last_native_trim = trim
            elif key:
                out[key] = items
            archive = res["trimmed"]["archive"]
            if archive and self.lossless:
                # What the provider's compaction stands for now is kept in the store,
                # once (the session's archived keys say what was handed over).
                self._archive_native(archive)
            compaction_body: Optional[Dict[str, Any]] = res["compaction_body"]
            if compaction_body is not None and key:
                compaction_body[key] = out[key]
            return NativeRequest(body=out, betas=list(res["betas"]), decision=decision, trim=trim,
                                 compaction_body=compaction_body)

    def _archive_native(self, archived: List[Any]) -> None:
        """recall.archive of messages a provider's compaction now stands for, as a
        new range (``last_native_archive``), and one store transaction."""
        range_id = self.store.next_range_id(self.session_id)
        rows = cast(ArchiveRows, self._compactor._run(b"recall.archive", [
            (b"session", dumps(self.session_id)), (b"range_id", dumps(range_id)),
            (b"report", b"{}"), (b"archived", _dumps_utf8(archived, "/archived"))]))
        self.store.archive(self.session_id, rows)
        self.last_native_archive = range_id

    def _trim(self, items: List[Message], fmt: str, replace: Optional[Dict[str, Any]] = None) -> NativeTrimResult:
        session = self._state.get("native")
        r = self._compactor.native_trim(items, format=cast(Any, fmt), route=self.native_route,
                                        session=cast(Optional[NativeSession], session),
                                        replace=cast(Any, replace))
        if r["changed"]:
            self.last_native_trim = r
        return r

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
        n = len(messages) if count is None else check_int("count", count)
        resp = _json_object(response)
        content = resp.get("content") if isinstance(resp, dict) else None
        if not isinstance(content, list) or not any(
                isinstance(b, dict) and b.get("type") == "compaction" for b in content):
            raise OptionError("response must be an Anthropic message whose content holds a compaction block",
                              "/response/content")
        with self._lock:
            self.observe_response(resp)
            message = {"role": "assistant", "content": [b for b in content if isinstance(b, dict)]}
            r = self._trim(messages, "anthropic", {"count": n, "message": message})
            if r["dropped"] and self.lossless:
                archived = [{"index": d["index"], "reason": d["reason"], "message": m}
                            for d, m in zip(r["dropped"], r["dropped_messages"])]
                self._archive_native(archived)
            self._awaiting_usage = True
            return r

    def observe_response(self, response: Any, **unknown: NoReturn) -> NativeObservation:
        """Record the compaction items of a provider response (native.observe): a
        Responses ``output`` item or an Anthropic ``content`` block of type
        ``compaction`` gets the route as its issuer in the session. ``response`` is
        a dict or an SDK object (pydantic ``model_dump()``, ``to_dict()``)."""
        reject_unknown("observe_response", unknown, ("response",))
        return self._observe(b"response", _json_object(response), None)

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
        r = self._observe(b"error", {"status": st, "body": b}, None)
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
        return self._observe(b"event", message, check_opt_int("messages_count", messages_count))

    def _observe(self, key: bytes, value: Any, messages_count: Optional[int]) -> NativeObservation:
        with self._lock:
            parts = self._native_parts()
            parts.append((key, dumps_at(value, "invalid_request", "/" + key.decode(), key.decode())))
            if messages_count is not None:
                parts.append((b"messages_count", dumps(messages_count)))
            r = cast(NativeObservation, self._compactor._run(b"native.observe", parts))
            self._adopt_session(r["session"])
            return r

    def get_status(self) -> EngineStatus:
        """The core's engine status (a copy): model, window, threshold and its rule,
        the last usage, usage_percent, compression_count, the breaker, and the last
        compaction's fits / fallback."""
        with self._lock:
            return cast(EngineStatus, dict(self._status))

    def on_session_reset(self) -> None:
        """/new or /reset (engine.reset): counters, usage, breaker and the last
        report back to zero; the config is kept."""
        with self._lock:
            self._with_state(b"engine.reset", [])
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
        """The tools of lossless recall (``context_search``, ``context_expand``;
        recall.tools) in the shape of ``format``: ``openai`` (chat completions),
        ``responses`` or ``anthropic``. [] in compressor mode."""
        reject_unknown("get_tool_schemas", unknown, ("format",))
        fmt = check_str("format", format)
        if not self.lossless:
            return []
        r = self._compactor._run(b"recall.tools", [(b"format", dumps(fmt))])
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
        if not self.lossless:
            return _tool_error(f"unknown tool {json.dumps(name)}: this engine has no tools (context.engine is not lossless)")
        from ._compactor import _encode  # the request encoder (ASCII, compact)

        try:
            a = b"null" if args is None else _encode(args).encode("ascii")
        except (TypeError, ValueError, RecursionError):
            return _tool_error(f"{name}: arguments must be a JSON object")
        checked = self._compactor._run(b"recall.check_call", [(b"name", dumps(name)), (b"arguments", a)])
        if not checked["ok"]:
            return cast(str, checked["result"])
        call = checked["args"]
        from ._recall import expand_result, search_result

        store, session = self.store, self.session_id  # the store has its own lock
        if name == "context_search":
            return search_result(self._compactor, store, session, call["query"], int(call["limit"]))
        return expand_result(self._compactor, call["id"], store.expand_rows(session, call["id"]),
                             call.get("max_tokens"))

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


def _check_store(store: Any) -> Any:
    if store is None or isinstance(store, (str, os.PathLike)):
        return store
    from ._recall import RecallStore

    if isinstance(store, RecallStore):
        return store
    raise OptionError(f"store must be a path or a RecallStore, not {type(store).__name__}", "/store")


def _tool_error(message: str) -> str:
    return json.dumps({"error": message})


def _dumps_utf8(value: Any, path: str) -> bytes:
    """JSON with non-ASCII text as UTF-8 (the archived originals are stored as the
    core copies them: readable, not \\u-escaped); a string with a lone surrogate,
    which UTF-8 cannot hold, goes \\u-escaped."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return dumps_at(value, "invalid_messages", path, "archived messages")
    except (TypeError, ValueError, RecursionError):
        return dumps_at(value, "invalid_messages", path, "archived messages")


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


def _native_format(key: str, items: List[Any]) -> Optional[str]:
    """The format of a body's ``input``/``messages`` for native.trim when they
    carry compaction items or blocks (None when they carry none): ``input`` is
    Responses; ``messages`` holding a ``compaction`` block is Anthropic."""
    if key == "input":
        return "responses" if any(isinstance(m, dict) and m.get("type") == "compaction" for m in items) else None
    for m in items:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "compaction" for b in content):
            return "anthropic"
    return None


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


def _with_extras(summarize: SyncSummarizer, focus_topic: Optional[str], memory_context: str) -> SyncSummarizer:
    extra = ""
    if focus_topic:
        extra += f"\n\nFocus topic: give priority to everything about {focus_topic!s}."
    if memory_context:
        extra += "\n\nContext from the memory provider (use it, do not repeat it verbatim):\n" + memory_context

    def wrapped(request: SummaryRequest) -> str:
        req = copy.deepcopy(request)
        msgs = req["messages"]
        if msgs and isinstance(msgs[-1].get("content"), str):
            msgs[-1]["content"] = msgs[-1]["content"] + extra
        return summarize(req)

    return wrapped
