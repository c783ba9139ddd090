"""CompactionEngine (the Hermes engine method set) over a simulated session."""

from __future__ import annotations

import pytest

from ctxcompact import CompactionEngine, Compactor

from conftest import conversation, load_trace, need_traces


@pytest.fixture(scope="module")
def shared():
    c = Compactor()
    yield c
    c.close()


def _pick_trace():
    traces = need_traces()
    # A coding-agent trace with many tool calls, big enough to trigger several times.
    named = [p for p in traces if "mini-swe-agent-deepseek-django" in p.name]
    return named[0] if named else max(traces, key=lambda p: p.stat().st_size)


def test_engine_surface(shared):
    e = CompactionEngine(model="gpt-4.1", context_length=200000, config={"compression": {"small_context_floor": 0}},
                         compactor=shared)
    assert e.name == "ctxcompact"
    assert (e.context_length, e.threshold_tokens, e.threshold_percent) == (200000, 100000, 0.5)
    assert e.compression_count == 0 and e.last_prompt_tokens == 0
    assert e.should_compress() is False
    assert e.should_compress(100000) is True
    e.update_from_response({"prompt_tokens": 120000, "completion_tokens": 500, "total_tokens": 120500})
    assert (e.last_prompt_tokens, e.last_completion_tokens, e.last_total_tokens) == (120000, 500, 120500)
    assert e.should_compress() is True
    # Anthropic-style usage: input_tokens excludes cache reads and writes.
    e.update_from_response({"input_tokens": 1000, "cache_read_input_tokens": 50000,
                            "cache_creation_input_tokens": 2000, "output_tokens": 10})
    assert e.last_prompt_tokens == 53000 and e.last_completion_tokens == 10
    e.update_from_response({"input_tokens": 10, "cache_read_tokens": 20, "cache_write_tokens": 30})
    assert e.last_prompt_tokens == 60
    st = e.get_status()
    for k in ("last_prompt_tokens", "threshold_tokens", "context_length", "usage_percent", "compression_count"):
        assert k in st
    assert st["usage_percent"] == pytest.approx(60 / 200000 * 100)
    # A model switch re-resolves the threshold (small-context floor back on: 0.75).
    e2 = CompactionEngine(model="a", context_length=200000, compactor=shared)
    assert e2.threshold_tokens == 150000
    e2.update_model("b", 100000, provider="openrouter")
    assert (e2.context_length, e2.threshold_tokens) == (100000, 75000)
    assert e2.config["model"] == {"name": "b", "context_length": 100000, "provider": "openrouter"}
    e.on_session_reset()
    assert (e.last_prompt_tokens, e.compression_count) == (0, 0)


def test_simulated_session_on_a_shared_trace(shared):
    trace = load_trace(_pick_trace())
    requests = []

    def summarize(request):
        requests.append(request)
        return f"Summary #{len(requests)}: Goal, Progress, Next Steps of the task so far."

    ctx = 32000
    engine = CompactionEngine(summarize, model="deepseek-chat", context_length=ctx,
                              config={"compression": {"small_context_floor": 0, "threshold": 0.5}},
                              compactor=shared)
    assert engine.threshold_tokens == 16000
    convo = []
    fired = []
    statuses = []
    for i, m in enumerate(trace):
        if m["role"] == "assistant" and convo:
            # Before the LLM call: does the last reported prompt size trigger?
            before = engine.last_prompt_tokens
            if engine.should_compress():
                assert before >= engine.threshold_tokens
                n = engine.compression_count
                convo = engine.compress(convo)
                assert engine.compression_count == n + 1
                assert engine.last_report["compacted"] is True
                assert engine.last_prompt_tokens < before, "the status moves down after compaction"
                fired.append((i, before, engine.last_report["tokens_after"]))
            else:
                assert before < engine.threshold_tokens or engine.last_compaction_tokens is not None
            # The "API" reports the prompt it was sent: here, the core's estimate.
            prompt = shared.count_tokens(convo)["total"]
            engine.update_from_response({"prompt_tokens": prompt, "completion_tokens": 100,
                                         "total_tokens": prompt + 100})
            statuses.append(engine.get_status())
        convo.append(m)

    assert len(fired) >= 2, f"compaction should fire several times on this trace, fired {fired}"
    assert engine.compression_count == len(fired) == len(requests)
    assert requests[0]["iterative"] is False
    assert any(r["iterative"] for r in requests[1:]), "re-compression updates the previous summary"
    assert statuses[-1]["compression_count"] == len(fired)
    assert max(s["last_prompt_tokens"] for s in statuses) < ctx, "the session never overflows its window"
    assert any(s["usage_percent"] >= 50 for s in statuses)
    # The conversation still holds the summary and the newest messages, unchanged.
    assert convo[-1] is trace[-1]
    assert any("Summary #" in str(m.get("content")) for m in convo)
    engine.on_session_reset()
    assert engine.get_status()["compression_count"] == 0


@pytest.mark.parametrize("turns,chars", [(30, 3000), (8, 400)])
def test_breaker_stops_a_repeated_trigger(shared, turns, chars):
    # A system prompt bigger than the threshold: no compaction can fit. With 30 turns
    # the middle is still summarized; with 8 there is nothing to compact at all.
    msgs = conversation(n_turns=turns, tool_output_chars=chars)
    msgs[0] = {"role": "system", "content": "rule. " * 30000}
    engine = CompactionEngine(lambda r: "short summary", context_length=32000, compactor=shared)
    engine.update_from_response({"prompt_tokens": shared.count_tokens(msgs)["total"]})
    assert engine.should_compress() is True
    out = engine.compress(msgs)
    rep = engine.last_report
    assert rep["fits"] is False
    assert rep["compacted"] is (turns == 30)
    assert engine.compression_count == (1 if turns == 30 else 0)
    assert engine.last_compaction_tokens == rep["tokens_after"]
    # The same prompt again (the agent goes on): the breaker holds the trigger back.
    engine.update_from_response({"prompt_tokens": shared.count_tokens(out)["total"]})
    ok, reason = engine.should_compress_info()
    assert ok is False and reason
    assert engine.get_status()["breaker_tokens"] == engine.last_compaction_tokens
    # A model with a bigger window clears the breaker.
    engine.update_model("bigger", 400000)
    assert engine.last_compaction_tokens is None


def test_focus_topic_reaches_the_summarizer(shared):
    seen = []
    engine = CompactionEngine(lambda r: seen.append(r) or "summary", context_length=32000, compactor=shared)
    engine.compress(conversation(), current_tokens=31000, focus_topic="the database schema")
    assert seen and "the database schema" in seen[0]["messages"][-1]["content"]
    assert engine.compression_count == 1
