// The Node agent-loop example (examples/agent-loop/node/agent.mjs, issue 18): run as
// the README runs it, it replays the example trace against the loopback model with
// the `openai` SDK, compacts with the ready OpenAI summarizer when the engine says so,
// and prints a line per compaction and a closing line. In process, every request the
// loopback got fits the window.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { DEFAULT_TRACE, runAgent } from "../../../examples/agent-loop/node/agent.mjs";
import { ROOT } from "./helpers.mjs";

const AGENT = path.join("examples", "agent-loop", "node", "agent.mjs");
const LINE = /^compaction (\d+) at turn (\d+): (\d+) -> (\d+) messages, (\d+) -> (\d+) tokens \(summarizer (host|builtin)\)$/;
const DONE = /^done: (\d+) turns, (\d+) compactions, (\d+) model requests$/;
const assistantTurns = JSON.parse(readFileSync(DEFAULT_TRACE, "utf8")).messages.filter((m) => m.role === "assistant").length;

function run(args) {
  const out = execFileSync(process.execPath, [AGENT, ...args], { cwd: ROOT, encoding: "utf8" });
  return out.trimEnd().split("\n");
}

/** Checks the printed lines; returns the compaction lines' fields. */
function check(lines) {
  const done = lines.at(-1).match(DONE);
  assert.ok(done, `the closing line: ${lines.at(-1)}`);
  const compactions = lines.slice(0, -1).map((l) => l.match(LINE));
  compactions.forEach((m, i) => assert.ok(m, `a compaction line: ${lines[i]}`));
  assert.ok(compactions.length >= 1, lines.join("\n"));
  const [, turns, k, requests] = done.map(Number);
  assert.equal(turns, assistantTurns, "one model request per recorded assistant turn");
  assert.equal(k, compactions.length);
  assert.equal(requests, turns + k, "the agent's requests and one summary request per compaction");
  let lastTurn = 0;
  compactions.forEach((m, i) => {
    const [, n, turn, before, after, tokensBefore, tokensAfter, summarizer] = m;
    assert.equal(Number(n), i + 1);
    assert.ok(Number(turn) > lastTurn);
    lastTurn = Number(turn);
    assert.ok(Number(after) < Number(before), m[0]);
    assert.ok(Number(tokensAfter) < Number(tokensBefore), m[0]);
    assert.equal(summarizer, "host", "the SDK summarizer wrote the summary (no fallback)");
  });
  return compactions;
}

let byDefault;

test("node examples/agent-loop/node/agent.mjs (the README's command): compaction lines, summarizer host", () => {
  byDefault = check(run([]));
});

test("agent.mjs TRACE --window 8000: a smaller window compacts more often", () => {
  const small = check(run([path.relative(ROOT, DEFAULT_TRACE), "--window", "8000"]));
  assert.ok(byDefault, "the default run passed");
  assert.ok(small.length > byDefault.length, `${small.length} compactions at 8000 vs ${byDefault.length} at the default 16000`);
});

test("agent.mjs rejects a bad --window", () => {
  assert.throws(() => execFileSync(process.execPath, [AGENT, "--window", "lots"], { cwd: ROOT, encoding: "utf8", stdio: "pipe" }),
    (err) => err.status === 1 && /--window takes a positive integer/.test(err.stderr));
});

for (const window of [16000, 8000]) {
  test(`in process (window ${window}): every request the loopback got fits the window`, async () => {
    const lines = [];
    const { turns, compactions, requests } = await runAgent({ window, log: (l) => lines.push(l) });
    check(lines);
    assert.equal(requests.length, turns + compactions);
    assert.equal(requests.filter((r) => r.summary).length, compactions);
    for (const [i, r] of requests.entries()) {
      assert.equal(r.status, 200, `request ${i}`);
      assert.ok(r.promptTokens <= window, `request ${i} (${r.summary ? "summary" : "agent"}): ${r.promptTokens} tokens > ${window}`);
    }
    // The summary requests went to the summary model through the chat API, with its size parameter.
    for (const r of requests.filter((q) => q.summary)) {
      assert.equal(r.path, "/v1/chat/completions");
      assert.equal(r.body.model, "summary-model");
      assert.ok(Number.isInteger(r.body.max_tokens) && r.body.max_tokens > 0);
    }
  });
}
