// compact(): the resumable protocol behind one async call, summarizers that resolve
// later, reject or throw, concurrency, refs (the caller's own objects), the engine.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CompactError, Compactor, _instanceOf } from "../index.js";
import { loadTrace, session, sleep, traceFile, traceFiles, tracesSkip } from "./helpers.mjs";

const c = await Compactor.create();
const small = { model: { context_length: 32000 } };

/** Every input message is kept (same object) or archived with that same object (docs/DESIGN.md §8.7). */
function assertNothingLost(input, res) {
  const kept = new Set();
  for (const m of res.messages) {
    const i = input.indexOf(m);
    if (i >= 0) kept.add(i);
  }
  const archived = new Set(res.archived.map((a) => a.index));
  for (const a of res.archived) assert.equal(a.message, input[a.index], `archived ${a.index} is the caller's object`);
  for (let i = 0; i < input.length; i++) {
    if (i === 0 && res.report.system_note_added && input[0].role === "system") {
      // The system prompt keeps its text with the compaction note appended; the
      // original is archived.
      assert.ok(res.archived.some((a) => a.index === 0 && a.reason === "system_note"));
      assert.equal(res.messages[0].role, input[0].role);
      assert.ok(res.messages[0].content.startsWith(input[0].content), "the system prompt is kept, note appended");
    }
    assert.ok(kept.has(i) || archived.has(i), `input message ${i} is neither kept nor archived`);
  }
}

const summaryText = (res) => res.messages.map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content))).join("\n");

test("an async summarizer that resolves later: its text is the summary", async () => {
  const msgs = session({ turns: 40 });
  let request;
  const res = await c.compact(msgs, {
    config: small,
    summarize: async (req) => {
      request = req;
      await sleep(30);
      return "Goal: FastAPI app. SUMMARY-MARK-ALPHA";
    },
  });
  assert.equal(request.messages.length, 2);
  assert.equal(request.messages[0].role, "system");
  assert.equal(request.messages[1].role, "user");
  assert.ok(request.max_tokens > 0 && request.target_tokens > 0);
  assert.equal(res.report.compacted, true);
  assert.equal(res.report.summarizer, "host");
  assert.equal(res.report.fallback_used, false);
  assert.ok(res.messages.length < msgs.length);
  assert.match(summaryText(res), /SUMMARY-MARK-ALPHA/);
  assert.match(summaryText(res), /\[CONTEXT COMPACTION\]/);
  // The tail comes back as the caller's own objects.
  assert.equal(res.messages.at(-1), msgs.at(-1));
  assert.equal(res.messages[1], msgs[1]);
  assertNothingLost(msgs, res);
  assert.deepEqual(c.validate(res.messages).ok, true);
});

test("a rejecting summarizer: the fallback summary is used, nothing lost", async () => {
  const msgs = session({ turns: 40 });
  const res = await c.compact(msgs, {
    config: small,
    summarize: async () => {
      await sleep(10);
      throw new Error("upstream 529 overloaded");
    },
  });
  assert.equal(res.report.compacted, true);
  assert.equal(res.report.fallback_used, true);
  assert.match(String(res.report.fallback_reason), /529 overloaded/);
  assert.match(summaryText(res), /\[CONTEXT COMPACTION\]/);
  assertNothingLost(msgs, res);
});

test("a summarizer that throws synchronously: same fallback", async () => {
  const msgs = session({ turns: 40 });
  const res = await c.compact(msgs, {
    config: small,
    summarize: () => { throw new TypeError("no API key"); },
  });
  assert.equal(res.report.fallback_used, true);
  assert.match(String(res.report.fallback_reason), /no API key/);
  assertNothingLost(msgs, res);
});

test("a summarizer that resolves to a non-string: fallback, with the reason", async () => {
  const res = await c.compact(session({ turns: 40 }), { config: small, summarize: async () => ({ text: "x" }) });
  assert.equal(res.report.fallback_used, true);
  assert.match(String(res.report.fallback_reason), /not a string/);
});

test("no summarizer: the built-in one, in one call", async () => {
  const msgs = session({ turns: 40 });
  const res = await c.compact(msgs, { config: small });
  assert.equal(res.report.compacted, true);
  assert.equal(res.report.summarizer, "builtin");
  assertNothingLost(msgs, res);
});

