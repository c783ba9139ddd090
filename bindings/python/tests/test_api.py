"""The idiomatic API: compact/acompact, summarizers, refs, pure ops, errors, loading."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
import wasmtime

import ctxcompact
from ctxcompact import CompactError, Compactor, ErrABIMismatch, ErrBadBinary, ErrClosed
from ctxcompact import _compactor, _runtime

from conftest import conversation

SMALL = {"model": {"name": "test-model", "context_length": 32000}, "compression": {"small_context_floor": 0}}
SUMMARY = "Goal: set up FastAPI. Progress: 8/10 tests pass. Next Steps: fix 2 tests."


def _summarizer(calls):
    def summarize(request):
        calls.append(request)
        return SUMMARY

    return summarize


# --- raw calls and errors --------------------------------------------------------------


def test_info_and_generic_call(compactor):
    info = compactor.info()
    assert info["name"] == "ctxcompact"
    assert "info" in info["ops"]
    assert compactor.call("info") == info


def test_unknown_op_raises_with_code_and_path(compactor):
    with pytest.raises(CompactError) as ei:
        compactor.call("no.such.op")
    assert ei.value.code == "unknown_op"
    assert ei.value.path == "/op"
    assert str(ei.value).startswith("ctxcompact:")


def test_call_bytes_returns_the_raw_envelope(compactor):
    out = compactor.call_bytes(b"{not json")
    env = json.loads(out)
    assert env["error"]["code"] == "invalid_json"
    out = compactor.call_bytes(b'{"op":"info"}')
    assert json.loads(out)["result"]["name"] == "ctxcompact"


def test_bad_config_is_a_compact_error(compactor):
    with pytest.raises(CompactError) as ei:
        compactor.resolve_threshold({"model": {"context_length": 0}})
    assert ei.value.code == "invalid_config"
    assert ei.value.path.startswith("/config/model/context_length")
    with pytest.raises(CompactError) as ei:
        compactor.compact(conversation(), config={"compression": {"no_such_key": 1}})
    assert ei.value.code == "invalid_config"
    assert ei.value.path == "/config/compression/no_such_key"


def test_bad_messages(compactor):
    with pytest.raises(CompactError) as ei:
        compactor.compact({"role": "user"})  # type: ignore[arg-type]
    assert ei.value.code == "invalid_messages"
    with pytest.raises(CompactError) as ei:
        compactor.compact([{"role": "user", "content": object()}])
    assert (ei.value.code, ei.value.path) == ("invalid_messages", "/messages/0/content")
    with pytest.raises(CompactError) as ei:
        compactor.compact([{"role": "wizard", "content": "hi"}])
    assert ei.value.code == "invalid_messages"
    assert ei.value.path == "/messages/0/role"


def test_circular_messages_are_an_error_not_a_crash(compactor):
    m = {"role": "user", "content": "hi"}
    m["self"] = m
    with pytest.raises(CompactError) as ei:
        compactor.compact([m])
    assert (ei.value.code, ei.value.path) == ("invalid_messages", "/messages/0/self")
    with pytest.raises(CompactError) as ei:
        compactor.compact([{"role": "user", "content": float("nan")}])
    assert (ei.value.code, ei.value.path) == ("invalid_messages", "/messages/0/content")


def test_escaped_and_raw_utf8_requests_give_the_same_results(compactor):
    """The binding sends non-ASCII text as \\uXXXX escapes (the fastest json
    setting); a JS host sends raw UTF-8. Both must give the same answers."""
    msgs = conversation()
    for i, m in enumerate(msgs):
        if m["role"] == "tool":
            m["content"] = ("日本語のテキスト😀 émoji ₂ " * 200)[: 3000 - i]
        elif m["role"] == "user":
            m["content"] += " 请修复 😀🎉"
    for op, extra in (("compact.begin", {"force": True, "summarizer": "host"}), ("tokens.count", {}),
                      ("prune", {}), ("compact.begin", {"force": True, "summarizer": "builtin"})):
        req = {"op": op, "messages": msgs, "config": SMALL, "output": "messages", **extra}
        if op == "tokens.count":
            del req["output"]
        raw = compactor.call_bytes(json.dumps(req, ensure_ascii=False).encode("utf-8"))
        esc = compactor.call_bytes(json.dumps(req, ensure_ascii=True).encode("ascii"))
        assert json.loads(raw) == json.loads(esc), op
        assert "result" in json.loads(raw)
    # And the state of an escaped begin finishes a raw-UTF-8 finish (any runtime).
    begin = compactor.call_bytes(_compactor.dumps({"op": "compact.begin", "messages": msgs, "config": SMALL,
                                                    "force": True}))
    state = json.loads(begin)["result"]["state"]
    fin = {"op": "compact.finish", "messages": msgs, "config": SMALL, "force": True, "state": state,
           "summary": SUMMARY}
    out = json.loads(compactor.call_bytes(json.dumps(fin, ensure_ascii=False).encode("utf-8")))
    assert out["result"]["report"]["compacted"] is True


@pytest.mark.parametrize("envelope", [b"", b"   ", b"\n\t "])
def test_an_empty_request_is_invalid_json(compactor, envelope):
    env = json.loads(compactor.call_bytes(envelope))
    assert env["error"]["code"] == "invalid_json" and env["error"]["path"] == ""


def test_input_too_large_is_refused_before_the_copy(compactor, monkeypatch):
    monkeypatch.setattr(_runtime, "MAX_REQUEST_BYTES", 1000)
    with pytest.raises(CompactError) as ei:
        compactor.count_tokens(conversation())
    assert ei.value.code == "input_too_large"


# --- compaction ------------------------------------------------------------------------


def test_below_threshold_returns_the_same_objects(compactor):
    msgs = conversation(n_turns=2, tool_output_chars=200)
    res = compactor.compact(msgs, summarize=lambda r: pytest.fail("summarizer must not run"))
    assert res.report["compacted"] is False
    assert len(res.messages) == len(msgs)
    assert all(a is b for a, b in zip(res.messages, msgs))
    assert res.archived == []


def test_sync_summarizer_refs_and_archive(compactor):
    msgs = conversation()
    before = copy.deepcopy(msgs)
    calls = []
    res = compactor.compact(msgs, summarize=_summarizer(calls), config=SMALL)
    assert msgs == before, "the input list and its dicts are not mutated"
    assert len(calls) == 1
    req = calls[0]
    assert [m["role"] for m in req["messages"]] == ["system", "user"]
    assert req["max_tokens"] > 0 and req["target_tokens"] > 0
    rep = res.report
    assert rep["compacted"] is True
    assert rep["summarizer"] == "host"
    assert rep["fallback_used"] is False
    assert rep["messages_before"] == len(msgs)
    assert rep["messages_after"] == len(res.messages) < len(msgs)
    assert any(SUMMARY in json.dumps(m) for m in res.messages)
    assert any(isinstance(m.get("content"), str) and m["content"].startswith("[CONTEXT COMPACTION]")
               for m in res.messages) or rep["summary_role"] == "merged"
    # Unchanged messages come back as the caller's own objects.
    ids = {id(m) for m in msgs}
    kept = [m for m in res.messages if id(m) in ids]
    assert kept, "some messages are returned unchanged"
    assert msgs[-1] is res.messages[-1], "the newest user request stays in place, unchanged"
    # Everything not returned unchanged is archived with its original object.
    archived_idx = {a["index"] for a in res.archived}
    kept_idx = {i for i, m in enumerate(msgs) if any(m is k for k in kept)}
    # The system prompt gains a note; its original is archived (reason system_note).
    if rep.get("system_note_added"):
        assert any(a["index"] == 0 and a["reason"] == "system_note" for a in res.archived)
        assert res.messages[0]["content"].startswith(msgs[0]["content"])
    assert archived_idx | kept_idx == set(range(len(msgs)))
    for a in res.archived:
        assert a["message"] is msgs[a["index"]]
        assert a["reason"] in ("summarized", "pruned", "merged", "orphan_removed", "system_note")


def test_async_summarizer_gives_the_same_result(compactor):
    msgs = conversation()
    sync = compactor.compact(msgs, summarize=lambda r: SUMMARY, config=SMALL)

    async def summarize(request):
        await asyncio.sleep(0)
        return SUMMARY

    res = asyncio.run(compactor.acompact(msgs, summarize=summarize, config=SMALL))
    assert res.messages == sync.messages
    assert res.report == sync.report
    assert res.report["fallback_used"] is False


def test_acompact_keeps_the_event_loop_responsive(compactor):
    msgs = conversation(n_turns=400)  # ~1.3 MB: its wasm work runs in the executor
    assert len(_compactor.dumps(msgs)) >= _compactor.OFFLOAD_BYTES
    ticks = []

    async def ticker(stop):
        while not stop.is_set():
            ticks.append(1)
            await asyncio.sleep(0)

    async def main():
        stop = asyncio.Event()
        t = asyncio.create_task(ticker(stop))
        await asyncio.sleep(0)
        before = len(ticks)
        res = await compactor.acompact(msgs, summarize=lambda r: SUMMARY, config=SMALL)
        during = len(ticks) - before
        stop.set()
        await t
        return res, during

    res, during = asyncio.run(main())
    assert res.report["compacted"] and not res.report["fallback_used"]
    assert during > 2, "other coroutines ran while the module worked"


def test_acompact_accepts_a_plain_function(compactor):
    res = asyncio.run(compactor.acompact(conversation(), summarize=lambda r: SUMMARY, config=SMALL))
    assert res.report["compacted"] and not res.report["fallback_used"]


@pytest.mark.parametrize("kind", ["raises", "empty", "not-a-string"])
def test_failing_sync_summarizer_falls_back(compactor, kind):
    def summarize(request):
        if kind == "raises":
            raise RuntimeError("LLM endpoint down")
        return "" if kind == "empty" else 42

    msgs = conversation()
    res = compactor.compact(msgs, summarize=summarize, config=SMALL)
    rep = res.report
    assert rep["compacted"] is True
    assert rep["fallback_used"] is True
    assert rep["fallback_reason"]
    if kind == "raises":
        assert "LLM endpoint down" in rep["fallback_reason"]
    # Nothing lost: the deterministic summary carries the user's requests.
    text = json.dumps(res.messages)
    assert "Set up a FastAPI project" in text


def test_failing_async_summarizer_falls_back(compactor):
    async def summarize(request):
        raise TimeoutError("summarizer timed out")

    res = asyncio.run(compactor.acompact(conversation(), summarize=summarize, config=SMALL))
    assert res.report["fallback_used"] is True
    assert "timed out" in res.report["fallback_reason"]


def test_sync_compact_rejects_an_async_summarizer(compactor):
    async def summarize(request):
        return SUMMARY

    with pytest.raises(TypeError, match="acompact"):
        compactor.compact(conversation(), summarize=summarize, config=SMALL)


MID = {"model": {"context_length": 64000}, "compression": {"small_context_floor": 0}}


def test_builtin_summarizer_and_force(compactor):
    msgs = conversation()  # ~23K tokens, under MID's 32K threshold
    res = compactor.compact(msgs, config=MID)
    assert res.report["compacted"] is False and res.report["reason"]
    assert all(a is b for a, b in zip(res.messages, msgs))
    res = compactor.compact(msgs, force=True, config=MID)
    assert res.report["compacted"] is True
    assert res.report["summarizer"] == "builtin"
    assert res.report["fallback_used"] is False


def test_reported_prompt_tokens_trigger_compaction(compactor):
    msgs = conversation()
    assert compactor.compact(msgs, config=MID).report["compacted"] is False
    res = compactor.compact(msgs, prompt_tokens=40000, config=MID)
    assert res.report["compacted"] is True


def test_messages_are_serialized_once_and_finish_reuses_the_bytes(compactor, monkeypatch):
    envelopes = []
    real_call = _runtime.Pool.call

    def spy(self, envelope):
        envelopes.append(envelope)
        return real_call(self, envelope)

    encoded = []
    real_encode = _compactor._encode

    def counting_encode(value):
        out = real_encode(value)
        if isinstance(value, list):
            encoded.append(out)
        return out

    monkeypatch.setattr(_runtime.Pool, "call", spy)
    monkeypatch.setattr(_compactor, "_encode", counting_encode)
    msgs = conversation()
    compactor.compact(msgs, summarize=lambda r: SUMMARY, config=SMALL)
    assert len(encoded) == 1, "the message list is serialized once per compact"
    begin, finish = envelopes
    mj = encoded[0].encode("utf-8")
    assert begin.startswith(b'{"op":"compact.begin"') and finish.startswith(b'{"op":"compact.finish"')
    assert begin.endswith(b',"messages":' + mj + b"}")
    # The instance that began it keeps the compaction: finish names it by ticket
    # and does not send the messages again.
    assert b'"messages"' not in finish
    fin, beg = json.loads(finish), json.loads(begin)
    assert fin["summary"] == SUMMARY and fin["output"] == "refs" and fin["state"]
    assert fin["ticket"] and fin["ticket"] == beg["ticket"]


def test_finish_sends_the_messages_when_the_instance_changed(compactor, monkeypatch):
    msgs = conversation()
    want = compactor.compact(msgs, summarize=lambda r: SUMMARY, config=SMALL)
    envelopes = []
    real_call = _runtime.Pool.call

    def spy(self, envelope):
        envelopes.append(envelope)
        return real_call(self, envelope)

    def summarize_elsewhere(request):
        pool = compactor._p()
        pool._drop(pool.take())  # finish runs on a fresh instance, which kept nothing
        return SUMMARY

    monkeypatch.setattr(_runtime.Pool, "call", spy)
    got = compactor.compact(msgs, summarize=summarize_elsewhere, config=SMALL)
    assert got.messages == want.messages and got.report == want.report
    begin, short, whole = envelopes
    assert b'"messages"' not in short and whole.endswith(b"]}") and b'"messages":[' in whole
    assert json.loads(short)["ticket"] == json.loads(whole)["ticket"] == json.loads(begin)["ticket"]
    tickets = {json.loads(begin)["ticket"]}
    compactor.compact(msgs, summarize=lambda r: SUMMARY, config=SMALL)
    assert json.loads(envelopes[-1])["ticket"] not in tickets, "every compaction has its own ticket"


# --- pure ops --------------------------------------------------------------------------


def test_resolve_threshold_and_should_compress(compactor):
    t = compactor.resolve_threshold({"model": {"context_length": 200000}, "compression": {"small_context_floor": 0}})
    assert set(t) == set(ctxcompact.ThresholdResult.__annotations__)
    assert (t["threshold_tokens"], t["tail_token_budget"], t["max_summary_tokens"]) == (100000, 20000, 10000)
    t = compactor.resolve_threshold({"model": {"context_length": 200000}})
    assert t["threshold_tokens"] == 150000 and t["floor_applied"] is True
    r = compactor.should_compress(150000, config={"model": {"context_length": 200000}})
    assert set(r) == set(ctxcompact.ShouldCompressResult.__annotations__)
    assert r["should_compress"] is True
    assert compactor.should_compress(149999, config={"model": {"context_length": 200000}})["should_compress"] is False


def test_hygiene_count_validate(compactor):
    msgs = conversation()
    h = compactor.hygiene_check(msgs, config=SMALL)
    assert set(h) == set(ctxcompact.HygieneResult.__annotations__)
    assert h["source"] == "estimate"
    assert compactor.hygiene_check(msgs, prompt_tokens=5, config=SMALL)["source"] == "reported"
    n = compactor.count_tokens(msgs)
    assert n["encoding"] == "rough"
    assert len(n["per_message"]) == len(msgs) and n["total"] >= sum(n["per_message"]) > 0
    v = compactor.validate(msgs)
    assert v == {"ok": True, "problems": []}
    bad = compactor.validate([{"role": "tool", "tool_call_id": "nope", "content": "x"}])
    assert bad["ok"] is False and bad["problems"][0]["path"].startswith("/messages/0")


def test_prune_returns_own_objects_and_archives_originals(compactor):
    msgs = conversation()
    r = compactor.prune(msgs, config=SMALL)
    assert r["pruned"], "old big tool outputs are pruned"
    assert r["tokens_after"] < r["tokens_before"]
    for i, m in enumerate(r["messages"]):
        if i in r["pruned"]:
            assert m is not msgs[i]
            assert m["content"].startswith("[Old tool output cleared to save context space]")
            assert m["tool_call_id"] == msgs[i]["tool_call_id"]
        else:
            assert m is msgs[i]
    assert {a["index"] for a in r["archived"]} == set(r["pruned"])
    assert all(a["message"] is msgs[a["index"]] for a in r["archived"])


def test_sanitize_removes_orphans_and_stubs(compactor):
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "next"},
        {"role": "tool", "tool_call_id": "zzz", "content": "orphan"},
    ]
    r = compactor.sanitize(msgs)
    assert r["removed"] == [3]
    assert r["stubbed"] == ["a"]
    assert r["messages"][0] is msgs[0]
    assert all(m is not msgs[3] for m in r["messages"])
    assert any(m.get("role") == "tool" and m.get("tool_call_id") == "a" for m in r["messages"])
    assert r["archived"][0]["message"] is msgs[3]


# --- runtime: closing, traps, bad modules -------------------------------------------------


def test_closed_compactor_raises():
    c = Compactor(max_instances=1)
    c.close()
    with pytest.raises(ErrClosed):
        c.info()
    with Compactor() as c2:
        assert c2.info()["name"] == "ctxcompact"
    with pytest.raises(ErrClosed):
        c2.info()


def _instances(c):
    pool = c._pool
    with pool._cv:
        return list(pool._free)


def _corrupt(inst):
    """Write garbage over the guest's whole memory: its next call traps."""
    import ctypes

    buf = inst._mem.get_buffer_ptr(inst.store)
    ctypes.memset(ctypes.addressof(buf), 0xAA, len(buf))


