"""CompactionEngine: the method set of a Hermes-style context engine over ctxcompact.

A host that expects such an engine (name, should_compress, compress,
update_from_response, update_model, get_status, on_session_reset and the token
fields) can use this class as it is. Thresholds come from the core
(threshold.resolve), the trigger from should_compress, compaction from
compact.begin/finish — the engine only keeps the session's counters.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Dict, List, Optional, Tuple

from ._compactor import Compactor, SyncSummarizer
from ._types import ArchivedMessage, CompactReport, Config, Message, SummaryRequest, ThresholdResult

__all__ = ["CompactionEngine"]


def _int(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


class CompactionEngine:
    """A context engine: decides when to compact and compacts.

    ``summarize(request) -> str`` is a synchronous LLM call (None: the core's
    deterministic summarizer). ``config`` is the ctxcompact config; ``model``,
    ``context_length`` and ``provider`` fill its ``model`` section. Pass a
    ``compactor`` to share one (and its instances) between engines.

    Typical loop (what a host does)::

        engine.update_from_response(response.usage)      # after every LLM call
        if engine.should_compress():                      # before the next turn
            messages = engine.compress(messages)

    The engine is safe to call from several threads (a lock guards its counters),
    but like any context engine it describes one session.
    """

    #: Hermes engine fields, read directly by hosts.
    last_prompt_tokens: int
    last_completion_tokens: int
    last_total_tokens: int
    threshold_tokens: int
    context_length: int
    compression_count: int
    threshold_percent: float
    protect_first_n: int
    protect_last_n: int

    def __init__(
        self,
        summarize: Optional[SyncSummarizer] = None,
        config: Optional[Config] = None,
        *,
        model: Optional[str] = None,
        context_length: Optional[int] = None,
        provider: Optional[str] = None,
        compactor: Optional[Compactor] = None,
    ) -> None:
        self._summarize = summarize
        self._owns_compactor = compactor is None
        self._compactor = compactor if compactor is not None else Compactor()
        self._lock = threading.RLock()
        self._config: Config = copy.deepcopy(dict(config or {}))  # type: ignore[assignment]
        model_cfg = dict(self._config.get("model") or {})
        if model is not None:
            model_cfg["name"] = model
        if context_length is not None:
            model_cfg["context_length"] = context_length
        if provider:
            model_cfg["provider"] = provider
        if model_cfg:
            self._config["model"] = model_cfg  # type: ignore[typeddict-item]
        comp = self._config.get("compression") or {}
        self.protect_first_n = int(comp.get("protect_first_n", 3))
        self.protect_last_n = int(comp.get("protect_last_n", 20))
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.last_total_tokens = 0
        self.compression_count = 0
        #: tokens_after of the last compaction when it did not fit under the
        #: threshold (the breaker input of should_compress), else None.
        self.last_compaction_tokens: Optional[int] = None
        #: report and archived messages of the last compress() (for soft-archiving).
        self.last_report: Optional[CompactReport] = None
        self.last_archived: List[ArchivedMessage] = []
        self.last_should_compress_reason: Optional[str] = None
        self.threshold: ThresholdResult
        self._resolve()

    # -- Hermes engine surface ----------------------------------------------------------

    @property
    def name(self) -> str:
        return "ctxcompact"

    @property
    def config(self) -> Config:
        """The config every call uses (a private copy; change it via update_model)."""
        return self._config

    @property
    def compactor(self) -> Compactor:
        return self._compactor

    def _resolve(self) -> None:
        t = self._compactor.resolve_threshold(self._config)
        self.threshold = t
        self.threshold_tokens = int(t["threshold_tokens"])
        self.context_length = int(t["context_length"])
        self.threshold_percent = float(t["fraction"])

    def update_model(
        self,
        model: str,
        context_length: int,
        base_url: Optional[str] = "",
        api_key: Optional[str] = "",
        provider: Optional[str] = "",
        api_mode: Optional[str] = "",
    ) -> None:
        """Model switch or fallback: re-resolve the threshold for the new model (per-
        model overrides, small-context floor, Codex autoraise are the core's). The
        breaker is cleared: the new window changes what fits. The parameter order is
        the Hermes engine's (pass ``provider=`` by keyword); base_url, api_key and
        api_mode are accepted for signature compatibility and not stored."""
        with self._lock:
            m: Dict[str, Any] = dict(self._config.get("model") or {})
            m["name"] = model
            m["context_length"] = int(context_length)
            if provider:
                m["provider"] = provider
            else:
                m.pop("provider", None)
            self._config["model"] = m  # type: ignore[typeddict-item]
            self._resolve()
            self.last_compaction_tokens = None

    def update_from_response(self, usage: Dict[str, Any]) -> None:
        """Record the API-reported usage of the last LLM call. ``prompt_tokens``
        (OpenAI, includes cached tokens) wins; otherwise Anthropic-style
        ``input_tokens`` plus cache reads and writes (``cache_read_tokens`` /
        ``cache_read_input_tokens``, ``cache_write_tokens`` /
        ``cache_creation_input_tokens``), which input_tokens excludes."""
        if not usage:
            return
        u = usage if isinstance(usage, dict) else getattr(usage, "__dict__", {})
        with self._lock:
            if u.get("prompt_tokens") is not None:
                prompt = _int(u.get("prompt_tokens"))
            else:
                prompt = (
                    _int(u.get("input_tokens"))
                    + _int(u.get("cache_read_tokens", u.get("cache_read_input_tokens")))
                    + _int(u.get("cache_write_tokens", u.get("cache_creation_input_tokens")))
                )
            completion = _int(u.get("completion_tokens", u.get("output_tokens")))
            total = _int(u.get("total_tokens")) or prompt + completion
            self.last_prompt_tokens = prompt
            self.last_completion_tokens = completion
            self.last_total_tokens = total

    def should_compress_info(self, prompt_tokens: Optional[int] = None) -> Tuple[bool, Optional[str]]:
        """(should compact now, the core's reason)."""
        with self._lock:
            tokens = self.last_prompt_tokens if prompt_tokens is None else int(prompt_tokens)
            r = self._compactor.should_compress(
                max(tokens, 0), last_compaction_tokens=self.last_compaction_tokens, config=self._config
            )
            self.last_should_compress_reason = r.get("reason")
            return bool(r["should_compress"]), r.get("reason")

    def should_compress(self, prompt_tokens: Optional[int] = None) -> bool:
        """True when the prompt (default: the last reported one) reached the
        threshold and the breaker does not hold it back."""
        return self.should_compress_info(prompt_tokens)[0]

    def compress(
        self,
        messages: List[Message],
        current_tokens: Optional[int] = None,
        focus_topic: Optional[str] = None,
        force: bool = False,
        memory_context: str = "",
    ) -> List[Message]:
        """Compact messages and return the new list (unchanged messages are the
        same objects). ``current_tokens`` (default: the last reported prompt tokens)
        is the reported size the core prefers over its estimate. ``focus_topic`` and
        ``memory_context`` are added to the summarizer's instructions."""
        with self._lock:
            tokens = self.last_prompt_tokens if current_tokens is None else int(current_tokens)
            summarize = self._summarize
            if summarize is not None and (focus_topic or memory_context):
                summarize = _with_extras(summarize, focus_topic, memory_context)
            res = self._compactor.compact(
                messages,
                summarize=summarize,
                force=force,
                prompt_tokens=tokens if tokens > 0 else None,
                config=self._config,
            )
            rep = res.report
            self.last_report = rep
            self.last_archived = res.archived
            after = int(rep.get("tokens_after") or 0)
            if rep.get("compacted"):
                self.compression_count += 1
                # Until the next response reports real usage, the estimate after
                # compaction is the best guess of the prompt size.
                self.last_prompt_tokens = after
            # The breaker: when the result is still over the threshold (whether or not
            # anything could be compacted), the next should_compress gets this size so
            # the same trigger does not fire again and again.
            self.last_compaction_tokens = None if rep.get("fits", True) else after
            return res.messages

    def get_status(self) -> Dict[str, Any]:
        """The standard status fields plus what the core decided."""
        with self._lock:
            last = max(self.last_prompt_tokens, 0)
            rep = self.last_report or {}
            return {
                "name": self.name,
                "last_prompt_tokens": last,
                "threshold_tokens": self.threshold_tokens,
                "context_length": self.context_length,
                "usage_percent": min(100.0, last / self.context_length * 100) if self.context_length else 0,
                "compression_count": self.compression_count,
                "threshold_percent": self.threshold_percent,
                "threshold_rule": self.threshold.get("rule"),
                "last_compaction_fits": rep.get("fits") if rep else None,
                "last_fallback_used": rep.get("fallback_used") if rep else None,
                "breaker_tokens": self.last_compaction_tokens,
            }

    def on_session_reset(self) -> None:
        """/new or /reset: counters and token tracking back to zero."""
        with self._lock:
            self.last_prompt_tokens = 0
            self.last_completion_tokens = 0
            self.last_total_tokens = 0
            self.compression_count = 0
            self.last_compaction_tokens = None
            self.last_report = None
            self.last_archived = []
            self.last_should_compress_reason = None

    # Optional parts of the engine surface, with neutral defaults.

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        """No persisted state: the previous summary is found in the messages."""

    def on_session_end(self, session_id: str, messages: List[Message]) -> None:
        """Nothing to flush."""

    def get_tool_schemas(self) -> List[Dict[str, Any]]:
        return []

    def has_content_to_compress(self, messages: List[Message]) -> bool:
        return len(messages) > self.protect_first_n + 1

    def close(self) -> None:
        if self._owns_compactor:
            self._compactor.close()


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