test("below the threshold nothing changes; force compacts anyway", async () => {
  const msgs = session({ turns: 40 });
  let called = 0;
  const summarize = async () => { called++; return "FORCED-SUMMARY"; };
  const idle = await c.compact(msgs, { summarize });
  assert.equal(idle.report.compacted, false);
  assert.equal(called, 0);
  assert.equal(idle.messages.length, msgs.length);
  idle.messages.forEach((m, i) => assert.equal(m, msgs[i]));
  const forced = await c.compact(msgs, { summarize, force: true, config: { model: { context_length: 64000 } } });
  assert.equal(forced.report.reason, "compacted");
  assert.equal(forced.report.compacted, true);
  assert.equal(called, 1);
  assert.match(summaryText(forced), /FORCED-SUMMARY/);
});

test("refs materialize to exactly what output:\"messages\" returns", async () => {
  const msgs = session({ turns: 40 });
  const summary = "Goal: equal. SUMMARY-EQ";
  const res = await c.compact(msgs, { config: small, summarize: async () => summary });
  // The same protocol by hand with full messages.
  const base = { config: small, messages: msgs, output: "messages" };
  const begun = c.call("compact.begin", { ...base, summarizer: "host" });
  assert.equal(begun.done, false);
  const full = c.call("compact.finish", { ...base, state: begun.state, summary });
  assert.deepEqual(JSON.parse(JSON.stringify(res.messages)), full.messages);
  assert.deepEqual(res.report, full.report);
  assert.deepEqual(res.archived.map((a) => [a.index, a.reason]), full.archived.map((a) => [a.index, a.reason]));
  for (const a of full.archived) assert.deepEqual(a.message, msgs[a.index]);
});

test("finish names the compaction by ticket and leaves the messages out", async () => {
  const d = await Compactor.create();
  const inst = _instanceOf(d);
  const sent = [];
  const real = inst.callParts.bind(inst);
  inst.callParts = (parts) => {
    sent.push(parts.map((p) => (typeof p === "string" ? p : new TextDecoder().decode(p))).join(""));
    return real(parts);
  };
  const msgs = session({ turns: 40 });
  const res = await d.compact(msgs, { config: small, summarize: async () => "TICKETED" });
  assert.match(summaryText(res), /TICKETED/);
  assert.equal(sent.length, 2);
  const [begin, finish] = sent.map((s) => JSON.parse(s));
  assert.ok(begin.messages && !("messages" in finish), "the whole conversation goes once");
  assert.ok(begin.ticket && finish.ticket === begin.ticket);
  await d.compact(msgs, { config: small, summarize: async () => "TICKETED" });
  assert.notEqual(JSON.parse(sent[2]).ticket, begin.ticket, "every compaction has its own ticket");
  // The same result as finishing with the messages.
  const whole = c.call("compact.finish", { config: small, output: "refs", ticket: "x", messages: msgs, state: finish.state, summary: "TICKETED" });
  assert.deepEqual(res.report, whole.report);
});

test("concurrent compactions on one compactor, summaries resolving out of order", async () => {
  const N = 6;
  const inputs = Array.from({ length: N }, (_, k) => session({ turns: 40 + k, tag: ` #${k}` }));
  const summarize = (k) => async () => {
    await sleep((N - k) * 15); // the first one started finishes last
    return `SUMMARY-FOR-${k}`;
  };
  const results = await Promise.all(inputs.map((m, k) => c.compact(m, { config: small, summarize: summarize(k) })));
  results.forEach((res, k) => {
    assert.equal(res.report.compacted, true);
    const text = summaryText(res);
    assert.match(text, new RegExp(`SUMMARY-FOR-${k}\\b`));
    for (let j = 0; j < N; j++) if (j !== k) assert.doesNotMatch(text, new RegExp(`SUMMARY-FOR-${j}\\b`));
    assert.equal(res.messages.at(-1), inputs[k].at(-1));
    assertNothingLost(inputs[k], res);
  });
  // Same results as one at a time.
  for (let k = 0; k < N; k++) {
    const seq = await c.compact(inputs[k], { config: small, summarize: async () => `SUMMARY-FOR-${k}` });
    assert.deepEqual(seq.messages, results[k].messages);
    assert.deepEqual(seq.report, results[k].report);
  }
});

