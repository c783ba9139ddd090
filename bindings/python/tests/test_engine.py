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


@pytest.mark.parametrize("turns,chars", [(30, 3000), (1, 100)])
def test_breaker_stops_a_repeated_trigger(shared, turns, chars):
    # A system prompt bigger than the threshold: no compaction can fit. With 30 turns
    # the middle is still summarized; with 1 (and an output too short to prune) there
    # is nothing to compact at all.
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


# --- the engine over the core's engine.* ops (issue 13 item 11) ---------------------------

from ctxcompact import CompactError, ContextEngine, OptionError  # noqa: E402

HERMES = ("should_compress", "compress", "update_from_response", "update_model", "get_status",
          "on_session_reset", "on_session_start", "on_session_end", "get_tool_schemas",
          "has_content_to_compress", "should_compress_preflight", "should_defer_preflight_to_real_usage")
FIELDS = ("last_prompt_tokens", "last_completion_tokens", "last_total_tokens", "threshold_tokens",
          "context_length", "compression_count", "threshold_percent", "protect_first_n", "protect_last_n")


def test_context_engine_is_the_name_and_compaction_engine_keeps_its_positional_order(shared):
    assert issubclass(CompactionEngine, ContextEngine)
    e = ContextEngine({"model": {"name": "gpt-4o", "context_length": 8000}}, summarize=lambda r: "s",
                      compactor=shared)
    for name in HERMES:
        assert callable(getattr(e, name))
    for name in FIELDS:
        assert isinstance(getattr(e, name), (int, float))
    assert (e.name, e.model, e.context_length, e.threshold_tokens) == ("ctxcompact", "gpt-4o", 8000, 6000)
    old = CompactionEngine(lambda r: "s", {"model": {"context_length": 8000}}, compactor=shared)
    assert old.context_length == 8000 and old._summarize is not None
    assert [t["function"]["name"] for t in e.get_tool_schemas()] == ["context_status", "compact_now"]
    assert e.has_content_to_compress([{}] * 5) is True
    assert e.on_session_start("s1", platform="cli") is None and e.on_session_end("s1", []) is None
    assert e.should_compress_preflight([{}] * 50) is False and e.should_defer_preflight_to_real_usage(10) is False


def test_the_status_is_the_cores(shared):
    e = ContextEngine(model="gpt-4o", context_length=8000, provider="openai", compactor=shared)
    st = e.get_status()
    want = shared.call("engine.start", {"config": {"model": {"name": "gpt-4o", "context_length": 8000,
                                                             "provider": "openai"}}})["status"]
    assert st == want
    st["compression_count"] = 99
    assert e.get_status()["compression_count"] == 0, "get_status returns a copy"


@pytest.mark.parametrize("usage,want", [
    ({"prompt_tokens": 7000, "completion_tokens": 12}, (7000, 12, 7012, "openai")),
    ({"input_tokens": 900, "output_tokens": 30, "total_tokens": 930, "input_tokens_details": {"cached_tokens": 800}},
     (900, 30, 930, "responses")),
    ({"input_tokens": 10, "cache_read_input_tokens": 5000, "cache_creation_input_tokens": 90, "output_tokens": 4},
     (5100, 4, 5104, "anthropic")),
    ({"inputTokens": 1234, "outputTokens": 56, "totalTokens": 1290}, (1234, 56, 1290, "ai-sdk")),
    ({"promptTokens": 100, "completionTokens": 5}, (100, 5, 105, "ai-sdk")),
    ({"promptTokenCount": 1234, "candidatesTokenCount": 50, "thoughtsTokenCount": 6}, (1234, 56, 1290, "gemini")),
])
def test_usage_objects_are_read_by_the_core(shared, usage, want):
    e = ContextEngine(compactor=shared)
    e.update_from_response(usage)
    got = (e.last_prompt_tokens, e.last_completion_tokens, e.last_total_tokens, e.last_usage["source"])
    assert got == want


def test_sdk_usage_objects(shared):
    class Model:  # a pydantic model: model_dump(by_alias=..., exclude_none=...)
        def model_dump(self, by_alias=False, exclude_none=False):
            d = {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 300,
                 "cache_creation_input_tokens": None}
            return {k: v for k, v in d.items() if v is not None} if exclude_none else d

    class Plain:  # attributes only
        def __init__(self):
            self.prompt_tokens = 50
            self.completion_tokens = 5
            self.prompt_tokens_details = None

    class Gemini:  # google-genai: snake_case fields, camelCase aliases
        def model_dump(self, by_alias=False, exclude_none=False):
            d = {"prompt_token_count": 700, "candidates_token_count": 9, "cached_content_token_count": None}
            if by_alias:
                d = {"promptTokenCount": 700, "candidatesTokenCount": 9, "cachedContentTokenCount": None}
            return {k: v for k, v in d.items() if v is not None} if exclude_none else d

    e = ContextEngine(compactor=shared)
    e.update_from_response(Gemini())
    assert (e.last_prompt_tokens, e.last_total_tokens, e.last_usage["source"]) == (700, 709, "gemini")
    e.update_from_response(Model())
    assert (e.last_prompt_tokens, e.last_usage["source"]) == (310, "anthropic")
    e.update_from_response(Plain())
    assert (e.last_prompt_tokens, e.last_total_tokens) == (50, 55)
    e.update_from_response(None)
    e.update_from_response({})
    assert e.last_prompt_tokens == 50 and e.last_usage["source"] == "none"
    with pytest.raises(CompactError) as ei:
        e.update_from_response({"prompt_tokens": "7000"})
    assert (ei.value.code, ei.value.path) == ("invalid_request", "/usage/prompt_tokens")
    with pytest.raises(CompactError) as ei:
        e.update_from_response("7000 tokens")
    assert (ei.value.code, ei.value.path) == ("invalid_request", "/usage")


