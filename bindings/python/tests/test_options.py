"""Options are checked, never coerced (issue 13 items 5, 6, 7, 10): wrong types and
unknown keywords in every public method, config validated at creation, the per-call
config merged by the core, values JSON cannot hold named by their pointer."""

from __future__ import annotations

import asyncio
import json

import pytest

from ctxcompact import CompactError, Compactor, CompactionEngine, ContextEngine, OptionError

from conftest import conversation

SMALL = {"model": {"name": "test-model", "context_length": 32000}, "compression": {"small_context_floor": 0}}
MSGS = conversation(n_turns=3, tool_output_chars=200)


@pytest.fixture(scope="module")
def c():
    comp = Compactor()
    yield comp
    comp.close()


@pytest.fixture(scope="module")
def engine(c):
    e = ContextEngine({"model": {"context_length": 32000}}, compactor=c)
    yield e


def _raises(path, fn, *args, **kwargs):
    with pytest.raises(CompactError) as ei:
        fn(*args, **kwargs)
    err = ei.value
    assert (err.code, err.path) == ("invalid_request", path), repr(err)
    assert isinstance(err, OptionError) and isinstance(err, TypeError)
    assert str(err).startswith("ctxcompact:")
    return err


BAD_INTS = ["60000", 47999.9, 48000.0, True, False, None.__class__, "abc", [1]]


@pytest.mark.parametrize("bad", BAD_INTS, ids=repr)
def test_integer_options_take_ints_only(c, engine, bad):
    _raises("/prompt_tokens", c.compact, MSGS, prompt_tokens=bad)
    _raises("/prompt_tokens", lambda: asyncio.run(c.acompact(MSGS, prompt_tokens=bad)))
    _raises("/prompt_tokens", c.should_compress, bad)
    _raises("/last_compaction_tokens", c.should_compress, 10, last_compaction_tokens=bad)
    _raises("/prompt_tokens", c.hygiene_check, MSGS, bad)
    _raises("/prompt_tokens", c.calibrate, MSGS, bad)
    _raises("/prompt_tokens", engine.should_compress, bad)
    _raises("/current_tokens", engine.compress, MSGS, current_tokens=bad)
    _raises("/context_length", engine.update_model, "m", bad)
    _raises("/context_length", ContextEngine, context_length=bad, compactor=c)
    _raises("/max_instances", Compactor, max_instances=bad)


@pytest.mark.parametrize("bad", ["false", "true", 0, 1, None, [True]], ids=repr)
def test_force_takes_a_bool_only(c, engine, bad):
    _raises("/force", c.compact, MSGS, force=bad)
    _raises("/force", lambda: asyncio.run(c.acompact(MSGS, force=bad)))
    _raises("/force", engine.compress, MSGS, force=bad)


def test_force_false_as_a_string_does_not_compact(c):
    # The case: force="false" used to compact.
    msgs = conversation()
    with pytest.raises(OptionError):
        c.compact(msgs, force="false", config=SMALL)
    assert c.compact(msgs, force=False, config={"model": {"context_length": 200000}}).report["compacted"] is False


def test_string_and_callable_options(c, engine):
    _raises("/format", c.compact, MSGS, format=1)
    _raises("/encoding", c.count_tokens, MSGS, encoding=1)
    _raises("/summarize", c.compact, MSGS, summarize="summarize")
    _raises("/focus_topic", engine.compress, MSGS, focus_topic=3)
    _raises("/memory_context", engine.compress, MSGS, memory_context=None)
    _raises("/model", engine.update_model, 5, 1000)
    _raises("/summarize", ContextEngine, summarize=42, compactor=c)
    _raises("/compactor", ContextEngine, compactor="shared")


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "60", True], ids=repr)
def test_timeout_is_a_positive_number_of_seconds(c, bad):
    _raises("/timeout", c.compact, MSGS, timeout=bad)
    _raises("/timeout", lambda: asyncio.run(c.acompact(MSGS, timeout=bad)))
    _raises("/timeout", ContextEngine, timeout=bad, compactor=c)


def test_numpy_style_integers_are_ints(c):
    class Index:  # what numpy.int64 offers: __index__, not an int subclass
        def __index__(self):
            return 123

    assert c.should_compress(Index())["prompt_tokens"] == 123