test("a compaction begun on an instance that traps is finished by its replacement", async () => {
  const d = await Compactor.create();
  const msgs = session({ turns: 40 });
  const first = _instanceOf(d);
  const res = await d.compact(msgs, {
    config: small,
    summarize: async () => {
      new Uint8Array(first.exports.memory.buffer).fill(0xaa);
      assert.throws(() => d.info(), (e) => e instanceof CompactError && e.code === "internal");
      return "SURVIVED-THE-TRAP";
    },
  });
  assert.notEqual(_instanceOf(d), first);
  assert.match(summaryText(res), /SURVIVED-THE-TRAP/);
});

test("bad input: CompactError with code and path", async () => {
  await assert.rejects(c.compact({ not: "an array" }), (e) => e instanceof CompactError && e.code === "invalid_messages");
  await assert.rejects(c.compact(session({ turns: 2 }), { config: { compression: { tail_mode: "fat" } } }), (e) => {
    assert.equal(e.code, "invalid_config");
    assert.equal(e.path, "/config/compression/tail_mode");
    return true;
  });
  await assert.rejects(c.compact([{ role: "wizard", content: "x" }], { force: true }), (e) => {
    assert.equal(e.code, "invalid_messages");
    assert.match(e.path, /^\/messages\/0/);
    return true;
  });
});

test("cache ops: policy, apply (input not mutated), simulate; calibrate", () => {
  const policy = c.cachePolicy({ model: "claude-sonnet-4", provider: "openrouter" });
  assert.equal(policy.enabled, true);
  assert.match(policy.status, /^Prompt caching: ENABLED/);
  assert.equal(c.cachePolicy({ model: "gpt-4o", provider: "openai" }).enabled, false);
  const msgs = session({ turns: 6 });
  const before = JSON.stringify(msgs);
  const applied = c.cacheApply(msgs, { layout: "anthropic" });
  assert.equal(JSON.stringify(msgs), before, "the input is not mutated");
  assert.ok(applied.markers >= 1 && applied.markers <= 4);
  assert.equal(JSON.stringify(applied.messages).split('"cache_control"').length - 1, applied.markers);
  const sim = c.cacheSimulate(msgs, { model: "claude-sonnet-4" });
  assert.ok(Object.keys(sim.strategies).length >= 2, JSON.stringify(sim).slice(0, 300));
  const est = c.countTokens(msgs).total;
  const cal = c.calibrate(msgs, est * 2);
  assert.ok(cal.factor > 1.5 && cal.factor <= 2.5, JSON.stringify(cal));
});

test("real traces compact to valid conversations (builtin and host summarizers)", { skip: tracesSkip() }, async () => {
  const files = traceFiles();
  assert.ok(files.length > 0);
  let compacted = 0;
  for (const f of files) {
    const msgs = loadTrace(f);
    const res = await c.compact(msgs, { config: small, summarize: async (req) => `Summary of ${req.middle.from}..${req.middle.to}` });
    assertNothingLost(msgs, res);
    assert.equal(c.validate(res.messages).ok, true, f);
    if (res.report.compacted) compacted++;
  }
  assert.ok(compacted > files.length / 2, `${compacted} of ${files.length} traces compacted at 32K`);
});

test("the Anthropic layout: top-level system gets the note, blocks stay paired", { skip: tracesSkip() }, async () => {
  const file = traceFile("anthropic-format/claude-code-spotter-ae4a77f8-precompact.json");
  const msgs = loadTrace(file);
  const system = "You are Claude Code.";
  const res = await c.compact(msgs, { system, config: small, summarize: async () => "## Goal\nTrace spans end to end." });
  assert.equal(res.report.compacted, true);
  assert.equal(res.report.system_note_added, true);
  assert.ok(res.system.startsWith(system) && res.system.includes("[Note: earlier turns"));
  assert.ok(res.messages.length < msgs.length);
  assert.deepEqual(c.validate(res.messages), { ok: true, problems: [] });
  assertNothingLost(msgs, res);
  assert.ok(JSON.stringify(res.messages).includes("Trace spans end to end."));
});