def test_the_state_persists_and_restores_a_session(shared):
    import json

    e = ContextEngine({"model": {"name": "gpt-4o", "context_length": 32000}}, summarize=lambda r: "summary",
                      compactor=shared)
    e.update_from_response({"prompt_tokens": 31000, "completion_tokens": 10})
    e.compress(conversation(), force=True)
    saved = json.dumps(e.state)
    assert e.compression_count == 1
    restored = ContextEngine(state=json.loads(saved), compactor=shared)
    assert restored.get_status() == e.get_status()
    assert restored.config == e.config == {"model": {"name": "gpt-4o", "context_length": 32000}}
    s = e.state
    s["compression_count"] = 7
    assert e.compression_count == 1 and e.state["compression_count"] == 1, "state is a copy"
    with pytest.raises(CompactError) as ei:
        ContextEngine(state={"v": 99}, compactor=shared)
    assert (ei.value.code, ei.value.path[:6]) == ("invalid_state", "/state")
    with pytest.raises(CompactError) as ei:
        ContextEngine(state="opaque", compactor=shared)
    assert (ei.value.code, ei.value.path) == ("invalid_state", "/state")
    with pytest.raises(OptionError) as ei:
        ContextEngine({"model": {"context_length": 8000}}, state=json.loads(saved), compactor=shared)
    assert ei.value.path == "/config"


def test_compress_uses_the_state_config_not_the_shared_compactors():
    c = Compactor({"model": {"context_length": 200000}})
    e = ContextEngine({"model": {"context_length": 8000}}, compactor=c)
    e.compress(conversation(), force=True)
    assert e.last_report["threshold_tokens"] == 6000
    c.close()


def test_update_model_keeps_the_route_and_never_the_key(shared):
    e = ContextEngine({"model": {"name": "a", "provider": "openrouter", "context_length": 100000}}, compactor=shared)
    e.update_model("b", 64000, base_url="https://example.invalid/v1", api_key="sk-secret", api_mode="chat")
    assert (e.model, e.provider, e.context_length) == ("b", "", 64000)
    st = e.state
    assert (st["base_url"], st["api_mode"]) == ("https://example.invalid/v1", "chat")
    assert "sk-secret" not in str(st)
    with pytest.raises(CompactError) as ei:
        e.update_model("b", 0)
    assert (ei.value.code, ei.value.path) == ("invalid_request", "/context_length")


def test_reset_keeps_the_config(shared):
    e = ContextEngine({"model": {"context_length": 32000}}, summarize=lambda r: "s", compactor=shared)
    e.update_from_response({"prompt_tokens": 31000})
    e.compress(conversation(), force=True)
    e.on_session_reset()
    assert (e.compression_count, e.last_prompt_tokens, e.context_length) == (0, 0, 32000)
    assert e.last_report is None and e.last_archived == [] and e.last_usage is None
    assert e.get_status()["last_compaction_fits"] is None


def test_a_host_resets_the_counters_by_assignment(shared):
    """Hermes' reset_session_state writes the fields directly: the writes reach the
    state, so the core's trigger sees them."""
    e = ContextEngine({"model": {"context_length": 8000}}, compactor=shared)
    e.update_from_response({"prompt_tokens": 7000, "completion_tokens": 5})
    assert e.should_compress() is True
    e.last_prompt_tokens = 0
    e.last_completion_tokens = 0
    e.last_total_tokens = 0
    e.compression_count = 0
    assert e.should_compress() is False
    assert e.state["last_prompt_tokens"] == 0 and e.get_status()["last_prompt_tokens"] == 0
    e.last_prompt_tokens = 7500
    assert e.should_compress() is True
    with pytest.raises(CompactError) as ei:
        e.last_prompt_tokens = -2
    assert ei.value.code == "invalid_state" and ei.value.path.startswith("/state")
    assert e.last_prompt_tokens == 7500, "a refused write changes nothing"
    # -1 is Hermes' "compaction just ran, awaiting real usage" (test_hermes.py): the
    # field reads it back, the state keeps its count.
    e.last_prompt_tokens = -1
    assert e.last_prompt_tokens == -1 and e.state["last_prompt_tokens"] == 7500
    e.last_prompt_tokens = 7500
    assert e.last_prompt_tokens == 7500
    with pytest.raises(OptionError):
        e.compression_count = "3"