@pytest.mark.parametrize("method,key,near", [
    ("compact", "forse", "force"),
    ("compact", "summarise", "summarize"),
    ("compact", "promptTokens", "prompt_tokens"),
    ("compact", "PROMPT_TOKENS", "prompt_tokens"),
    ("compact", "timeout_ms", "timeout"),
    ("compact", "context_length", None),
    ("acompact", "forse", "force"),
    ("should_compress", "last_compaction_token", "last_compaction_tokens"),
    ("count_tokens", "encodign", "encoding"),
    ("prune", "confg", "config"),
    ("sanitize", "config", None),
    ("validate", "strict", None),
    ("resolve_threshold", "conifg", "config"),
    ("hygiene_check", "prompt_token", "prompt_tokens"),
])
def test_unknown_keywords_name_the_closest_option(c, method, key, near):
    fn = getattr(c, method)
    args = {"should_compress": (10,), "resolve_threshold": ()}.get(method, (MSGS,))
    if method == "acompact":
        err = _raises("/" + key, lambda: asyncio.run(fn(*args, **{key: 1})))
    else:
        err = _raises("/" + key, fn, *args, **{key: 1})
    if near:
        assert f"did you mean {near!r}" in str(err)
    else:
        assert "valid options:" in str(err)


def test_unknown_keywords_of_the_engine_and_constructors(c, engine):
    err = _raises("/summarise", ContextEngine, summarise=lambda r: "x", compactor=c)
    assert "'summarize'" in str(err)
    _raises("/model", Compactor, model={"context_length": 32000})
    _raises("/cach_dir", Compactor, cach_dir=False)
    err = _raises("/curent_tokens", engine.compress, MSGS, curent_tokens=5)
    assert "'current_tokens'" in str(err)
    _raises("/promptTokens", engine.should_compress, promptTokens=5)
    _raises("/providr", engine.update_model, "m", 1000, providr="x")
    _raises("/usage_object", engine.update_from_response, {}, usage_object=1)


def test_an_option_error_is_caught_as_a_type_error(c):
    with pytest.raises(TypeError):
        c.compact(MSGS, forse=True)


# --- config at creation (item 5) and merged per call (item 10) ----------------------------


def test_config_is_validated_when_the_compactor_is_created():
    with pytest.raises(CompactError) as ei:
        Compactor({"compression": {"threshold": 2}})
    assert (ei.value.code, ei.value.path) == ("invalid_config", "/config/compression/threshold")
    with pytest.raises(CompactError) as ei:
        Compactor({"model": {"context_lenght": 32000}})
    assert ei.value.path == "/config/model/context_lenght"
    with pytest.raises(CompactError) as ei:
        Compactor(["not", "a", "dict"])
    assert (ei.value.code, ei.value.path) == ("invalid_config", "/config")


def test_setting_the_config_validates_it(c):
    comp = Compactor({"model": {"context_length": 32000}})
    with pytest.raises(CompactError) as ei:
        comp.config = {"model": {"context_length": -3}}
    assert ei.value.path == "/config/model/context_length"
    assert comp.config == {"model": {"context_length": 32000}}, "a bad config is not adopted"
    comp.close()


def test_config_is_validated_when_the_engine_is_created(c):
    with pytest.raises(CompactError) as ei:
        ContextEngine({"compression": {"threshold": "high"}}, compactor=c)
    assert (ei.value.code, ei.value.path) == ("invalid_config", "/config/compression/threshold")
    with pytest.raises(CompactError) as ei:
        CompactionEngine(None, {"model": {"nme": "x"}}, compactor=c)
    assert ei.value.path == "/config/model/nme"


def test_a_call_config_model_name_keeps_the_compactor_window():
    """The issue's case: a {model: {name}} override used to replace the config, so
    the window fell back to 200K."""
    comp = Compactor({"model": {"context_length": 32000}, "compression": {"small_context_floor": 0}})
    t = comp.resolve_threshold({"model": {"name": "gpt-4o"}})
    assert (t["context_length"], t["threshold_tokens"]) == (32000, 16000)
    res = comp.compact(conversation(), config={"model": {"name": "gpt-4o"}})
    assert res.report["threshold_tokens"] == 16000 and res.report["compacted"] is True
    assert comp.merge_config({"model": {"name": "gpt-4o"}}) == {
        "model": {"context_length": 32000, "name": "gpt-4o"}, "compression": {"small_context_floor": 0}}
    # The per-call config's key wins; a map below a section replaces as a whole.
    assert comp.resolve_threshold({"model": {"context_length": 64000}})["threshold_tokens"] == 32000
    comp.config = {"model": {"name": "gpt-4o", "context_length": 8000},
                   "compression": {"small_context_floor": 0, "model_thresholds": {"gpt-4o": 0.6}}}
    assert comp.resolve_threshold()["threshold_tokens"] == 4800
    assert comp.resolve_threshold({"compression": {"model_thresholds": {"claude": 0.9}}})["threshold_tokens"] == 4000
    assert comp.resolve_threshold({"compression": {"target_ratio": 0.3}})["threshold_tokens"] == 4800
    assert comp.count_tokens(MSGS, config={"tokens": {"calibration": 2}})["total"] > comp.count_tokens(MSGS)["total"]
    comp.close()


