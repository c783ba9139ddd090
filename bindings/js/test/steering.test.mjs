// Steering a compaction: the config's compression.instructions and compact()'s focus
// reach the summarizer's request, and the built-in summary keeps what matches the
// focus first (docs/STEERING.md).
import { test } from "node:test";
import assert from "node:assert/strict";
import { CompactError, Compactor, ContextEngine } from "../index.js";
import { loadTrace, traceFile, tracesSkip } from "./helpers.mjs";

/** A coding session whose middle reads five modules, one of them the ledger. */
function conversation() {
  const msgs = [{ role: "system", content: "You are a coding agent." }, { role: "user", content: "Fix the failing tests." }];
  ["parser", "ledger", "cache", "router", "auth"].forEach((topic, i) => {
    msgs.push(
      { role: "assistant", content: `Reading ${topic}.`, tool_calls: [{ id: `c${i}`, type: "function", function: { name: "read_file", arguments: `{"path":"src/${topic}.py"}` } }] },
      { role: "tool", tool_call_id: `c${i}`, content: `# ${topic} code\n`.repeat(80) });
  });
  msgs.push({ role: "assistant", content: "Done reading." }, { role: "user", content: "Fix it." });
  return msgs;
}

const config = { model: { context_length: 3000 }, compression: { instructions: "Keep every file path." } };

test("compact() sends the instructions and the focus to the summarizer", async () => {
  const c = await Compactor.create({ config });
  let asked;
  const res = await c.compact(conversation(), { force: true, focus: "the ledger module", summarize: (req) => { asked = req; return "## Goal\nFix the tests."; } });
  assert.equal(res.report.compacted, true);
  const prompt = asked.messages[1].content;
  assert.ok(prompt.includes("Standing instructions for every summary (follow them):\nKeep every file path."), prompt.slice(-300));
  assert.ok(prompt.endsWith("Focus topic: give priority to everything about the ledger module."), prompt.slice(-300));
});