def test_a_trap_fails_the_call_and_the_next_call_gets_a_fresh_instance(monkeypatch):
    c = Compactor(max_instances=1)
    (inst,) = _instances(c)
    _corrupt(inst)
    sent = []
    real = _runtime.Instance.call
    monkeypatch.setattr(_runtime.Instance, "call", lambda self, env: sent.append(env) or real(self, env))
    with pytest.raises(CompactError) as ei:
        c.info()
    assert ei.value.code == "internal" and "trapped" in str(ei.value) and "replaced" in str(ei.value)
    assert isinstance(ei.value.__cause__, (wasmtime.Trap, wasmtime.WasmtimeError))
    assert sent == [b'{"op":"info"}'], "the input that trapped is not retried"
    assert c._pool.replaced == 1 and _instances(c) == [] and c._pool.instances() == 0
    assert c.info()["name"] == "ctxcompact", "the next call gets a fresh instance"
    (fresh,) = _instances(c)
    assert fresh is not inst
    assert c.compact(conversation(), summarize=lambda r: SUMMARY, config=SMALL).report["compacted"]


def test_a_trap_between_begin_and_finish_fails_the_compaction():
    c = Compactor(max_instances=1)
    calls = []

    def summarize(request):
        # While the summarizer runs no instance is held: the finish gets this one.
        (inst,) = _instances(c)
        _corrupt(inst)
        calls.append(request)
        return SUMMARY

    with pytest.raises(CompactError) as ei:
        c.compact(conversation(), summarize=summarize, config=SMALL)
    assert ei.value.code == "internal" and len(calls) == 1
    assert c._pool.replaced == 1
    assert c.compact(conversation(), summarize=lambda r: SUMMARY, config=SMALL).report["compacted"]


