// The sync pure ops through the idiomatic API.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CompactError, Compactor } from "../index.js";
import { session } from "./helpers.mjs";

const c = await Compactor.create();
const noFloor = { compression: { small_context_floor: 0 }, model: { context_length: 200000 } };

test("resolveThreshold: the worked example (200K window, floor off / on)", () => {
  const t = c.resolveThreshold(noFloor);
  assert.equal(t.threshold_tokens, 100000);
  assert.equal(t.tail_token_budget, 20000);
  assert.equal(t.max_summary_tokens, 10000);
  assert.equal(t.rule, "threshold");
  const f = c.resolveThreshold({ model: { context_length: 200000 } });
  assert.equal(f.threshold_tokens, 150000);
  assert.equal(f.floor_applied, true);
});

test("resolveThreshold: the compactor's config is merged per section under the call's", async () => {
  const d = await Compactor.create({ config: { compression: { small_context_floor: 0, threshold: 0.6 }, model: { context_length: 100000 } } });
  assert.equal(d.resolveThreshold().threshold_tokens, 60000);
  // The call overrides threshold only; small_context_floor: 0 and the window stay.
  assert.equal(d.resolveThreshold({ compression: { threshold: 0.5 } }).threshold_tokens, 50000);
});

test("shouldCompress: at the threshold fires, below does not, breaker holds", () => {
  assert.equal(c.shouldCompress(100000, { config: noFloor }).should_compress, true);
  const below = c.shouldCompress(99999, { config: noFloor });
  assert.equal(below.should_compress, false);
  assert.equal(below.reason, "below_threshold");
  const br = c.shouldCompress(101000, { config: noFloor, lastCompactionTokens: 100500 });
  assert.equal(br.should_compress, false);
  assert.equal(br.reason, "breaker_open");
});

test("invalid config is a CompactError naming the key", () => {
  assert.throws(() => c.resolveThreshold({ compression: { threshold: -1 } }), (err) => {
    assert.ok(err instanceof CompactError);
    assert.equal(err.code, "invalid_config");
    assert.equal(err.path, "/config/compression/threshold");
    return true;
  });
});

test("countTokens: one count per message", () => {
  const msgs = session({ turns: 4 });
  const r = c.countTokens(msgs);
  assert.equal(r.per_message.length, msgs.length);
  assert.ok(r.total >= r.per_message.reduce((a, b) => a + b, 0) - 1, JSON.stringify(r));
  assert.ok(r.per_message[3] > 500 && r.per_message[3] < 1000, `a 3000-char tool output is ~750 tokens: ${r.per_message[3]}`);
  const exact = c.countTokens(msgs, { encoding: "o200k_base" });
  assert.equal(exact.encoding, "o200k_base");
  assert.notDeepEqual(exact.per_message, r.per_message);
});

test("hygieneCheck: prefers reported tokens, falls back to the estimate", () => {
  const msgs = session({ turns: 4 });
  const reported = c.hygieneCheck(msgs, { promptTokens: 190000 });
  assert.equal(reported.source, "reported");
  assert.equal(reported.should_compact, true);
  const est = c.hygieneCheck(msgs);
  assert.equal(est.source, "estimate");
  assert.equal(est.should_compact, false);
});

test("prune: old long tool outputs become placeholders; the rest are the caller's objects", () => {
  const msgs = session({ turns: 40 });
  const r = c.prune(msgs, { config: { compression: { protect_last_n: 4 }, model: { context_length: 32000 } } });
  assert.ok(r.pruned.length > 0, "something was pruned");
  assert.ok(r.tokens_after < r.tokens_before);
  assert.equal(r.messages.length, msgs.length);
  for (const i of r.pruned) {
    assert.equal(msgs[i].role, "tool");
    assert.notEqual(r.messages[i], msgs[i]);
    assert.ok(r.messages[i].content.startsWith("[Old tool output cleared to save context space]"), r.messages[i].content);
    assert.equal(r.messages[i].tool_call_id, msgs[i].tool_call_id);
  }
  const pruned = new Set(r.pruned);
  r.messages.forEach((m, i) => { if (!pruned.has(i)) assert.equal(m, msgs[i], `message ${i} is the caller's object`); });
  assert.deepEqual(r.archived.map((a) => a.index).sort((a, b) => a - b), [...r.pruned].sort((a, b) => a - b));
  for (const a of r.archived) assert.equal(a.message, msgs[a.index]);
});

test("sanitize: an orphan result is removed, a missing result is stubbed", () => {
  const msgs = [
    { role: "user", content: "hi" },
    { role: "tool", tool_call_id: "ghost", content: "orphan" },
    { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "ls", arguments: "{}" } }] },
    { role: "user", content: "and?" },
  ];
  const r = c.sanitize(msgs);
  assert.deepEqual(r.removed, [1]);
  assert.deepEqual(r.stubbed, ["c1"]);
  assert.equal(r.messages[0], msgs[0]);
  assert.ok(!r.messages.includes(msgs[1]));
  const stub = r.messages.find((m) => m.role === "tool");
  assert.equal(stub.tool_call_id, "c1");
  assert.equal(r.archived.find((a) => a.index === 1).message, msgs[1]);
});

test("validate: ok for a clean session, problems for a broken one", () => {
  assert.deepEqual(c.validate(session({ turns: 3 })), { ok: true, problems: [] });
  const bad = c.validate([{ role: "user", content: "x" }, { role: "tool", tool_call_id: "nope", content: "y" }]);
  assert.equal(bad.ok, false);
  assert.ok(bad.problems.length > 0);
  assert.ok(bad.problems.every((p) => typeof p.code === "string" && p.path.startsWith("/messages/")), JSON.stringify(bad.problems));
});

test("cacheApply and cacheSimulate: Responses instructions are the format's own system, Gemini has no breakpoints", () => {
  const items = [
    { type: "message", role: "user", content: "hi" },
    { type: "message", role: "assistant", content: [{ type: "output_text", text: "hello" }] },
    { type: "message", role: "user", content: "more" },
  ];
  const applied = c.cacheApply(items, { format: "responses", system: "Be brief." });
  assert.equal(applied.system, "Be brief.");
  assert.deepEqual(applied.marked, [0, 2]);
  assert.deepEqual(applied.messages[2].content[0].prompt_cache_breakpoint, { mode: "explicit" });
  const sim = c.cacheSimulate(items, { format: "responses", system: "Be brief.", per_request: true, min_cacheable_tokens: 0 });
  const counts = c.countTokens(items, { format: "responses", system: "Be brief." });
  assert.equal(sim.requests, 1);
  assert.equal(sim.strategies.none.requests[0].prompt_tokens, counts.system + counts.per_message[0]);
  const gemini = [{ role: "user", parts: [{ text: "hi" }] }, { role: "model", parts: [{ text: "hello" }] }];
  for (const call of [() => c.cacheApply(gemini, { system: { parts: [{ text: "sys" }] } }), () => c.cacheSimulate(gemini, { system: { parts: [{ text: "sys" }] } })]) {
    assert.throws(call, (err) => err instanceof CompactError && err.code === "invalid_request" && err.path === "/format" &&
      err.message.includes('format "gemini" has no prompt-cache breakpoints'));
  }
});