test("the built-in summary keeps a Focus section of what matches it", async () => {
  const c = await Compactor.create({ config });
  const res = await c.compact(conversation(), { force: true, focus: "ledger" });
  const summary = res.messages[res.report.head_end].content;
  const focus = summary.split("## Focus: ledger\n")[1]?.split("\n\n")[0];
  assert.ok(focus, summary);
  assert.match(focus, /^- #\d+ assistant: call read_file\(path="src\/ledger\.py"\)$/m);
  assert.ok(focus.split("\n").every((l) => /ledger/i.test(l)), focus);
});

test("a focus over 1,000 bytes, or instructions over 8,000, are refused with their path", async () => {
  const c = await Compactor.create();
  await assert.rejects(c.compact(conversation(), { force: true, focus: "x".repeat(1001) }),
    (e) => e instanceof CompactError && e.code === "invalid_request" && e.path === "/focus");
  await assert.rejects(Compactor.create({ config: { compression: { instructions: "x".repeat(8001) } } }),
    (e) => e instanceof CompactError && e.code === "invalid_config" && e.path === "/config/compression/instructions");
});

test("a compressor engine gives the agent context_status and compact_now", async () => {
  let asked;
  const engine = await ContextEngine.create({ config: { model: { context_length: 3000 } }, summarize: (req) => { asked = req; return "## Goal\nFix the tests."; } });
  assert.deepEqual(engine.getToolSchemas("anthropic").map((t) => t.name), ["context_status", "compact_now"]);
  assert.equal(engine.shouldCompress(500), false);
  const ans = JSON.parse(engine.handleToolCall("compact_now", { focus: "the ledger module" }));
  assert.equal(ans.ok, true);
  assert.equal(engine.getStatus().compaction_requested, true);
  assert.equal(engine.shouldCompress(500), true, "the agent asked");
  const out = await engine.compress(conversation());
  assert.equal(out.report.compacted, true, "below the threshold, the requested compaction is forced");
  assert.ok(asked.messages[1].content.endsWith("Focus topic: give priority to everything about the ledger module."));
  const status = JSON.parse(engine.handleToolCall("context_status", "{}"));
  assert.equal(status.compaction_requested, false);
  assert.equal(status.compactions, 1);
  assert.equal(status.window, 3000);
  assert.ok(Array.isArray(status.last_compaction.summarized_messages));
  assert.match(JSON.parse(engine.handleToolCall("compact_now", { focus: 3 })).error, /focus must be a string/);
});

test("a summarizer window too small for one request gets the summary in chunks, each request fitting it", { skip: tracesSkip() }, async () => {
  const messages = loadTrace(traceFile("claude-code-spotter-4d5611e5-precompact.json"));
  const c = await Compactor.create();
  const window = 11000; // one request would take about 33,000 tokens
  const asked = [];
  let refused = 0;
  const summarize = async (req) => {
    const n = c.countTokens(req.messages, { encoding: "o200k_base" }).total;
    if (n + req.max_tokens > window) {
      refused++;
      throw new Error(`the input is ${n + req.max_tokens} tokens; the window is ${window}`);
    }
    asked.push(req.middle);
    return `## Goal\nKeep going.\n- request ${asked.length} read turns ${req.middle.from}-${req.middle.to - 1}`;
  };
  const engine = c.engine({ config: { model: { context_length: 64000 }, compression: { summary_context_length: window } }, summarize });
  const res = await engine.compress(messages, { force: true });
  assert.equal(refused, 0, "no request above the window");
  assert.equal(res.report.fallback_used, false);
  assert.ok(asked.length >= 3, `${asked.length} requests`);
  assert.equal(res.report.summary_chunks, asked.length);
  asked.forEach((m, i) => { if (i > 0) assert.equal(m.from, asked[i - 1].to, "the chunks follow each other"); });
  assert.deepEqual([asked[0].from, asked.at(-1).to], [res.report.summarized.from, res.report.summarized.to]);
  assert.match(JSON.stringify(res.messages[res.report.head_end]), new RegExp(`request ${asked.length} read turns`));
});

test("background compaction: prepareCompaction runs beside the session; compress at the trigger splices it, asking the summarizer nothing", async () => {
  const prefix = conversation();
  const grown = [...prefix, { role: "assistant", content: "The parser test fails on empty input." }, { role: "user", content: "Fix that first." }];
  let calls = 0;
  let release;
  const running = new Promise((resolve) => { release = resolve; });
  let started;
  const asked = new Promise((resolve) => { started = resolve; });
  const engine = await ContextEngine.create({ config: { model: { context_length: 3000 } }, summarize: async () => {
    calls++;
    started();
    await running;
    return "## Goal\nFix the failing tests, the parser's first.";
  } });
  const threshold = engine.getStatus().threshold_tokens;
  assert.equal(engine.shouldPrepare(Math.floor(threshold * 0.9)), true);
  assert.equal(engine.shouldPrepare(Math.floor(threshold * 0.5)), false, "below prepare_ratio 0.85");
  const preparing = engine.prepareCompaction(prefix);
  await asked; // the summarizer is running: the session goes on
  engine.updateFromResponse({ prompt_tokens: 2100, completion_tokens: 40 });
  assert.equal(engine.shouldCompress(), false);
  release();
  const prepared = await preparing;
  assert.equal(prepared.prepared?.messages, prefix.length);
  assert.equal(engine.state.prepared?.messages, prefix.length, "the engine keeps it");
  const res = await engine.compress(grown, { currentTokens: threshold + 100 });
  assert.equal(res.report.prepared, true);
  assert.equal(calls, 1, "the summarizer was asked once, ahead");
  assert.deepEqual(res.messages.slice(-2), grown.slice(-2));
  assert.equal(res.messages.at(-1), grown.at(-1), "the caller's own objects");
  assert.match(JSON.stringify(res.messages[res.report.head_end]), /the parser's first/);
  await assert.rejects(engine.prepareCompaction(prefix, { force: true }), (e) => e instanceof CompactError && e.path === "/force");
});

test("pins: a pinned tool group is kept verbatim after the summary, and the engine keeps the pin at its new index", async () => {
  const c = await Compactor.create();
  const msgs = conversation();
  const res = await c.compact(msgs, { config: { model: { context_length: 3000 } }, force: true, pins: ["c1"] });
  assert.deepEqual(res.report.pinned, [4, 5]);
  assert.equal(res.messages[res.report.head_end + 1], msgs[4], "the caller's own object, in place after the summary");
  const engine = c.engine({ config: { model: { context_length: 3000 } } });
  const first = await engine.compress(msgs, { force: true, pins: [4] });
  assert.deepEqual(first.report.pinned, [4, 5]);
  const grown = [...first.messages, { role: "assistant", content: "Fixed the ledger." }, { role: "user", content: "Go on." }];
  const second = await engine.compress(grown, { force: true });
  assert.equal(second.report.pinned?.length, 2, "the pin held");
  assert.equal(second.messages[second.report.head_end + 1], msgs[4]);
  await assert.rejects(c.compact(msgs, { config: { model: { context_length: 3000 } }, force: true, pins: ["nope"] }),
    (e) => e instanceof CompactError && e.code === "invalid_request" && e.path === "/pins/0");
  await assert.rejects(c.compact(msgs, { pins: [-1] }), (e) => e instanceof CompactError && e.path === "/pins");
});

test("see and undo: the status has the last summary; undo gives back the compaction's input, then what came after", async () => {
  const engine = await ContextEngine.create({ config: { model: { context_length: 3000 } } });
  const msgs = conversation();
  const res = await engine.compress(msgs, { force: true });
  const status = engine.getStatus();
  assert.equal(status.can_undo, true);
  assert.match(status.last_compaction.summary, /^## Goal/);
  const grown = [...res.messages, { role: "user", content: "Undo that." }];
  const back = await engine.undo(grown);
  assert.deepEqual(back, [...msgs, { role: "user", content: "Undo that." }]);
  assert.equal(engine.getStatus().can_undo, false);
  await assert.rejects(engine.undo(back), (e) => e instanceof CompactError && e.code === "invalid_state" && /no compaction to undo/.test(e.message));
});

test("a range compaction summarizes exactly the messages named", async () => {
  const c = await Compactor.create();
  const res = await c.compact(conversation(), { config: { model: { context_length: 200000 } }, range: { from: 4, to: 8 } });
  assert.deepEqual(res.report.summarized, { from: 4, to: 8 });
  const engine = c.engine({ config: { model: { context_length: 200000 } } });
  const r = await engine.compress(conversation(), { range: { from: 2, to: 6 } });
  assert.deepEqual(r.report.summarized, { from: 2, to: 6 });
  await assert.rejects(c.compact(conversation(), { range: { from: 5, to: 8 } }), (e) => e instanceof CompactError && e.path === "/range/from");
});
