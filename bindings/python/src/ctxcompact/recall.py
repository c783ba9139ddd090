"""Lossless recall: ``from ctxcompact.recall import RecallStore``.

Its own entry point, so that ``import ctxcompact`` (the plain compactor) never
imports sqlite3; ``ctxcompact.RecallStore`` is the same class, loaded on first use.
See ``RecallStore`` and the README section "Lossless recall".
"""

from ._recall import (
    BUSY_TIMEOUT,
    SCHEMA_SQL,
    SCHEMA_VERSION,
    RecallStore,
    fts5_trigram_available,
    plan_query,
    split_terms,
)

__all__ = ["RecallStore", "plan_query", "split_terms", "fts5_trigram_available", "SCHEMA_VERSION", "SCHEMA_SQL", "BUSY_TIMEOUT"]
