"""A loopback "model" server for the agent-loop example and the SDK tests.

It listens on 127.0.0.1 (port 0: the OS picks a free port), in a thread of the
calling process, and speaks the three APIs the ready summarizers use:
``POST /v1/chat/completions``, ``POST /v1/responses`` and ``POST /v1/messages``.
Every request is recorded (path, headers, decoded JSON body) in ``requests``.

* A summary request (its model is ``summary_model``, or the first line of its
  system/instructions text mentions "summar", case-insensitively) is answered with
  a deterministic summary::

      ## Goal
      Replay of <trace name>.
      ## Progress
      <n> messages summarized.

  where n counts the turns the request serialized (its user text's lines that
  start with "[#", the core's turn headers). Only the first line of the system
  text is looked at: the note the core appends to a compacted conversation's
  system prompt mentions the summary too, and that is still an agent turn.
* Any other request is an agent turn, answered with the trace's next recorded
  assistant message (a cursor over them, in order): its content and tool_calls as
  recorded. The traces record no usage per turn, so usage is computed from the
  request: prompt tokens = ceil(len(JSON of the request's messages) / 4),
  completion tokens = ceil(len(JSON of the answer) / 4), JSON written compactly
  (no spaces, non-ASCII as is), as JSON.stringify writes it.

Error modes for tests: ``fail(status, ...)`` queues error answers (429 with a
retry-after header, 500, a structured 400, ...) taken by the next requests, and
``delay`` (seconds) holds every answer back that long (for timeout tests).

Usage::

    with LoopbackModel("examples/astropy-12907.json") as model:
        client = openai.OpenAI(base_url=model.openai_base_url, api_key="loopback")
        ...
        model.requests  # what was sent

Only the standard library is used, so the example and the tests share this file.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Deque, Dict, List, Optional, Set, Union
from collections import deque

__all__ = ["LoopbackModel", "Recorded", "summary_text", "compact_json", "SUMMARY_MODEL"]

#: The model name the examples give their summarizer; requests for it are summary
#: requests whatever their system text says.
SUMMARY_MODEL = "summary-model"

PATHS = ("/v1/chat/completions", "/v1/responses", "/v1/messages")


def compact_json(value: Any) -> str:
    """JSON as JSON.stringify writes it: no spaces, non-ASCII characters as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def tokens_of(value: Any) -> int:
    """The loopback's usage estimate: ceil(len(compact JSON) / 4)."""
    return math.ceil(len(compact_json(value)) / 4)


def summary_text(trace_name: str, n: int) -> str:
    """The deterministic summary the loopback answers a summary request with."""
    return f"## Goal\nReplay of {trace_name}.\n## Progress\n{n} messages summarized."


@dataclass
class Recorded:
    """One request the loopback got."""

    path: str
    headers: Dict[str, str]  # lower-cased names
    body: Any  # the decoded JSON body (None if it was not JSON)
    kind: str  # "summary", "agent" or "error" (answered by a queued failure)


@dataclass
class _Failure:
    status: int
    retry_after: Optional[str]
    message: str
    error_type: Optional[str]
    times: int


