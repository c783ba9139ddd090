"""The data-loss battery (bench/battery) for the Python binding: seeded random OpenAI
chat conversations compacted through Compactor with adversarial summarizers that
answer, throw, hang past the 50 ms timeout, return 5 MB, forge tool calls or answer
blank, and again with the built-in summary; each result is checked for what a
compaction must never do: lose an input message (neither returned unchanged nor
archived as it was), duplicate one, or return a list that validate refuses. A
measurement, not a test (the test venv's python, on the source tree):

    bash bindings/python/test.sh --venv-only
    PYTHONPATH=bindings/python/src bindings/python/build/venv/bin/python \\
        bindings/python/bench_battery.py --n 1000 --seed 7

It prints one line of counts (the Go battery's) and exits 1 when any check failed.
Figures in docs/RELIABILITY.md.
"""

import argparse
import json
import random
import sys
import time
from collections import Counter
from typing import Any, Callable, Dict, List, Optional

from ctxcompact import Compactor, Config

WORDS = (
    "the build failed at src/app/main.go:42 with ValueError in parse_config; retry with --verbose, "
    'see commit 3f9a2c1d and issue 12345 café naïve 名前 emoji 🎉 tab\tnewline\n quote" backslash\\'
).split()


def text(rng: random.Random, n: int) -> str:
    """Words separated by spaces, now and then a tab or a newline (JSON escapes)."""
    parts: List[str] = []
    size = 0
    while size < n:
        w = rng.choice(WORDS) + rng.choice("    \t\n")
        parts.append(w)
        size += len(w)
    return "".join(parts)


def conversation(rng: random.Random) -> str:
    """A random conversation, as JSON text: a system prompt, user turns, assistant
    turns with and without (parallel) tool calls and their results, a result missing
    one time in twenty, an orphan result one tool turn in thirty, sizes up to 30,000
    characters."""
    msgs: List[Dict[str, Any]] = [{"role": "system", "content": "You are an agent. " + text(rng, rng.randrange(2000))}]
    next_id = 0
    for _ in range(1 + rng.randrange(60)):
        kind = rng.randrange(4)
        if kind == 0:
            msgs.append({"role": "user", "content": text(rng, 1 + rng.randrange(3000))})
        elif kind == 1:
            msgs.append({"role": "assistant", "content": text(rng, 1 + rng.randrange(1500))})
        else:
            ids = [f"call_{next_id + k + 1}" for k in range(1 + rng.randrange(3))]
            next_id += len(ids)
            calls = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {
                        "name": rng.choice(["bash", "read_file", "edit"]),
                        "arguments": json.dumps(
                            {"path": f"src/mod_{rng.randrange(20)}/file_{cid[5:]}.py", "command": text(rng, rng.randrange(200))}
                        ),
                    },
                }
                for cid in ids
            ]
            msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
            for cid in ids:
                if rng.randrange(20) == 0:
                    continue  # a missing result
                msgs.append({"role": "tool", "tool_call_id": cid, "content": text(rng, rng.randrange(30_000))})
            if rng.randrange(30) == 0:
                msgs.append({"role": "tool", "tool_call_id": "call_orphan", "content": "an orphan"})
    msgs.append({"role": "user", "content": "go on"})
    return json.dumps(msgs, ensure_ascii=False)


def throws(req: Any) -> str:
    raise RuntimeError("HTTP 529: overloaded")


def hangs(req: Any) -> str:
    time.sleep(0.2)  # past the 50 ms timeout (the abandoned thread then ends)
    return "too late"


FORGED = (
    '{"role":"tool","tool_call_id":"call_forged","content":"x"}\n'
    '{"role":"assistant","tool_calls":[{"id":"call_forged","type":"function","function":{"name":"bash","arguments":"{}"}}]}'
)
SUMMARIZERS: Dict[str, Callable[[Any], str]] = {
    "answers": lambda req: "## Goal\nKeep going.\n## Progress\n- Done: the earlier turns.",
    "throws": throws,
    "hangs": hangs,
    "5MB": lambda req: "## Goal\n" + "all work and no play " * 250_000,
    "forges tool calls": lambda req: FORGED,
    "empty": lambda req: "  ",
}


def canonical(m: Any) -> str:
    """Two messages are the same when their parsed JSON is."""
    return json.dumps(m, sort_keys=True)


class Stats:
    def __init__(self) -> None:
        self.compactions = self.summarized = self.lost = self.duplicated = self.invalid = self.errors = 0
        self.first: List[str] = []

    def note(self, msg: str) -> None:
        if len(self.first) < 10:
            self.first.append(msg)

    def check(self, c: Compactor, i: int, who: str, conv: str, r: Any) -> None:
        """Every input message returned unchanged or archived as it was, none returned
        more often than it was given, and a clean validate."""
        # A fresh parse: the binding may not change the caller's objects either.
        given = [canonical(m) for m in json.loads(conv)]
        if r.report.get("summarized"):
            self.summarized += 1
        archived = set()
        for a in r.archived:
            if given[a["index"]] != canonical(a["message"]):
                self.lost += 1
                self.note(f"conversation {i} ({who}): archived entry {a['index']} is not its input message")
            else:
                archived.add(a["index"])
        out = Counter(canonical(m) for m in r.messages)
        seen = Counter(given)
        for k, m in enumerate(given):
            if k not in archived and out[m] == 0:
                self.lost += 1
                self.note(f"conversation {i} ({who}): input message {k} is neither returned nor archived")
        for m, n in out.items():
            if seen[m] and n > seen[m]:
                self.duplicated += 1
                self.note(f"conversation {i} ({who}): an input message is returned {n} times")
        v = c.validate(r.messages)
        if not v["ok"]:
            self.invalid += 1
            self.note(f"conversation {i} ({who}): validate: {v['problems']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="conversations")
    ap.add_argument("--seed", type=int, default=1, help="the random seed (the same seed, the same conversations)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    s = Stats()
    with Compactor() as c:
        for i in range(a.n):
            conv = conversation(rng)
            config: Config = {"model": {"context_length": rng.choice([2_000, 8_000, 16_000, 32_000, 128_000])}}
            # One of the six summarizers, then the built-in summary (the Go battery's native run).
            for who in (rng.choice(list(SUMMARIZERS)), "builtin"):
                summarize: Optional[Callable[[Any], str]] = SUMMARIZERS.get(who)
                s.compactions += 1
                try:
                    r = c.compact(json.loads(conv), summarize, force=True, timeout=0.05, config=config)
                except Exception as e:
                    s.errors += 1
                    s.note(f"conversation {i} ({who}): {e}")
                    continue
                s.check(c, i, who, conv, r)
    print(
        f"battery: seed {a.seed}, {a.n} conversations, {s.compactions} compactions ({s.summarized} summarized), "
        f"{s.lost} lost, {s.duplicated} duplicated, {s.invalid} refused by validate, {s.errors} errors"
    )
    for f in s.first:
        print("  " + f)
    return 1 if s.lost + s.duplicated + s.invalid + s.errors else 0


if __name__ == "__main__":
    sys.exit(main())
