"""ctxcompact as Hermes Agent's context engine, in Hermes' own agent loop.

hermes-agent (pinned in test.sh, a test dependency only) finds the plugin through
ctxcompact's entry point (``hermes_agent.plugins``), ``context.engine: ctxcompact``
in its config.yaml selects it, and ``AIAgent.run_conversation`` replays a recorded
trace against the loopback model (examples/agent-loop/python/loopback.py): the
loopback answers with the trace's assistant turns, a ``bash`` tool registered here
answers with the trace's tool results, and the summaries go through Hermes' own
auxiliary client to the same loopback.
"""

from __future__ import annotations

import copy
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

import ctxcompact

ROOT = Path(os.environ.get("CTXCOMPACT_REPO_ROOT", Path(__file__).resolve().parents[3]))
TRACE = ROOT / "examples" / "astropy-12907.json"
TEMPLATE_START = "You summarize the earlier part of a long conversation"
FINAL = "Done: the fix is submitted."

CONFIG_YAML = """\
model:
  default: replay-model
  context_length: 64000
plugins:
  enabled: [ctxcompact]
context:
  engine: ctxcompact
ctxcompact:
  summarizer: auxiliary
  config: {compression: {threshold: 0.15, small_context_floor: 0}}
"""


@pytest.fixture(scope="module")
def hermes_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hermes home with the config above, set before Hermes is first imported
    (its plugin discovery runs once per process)."""
    home = tmp_path_factory.mktemp("hermes-home")
    (home / "config.yaml").write_text(CONFIG_YAML)
    old = os.environ.get("HERMES_HOME")
    os.environ["HERMES_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("HERMES_HOME", None)
    else:
        os.environ["HERMES_HOME"] = old


def _loopback() -> Any:
    """examples/agent-loop/python/loopback.py, loaded by its path: that directory
    also holds agent.py, which must not shadow Hermes' ``agent`` package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ctxcompact_loopback", ROOT / "examples" / "agent-loop" / "python" / "loopback.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _calls(monkeypatch: pytest.MonkeyPatch, cls: type, names: List[str]) -> Dict[str, List[Any]]:
    """Spy on the engine's methods (the class's, so the engine Hermes deep-copies
    from the registered one is spied on too)."""
    seen: Dict[str, List[Any]] = {n: [] for n in names}
    for n in names:
        orig = getattr(cls, n)

        def spy(self: Any, *a: Any, __n: str = n, __orig: Any = orig, **kw: Any) -> Any:
            seen[__n].append((a, kw))
            return __orig(self, *a, **kw)

        monkeypatch.setattr(cls, n, spy)
    return seen


