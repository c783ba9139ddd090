"""Provider-native compaction (issue 16) through the Python binding: the typed
wrappers (Compactor.native_policy / native_observe / native_trim) and the
ContextEngine's request preparation, driven multi-turn against a local HTTP server
that speaks the Anthropic Messages API (request and response shapes as in the
anthropic SDK's beta types: the compact_20260112 edit, the ``compaction`` request,
the ``compaction`` block, stop_reason "compaction", the ``anthropic-beta`` header).

The engine's route is set to api.anthropic.com with update_model (that is what the
policy reads), while the client points at the loopback server: the route names
where requests go for the policy, the client's base_url is only transport. With the
anthropic SDK installed (test.sh pins it) the client is the SDK's
``client.beta.messages.create``; without it, plain urllib.

The server checks what the real API checks and these tests rely on: the beta header
of each mechanism, a signed (on-demand) block first in ``messages``, blocks sent
back verbatim, ``compaction`` not combined with ``context_management``; it counts
input tokens as len(JSON)/4 from the newest block on (the API ignores what precedes
it), compacts at the edit's trigger, and can be told to reject context_management.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import ctxcompact
from ctxcompact import CompactError, ContextEngine, OptionError

try:  # the real SDK when the test venv has it (bindings/python/test.sh pins 2.10.0)
    import anthropic
except ImportError:  # pragma: no cover - exercised only without the SDK
    anthropic = None

MODEL = "claude-sonnet-4-6"
WINDOW = 100000
THRESHOLD = 0.75  # threshold_tokens 75000 (also the small-window floor of 100k windows)
THRESHOLD_TOKENS = 75000
TRIGGER = THRESHOLD_TOKENS - 8192  # 66808: the compact edit's trigger, the on-demand point
SYSTEM = "You are a coding agent."


# --- the loopback Anthropic Messages API ------------------------------------------------


def _tokens(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"))) // 4


def _blocks(messages: List[Dict[str, Any]]) -> List[Tuple[int, int, Dict[str, Any]]]:
    out = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if isinstance(content, list):
            for j, b in enumerate(content):
                if isinstance(b, dict) and b.get("type") == "compaction":
                    out.append((i, j, b))
    return out


def _error(message: str, code: Optional[str] = None) -> Tuple[int, Dict[str, Any]]:
    err: Dict[str, Any] = {"type": "invalid_request_error", "message": message}
    if code:
        err["details"] = {"error_code": code}
    return 400, {"type": "error", "error": err}


class FakeAnthropic:
    """POST /v1/messages on 127.0.0.1 (port 0, in a thread). ``requests`` holds
    (headers, body, status, answer) of every call."""

    def __init__(self) -> None:
        self.requests: List[Tuple[Dict[str, str], Dict[str, Any], int, Dict[str, Any]]] = []
        self.reject_context_management = False
        self.issued: List[Dict[str, Any]] = []  # every block handed out, as sent
        self._n = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.loads(raw)
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, answer = fake.answer(self.path, headers, body)
                fake.requests.append((headers, body, status, answer))
                out = json.dumps(answer).encode("utf-8")
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.send_header("request-id", f"req_{len(fake.requests)}")
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "FakeAnthropic":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def _message(self, body: Dict[str, Any], content: List[Dict[str, Any]], stop: str,
                 input_tokens: int) -> Dict[str, Any]:
        self._n += 1
        return {"id": f"msg_{self._n:04d}", "type": "message", "role": "assistant", "model": body["model"],
                "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 16}}

    def _summary(self, messages: List[Dict[str, Any]], signed: bool) -> Dict[str, Any]:
        text = f"Summary of {len(messages)} messages: " + " / ".join(
            (m["content"] if isinstance(m["content"], str) else "[blocks]")[:40] for m in messages)
        block: Dict[str, Any] = {"type": "compaction", "content": text}
        digest = hashlib.sha256(text.encode()).hexdigest()
        if signed:
            block["signature"] = "sig-" + digest[:32]
        else:
            block["encrypted_content"] = "enc-" + digest[:32]
        self.issued.append(copy.deepcopy(block))
        return block

    def answer(self, path: str, headers: Dict[str, str], body: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
        if path != "/v1/messages":
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": path}}
        betas = [b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()]
        messages = body["messages"]
        cm = body.get("context_management")
        if cm is not None and self.reject_context_management:
            return _error("context_management: Extra inputs are not permitted")
        edits = (cm or {}).get("edits") or []
        compact_edit = next((e for e in edits if e.get("type") == "compact_20260112"), None)
        if compact_edit is not None and "compact-2026-01-12" not in betas:
            return _error("context_management.edits.0: compact_20260112 requires the compact-2026-01-12 beta")
        if "compaction" in body and cm is not None:
            return _error("compaction: cannot be combined with context_management")
        found = _blocks(messages)
        for i, j, b in found:
            if not any(all(b.get(k) == v for k, v in issued.items()) and set(b) <= set(issued) | {"cache_control"}
                       for issued in self.issued):
                return _error(f"messages.{i}.content.{j}: compaction block was not sent back verbatim")
            if b.get("signature"):
                if "compact-2026-09-04" not in betas:
                    return _error("messages: a signed compaction block requires the compact-2026-09-04 beta")
                if (i, j) != (0, 0):
                    return _error(f"messages.{i}.content.{j}: a signed compaction block must come first",
                                  "compaction_block_misplaced")
        # What the API reads: from the newest block on (it drops what precedes it).
        if found:
            i, j, _ = found[-1]
            seen = [dict(messages[i], content=messages[i]["content"][j:])] + messages[i + 1:]
        else:
            seen = messages
        input_tokens = _tokens(seen) + _tokens(body.get("system", ""))
        if "compaction" in body:
            if "compact-2026-09-04" not in betas:
                return _error("compaction: requires the compact-2026-09-04 beta")
            if body["compaction"] != {"type": "summarize"} and body["compaction"].get("type") != "summarize":
                return _error("compaction.type: must be summarize")
            return 200, self._message(body, [self._summary(seen, signed=True)], "compaction", input_tokens)
        reply = {"type": "text", "text": f"Done with step {len(messages)}."}
        if compact_edit is not None and input_tokens >= compact_edit["trigger"]["value"]:
            # Everything but the newest user message is summarized into the block,
            # which comes first in the content; the usage is of the compacted context.
            block = self._summary(seen[:-1], signed=False)
            after = _tokens([{"role": "assistant", "content": [block]}, seen[-1]])
            return 200, self._message(body, [block, reply], "end_turn", after)
        return 200, self._message(body, [reply], "end_turn", input_tokens)


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.body = status, body


class Client:
    """client.beta.messages.create of the anthropic SDK (or urllib) at the fake's URL."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.sdk = anthropic.Anthropic(base_url=base_url, api_key="test-key", max_retries=0) if anthropic else None

    def create(self, body: Dict[str, Any], betas: List[str]) -> Any:
        """The response (an SDK BetaMessage, or a dict), or ApiError."""
        if self.sdk is not None:
            try:
                if betas:
                    return self.sdk.beta.messages.create(**body, betas=betas)
                return self.sdk.beta.messages.create(**body)
            except anthropic.APIStatusError as e:
                raise ApiError(e.status_code, e.body) from e
        headers = {"content-type": "application/json", "x-api-key": "test-key", "anthropic-version": "2023-06-01"}
        if betas:
            headers["anthropic-beta"] = ",".join(betas)
        req = urllib.request.Request(self.base_url + "/v1/messages", data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(req) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise ApiError(e.code, e.read().decode()) from e


def as_dict(response: Any) -> Dict[str, Any]:
    if isinstance(response, dict):
        return response
    return response.model_dump(exclude_none=True)  # type: ignore[no-any-return]


def user_turn(i: int) -> Dict[str, Any]:
    """About 7,500 of the fake's tokens: a request and a long tool log."""
    lines = "".join(f"turn {i} line {j}: pytest tests/test_mod_{i}_{j}.py passed in {j % 7}.{i % 10}s\n"
                    for j in range(460))
    return {"role": "user", "content": f"Step {i}: fix the next module. Here is the log:\n{lines}"}


def make_engine(mode: str, **compression: Any) -> ContextEngine:
    cfg = {"compression": {"threshold": THRESHOLD, "anthropic_native": mode, "protect_first_n": 1,
                           "protect_last_n": 4, **compression}}
    engine = ContextEngine(cfg, model=MODEL, context_length=WINDOW, provider="anthropic")
    # The route the policy reads; the client goes to the loopback server instead.
    engine.update_model(MODEL, WINDOW, base_url="https://api.anthropic.com", provider="anthropic",
                        api_mode="anthropic_messages")
    return engine


def request(messages: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {"model": MODEL, "max_tokens": 512, "system": SYSTEM, "messages": messages}


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as s:
        yield s


# --- the typed wrappers ---------------------------------------------------------------------


ANTHROPIC_ROUTE = {"provider": "anthropic", "base_url": "https://api.anthropic.com", "api_mode": "anthropic_messages"}
CFG = {"model": {"name": MODEL, "context_length": WINDOW, "provider": "anthropic"},
       "compression": {"threshold": THRESHOLD, "anthropic_native": "threshold"}}


def test_native_policy_wrapper(compactor: ctxcompact.Compactor) -> None:
    d = compactor.native_policy(route=ANTHROPIC_ROUTE, config=CFG)
    assert d["route"] == "anthropic"
    assert d["mechanism"] == "anthropic_threshold"
    assert d["body"] == {"context_management": {"edits": [
        {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": TRIGGER}}]}}
    assert d["betas"] == ["compact-2026-01-12"]
    assert d["local"]["armed"] is True and d["local"]["threshold_tokens"] == THRESHOLD_TOKENS
    # A model outside the family gets nothing.
    other = compactor.native_policy(route=ANTHROPIC_ROUTE, config={**CFG, "model": {"name": "claude-3-haiku"}})
    assert other["reason"] == "model_not_eligible" and other["body"] == {}
    # The same route through a proxy is not Anthropic's.
    proxy = compactor.native_policy(route={"base_url": "https://proxy.example.com/v1"}, config=CFG)
    assert proxy["route"] == "other:proxy.example.com" and proxy["mechanism"] == "none"


def test_native_config_keys(compactor: ctxcompact.Compactor) -> None:
    keys = {"codex_responses_native": True, "codex_responses_compact_threshold": 150000,
            "codex_app_server_auto": "hermes", "codex_gpt55_autoraise_notice": False,
            "anthropic_native": "on_demand", "anthropic_compact_instructions": "Keep file paths."}
    assert set(keys) <= set(ctxcompact.CompressionConfig.__annotations__)
    with ctxcompact.Compactor({"compression": keys, "model": {"name": MODEL}}) as c:  # validated here
        assert c.native_policy(route=ANTHROPIC_ROUTE)["mechanism"] == "anthropic_on_demand"
    with pytest.raises(CompactError) as e:
        ctxcompact.Compactor({"compression": {"anthropic_native": "always"}})
    assert (e.value.code, e.value.path) == ("invalid_config", "/config/compression/anthropic_native")
    d = compactor.native_policy(route=ANTHROPIC_ROUTE, manual=True, config={**CFG, "compression": keys})
    assert d["compaction_request"] == {"compaction": {"type": "summarize", "instructions": "Keep file paths."}}


def test_native_wrappers_check_options(compactor: ctxcompact.Compactor) -> None:
    with pytest.raises(OptionError) as e:
        compactor.native_policy(route="api.anthropic.com")  # type: ignore[arg-type]
    assert e.value.path == "/route"
    with pytest.raises(OptionError) as e:
        compactor.native_policy(tokens="60000")  # type: ignore[arg-type]
    assert e.value.path == "/tokens"
    with pytest.raises(OptionError) as e:
        compactor.native_policy(rout={})  # type: ignore[call-arg]
    assert "route" in str(e.value)
    with pytest.raises(OptionError) as e:
        compactor.native_observe(response={"content": []}, error={"status": 400, "body": ""})
    assert e.value.path == "/error"
    with pytest.raises(OptionError):
        compactor.native_observe()
    with pytest.raises(OptionError) as e:
        compactor.native_trim([], drop_before_newest=1)  # type: ignore[arg-type]
    assert e.value.path == "/drop_before_newest"
    with pytest.raises(CompactError) as e2:
        compactor.native_trim("not a list")  # type: ignore[arg-type]
    assert e2.value.code == "invalid_messages"


def test_native_observe_and_trim_wrappers(compactor: ctxcompact.Compactor) -> None:
    block = {"type": "compaction", "content": "Summary.", "encrypted_content": "enc-1"}
    obs = compactor.native_observe(route=ANTHROPIC_ROUTE, config=CFG, response={
        "type": "message", "role": "assistant", "content": [block, {"type": "text", "text": "ok"}],
        "stop_reason": "end_turn"})
    assert [s["kind"] for s in obs["seen"]] == ["anthropic_compaction"]
    key = obs["seen"][0]["key"]
    # The key is FNV-1a 64 of the signature, else encrypted_content, else content (the core's order).
    h = 0xCBF29CE484222325
    for byte in b"enc-1":
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    assert key == f"fnv64:{h:016x}"
    assert obs["session"]["issuers"] == {key: "anthropic"}
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}, {"role": "assistant", "content": [block, {"type": "text", "text": "d"}]},
            {"role": "user", "content": "e"}]
    r = compactor.native_trim(msgs, format="anthropic", session=obs["session"], route=ANTHROPIC_ROUTE)
    assert r["changed"] is True
    assert r["messages"] == msgs[3:]
    assert r["dropped"] == [{"index": i, "reason": "before_compaction"} for i in range(3)]
    assert r["dropped_messages"] == msgs[:3]
    assert r["rewritten"] == []
    # Kept messages are the caller's own objects, and so are the dropped originals.
    assert r["messages"][0] is msgs[3] and r["messages"][1] is msgs[4]
    assert all(a is b for a, b in zip(r["dropped_messages"], msgs[:3]))
    kept = compactor.native_trim(msgs, format="anthropic", session=obs["session"], route=ANTHROPIC_ROUTE,
                                 drop_before_newest=False)
    assert kept["messages"] == msgs and kept["dropped"] == [] and kept["changed"] is False
    # On another route the block's issuer is foreign: it is not sent; its readable
    # summary stays as a text block (the core's rule), the message is rewritten.
    moved = compactor.native_trim(msgs, format="anthropic", session=obs["session"],
                                  route={"base_url": "https://openrouter.ai/api/v1"})
    assert not any(b.get("type") == "compaction" for m in moved["messages"] if isinstance(m["content"], list)
                   for b in m["content"])
    assert len(moved["messages"]) == len(msgs) and moved["dropped"] == []
    assert [(w["index"], w["reason"]) for w in moved["rewritten"]] == [(3, "other_issuer")]
    assert moved["rewritten"][0]["original"] is msgs[3]
    text = moved["messages"][3]["content"][0]
    assert text["type"] == "text" and text["text"].endswith("\nSummary.")
    assert moved["messages"][3]["content"][1] == {"type": "text", "text": "d"}
    assert moved["messages"][4] is msgs[4]


# --- (a) threshold: the compact_20260112 edit -------------------------------------------


def test_anthropic_threshold_multi_turn(server: FakeAnthropic) -> None:
    client = Client(server.base_url)
    with make_engine("threshold") as engine:
        assert engine.threshold_tokens == THRESHOLD_TOKENS
        assert engine.native_route == ANTHROPIC_ROUTE
        messages: List[Dict[str, Any]] = []
        compacted_at: Optional[int] = None
        trims: List[Any] = []
        for turn in range(14):
            messages.append(user_turn(turn))
            prep = engine.prepare_request(request(messages))
            d = prep["decision"]
            assert (d["mechanism"], d["reason"]) == ("anthropic_threshold", "sent")
            assert prep["body"]["context_management"] == {"edits": [
                {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": TRIGGER}}]}
            assert prep["betas"] == ["compact-2026-01-12"]
            assert d["local"] == {"armed": True, "rewrite": True, "threshold_tokens": THRESHOLD_TOKENS}
            trims.append(prep["trim"])
            sent = prep["body"]["messages"]
            response = client.create(prep["body"], prep["betas"])
            obs = engine.observe_response(response)
            engine.update_from_response(response.usage if not isinstance(response, dict) else response["usage"])
            r = as_dict(response)
            messages = list(sent) + [{"role": "assistant", "content": r["content"]}]
            if r["content"][0]["type"] == "compaction":
                assert compacted_at is None, "the server compacted twice"
                compacted_at = turn
                assert [s["kind"] for s in obs["seen"]] == ["anthropic_compaction"]
                assert obs["seen"][0]["issuer"] == "anthropic"
                assert engine.native_session["issuers"] == {obs["seen"][0]["key"]: "anthropic"}  # type: ignore[index]
                # The server compacted; the local compressor, armed, has nothing to do.
                assert not engine.should_compress()
            elif compacted_at is not None:
                break
        assert compacted_at is not None, "the server never reached the trigger"
        assert compacted_at >= 3  # not from the first turn: the trigger was reached by growth

        # Every request carried the edit and the beta header.
        assert all(h.get("anthropic-beta") == "compact-2026-01-12" for h, _, _, _ in server.requests)
        assert all(st == 200 for _, _, st, _ in server.requests)
        headers, body, _, answer = server.requests[compacted_at]
        assert body["context_management"]["edits"][0]["trigger"]["value"] == TRIGGER
        assert answer["content"][0]["type"] == "compaction"
        # Before the compaction nothing was trimmed (no native items in the body).
        assert trims[:compacted_at + 1] == [None] * (compacted_at + 1)

        # The next request sends the block back first, and what preceded its message is gone.
        _, after, status, _ = server.requests[compacted_at + 1]
        assert status == 200
        before = server.requests[compacted_at][1]["messages"]
        assert after["messages"][0]["role"] == "assistant"
        assert after["messages"][0]["content"][0] == server.issued[0]
        assert after["messages"][1:] == [user_turn(compacted_at + 1)]
        trim = trims[compacted_at + 1]
        assert trim is not None and trim["changed"]
        assert trim["dropped"] == [{"index": i, "reason": "before_compaction"} for i in range(len(before))]
        assert trim["dropped_messages"] == before
        assert engine.last_native_trim == trim
        # The state carries the session: a restored engine knows the block's issuer.
        restored = ContextEngine(state=engine.state)
        assert restored.native_session == engine.native_session
        restored.close()


# --- (b) on demand: the compaction request and the swap ------------------------------------


def test_anthropic_on_demand_multi_turn(server: FakeAnthropic) -> None:
    client = Client(server.base_url)
    with make_engine("on_demand") as engine:
        messages: List[Dict[str, Any]] = []
        swapped = None
        compaction_turn = None
        for turn in range(14):
            messages.append(user_turn(turn))
            reported = engine.last_prompt_tokens
            prep = engine.prepare_request(request(messages))
            d = prep["decision"]
            assert d["mechanism"] == "anthropic_on_demand"
            assert prep["betas"] == ["compact-2026-09-04"]
            assert "context_management" not in prep["body"] and "compaction" not in prep["body"]
            if reported < TRIGGER:
                assert (d["compact_now"], d["reason"], d["compaction_request"]) == (False, "armed", None)
            else:
                assert swapped is None, "compact_now again after the swap"
                assert (d["compact_now"], d["reason"]) == (True, "compact_now")
                assert d["compaction_request"] == {"compaction": {"type": "summarize"}}
                compaction_turn = turn
                # Compact the complete turns; the new request stays after the block.
                count = len(messages) - 1
                creq = {**prep["body"], "messages": prep["body"]["messages"][:count], **d["compaction_request"]}
                response = client.create(creq, prep["betas"])
                r = as_dict(response)
                assert r["stop_reason"] == "compaction"
                assert [b["type"] for b in r["content"]] == ["compaction"]
                obs = engine.observe_response(response)
                assert obs["reason"] == "compaction_returned"
                summarized = list(messages[:count])
                swapped = engine.apply_compaction(messages, response, count=count)
                assert swapped["messages"][0] == {"role": "assistant", "content": r["content"]}
                assert swapped["messages"][1:] == messages[count:]
                assert swapped["dropped"] == [{"index": i, "reason": "replaced"} for i in range(count)]
                assert swapped["dropped_messages"] == summarized
                assert engine.last_prompt_tokens == -1  # the old size no longer applies
                messages = swapped["messages"]
                prep = engine.prepare_request(request(messages))
                assert prep["decision"]["compact_now"] is False
                assert prep["body"]["messages"] == messages  # the block is first: nothing to trim
            response = client.create(prep["body"], prep["betas"])
            engine.observe_response(response)
            engine.update_from_response(response.usage if not isinstance(response, dict) else response["usage"])
            messages = list(prep["body"]["messages"]) + [{"role": "assistant", "content": as_dict(response)["content"]}]
            if swapped is not None and turn > compaction_turn:  # type: ignore[operator]
                break
        assert compaction_turn is not None and compaction_turn >= 3, "never reached the on-demand point"
        statuses = [st for _, _, st, _ in server.requests]
        assert statuses == [200] * len(statuses), [a for _, _, st, a in server.requests if st != 200]
        kinds = ["compaction" if "compaction" in b else "turn" for _, b, _, _ in server.requests]
        assert kinds.count("compaction") == 1
        i = kinds.index("compaction")
        # The request after the swap: the signed block first (the server refuses it
        # anywhere else), then the new request; far below the trigger again.
        _, next_body, _, next_answer = server.requests[i + 1]
        assert next_body["messages"][0]["content"] == [server.issued[0]]
        assert next_body["messages"][1] == user_turn(compaction_turn)
        assert next_answer["usage"]["input_tokens"] < TRIGGER // 4


def test_on_demand_manual(server: FakeAnthropic) -> None:
    with make_engine("on_demand") as engine:
        d = engine.prepare_request(request([user_turn(0)]))["decision"]
        assert d["compact_now"] is False
        d = engine.prepare_request(request([user_turn(0)]), manual=True)["decision"]
        assert d["compact_now"] is True and d["compaction_request"] == {"compaction": {"type": "summarize"}}


# --- (c) a rejection disables it; the local compressor takes over ---------------------------


def test_anthropic_rejection_then_local_compressor(server: FakeAnthropic) -> None:
    client = Client(server.base_url)
    server.reject_context_management = True
    with make_engine("threshold") as engine:
        messages: List[Dict[str, Any]] = [user_turn(0)]
        prep = engine.prepare_request(request(messages))
        assert "context_management" in prep["body"]
        with pytest.raises(ApiError) as e:
            client.create(prep["body"], prep["betas"])
        assert e.value.status == 400
        outcome = engine.observe_error(e.value.status, e.value.body)
        assert outcome == {"retry": True, "disabled": "anthropic_compaction", "reason": "rejected"}
        assert engine.native_session["disabled"] == ["anthropic_compaction"]  # type: ignore[index]

        compressed = None
        for turn in range(20):
            if turn > 0:
                messages.append(user_turn(turn))
            prep = engine.prepare_request(request(messages))
            d = prep["decision"]
            assert d["reason"] == "rejected"
            assert "context_management" not in prep["body"] and prep["betas"] == []
            assert d["local"]["armed"] is True
            response = client.create(prep["body"], prep["betas"])
            engine.update_from_response(response.usage if not isinstance(response, dict) else response["usage"])
            messages = list(prep["body"]["messages"]) + [{"role": "assistant", "content": as_dict(response)["content"]}]
            if compressed is not None:
                break
            if engine.should_compress():
                before = len(messages)
                compressed = engine.compress(messages)
                assert engine.last_report is not None and engine.last_report["compacted"] is True
                assert len(compressed) < before
                assert engine.compression_count == 1
                messages = compressed
        assert compressed is not None, "the local compressor never triggered"
        # The request right after the rejection went without the field, and so did
        # every later one; the one after the local compaction is under the threshold.
        rejected = [st for _, _, st, _ in server.requests].count(400)
        assert rejected == 1
        assert all("context_management" not in b and "anthropic-beta" not in h
                   for h, b, st, _ in server.requests if st == 200)
        assert server.requests[-1][3]["usage"]["input_tokens"] < THRESHOLD_TOKENS
        # The disable is part of the state: a restored session still leaves it out.
        with ContextEngine(state=engine.state) as restored:
            again = restored.prepare_request(request([user_turn(0)]))
            assert again["decision"]["reason"] == "rejected" and "context_management" not in again["body"]
            # /new or /reset starts a fresh native session (engine.reset): the field goes again.
            restored.on_session_reset()
            assert restored.native_session is None
            assert "context_management" in restored.prepare_request(request([user_turn(0)]))["body"]


def test_transient_error_retries_without_disabling() -> None:
    with make_engine("threshold") as engine:
        status, body = _error("compaction is unavailable, try again", "compaction_unavailable")
        assert engine.observe_error(status, body) == {"retry": True, "disabled": None, "reason": "transient"}
        assert engine.prepare_request(request([user_turn(0)]))["decision"]["reason"] == "sent"
        assert engine.observe_error(500, "overloaded")["retry"] is False


# --- the other routes through the engine --------------------------------------------------


def test_responses_route_change_drops_foreign_items() -> None:
    cfg = {"compression": {"codex_responses_native": True}}
    with ContextEngine(cfg, model="gpt-5.6", context_length=272000, provider="openai") as engine:
        engine.update_model("gpt-5.6", 272000, base_url="https://api.openai.com/v1", provider="openai",
                            api_mode="codex_responses")
        n = min(200000, engine.threshold_tokens - 8192)
        item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"}
        body = {"model": "gpt-5.6", "input": [{"role": "user", "content": "hi"}]}
        prep = engine.prepare_request(body)
        assert prep["body"]["context_management"] == [{"type": "compaction", "compact_threshold": n}]
        assert body == {"model": "gpt-5.6", "input": [{"role": "user", "content": "hi"}]}  # not mutated
        obs = engine.observe_response({"object": "response", "output": [item, {
            "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]})
        assert obs["seen"] == [{"kind": "openai_compaction", "key": "cmp_1", "issuer": "openai"}]
        # A move to another provider: no field, and the OpenAI item is not sent there.
        engine.update_model("gpt-5.6", 272000, base_url="https://openrouter.ai/api/v1", provider="openrouter",
                            api_mode="codex_responses")
        moved = engine.prepare_request({"model": "gpt-5.6", "context_management": [{"type": "compaction"}],
                                        "input": [{"role": "user", "content": "hi"}, item,
                                                  {"role": "user", "content": "next"}]})
        assert moved["decision"]["drop_issuers"] == ["openai"]
        assert "context_management" not in moved["body"]
        assert moved["body"]["input"] == [{"role": "user", "content": "hi"}, {"role": "user", "content": "next"}]
        assert moved["trim"] is not None and moved["trim"]["dropped"] == [{"index": 1, "reason": "other_issuer"}]


def test_app_server_events() -> None:
    cfg = {"compression": {"codex_app_server_auto": "hermes"}}
    with ContextEngine(cfg, model="gpt-5.5", context_length=272000, provider="openai-codex") as engine:
        engine.update_model("gpt-5.5", 272000, provider="openai-codex", api_mode="codex_app_server")
        d = engine.prepare_request({}, tokens=engine.threshold_tokens)["decision"]
        assert d["mechanism"] == "app_server" and d["local"]["rewrite"] is False
        assert d["app_server"] == {"mode": "hermes", "initiator": "host", "compact_now": True}
        engine.observe_event({"method": "thread/compact/start", "params": {"threadId": "t1"}})
        d = engine.prepare_request({}, tokens=engine.threshold_tokens)["decision"]
        assert d["app_server"]["compact_now"] is False and d["reason"] == "pending"  # type: ignore[index]
        obs = engine.observe_event({"method": "item/completed", "params": {"item": {"type": "contextCompaction",
                                                                                    "id": "c1"}}},
                                   messages_count=12)
        assert [s["kind"] for s in obs["seen"]] == ["app_server_compaction"]
        assert engine.native_session["app_server"] == {"pending": False, "compactions": 1,  # type: ignore[index]
                                                       "boundaries": [12]}
        with pytest.raises(OptionError):
            engine.observe_event("thread/compacted")  # type: ignore[arg-type]


def test_app_server_boundary_from_hermes() -> None:
    # Hermes' codex runtime calls record_completed_compaction after the app-server
    # compacted its thread (agent/codex_runtime.py), and after its own compaction step.
    with ContextEngine(model="gpt-5.5", context_length=272000, provider="openai-codex") as engine:
        engine.record_completed_compaction(used_fallback=False)  # not the app-server route: nothing
        assert engine.native_session is None
        engine.update_model("gpt-5.5", 272000, provider="openai-codex", api_mode="codex_app_server")
        engine.record_completed_compaction()
        assert engine.native_session["app_server"]["compactions"] == 1  # type: ignore[index]
        assert engine.state["native"]["app_server"]["compactions"] == 1


def test_prepare_request_merges_the_compaction_edit_into_the_hosts_edits() -> None:
    clear = {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000}}
    history = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
               {"role": "user", "content": "three"}]
    body = {"model": "claude-opus-4-7", "max_tokens": 1024, "messages": history,
            "context_management": {"edits": [clear]}}
    with ContextEngine({"compression": {"anthropic_native": "threshold"}}, model="claude-opus-4-7",
                       context_length=1000000, provider="anthropic") as engine:
        p = engine.prepare_request(body)
        edits = p["body"]["context_management"]["edits"]
        assert [e["type"] for e in edits] == ["clear_tool_uses_20250919", "compact_20260112"]
        assert edits[1]["trigger"]["value"] == 500000 - 8192
        assert p["betas"] == ["compact-2026-01-12"]
        assert p["body"]["messages"] is history  # no compaction item: the caller's list
        assert body["context_management"] == {"edits": [clear]}  # not mutated
        assert p["compaction_body"] is None and p["trim"] is None
    with ContextEngine({"compression": {"anthropic_native": "on_demand"}}, model="claude-opus-4-7",
                       context_length=200000, provider="anthropic") as engine:
        q = engine.prepare_request(body, tokens=150000)
        assert q["decision"]["compact_now"] is True
        cb = q["compaction_body"]
        assert cb is not None and cb["compaction"] == {"type": "summarize"}
        assert "context_management" not in cb  # the API does not take both
        assert cb["messages"] is history
        assert q["body"]["context_management"] == {"edits": [clear]}


def test_native_prepare_wrapper(compactor: ctxcompact.Compactor) -> None:
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "x"}
    body = {"model": "gpt-5.6", "input": [{"role": "user", "content": "hi"}, item, {"role": "user", "content": "next"}]}
    cfg: ctxcompact.Config = {"model": {"name": "gpt-5.6", "context_length": 1000000},
                              "compression": {"codex_responses_native": True}}
    p = compactor.native_prepare(body, route={"base_url": "https://api.openai.com/v1"}, config=cfg)
    assert p["decision"]["reason"] == "sent"
    assert p["body"]["context_management"] == [{"type": "compaction", "compact_threshold": 200000}]
    assert p["body"]["input"] == [item, {"role": "user", "content": "next"}]
    assert p["trimmed"]["dropped"] == [{"index": 0, "reason": "before_compaction"}]
    assert p["compaction_body"] is None
    with pytest.raises(ctxcompact.OptionError):
        compactor.native_prepare([])  # type: ignore[arg-type]


def test_lossless_engine_archives_native_drops_once(tmp_path: Any) -> None:
    from ctxcompact.recall import RecallStore

    store = RecallStore(tmp_path / "recall.db")
    cfg = {"compression": {"codex_responses_native": True}, "context": {"engine": "lossless"}}
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "x"}
    history = [{"role": "user", "content": "the flaky test is tests/test_io.py"},
               {"role": "assistant", "content": "fixed by a retry"}, item, {"role": "user", "content": "next"}]
    with ContextEngine(cfg, model="gpt-5.6", context_length=400000, provider="openai",
                       store=store, session_id="s1") as engine:
        engine.update_model("gpt-5.6", 400000, base_url="https://api.openai.com/v1", provider="openai")
        p = engine.prepare_request({"model": "gpt-5.6", "input": history})
        assert p["body"]["input"] == [item, {"role": "user", "content": "next"}]
        assert engine.last_native_archive == "r1"
        found = json.loads(engine.handle_tool_call("context_search", {"query": "test_io.py"}))
        assert "r1" in json.dumps(found)
        # The same history again: dropped again, archived once.
        engine.last_native_archive = None
        engine.prepare_request({"model": "gpt-5.6", "input": history})
        assert engine.last_native_archive is None
        expanded = json.loads(engine.handle_tool_call("context_expand", {"id": "r1"}))
        assert "tests/test_io.py" in json.dumps(expanded)


def test_lossless_apply_compaction_archives_what_the_block_summarized(tmp_path: Any) -> None:
    from ctxcompact.recall import RecallStore

    store = RecallStore(tmp_path / "recall.db")
    history = [{"role": "user", "content": "the schema lives in db/schema.sql"},
               {"role": "assistant", "content": "noted"}]
    block = {"type": "compaction", "content": "Summary: schema in db/schema.sql.", "signature": "sig"}
    cfg = {"compression": {"anthropic_native": "on_demand"}, "context": {"engine": "lossless"}}
    with ContextEngine(cfg, model="claude-opus-4-7", context_length=200000, provider="anthropic",
                       store=store, session_id="s1") as engine:
        r = engine.apply_compaction(history, {"type": "message", "role": "assistant",
                                              "stop_reason": "compaction", "content": [block]})
        assert r["messages"] == [{"role": "assistant", "content": [block]}]
        assert engine.last_native_archive == "r1"
        assert "r1" in engine.handle_tool_call("context_search", {"query": "schema.sql"})
        assert engine.last_prompt_tokens == -1
