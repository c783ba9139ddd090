"""ContextEngine with lossless recall (issue 17): the options, compressor mode
unchanged, and (with the core's recall ops) the lossless engine over shared traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ctxcompact
from ctxcompact import ContextEngine, OptionError
from ctxcompact.recall import RecallStore


def test_store_and_session_options(compactor, tmp_path: Path):
    with pytest.raises(OptionError) as e:
        ContextEngine(compactor=compactor, store=3)  # type: ignore[arg-type]
    assert e.value.path == "/store"
    with pytest.raises(OptionError) as e:
        ContextEngine(compactor=compactor, session_id=7)  # type: ignore[arg-type]
    assert e.value.path == "/session_id"
    with pytest.raises(OptionError):
        ContextEngine(compactor=compactor, session_id="")
    with pytest.raises(OptionError):
        ContextEngine(compactor=compactor, stor="x.db")  # type: ignore[call-arg]
    a = ContextEngine(compactor=compactor)
    b = ContextEngine(compactor=compactor)
    assert a.session_id != b.session_id and a.session_id.startswith("session-")
    a.on_session_start("hermes-session-1")
    assert a.session_id == "hermes-session-1"
    # The earlier name takes them too.
    c = ctxcompact.CompactionEngine(None, None, compactor=compactor, session_id="s")
    assert c.session_id == "s"


def test_compressor_mode_has_no_tools_and_no_store(compactor, tmp_path: Path):
    path = tmp_path / "never.db"
    e = ContextEngine({"model": {"context_length": 8000}}, compactor=compactor, store=path, session_id="s")
    assert e.lossless is False
    assert e.get_tool_schemas() == [] and e.get_tool_schemas("anthropic") == []
    out = json.loads(e.handle_tool_call("context_search", {"query": "x"}))
    assert "unknown tool" in out["error"] and "lossless" in out["error"]
    from conftest import conversation

    msgs = conversation(30)
    e.compress(msgs, force=True)
    assert e.last_report["compacted"] and e.last_range is None
    # Nothing archived, no file made: compressor mode never opens the store.
    assert not path.exists()
    e.close()
    with pytest.raises(OptionError):
        e.get_tool_schemas(fmt="openai")  # type: ignore[call-arg]


def test_a_given_store_is_not_closed_by_the_engine(compactor):
    store = RecallStore()
    e = ContextEngine(compactor=compactor, store=store)
    e.close()
    assert store.sessions() == []
    store.close()
