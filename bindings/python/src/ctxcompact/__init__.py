"""ctxcompact: context compaction for LLM agents.

The core is Go compiled to one WebAssembly module, run here on wasmtime::

    from ctxcompact import Compactor

    c = Compactor({"model": {"name": "gpt-4.1", "context_length": 128000}})
    result = c.compact(messages, summarize=my_llm_summarizer)
    messages = result.messages          # unchanged messages are your own objects
    print(result.report["tokens_before"], "->", result.report["tokens_after"])

``acompact`` takes an async summarizer; ``ContextEngine`` (alias
``CompactionEngine``, the earlier name) offers the method set of a Hermes-style context engine;
with ``{"context": {"engine": "lossless"}}`` and a ``RecallStore`` (``ctxcompact.recall``,
SQLite, imported only when used) it archives what it compacts and gives the agent
``context_search`` / ``context_expand`` tools.
``ctxcompact.summarizers`` (imported only when used) turns an OpenAI or Anthropic
SDK client, sync or async, into a summarizer (extras ``ctxcompact[openai]``,
``ctxcompact[anthropic]``).
Errors are ``CompactError`` with a stable ``code`` and a JSON-pointer ``path``; a
bad option is an ``OptionError`` (a CompactError that is also a TypeError).
"""

from typing import TYPE_CHECKING

from ._compactor import DEFAULT_TIMEOUT, AsyncSummarizer, Compactor, SyncSummarizer
from ._engine import CompactionEngine, ContextEngine
from ._errors import CompactError, ErrABIMismatch, ErrBadBinary, ErrClosed, OptionError
from ._runtime import ABI_VERSION
from ._types import (
    AISDKMessage,
    AISDKPart,
    ArchiveRows,
    Format,
    GeminiContent,
    GeminiPart,
    ResponsesItem,
    ArchivedMessage,
    CompactReport,
    CompactResult,
    CompressionConfig,
    Config,
    ContextConfig,
    EngineStatus,
    ExpandResult,
    HygieneResult,
    IndexRange,
    InfoResult,
    Message,
    ModelConfig,
    NativeAppServerDecision,
    NativeAppServerState,
    NativeDecision,
    NativeDropped,
    NativeErrorOutcome,
    NativeLocal,
    NativeNotice,
    NativeObservation,
    NativeArchived,
    NativePrepared,
    NativePreparedTrim,
    NativeRequest,
    NativeRewritten,
    NativeRoute,
    NativeSeen,
    NativeSession,
    NativeTrimReplace,
    NativeTrimResult,
    Problem,
    PromptCachingConfig,
    PruneResult,
    RecallMessageRow,
    RecallQuery,
    RecallRange,
    SanitizeResult,
    SearchHit,
    SearchResult,
    SearchResultHit,
    ShouldCompressResult,
    StoredMessage,
    SummaryRequest,
    ThresholdResult,
    TokenCountResult,
    TokensConfig,
    UsageRecord,
    ValidateResult,
)

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from ._recall import RecallStore


def __getattr__(name: str) -> object:
    # RecallStore imports sqlite3: only when it is used, not with the package.
    if name == "RecallStore":
        from ._recall import RecallStore

        return RecallStore
    raise AttributeError(f"module 'ctxcompact' has no attribute {name!r}")


__all__ = [
    "ABI_VERSION",
    "ArchiveRows",
    "ArchivedMessage",
    "AsyncSummarizer",
    "CompactError",
    "Format",
    "AISDKMessage",
    "AISDKPart",
    "GeminiContent",
    "GeminiPart",
    "ResponsesItem",
    "CompactReport",
    "CompactResult",
    "CompactionEngine",
    "Compactor",
    "CompressionConfig",
    "Config",
    "ContextConfig",
    "ContextEngine",
    "DEFAULT_TIMEOUT",
    "EngineStatus",
    "ExpandResult",
    "ErrABIMismatch",
    "ErrBadBinary",
    "ErrClosed",
    "HygieneResult",
    "IndexRange",
    "InfoResult",
    "Message",
    "ModelConfig",
    "NativeAppServerDecision",
    "NativeAppServerState",
    "NativeDecision",
    "NativeDropped",
    "NativeErrorOutcome",
    "NativeLocal",
    "NativeNotice",
    "NativeObservation",
    "NativeArchived",
    "NativePrepared",
    "NativePreparedTrim",
    "NativeRequest",
    "NativeRewritten",
    "NativeRoute",
    "NativeSeen",
    "NativeSession",
    "NativeTrimReplace",
    "NativeTrimResult",
    "OptionError",
    "Problem",
    "PromptCachingConfig",
    "PruneResult",
    "RecallMessageRow",
    "RecallQuery",
    "RecallRange",
    "RecallStore",
    "SanitizeResult",
    "SearchHit",
    "SearchResult",
    "SearchResultHit",
    "ShouldCompressResult",
    "StoredMessage",
    "SummaryRequest",
    "SyncSummarizer",
    "ThresholdResult",
    "TokenCountResult",
    "TokensConfig",
    "UsageRecord",
    "ValidateResult",
    "__version__",
]
