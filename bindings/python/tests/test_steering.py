"""Steering a compaction: the config's compression.instructions and compact()'s
focus reach the summarizer's request, and the built-in summary keeps what matches
the focus first (docs/STEERING.md)."""

import asyncio
import json
import re

import pytest

from ctxcompact import CompactError, Compactor, ContextEngine

from conftest import load_trace, need_trace

CONFIG = {"model": {"context_length": 3000}, "compression": {"instructions": "Keep every file path."}}


def conversation():
    msgs = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the failing tests."}]
    for i, topic in enumerate(["parser", "ledger", "cache", "router", "auth"]):
        msgs.append({"role": "assistant", "content": f"Reading {topic}.", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": f'{{"path":"src/{topic}.py"}}'}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"# {topic} code\n" * 80})
    msgs += [{"role": "assistant", "content": "Done reading."}, {"role": "user", "content": "Fix it."}]
    return msgs


def test_compact_sends_instructions_and_focus():
    asked = []

    def summarize(req):
        asked.append(req)
        return "## Goal\nFix the tests."

    res = Compactor(config=CONFIG).compact(conversation(), summarize, force=True, focus="the ledger module")
    assert res.report["compacted"]
    prompt = asked[0]["messages"][1]["content"]
    assert "Standing instructions for every summary (follow them):\nKeep every file path." in prompt
    assert prompt.endswith("Focus topic: give priority to everything about the ledger module.")


def test_acompact_takes_the_focus():
    async def summarize(req):
        return req["messages"][1]["content"][-80:]

    res = asyncio.run(Compactor(config=CONFIG).acompact(conversation(), summarize, force=True, focus="ledger"))
    summary = res.messages[res.report["head_end"]]["content"]
    assert "give priority to everything about ledger." in summary


def test_builtin_summary_keeps_a_focus_section():
    res = Compactor(config=CONFIG).compact(conversation(), force=True, focus="ledger")
    summary = res.messages[res.report["head_end"]]["content"]
    section = summary.split("## Focus: ledger\n", 1)[1].split("\n\n", 1)[0]
    assert re.search(r'^- #\d+ assistant: call read_file\(path="src/ledger\.py"\)$', section, re.M), section
    assert all("ledger" in line.lower() for line in section.splitlines()), section


def test_bad_focus_and_instructions_are_refused():
    with pytest.raises(CompactError) as e:
        Compactor().compact(conversation(), force=True, focus="x" * 1001)
    assert (e.value.code, e.value.path) == ("invalid_request", "/focus")
    with pytest.raises(CompactError) as e:
        Compactor(config={"compression": {"instructions": "x" * 8001}})
    assert (e.value.code, e.value.path) == ("invalid_config", "/config/compression/instructions")


def test_a_compressor_engine_gives_the_agent_context_status_and_compact_now():
    from ctxcompact import ContextEngine

    asked = []

    def summarize(req):
        asked.append(req)
        return "## Goal\nFix the tests."

    engine = ContextEngine({"model": {"context_length": 3000}}, summarize=summarize)
    assert [t["name"] for t in engine.get_tool_schemas("anthropic")] == ["context_status", "compact_now"]
    assert not engine.should_compress(500)
    assert json.loads(engine.handle_tool_call("compact_now", {"focus": "the ledger module"}))["ok"] is True
    assert engine.get_status()["compaction_requested"] is True
    assert engine.should_compress(500), "the agent asked"
    out = engine.compress(conversation())
    assert len(out) < len(conversation()), "below the threshold, the requested compaction is forced"
    assert asked[0]["messages"][1]["content"].endswith("Focus topic: give priority to everything about the ledger module.")
    status = json.loads(engine.handle_tool_call("context_status", "{}"))
    assert (status["compaction_requested"], status["compactions"], status["window"]) == (False, 1, 3000)
    assert isinstance(status["last_compaction"]["summarized_messages"], list)
    assert "focus must be a string" in json.loads(engine.handle_tool_call("compact_now", {"focus": 3}))["error"]


def test_a_small_summarizer_window_gets_the_summary_in_chunks(compactor):
    """A summarizer whose window is a third of what one summary request would
    take (about 33,000 tokens) gets the summary in chunks, each request fitting
    it: a summarizer refusing larger input never refuses."""
    messages = load_trace(need_trace("claude-code-spotter-4d5611e5-precompact.json"))
    window = 11000
    asked, refused = [], []

    def summarize(req):
        n = compactor.count_tokens(req["messages"], "o200k_base")["total"]
        if n + req["max_tokens"] > window:
            refused.append(n)
            raise RuntimeError(f"the input is {n + req['max_tokens']} tokens; the window is {window}")
        asked.append(req["middle"])
        return f"## Goal\nKeep going.\n- request {len(asked)} read turns {req['middle']['from']}-{req['middle']['to'] - 1}"

    engine = ContextEngine({"model": {"context_length": 64000}, "compression": {"summary_context_length": window}},
                           summarize=summarize, compactor=compactor)
    out = engine.compress(messages, force=True)
    rep = engine.last_report
    assert refused == [], "no request above the window"
    assert rep["fallback_used"] is False
    assert len(asked) >= 3
    assert rep["summary_chunks"] == len(asked)
    for a, b in zip(asked, asked[1:]):
        assert b["from"] == a["to"], "the chunks follow each other"
    assert (asked[0]["from"], asked[-1]["to"]) == (rep["summarized"]["from"], rep["summarized"]["to"])
    assert f"request {len(asked)} read turns" in json.dumps(out[rep["head_end"]])


def test_background_compaction_is_spliced_at_the_trigger():
    """prepare_compaction in a thread while the session goes on; the compress at
    the trigger splices it into the grown conversation, asking the summarizer
    nothing, the messages appended since verbatim after the summary."""
    import threading

    prefix = conversation()
    grown = prefix + [{"role": "assistant", "content": "The parser test fails on empty input."},
                      {"role": "user", "content": "Fix that first."}]
    asked, release = threading.Event(), threading.Event()
    calls = []

    def summarize(req):
        calls.append(req)
        asked.set()
        assert release.wait(30)
        return "## Goal\nFix the failing tests, the parser's first."

    engine = ContextEngine({"model": {"context_length": 3000}}, summarize=summarize)
    threshold = engine.get_status()["threshold_tokens"]
    assert engine.should_prepare(int(threshold * 0.9)) is True
    assert engine.should_prepare(int(threshold * 0.5)) is False, "below prepare_ratio 0.85"
    out = {}
    worker = threading.Thread(target=lambda: out.update(engine.prepare_compaction(prefix)))
    worker.start()
    assert asked.wait(30)  # the summarizer is running: the session goes on
    engine.update_from_response({"prompt_tokens": 2100, "completion_tokens": 40})
    assert engine.should_compress() is False
    release.set()
    worker.join(30)
    assert out["prepared"]["messages"] == len(prefix)
    assert engine.state["prepared"]["messages"] == len(prefix), "the engine keeps it"
    before = len(calls)
    res = engine.compress(grown, current_tokens=threshold + 100)
    assert engine.last_report["prepared"] is True
    assert len(calls) == before, "the summarizer is not asked at the trigger"
    assert res[-2:] == grown[-2:] and res[-1] is grown[-1]
    assert "the parser's first" in json.dumps(res[engine.last_report["head_end"]])
    with pytest.raises(CompactError) as e:
        engine.prepare_compaction(prefix, force=True)
    assert e.value.path == "/force"


def test_pins_are_kept_and_held_by_the_engine(compactor):
    """A pinned tool group is kept verbatim after the summary (the caller's own
    objects); the engine keeps the pin at its new index in the next compaction."""
    msgs = conversation()
    cfg = {"model": {"context_length": 3000}}
    res = compactor.compact(msgs, force=True, config=cfg, pins=["c1"])
    assert res.report["pinned"] == [4, 5]
    assert res.messages[res.report["head_end"] + 1] is msgs[4]
    engine = ContextEngine(cfg, compactor=compactor)
    first = engine.compress(msgs, force=True, pins=[4])
    assert engine.last_report["pinned"] == [4, 5]
    grown = first + [{"role": "assistant", "content": "Fixed the ledger."}, {"role": "user", "content": "Go on."}]
    second = engine.compress(grown, force=True)
    assert len(engine.last_report["pinned"]) == 2, "the pin held"
    assert second[engine.last_report["head_end"] + 1] is msgs[4]
    with pytest.raises(CompactError) as e:
        compactor.compact(msgs, force=True, config=cfg, pins=["nope"])
    assert (e.value.code, e.value.path) == ("invalid_request", "/pins/0")
    with pytest.raises(CompactError) as e:
        compactor.compact(msgs, pins=[True])
    assert e.value.path == "/pins"


def test_see_and_undo(compactor):
    """The status has the last summary; undo gives back the compaction's input,
    then what came after; a second undo is refused."""
    engine = ContextEngine({"model": {"context_length": 3000}}, compactor=compactor)
    msgs = conversation()
    out = engine.compress(msgs, force=True)
    status = engine.get_status()
    assert status["can_undo"] is True and status["last_compaction"]["summary"].startswith("## Goal")
    back = engine.undo(out + [{"role": "user", "content": "Undo that."}])
    assert back == msgs + [{"role": "user", "content": "Undo that."}]
    assert engine.get_status().get("can_undo") is not True
    with pytest.raises(CompactError) as e:
        engine.undo(back)
    assert e.value.code == "invalid_state" and "no compaction to undo" in str(e.value)


def test_range_compaction(compactor):
    """range summarizes exactly the messages named, through compact and compress."""
    cfg = {"model": {"context_length": 200000}}
    res = compactor.compact(conversation(), config=cfg, range={"from": 4, "to": 8})
    assert res.report["summarized"] == {"from": 4, "to": 8}
    engine = ContextEngine(cfg, compactor=compactor)
    engine.compress(conversation(), range={"from": 2, "to": 6})
    assert engine.last_report["summarized"] == {"from": 2, "to": 6}
    with pytest.raises(CompactError) as e:
        compactor.compact(conversation(), range={"from": 5, "to": 8})
    assert e.value.path == "/range/from"
