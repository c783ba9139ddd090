"""Lossless recall: ``from ctxcompact.recall import RecallStore``.

Its own entry point, so that ``import ctxcompact`` (the plain compactor) never
imports sqlite3; ``ctxcompact.RecallStore`` is the same class, loaded on first use.
``PostgresRecallStore`` keeps the archive on a PostgreSQL server (psycopg 3, imported
when one is made: ``pip install 'ctxcompact[postgres]'``); ``open_store(url)`` opens
either from a URL or ``CTXCOMPACT_RECALL_URL``. See ``RecallStore`` and the README
section "Lossless recall".
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
from ._recall_postgres import POSTGRES_SCHEMA_SQL, PostgresRecallStore, open_store

__all__ = ["RecallStore", "PostgresRecallStore", "open_store", "POSTGRES_SCHEMA_SQL", "plan_query", "split_terms", "fts5_trigram_available", "SCHEMA_VERSION", "SCHEMA_SQL", "BUSY_TIMEOUT"]
