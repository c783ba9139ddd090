"""ctxcompact: context compaction for LLM agents.

The core is Go compiled to one WebAssembly module, run here on wasmtime::

    from ctxcompact import Compactor

    c = Compactor({"model": {"name": "gpt-4.1", "context_length": 128000}})
    result = c.compact(messages, summarize=my_llm_summarizer)
    messages = result.messages          # unchanged messages are your own objects
    print(result.report["tokens_before"], "->", result.report["tokens_after"])

``acompact`` takes an async summarizer; ``ContextEngine`` (alias
``CompactionEngine``, the earlier name) offers the method set of a Hermes-style context engine.
Errors are ``CompactError`` with a stable ``code`` and a JSON-pointer ``path``; a
bad option is an ``OptionError`` (a CompactError that is also a TypeError).
"""

from ._compactor import DEFAULT_TIMEOUT, AsyncSummarizer, Compactor, SyncSummarizer
from ._engine import CompactionEngine, ContextEngine
from ._errors import CompactError, ErrABIMismatch, ErrBadBinary, ErrClosed, OptionError
from ._runtime import ABI_VERSION
from ._types import (
    ArchivedMessage,
    CompactReport,
    CompactResult,
    CompressionConfig,
    Config,
    EngineStatus,
    HygieneResult,
    IndexRange,
    InfoResult,
    Message,
    ModelConfig,
    Problem,
    PromptCachingConfig,
    PruneResult,
    SanitizeResult,
    ShouldCompressResult,
    SummaryRequest,
    ThresholdResult,
    TokenCountResult,
    TokensConfig,
    UsageRecord,
    ValidateResult,
)

__version__ = "0.1.0"

__all__ = [
    "ABI_VERSION",
    "ArchivedMessage",
    "AsyncSummarizer",
    "CompactError",
    "CompactReport",
    "CompactResult",
    "CompactionEngine",
    "Compactor",
    "CompressionConfig",
    "Config",
    "ContextEngine",
    "DEFAULT_TIMEOUT",
    "EngineStatus",
    "ErrABIMismatch",
    "ErrBadBinary",
    "ErrClosed",
    "HygieneResult",
    "IndexRange",
    "InfoResult",
    "Message",
    "ModelConfig",
    "OptionError",
    "Problem",
    "PromptCachingConfig",
    "PruneResult",
    "SanitizeResult",
    "ShouldCompressResult",
    "SummaryRequest",
    "SyncSummarizer",
    "ThresholdResult",
    "TokenCountResult",
    "TokensConfig",
    "UsageRecord",
    "ValidateResult",
    "__version__",
]