def test_a_simulated_trap_is_internal_and_not_retried(monkeypatch):
    c = Compactor(max_instances=1)
    tries = []

    def trap(self, envelope):
        tries.append(envelope)
        raise wasmtime.WasmtimeError("simulated trap")

    monkeypatch.setattr(_runtime.Instance, "call", trap)
    with pytest.raises(CompactError) as ei:
        c.info()
    assert ei.value.code == "internal" and "trapped" in str(ei.value)
    assert isinstance(ei.value.__cause__, wasmtime.WasmtimeError)
    assert len(tries) == 1 and c._pool.replaced == 1
    monkeypatch.undo()
    assert c.info()["name"] == "ctxcompact"


def test_an_instance_grown_past_the_memory_limit_is_recycled():
    c = Compactor(max_instances=1, max_instance_memory=1 << 20)  # below even a fresh instance
    (first,) = _instances(c)
    assert c.info()["name"] == "ctxcompact"
    assert c._pool.recycled == 1 and _instances(c) == []
    assert c.count_tokens(conversation())["total"] > 0
    assert c._pool.recycled == 2
    big = Compactor(max_instances=1, max_instance_memory=None)
    (inst,) = _instances(big)
    big.info()
    assert _instances(big) == [inst] and big._pool.recycled == 0