def test_hermes_agent_loop_runs_on_ctxcompact(hermes_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.context_engine import ContextEngine as HermesEngine
    from run_agent import AIAgent
    from tools.registry import registry

    from ctxcompact.hermes import HermesContextEngine

    lb = _loopback()
    trace = json.loads(TRACE.read_text())
    recorded = trace["messages"]
    first_user = next(m for m in recorded if m["role"] == "user")
    results = [m["content"] for m in recorded if m["role"] == "tool"]
    n_turns = sum(1 for m in recorded if m["role"] == "assistant")
    # The trace ends on a tool call; a last answer without one ends Hermes' loop.
    replay = dict(trace, messages=recorded + [{"role": "assistant", "content": FINAL}])

    served: List[str] = []

    def bash(args: Dict[str, Any], **kw: Any) -> str:
        served.append(args.get("command", ""))
        i = len(served) - 1
        return results[i] if i < len(results) else "(the recording has no more output)"

    registry.register(name="bash", toolset="ctxcompact-replay", handler=bash,
                      schema={"name": "bash", "description": "Run a shell command",
                              "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                                             "required": ["command"]}})
    spied = _calls(monkeypatch, HermesContextEngine,
                   ["update_model", "update_from_response", "should_compress", "compress", "on_session_start"])
    try:
        with lb.LoopbackModel(replay, trace_name="astropy-12907") as model:
            agent = AIAgent(base_url=model.openai_base_url, api_key="loopback", model="replay-model",
                            provider="custom", enabled_toolsets=["ctxcompact-replay"], quiet_mode=True,
                            skip_context_files=True, skip_memory=True, max_iterations=n_turns + 10, tool_delay=0)
            # The loopback answers whole responses, not SSE streams: Hermes' own
            # non-streaming path (the one it switches to for such providers).
            agent._disable_streaming = True
            engine = agent.context_compressor
            # Hermes selected our engine by context.engine, through the entry point.
            assert type(engine) is HermesContextEngine and isinstance(engine, HermesEngine)
            assert engine.name == "ctxcompact" and engine.context_length == 64000
            assert engine.threshold_tokens == 9600 and engine.model == "replay-model"
            result = agent.run_conversation(first_user["content"])
            requests = list(model.requests)
    finally:
        registry.deregister("bash")

    # The conversation ran to the end: every recorded turn was answered and every
    # tool call got its recorded output, then the final answer.
    assert result["completed"] and not result["failed"], result.get("error")
    assert result["final_response"] == FINAL
    assert len(served) == n_turns
    agent_reqs = [r for r in requests if r.path == "/v1/chat/completions"
                  and not str(r.body["messages"][0].get("content", "")).startswith(TEMPLATE_START)]
    summary_reqs = [r for r in requests if r.path == "/v1/chat/completions" and r not in agent_reqs]
    assert len(agent_reqs) == n_turns + 1

    # Hermes drove our engine: the model switch at start-up, the usage of every
    # response, its triggers, and the compactions.
    assert spied["update_model"] and spied["update_model"][0][1]["context_length"] == 64000
    assert len(spied["update_from_response"]) == len(agent_reqs)
    assert spied["should_compress"]
    k = engine.compression_count
    assert k >= 2 and len(spied["compress"]) == k
    # Each compaction asked Hermes' auxiliary client, which sent our template to the
    # loopback, and the core kept the model's summary (no fallback).
    assert len(summary_reqs) == k
    assert engine.last_report is not None and not engine.last_report["fallback_used"]
    summary = lb.summary_text("astropy-12907", 0).split("\n")[0]  # "## Goal"
    # After each compaction the next request is shorter and carries the summary.
    sizes = [len(r.body["messages"]) for r in agent_reqs]
    for s in summary_reqs:
        at = requests.index(s)
        before = [r for r in agent_reqs if requests.index(r) < at][-1]
        after = next(r for r in agent_reqs if requests.index(r) > at)
        assert len(after.body["messages"]) < len(before.body["messages"])
        assert summary in json.dumps(after.body["messages"])
    assert max(sizes) < 2 * min(sizes[-5:]) + 40  # the context stayed bounded
    # The usage Hermes fed back is the loopback's: the last request's prompt size.
    last = agent_reqs[-1].body["messages"]
    want = math.ceil(len(json.dumps(last, separators=(",", ":"), ensure_ascii=False)) / 4)
    assert engine.last_usage is not None and engine.last_usage["source"] == "openai"
    assert engine.last_prompt_tokens == want


def test_plugin_settings_are_checked() -> None:
    from ctxcompact.hermes import make_engine

    with pytest.raises(ctxcompact.OptionError, match="unknown ctxcompact setting 'thresold'"):
        make_engine({"thresold": 0.5})
    with pytest.raises(ctxcompact.OptionError, match="summarizer must be auxiliary or builtin"):
        make_engine({"summarizer": "gpt"})
    with pytest.raises(ctxcompact.CompactError) as e:
        make_engine({"config": {"compression": {"threshold": 2}}})
    assert e.value.code == "invalid_config"
    e2 = make_engine({"summarizer": "builtin", "timeout": 5, "config": {"model": {"context_length": 64000}}})
    assert e2._summarize is None and e2.threshold_tokens > 0


def test_what_hermes_does_to_an_engine() -> None:
    """The parts of Hermes' engine contract beyond the method set: the -1 sentinel
    it writes into last_prompt_tokens after its compaction step, the deep copy it
    makes of a plugin's engine per agent, and handle_tool_call(..., messages=...)."""
    from agent.context_engine import ContextEngine as HermesEngine

    from ctxcompact.hermes import HermesContextEngine

    e = HermesContextEngine({"model": {"context_length": 64000}, "compression": {"small_context_floor": 0}},
                            summarize=lambda r: "summary")
    assert isinstance(e, HermesEngine)
    e.update_from_response({"prompt_tokens": 40000, "completion_tokens": 10, "total_tokens": 40010,
                            "input_tokens": 30000, "output_tokens": 10, "cache_read_tokens": 10000,
                            "cache_write_tokens": 0, "reasoning_tokens": 0})
    assert e.last_prompt_tokens == 40000 and e.should_compress()
    e.last_prompt_tokens = -1  # Hermes: "compaction just ran, awaiting real usage"
    assert e.last_prompt_tokens == -1 and e.get_status()["last_prompt_tokens"] == 40000
    e.update_from_response({})  # Hermes' "no usage in this response"
    assert e.last_prompt_tokens == 40000
    with pytest.raises(ctxcompact.CompactError):
        e.last_prompt_tokens = -2

    e.awaiting_real_usage_after_compression = True  # fields Hermes sets on any engine
    c = copy.deepcopy(e)
    assert type(c) is HermesContextEngine and c.compactor is e.compactor
    assert c.state == e.state and c.awaiting_real_usage_after_compression
    c.update_from_response({"prompt_tokens": 100})
    assert c.last_prompt_tokens == 100 and e.last_prompt_tokens == 40000  # its own session

    lossless = HermesContextEngine({"context": {"engine": "lossless"}, "model": {"context_length": 64000}})
    try:
        names = {t["function"]["name"] for t in lossless.get_tool_schemas()}
        assert names == {"context_search", "context_expand", "context_status", "compact_now"}
        out = json.loads(lossless.handle_tool_call("context_search", {"query": "x"}, messages=[]))
        assert "error" not in out
        lossless.on_session_start("s1")
        lossless.on_session_start("s2", boundary_reason="compression", old_session_id="s1")
        assert lossless.session_id == "s1"  # the same conversation, the same archive
    finally:
        lossless.close()
    e.close()


def test_the_auxiliary_summary_asks_hermes_compression_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """summarizer: auxiliary calls Hermes' call_llm as Hermes' compressor does, with
    the runtime of the copy's own update_model and the compaction's time left."""
    import types

    import agent.auxiliary_client as aux

    from ctxcompact.hermes import make_engine

    seen: List[Dict[str, Any]] = []

    def call_llm(**kw: Any) -> Any:
        seen.append(kw)
        msg = types.SimpleNamespace(content="## Goal\nFrom the compression model.")
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=msg)])

    monkeypatch.setattr(aux, "call_llm", call_llm)
    registered = make_engine({"timeout": 30, "config": {"compression": {"small_context_floor": 0}}})
    e = copy.deepcopy(registered)  # what Hermes runs: a copy per agent
    e.update_model(model="m1", context_length=64000, base_url="http://127.0.0.1:1/v1", api_key="sk-secret-123",
                   provider="custom", api_mode="chat_completions")
    msgs = json.loads(TRACE.read_text())["messages"]
    out = e.compress(msgs, force=True)
    assert len(out) < len(msgs) and e.compression_count == 1
    assert not e.last_report["fallback_used"]
    (kw,) = seen
    assert kw["task"] == "compression" and kw["main_runtime"]["model"] == "m1"
    assert kw["main_runtime"]["api_key"] == "sk-secret-123" and kw["main_runtime"]["base_url"] == "http://127.0.0.1:1/v1"
    assert [m["role"] for m in kw["messages"]] == ["system", "user"]
    assert kw["messages"][0]["content"].startswith(TEMPLATE_START)
    assert 0 < kw["timeout"] <= 30
    assert "sk-secret-123" not in json.dumps(e.state), "the key stays in memory, out of the state"
    assert "From the compression model." in json.dumps(out)
    registered.close()
