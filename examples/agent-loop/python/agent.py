"""An agent loop with ctxcompact: replays a recorded trace against a loopback model.

    python3 examples/agent-loop/python/agent.py [TRACE] [--window N]

(from the repository root, with the package and the openai SDK installed:
``pip install './bindings/python[openai]'``). TRACE defaults to
examples/astropy-12907.json, the window to 16000 tokens.

The loopback model (loopback.py beside this file, on 127.0.0.1) answers each
agent turn with the trace's next recorded assistant message and reports usage
computed from the request it got. The loop sends the conversation with the
openai SDK, appends the answer and the recorded tool results and user turns that
followed it, feeds the usage to a ctxcompact.ContextEngine and, when the engine
says so, compacts with the ready OpenAI summarizer (pointed at the same loopback)
and prints one line per compaction.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Dict, List

import openai

import ctxcompact
from ctxcompact.summarizers import openai_summarizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import SUMMARY_MODEL, LoopbackModel  # noqa: E402

DEFAULT_TRACE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "astropy-12907.json")
AGENT_MODEL = "agent-model"


def answer_message(message: Any) -> Dict[str, Any]:
    """The SDK's assistant message as a chat message dict."""
    out: Dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in message.tool_calls
        ]
    return out


def run(trace_path: str, window: int, model: LoopbackModel, out: Callable[[str], None] = print) -> int:
    """Replay trace_path against the started loopback model with a window of
    window tokens; out gets each line. Returns the number of compactions."""
    with open(trace_path, "rb") as f:
        trace: List[Dict[str, Any]] = json.load(f)["messages"]
    first_user = next(i for i, m in enumerate(trace) if m.get("role") == "user")
    turns = [i for i, m in enumerate(trace) if m.get("role") == "assistant" and i > first_user]
    # The loopback's cursor walks every assistant message: skip any before the first user turn.
    model.cursor = sum(1 for m in trace[:first_user] if m.get("role") == "assistant")

    # Retries off: the loopback answers at once, and a failure should show.
    client = openai.OpenAI(base_url=model.openai_base_url, api_key="loopback", max_retries=0)
    engine = ctxcompact.ContextEngine(
        model=AGENT_MODEL,
        context_length=window,
        summarize=openai_summarizer(client, model=SUMMARY_MODEL),
    )
    messages: List[Dict[str, Any]] = trace[: first_user + 1]
    compactions = 0
    with engine, client:
        for t, i in enumerate(turns, 1):
            resp = client.chat.completions.create(model=AGENT_MODEL, messages=messages)  # type: ignore[arg-type]
            messages = messages + [answer_message(resp.choices[0].message)]
            end = turns[t] if t < len(turns) else len(trace)
            messages += trace[i + 1 : end]  # the tool results and user turns that followed
            engine.update_from_response(resp.usage)
            if not engine.should_compress():
                continue
            before = len(messages)
            messages = engine.compress(messages)
            report = engine.last_report or {}
            if not report.get("compacted"):
                continue
            compactions += 1
            summarizer = "builtin" if report.get("fallback_used") else report.get("summarizer", "")
            out(
                f"compaction {compactions} at turn {t}: {before} -> {len(messages)} messages, "
                f"{report.get('tokens_before')} -> {report.get('tokens_after')} tokens (summarizer {summarizer})"
            )
    out(f"done: {len(turns)} turns, {compactions} compactions, {len(model.requests)} model requests")
    return compactions


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", nargs="?", default=DEFAULT_TRACE, help="a trace in the OpenAI chat format")
    ap.add_argument("--window", type=int, default=16000, help="the model's context window in tokens")
    args = ap.parse_args(argv)
    with LoopbackModel(args.trace) as model:
        run(args.trace, args.window, model, lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