def test_a_closed_compactor_leaves_its_idle_instances_to_the_next_one(monkeypatch):
    """close() keeps up to MAX_SPARES idle instances (each at most SPARE_MAX_MEMORY)
    for the module's next pool, which starts on them instead of instantiating."""
    _runtime.drop_spares()
    a = Compactor(max_instances=2)
    a.compact(conversation(), summarize=lambda r: SUMMARY, config=SMALL)
    (warm,) = _instances(a)
    a.close()
    b = Compactor(max_instances=1)
    assert _instances(b) == [warm], "the new Compactor starts on the closed one's instance"
    assert b.compact(conversation(), summarize=lambda r: SUMMARY, config=SMALL).report["compacted"]
    b.close()
    monkeypatch.setattr(_runtime, "MAX_SPARES", 1)
    c, d = Compactor(max_instances=1), Compactor(max_instances=1)
    (ci,), (di,) = _instances(c), _instances(d)
    assert warm in (ci, di)
    c.close()
    d.close()  # one spare already kept: this one is released
    assert c._loaded.spares == [ci]
    monkeypatch.setattr(_runtime, "SPARE_MAX_MEMORY", 1 << 20)  # below even a fresh instance
    e = Compactor(max_instances=1)
    assert _instances(e) == [ci]
    e.close()
    assert e._loaded.spares == [], "an instance over the memory bound is released"
    Compactor(max_instances=1).close()
    monkeypatch.undo()
    Compactor(max_instances=1).close()
    assert _runtime.drop_spares() == 1 and e._loaded.spares == []


