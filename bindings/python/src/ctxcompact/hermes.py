"""ctxcompact as Hermes Agent's context engine (a Hermes plugin).

Import this module only inside Hermes Agent (``pip install hermes-agent``): it
subclasses Hermes' ``agent.context_engine.ContextEngine``. ctxcompact itself does
not depend on Hermes; the package declares this module as a plugin in Hermes'
entry-point group (``hermes_agent.plugins``), so with both installed a user turns it
on in ``~/.hermes/config.yaml``::

    plugins:
      enabled: [ctxcompact]
    context:
      engine: ctxcompact
    ctxcompact:                 # optional
      config: {compression: {threshold: 0.5}}   # a ctxcompact config
      summarizer: auxiliary     # auxiliary (default): Hermes' compression model;
                                # builtin: the core's deterministic summary, no LLM call
      timeout: 120              # seconds per compaction

Hermes then calls ``register(ctx)`` at plugin discovery, which registers one
``HermesContextEngine``; Hermes deep-copies it for every agent it builds and drives
it through its own loop (``update_model``, ``update_from_response`` after every
call, ``should_compress``, ``compress``, ``on_session_start``, the ``-1`` sentinel
in ``last_prompt_tokens``, ``get_tool_schemas`` / ``handle_tool_call`` in lossless
mode). A directory plugin (``~/.hermes/plugins/ctxcompact/`` with a
``plugin.yaml`` and an ``__init__.py`` that does
``from ctxcompact.hermes import register``) is the same engine by the other route.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from agent.context_engine import ContextEngine as _HermesEngine  # type: ignore[import-not-found, import-untyped, unused-ignore]

from ._compactor import SummaryTimeout, summary_time_left
from ._engine import ContextEngine
from ._errors import OptionError
from ._types import Config, Message, SummaryRequest

__all__ = ["HermesContextEngine", "register", "make_engine", "auxiliary_summary", "load_settings"]

#: The engine's name, and so the value of Hermes' ``context.engine``.
NAME = "ctxcompact"


class HermesContextEngine(ContextEngine, _HermesEngine):  # type: ignore[misc, unused-ignore]
    """``ctxcompact.ContextEngine`` that is also a Hermes ``ContextEngine`` (Hermes
    checks ``isinstance`` when a plugin registers an engine). Everything is
    ctxcompact's; this class adds what only a Hermes host needs: the keyword
    arguments Hermes passes beyond the engine method set are accepted, and the main
    model's runtime (from ``update_model``) is kept in memory for the
    ``auxiliary`` summarizer (never in the state)."""

    def __init__(self, config: Optional[Config] = None, **options: Any) -> None:
        super().__init__(config, **options)
        self._runtime: Dict[str, Any] = {}

    def __deepcopy__(self, memo: Dict[int, Any]) -> "HermesContextEngine":
        new = super().__deepcopy__(memo)
        assert isinstance(new, HermesContextEngine)
        if self._summarize == self._auxiliary:  # each copy asks with its own model's runtime
            new._summarize = new._auxiliary
        return new

    def _auxiliary(self, request: SummaryRequest) -> str:
        return auxiliary_summary(request, self._runtime)

    def update_model(self, model: str, context_length: int, base_url: Optional[str] = "",
                     api_key: Optional[str] = "", provider: Optional[str] = "",
                     api_mode: Optional[str] = "", **unknown: Any) -> None:
        super().update_model(model, context_length, base_url or "", api_key or "", provider or "",
                             api_mode or "")
        self._runtime = {"model": model, "provider": provider or "", "base_url": base_url or "",
                         "api_key": api_key or "", "api_mode": api_mode or ""}

    def handle_tool_call(self, name: str, args: Any = None, messages: Optional[List[Message]] = None,
                         **kwargs: Any) -> str:
        return super().handle_tool_call(name, args, messages)

    def get_tool_schemas(self, format: str = "openai", **kwargs: Any) -> List[Dict[str, Any]]:
        return super().get_tool_schemas(format)


def auxiliary_summary(request: SummaryRequest, runtime: Optional[Dict[str, Any]] = None) -> str:
    """Ask Hermes' compression model for the summary, as Hermes' own compressor
    does: ``agent.auxiliary_client.call_llm(task="compression", ...)`` with the main
    model's ``runtime`` (model, provider, base_url, api_key, api_mode) as the
    fallback, the request's system and user messages, and its ``max_tokens``
    (Hermes resolves provider and model from ``auxiliary.compression`` in
    config.yaml), and the compaction's time left as the call's ``timeout``, so an
    abandoned call ends by itself. An error or an empty answer is the summarizer's
    failure, from which the core falls back to its own summary."""
    from agent.auxiliary_client import call_llm  # type: ignore[import-not-found, import-untyped, unused-ignore]

    left = summary_time_left()  # the compaction's time left, as the request's timeout
    if left is not None and left <= 0:
        raise SummaryTimeout("ctxcompact: no time left for the summary request")
    response = call_llm(task="compression", main_runtime=dict(runtime or {}) or None,
                        messages=[dict(m) for m in request["messages"]],
                        max_tokens=request.get("max_tokens"), timeout=left)
    message = response.choices[0].message
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    if not isinstance(content, str) or not content.strip():
        raise RuntimeError("ctxcompact: the compression model answered no text")
    return content


def load_settings() -> Dict[str, Any]:
    """The ``ctxcompact`` section of Hermes' config.yaml ({} when there is none)."""
    from hermes_cli.config import load_config  # type: ignore[import-not-found, import-untyped, unused-ignore]

    section = (load_config() or {}).get(NAME) or {}
    if not isinstance(section, dict):
        raise OptionError(f"the {NAME} section of config.yaml must be a mapping", "/" + NAME)
    return section


def make_engine(settings: Optional[Dict[str, Any]] = None) -> HermesContextEngine:
    """The engine the plugin registers, from the config.yaml section (see the module
    doc): ``config``, ``summarizer`` (``auxiliary`` or ``builtin``), ``timeout``."""
    s = dict(load_settings() if settings is None else settings)
    unknown = sorted(set(s) - {"config", "summarizer", "timeout"})
    if unknown:
        raise OptionError(f"unknown {NAME} setting {unknown[0]!r} in config.yaml", f"/{NAME}/{unknown[0]}")
    kind = s.get("summarizer", "auxiliary")
    if kind not in ("auxiliary", "builtin"):
        raise OptionError(f"{NAME}.summarizer must be auxiliary or builtin, not {kind!r}", f"/{NAME}/summarizer")
    options: Dict[str, Any] = {}
    if "timeout" in s:
        options["timeout"] = s["timeout"]
    engine = HermesContextEngine(s.get("config"), **options)
    if kind == "auxiliary":
        engine._summarize = engine._auxiliary
    return engine


def register(ctx: Any) -> None:
    """Hermes' plugin entry point: registers the engine (``context.engine:
    ctxcompact`` selects it)."""
    ctx.register_context_engine(make_engine())