def _text_of(content: Any) -> str:
    """The text of a message content: a string, or a list of text parts/blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
        return "".join(out)
    return ""


def system_text(path: str, body: Dict[str, Any]) -> str:
    """The system/instructions text of a request, per API."""
    if path == "/v1/messages":
        return _text_of(body.get("system"))
    parts: List[str] = []
    if path == "/v1/responses":
        if isinstance(body.get("instructions"), str):
            parts.append(body["instructions"])
        items = body.get("input") if isinstance(body.get("input"), list) else []
    else:
        items = body.get("messages") or []
    for m in items:
        if isinstance(m, dict) and m.get("role") in ("system", "developer"):
            parts.append(_text_of(m.get("content")))
    return "\n".join(parts)


def user_text(path: str, body: Dict[str, Any]) -> str:
    """The user text of a request, per API (all user messages, joined)."""
    if path == "/v1/responses" and isinstance(body.get("input"), str):
        return str(body["input"])
    items = body.get("input") if path == "/v1/responses" else body.get("messages")
    if not isinstance(items, list):
        return ""
    return "\n".join(_text_of(m.get("content")) for m in items if isinstance(m, dict) and m.get("role") == "user")


def request_messages(path: str, body: Dict[str, Any]) -> Any:
    """What the usage estimate counts: the request's messages (input for Responses;
    system and messages for Anthropic)."""
    if path == "/v1/responses":
        return [body.get("instructions"), body.get("input")] if body.get("instructions") else body.get("input")
    if path == "/v1/messages" and body.get("system") is not None:
        return [body.get("system"), body.get("messages")]
    return body.get("messages")


def load_trace(trace: Union[str, "os.PathLike[str]", Dict[str, Any], List[Dict[str, Any]], None]) -> List[Dict[str, Any]]:
    if trace is None:
        return []
    if isinstance(trace, (str, os.PathLike)):
        with open(trace, "rb") as f:
            trace = json.load(f)
    if isinstance(trace, dict):
        trace = trace["messages"]
    assert isinstance(trace, list), "a trace is a path, {messages: [...]} or a list of messages"
    return trace


def trace_name_of(trace: Any) -> str:
    if isinstance(trace, (str, os.PathLike)):
        base = os.path.basename(os.fspath(trace))
        return base[:-5] if base.endswith(".json") else base
    return "trace"


class LoopbackModel:
    """The loopback model server; see the module docstring. Start it with
    ``start()`` or ``with``; ``close()`` stops it (and wakes delayed answers)."""

    def __init__(
        self,
        trace: Union[str, "os.PathLike[str]", Dict[str, Any], List[Dict[str, Any]], None] = None,
        *,
        trace_name: Optional[str] = None,
        summary_model: str = SUMMARY_MODEL,
        summary: Union[str, Callable[[Recorded], str], None] = None,
        delay: float = 0.0,
    ) -> None:
        self.messages = load_trace(trace)
        self.trace_name = trace_name or trace_name_of(trace)
        self.summary_model = summary_model
        #: Overrides the summary answer (a string, "" included, or a function of the request).
        self.summary = summary
        #: Seconds every answer is held back.
        self.delay = delay
        self.requests: List[Recorded] = []
        self.assistants = [m for m in self.messages if m.get("role") == "assistant"]
        self.cursor = 0  # the next assistant turn to answer with
        self._failures: Deque[_Failure] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._conns: Set[socket.socket] = set()
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self._ids = 0

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> "LoopbackModel":
        if self._server is not None:
            return self
        model = self

        class Handler(_Handler):
            loopback = model

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        # A short poll: close() (shutdown) waits for the loop to notice, up to one interval.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="loopback-model", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._closing.set()
        server.shutdown()
        with self._lock:
            conns = list(self._conns)
        for c in conns:  # idle keep-alive connections: their handler threads end
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> "LoopbackModel":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._server is not None, "the loopback is not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:<port> (Anthropic's base_url)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """http://127.0.0.1:<port>/v1 (OpenAI's base_url)."""
        return self.base_url + "/v1"

    # --- test controls --------------------------------------------------------------

    def fail(
        self,
        status: int,
        *,
        times: int = 1,
        retry_after: Union[str, float, None] = None,
        message: str = "loopback failure",
        error_type: Optional[str] = None,
    ) -> None:
        """Answer the next ``times`` requests with an HTTP error: status, a
        structured error body in the API's own shape, and retry-after if given."""
        ra = None if retry_after is None else str(retry_after)
        with self._lock:
            self._failures.append(_Failure(status, ra, message, error_type, times))

    def summary_requests(self) -> List[Recorded]:
        return [r for r in self.requests if r.kind == "summary"]

    def agent_requests(self) -> List[Recorded]:
        return [r for r in self.requests if r.kind == "agent"]

    # --- answers --------------------------------------------------------------------

    def is_summary(self, path: str, body: Dict[str, Any]) -> bool:
        if body.get("model") == self.summary_model:
            return True
        first = system_text(path, body).lstrip().split("\n", 1)[0]
        return "summar" in first.lower()

    def _take_failure(self) -> Optional[_Failure]:
        with self._lock:
            if not self._failures:
                return None
            f = self._failures[0]
            f.times -= 1
            if f.times <= 0:
                self._failures.popleft()
            return f

    def _next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    def answer(self, path: str, headers: Dict[str, str], body: Any) -> "tuple[int, Dict[str, str], Any]":
        """(status, extra headers, JSON body) for one request; records it."""
        failure = self._take_failure()
        if failure is not None:
            self.requests.append(Recorded(path, headers, body, "error"))
            extra = {} if failure.retry_after is None else {"retry-after": failure.retry_after}
            return failure.status, extra, error_body(path, failure.status, failure.message, failure.error_type)
        if not isinstance(body, dict):
            self.requests.append(Recorded(path, headers, body, "error"))
            return 400, {}, error_body(path, 400, "loopback: the body is not a JSON object", None)
        summary = self.is_summary(path, body)
        rec = Recorded(path, headers, body, "summary" if summary else "agent")
        self.requests.append(rec)
        model = str(body.get("model", ""))
        n = self._next_id()
        prompt = tokens_of(request_messages(path, body))
        if summary:
            if callable(self.summary):
                text = self.summary(rec)
            elif self.summary is not None:
                text = self.summary
            else:
                turns = sum(1 for line in user_text(path, body).split("\n") if line.startswith("[#"))
                text = summary_text(self.trace_name, turns)
            msg: Dict[str, Any] = {"role": "assistant", "content": text}
        else:
            with self._lock:
                if self.cursor >= len(self.assistants):
                    msg = {}
                else:
                    msg = self.assistants[self.cursor]
                    self.cursor += 1
            if not msg:
                rec.kind = "error"
                return 400, {}, error_body(path, 400, "loopback: the trace has no more assistant turns", None)
        if path == "/v1/chat/completions":
            return 200, {}, chat_answer(n, model, msg, prompt)
        if path == "/v1/responses":
            return 200, {}, responses_answer(n, model, msg, prompt)
        return 200, {}, messages_answer(n, model, msg, prompt)