def test_a_bad_call_config_is_named_by_its_own_path():
    comp = Compactor({"model": {"context_length": 32000}})
    for op in (lambda cfg: comp.compact(MSGS, config=cfg), lambda cfg: comp.resolve_threshold(cfg),
               lambda cfg: comp.should_compress(5, config=cfg), lambda cfg: comp.cache_policy(config=cfg)):
        with pytest.raises(CompactError) as ei:
            op({"compression": {"threshold": 5}})
        assert (ei.value.code, ei.value.path) == ("invalid_config", "/config/compression/threshold")
    comp.close()


# --- values JSON cannot hold (item 7) ----------------------------------------------------


def _msgs_err(c, msgs, **kw):
    with pytest.raises(CompactError) as ei:
        c.compact(msgs, **kw)
    return ei.value


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=repr)
def test_nan_and_infinity_are_refused_with_their_path(c, value):
    msgs = json.loads(json.dumps(MSGS))
    msgs[2]["tool_calls"][0]["function"]["arguments"] = {"command": "ls", "limit": value}
    err = _msgs_err(c, msgs)
    assert (err.code, err.path) == ("invalid_messages", "/messages/2/tool_calls/0/function/arguments/limit")
    for fn in (c.count_tokens, c.prune, c.sanitize, c.validate, c.hygiene_check):
        with pytest.raises(CompactError) as ei:
            fn(msgs)
        assert ei.value.path == "/messages/2/tool_calls/0/function/arguments/limit"


def test_unserializable_values_are_named(c):
    msgs = json.loads(json.dumps(MSGS))
    msgs[1]["meta"] = {"tags": {"a", "b"}}
    assert _msgs_err(c, msgs).path == "/messages/1/meta/tags"
    msgs[1]["meta"] = {"a/b~c": object()}
    assert _msgs_err(c, msgs).path == "/messages/1/meta/a~1b~0c"
    msgs[1]["meta"] = b"bytes"
    assert _msgs_err(c, msgs).path == "/messages/1/meta"


def test_cycles_and_deep_nesting_are_named(c):
    msgs = json.loads(json.dumps(MSGS))
    msgs[1]["content"] = [msgs[1]]
    err = _msgs_err(c, msgs)
    assert (err.code, err.path) == ("invalid_messages", "/messages/1/content/0")
    # The same object twice (not a cycle) is fine.
    shared = {"type": "text", "text": "hi"}
    ok = json.loads(json.dumps(MSGS))
    ok[1]["content"] = [shared, shared]
    assert c.validate(ok)["ok"] is True
    deep = []
    for _ in range(100_000):
        deep = [deep]
    msgs[1]["content"] = deep
    err = _msgs_err(c, msgs)
    assert (err.code, err.path) == ("invalid_messages", "/messages/1/content")
    assert "1000" in str(err)


def test_system_config_usage_and_params_name_their_bad_values(c, engine):
    err = _msgs_err(c, MSGS, system=[{"type": "text", "text": float("nan")}])
    assert (err.code, err.path) == ("invalid_messages", "/system/0/text")
    with pytest.raises(CompactError) as ei:
        c.compact(MSGS, config={"tokens": {"calibration": float("nan")}})
    assert (ei.value.code, ei.value.path) == ("invalid_config", "/config/tokens/calibration")
    with pytest.raises(CompactError) as ei:
        Compactor({"tokens": {"calibration": float("inf")}})
    assert (ei.value.code, ei.value.path) == ("invalid_config", "/config/tokens/calibration")
    with pytest.raises(CompactError) as ei:
        engine.update_from_response({"prompt_tokens": float("nan")})
    assert (ei.value.code, ei.value.path) == ("invalid_request", "/usage/prompt_tokens")
    with pytest.raises(CompactError) as ei:
        c.call("should_compress", {"prompt_tokens": float("nan")})
    assert (ei.value.code, ei.value.path) == ("invalid_request", "/prompt_tokens")
    with pytest.raises(CompactError) as ei:
        c.cache_apply(MSGS, system=[{"text": float("nan")}])
    assert (ei.value.code, ei.value.path) == ("invalid_request", "/system/0/text")


def test_a_compactor_with_a_bad_config_releases_its_instances(monkeypatch):
    from ctxcompact import _runtime

    pools = []
    real = _runtime.Pool.__init__

    def spy(self, *a, **kw):
        pools.append(self)
        real(self, *a, **kw)

    monkeypatch.setattr(_runtime.Pool, "__init__", spy)
    with pytest.raises(CompactError):
        Compactor({"compression": {"threshold": 2}})
    assert pools and pools[-1]._closed and pools[-1].instances() == 0