def _wat(abi=2, drop=None, extra_import=""):
    funcs = {
        "_initialize": "(func (export \"_initialize\"))",
        "ctxc_abi_version": f"(func (export \"ctxc_abi_version\") (result i32) i32.const {abi})",
        "ctxc_alloc": "(func (export \"ctxc_alloc\") (param i32) (result i32) i32.const 16)",
        "ctxc_free": "(func (export \"ctxc_free\") (param i32))",
        "ctxc_call": "(func (export \"ctxc_call\") (param i32 i32) (result i32) i32.const 16)",
        "ctxc_call_take": "(func (export \"ctxc_call_take\") (param i32 i32) (result i32) i32.const 16)",
        "ctxc_result_len": "(func (export \"ctxc_result_len\") (result i32) i32.const 2)",
    }
    body = "".join(v for k, v in funcs.items() if k != drop)
    mem = "" if drop == "memory" else '(memory (export "memory") 1)'
    return wasmtime.wat2wasm(f"(module {extra_import} {mem} {body})")


def test_bad_binaries_are_refused():
    with pytest.raises(ErrBadBinary):
        Compactor(wasm=b"\x00asm garbage", cache_dir=False)
    for missing in ("ctxc_call", "ctxc_call_take", "memory", "ctxc_result_len"):
        with pytest.raises(ErrBadBinary, match=missing):
            Compactor(wasm=_wat(drop=missing), cache_dir=False)
    with pytest.raises(ErrBadBinary, match="env.f"):
        Compactor(wasm=_wat(extra_import='(import "env" "f" (func))'), cache_dir=False)
    wrong_sig = wasmtime.wat2wasm(
        '(module (memory (export "memory") 1) (func (export "_initialize"))'
        '(func (export "ctxc_abi_version") (result i32) i32.const 1)'
        '(func (export "ctxc_alloc") (param i64) (result i32) i32.const 16)'
        '(func (export "ctxc_free") (param i32)) (func (export "ctxc_call") (param i32 i32) (result i32) i32.const 16)'
        '(func (export "ctxc_call_take") (param i32 i32) (result i32) i32.const 16)'
        '(func (export "ctxc_result_len") (result i32) i32.const 2))'
    )
    with pytest.raises(ErrBadBinary, match="ctxc_alloc"):
        Compactor(wasm=wrong_sig, cache_dir=False)