def _answer_message(msg: Dict[str, Any]) -> Dict[str, Any]:
    """The recorded assistant message as a chat answer: role, content, tool_calls."""
    out: Dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
    if isinstance(out["content"], list):
        out["content"] = _text_of(out["content"])
    if msg.get("tool_calls"):
        out["tool_calls"] = msg["tool_calls"]
    return out


def chat_answer(n: int, model: str, msg: Dict[str, Any], prompt: int) -> Dict[str, Any]:
    message = _answer_message(msg)
    completion = tokens_of(message)
    return {
        "id": f"chatcmpl-loopback-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def responses_answer(n: int, model: str, msg: Dict[str, Any], prompt: int) -> Dict[str, Any]:
    message = _answer_message(msg)
    output: List[Dict[str, Any]] = []
    if message.get("content"):
        output.append(
            {
                "type": "message",
                "id": f"msg_loopback_{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": message["content"], "annotations": []}],
            }
        )
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{call.get('id', n)}",
                "call_id": call.get("id"),
                "name": fn.get("name"),
                "arguments": fn.get("arguments", ""),
                "status": "completed",
            }
        )
    completion = tokens_of(output)
    return {
        "id": f"resp_loopback_{n}",
        "object": "response",
        "created_at": 0,
        "model": model,
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
    }


def messages_answer(n: int, model: str, msg: Dict[str, Any], prompt: int) -> Dict[str, Any]:
    message = _answer_message(msg)
    content: List[Dict[str, Any]] = []
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = {"arguments": fn.get("arguments")}
        content.append({"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": args})
    completion = tokens_of(content)
    return {
        "id": f"msg_loopback_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if message.get("tool_calls") else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": completion},
    }


_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_OPENAI_ERRORS = {400: "invalid_request_error", 401: "invalid_api_key", 429: "rate_limit_exceeded", 500: "server_error"}


def error_body(path: str, status: int, message: str, error_type: Optional[str]) -> Dict[str, Any]:
    """A structured error in the API's own shape."""
    if path == "/v1/messages":
        kind = error_type or _ANTHROPIC_ERRORS.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = error_type or _OPENAI_ERRORS.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the SDKs pool connections
    # Headers and body in one buffered write, sent at once: without these an
    # answer waits for the client's delayed ACK (~40 ms a request).
    disable_nagle_algorithm = True
    wbufsize = 1 << 16
    loopback: LoopbackModel

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        with self.loopback._lock:
            self.loopback._conns.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.loopback._lock:
                self.loopback._conns.discard(self.connection)

    def _send(self, status: int, headers: Dict[str, str], body: Any) -> None:
        data = compact_json(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
            self.close_connection = True

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        path = self.path.split("?", 1)[0]
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        if path not in PATHS:
            self.loopback.requests.append(Recorded(path, headers, body, "error"))
            self._send(404, {}, error_body(path, 404, f"loopback: no route {path}", None))
            return
        status, extra, answer = self.loopback.answer(path, headers, body)
        if self.loopback.delay > 0 and self.loopback._closing.wait(self.loopback.delay):
            self.close_connection = True  # closing: drop the answer
            return
        self._send(status, extra, answer)