def test_abi_mismatch():
    with pytest.raises(ErrABIMismatch) as ei:
        Compactor(wasm=_wat(abi=1), cache_dir=False)
    assert (ei.value.got, ei.value.want) == (1, 2)
    # The fake module with the right ABI loads and answers whatever it has.
    c = Compactor(wasm=_wat(abi=2), cache_dir=False)
    # (it "answers" with the first 2 bytes of the request it was given at 16)
    assert c.call_bytes(b'{"op":"info"}') == b'{"'


def test_cache_and_calibration_wrappers():
    c = Compactor({"model": {"name": "claude-sonnet-4", "provider": "openrouter"}})
    msgs = conversation(n_turns=3, tool_output_chars=200)
    before = copy.deepcopy(msgs)
    r = c.cache_apply(msgs)
    assert msgs == before, "cache_apply does not mutate the caller's messages"
    assert len(r["messages"]) == len(msgs) and 1 <= r["markers"] <= 4
    assert "cache_control" in json.dumps(r["messages"])
    assert c.cache_apply(msgs, ttl="1h")["ttl"] == "1h"
    pol = c.cache_policy()
    assert pol["enabled"] is True and pol["status"].startswith("Prompt caching: ENABLED")
    assert c.cache_policy(config={"model": {"name": "gpt-4.1"}})["enabled"] is False
    sim = c.cache_simulate(msgs)
    assert sim["requests"] and sim["strategies"]
    est = c.count_tokens(msgs)["total"]
    cal = c.calibrate(msgs, est * 2)
    assert cal, "a calibration result"
    with pytest.raises(CompactError) as ei:
        c.calibrate(msgs, est * 100)
    assert ei.value.path == "/prompt_tokens"


def test_anthropic_layout_system_gets_the_note(compactor):
    from conftest import load_trace, need_trace

    msgs = load_trace(need_trace("anthropic-format/claude-code-spotter-ae4a77f8-precompact.json"))
    res = compactor.compact(msgs, summarize=lambda r: "## Goal\nTrace spans end to end.", config=SMALL,
                            system=[{"type": "text", "text": "You are Claude Code."}])
    assert res.report["compacted"] and res.report["system_note_added"]
    assert res.system[0] == {"type": "text", "text": "You are Claude Code."}
    assert "[Note: earlier turns" in res.system[-1]["text"]
    assert compactor.validate(res.messages) == {"ok": True, "problems": []}
    assert "Trace spans end to end." in json.dumps(res.messages)
    kept = {id(m) for m in res.messages}
    archived = {a["index"] for a in res.archived}
    assert all(id(m) in kept or i in archived for i, m in enumerate(msgs))


def test_by_default_an_instance_grown_past_64_mib_is_dropped_results_intact():
    """The default bound (64 MiB, as in JS and Go): a call that grows the instance
    past it (a 70 MB request, read in place) returns its result, and the pool keeps
    no instance above the bound; the next compaction is the same as before."""
    assert _compactor.DEFAULT_MAX_INSTANCE_MEMORY == 64 << 20
    c = Compactor(max_instances=1)
    msgs = conversation()
    before = c.compact(msgs, force=True)
    (first,) = _instances(c)
    env = json.loads(c._pool.call(b'{"op":"info"' + b" " * (70 << 20) + b"}"))  # padded with whitespace
    assert env["result"]["name"] == "ctxcompact"
    assert _instances(c) == [] and c._pool.recycled == 1
    after = c.compact(msgs, force=True)
    (fresh,) = _instances(c)
    assert fresh is not first and fresh.memory_bytes() <= 64 << 20
    assert (after.messages, after.report, after.archived) == (before.messages, before.report, before.archived)
