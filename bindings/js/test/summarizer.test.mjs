// The summarizer's bounds (issue 13, item 13): timeoutMs (default 2 minutes) falls back
// to the extractive summary with fallback_code "timeout"; the caller's AbortSignal
// rejects the call with its reason and sends no finish; a summarizer that reports
// its own cancellation falls back with "cancelled"; no timer or listener outlives
// the call. And traps (item 12): the call fails with internal, no hidden retry.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CompactError, Compactor, DEFAULT_TIMEOUT_MS, _instanceOf } from "../index.js";
import { session, sleep } from "./helpers.mjs";

const small = { model: { context_length: 32000 } };
const msgs = session({ turns: 40 });

/** A compactor whose instance records the op of every request it gets. */
async function recording() {
  const d = await Compactor.create({ config: small });
  const ops = [];
  const wrap = (inst) => {
    const call = inst.call.bind(inst);
    const parts = inst.callParts.bind(inst);
    const opOf = (text) => JSON.parse(text).op;
    inst.call = (r) => { ops.push(opOf(r)); return call(r); };
    inst.callParts = (p) => { ops.push(opOf(p.map((x) => (typeof x === "string" ? x : new TextDecoder().decode(x))).join(""))); return parts(p); };
  };
  wrap(_instanceOf(d));
  return { d, ops };
}

/** Timers and other handles that keep Node's event loop alive right now. */
function timers() {
  return process.getActiveResourcesInfo().filter((r) => r === "Timeout");
}

test("the default timeout is the CLI's 2 minutes", () => {
  assert.equal(DEFAULT_TIMEOUT_MS, 120000);
});

test("a summarizer that never answers times out: extractive fallback, fallback_code timeout", async () => {
  const c = await Compactor.create({ config: small });
  let seen;
  const res = await c.compact(msgs, {
    timeoutMs: 30,
    summarize: (req, ctx) => {
      seen = ctx.signal;
      return new Promise(() => {});
    },
  });
  assert.equal(res.report.compacted, true);
  assert.equal(res.report.fallback_used, true);
  assert.equal(res.report.fallback_code, "timeout");
  assert.match(res.report.fallback_reason, /did not answer within 30 ms/);
  // The summarizer's own signal was aborted, with a TimeoutError, so it can stop its request.
  assert.equal(seen.aborted, true);
  assert.equal(seen.reason.name, "TimeoutError");
  assert.deepEqual(timers(), [], "no timer left");
});

test("a summarizer that answers in time leaves no timer behind (Node can exit)", async () => {
  const c = await Compactor.create({ config: small });
  const before = timers().length;
  const res = await c.compact(msgs, { summarize: async () => "IN-TIME" });
  assert.equal(res.report.fallback_used, false);
  assert.equal(res.report.fallback_code, "");
  assert.equal(timers().length, before);
  // Also when it throws, and when the caller's signal stays untouched.
  const ac = new AbortController();
  const res2 = await c.compact(msgs, { signal: ac.signal, summarize: async () => { throw new Error("429"); } });
  assert.equal(res2.report.fallback_code, "error");
  assert.match(res2.report.fallback_reason, /429/);
  assert.equal(timers().length, before);
});

test("a late answer after the timeout is ignored (and its rejection is handled)", async () => {
  const c = await Compactor.create({ config: small });
  let unhandled = 0;
  const onUnhandled = () => { unhandled++; };
  process.on("unhandledRejection", onUnhandled);
  try {
    const res = await c.compact(msgs, {
      timeoutMs: 10,
      summarize: () => new Promise((_, reject) => setTimeout(() => reject(new Error("late")), 40)),
    });
    assert.equal(res.report.fallback_code, "timeout");
    await sleep(60);
    assert.equal(unhandled, 0);
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
});

test("the caller's signal aborted during the summarizer: compact rejects with its reason, no finish", async () => {
  const { d, ops } = await recording();
  const ac = new AbortController();
  const reason = new Error("user pressed ctrl-c");
  let summarizerSignal;
  const p = d.compact(msgs, {
    signal: ac.signal,
    summarize: (req, ctx) => {
      summarizerSignal = ctx.signal;
      setTimeout(() => ac.abort(reason), 5);
      return new Promise(() => {});
    },
  });
  await assert.rejects(p, (e) => e === reason);
  assert.deepEqual(ops, ["compact.begin"], "no compact.finish was sent");
  assert.equal(summarizerSignal.aborted, true, "the summarizer's signal follows the caller's");
  assert.deepEqual(timers(), []);
});

test("an already aborted signal rejects before anything is sent", async () => {
  const { d, ops } = await recording();
  const ac = new AbortController();
  ac.abort();
  await assert.rejects(d.compact(msgs, { signal: ac.signal, summarize: async () => "x" }), (e) => e.name === "AbortError");
  assert.deepEqual(ops, []);
});

test("a summarizer that rejects with AbortError while the caller's signal is fine: fallback_code cancelled", async () => {
  const c = await Compactor.create({ config: small });
  const ac = new AbortController();
  const res = await c.compact(msgs, {
    signal: ac.signal,
    summarize: async () => { throw new DOMException("the fetch was aborted", "AbortError"); },
  });
  assert.equal(res.report.fallback_used, true);
  assert.equal(res.report.fallback_code, "cancelled");
  // Without any signal too.
  const res2 = await c.compact(msgs, { summarize: async () => { const e = new Error("stop"); e.name = "AbortError"; throw e; } });
  assert.equal(res2.report.fallback_code, "cancelled");
});

test("the summarizer's own timeout (TimeoutError) is fallback_code timeout; a non-string is error; empty is empty", async () => {
  const c = await Compactor.create({ config: small });
  const t = await c.compact(msgs, { summarize: async () => { throw new DOMException("signal timed out", "TimeoutError"); } });
  assert.equal(t.report.fallback_code, "timeout");
  const n = await c.compact(msgs, { summarize: async () => 42 });
  assert.equal(n.report.fallback_code, "error");
  assert.match(n.report.fallback_reason, /not a string/);
  const e = await c.compact(msgs, { summarize: async () => "   " });
  assert.equal(e.report.fallback_code, "empty");
});

test("concurrent compactions with their own timeouts: each falls back or not by itself", async () => {
  const c = await Compactor.create({ config: small });
  const [slow, fast] = await Promise.all([
    c.compact(msgs, { timeoutMs: 20, summarize: () => new Promise(() => {}) }),
    c.compact(session({ turns: 40, tag: " b" }), { timeoutMs: 60000, summarize: async () => "FAST" }),
  ]);
  assert.equal(slow.report.fallback_code, "timeout");
  assert.equal(fast.report.fallback_code, "");
  assert.deepEqual(timers(), []);
});

// ---------------------------------------------------------------------------
// Traps (item 12)

test("a compact whose instance traps fails with internal; the next call gets a fresh instance; no retry", async () => {
  const { d, ops } = await recording();
  const first = _instanceOf(d);
  new Uint8Array(first.exports.memory.buffer).fill(0xaa);
  let summarized = 0;
  await assert.rejects(d.compact(msgs, { summarize: async () => { summarized++; return "x"; } }), (e) => {
    assert.ok(e instanceof CompactError);
    assert.equal(e.code, "internal");
    assert.match(e.message, /trapped .*replaced by a fresh one/);
    return true;
  });
  assert.equal(summarized, 0);
  assert.equal(ops.filter((o) => o === "compact.begin").length, 1, "the input that trapped was sent once");
  const second = _instanceOf(d);
  assert.ok(second && second !== first);
  const res = await d.compact(msgs, { summarize: async () => "AFTER-TRAP" });
  assert.equal(res.report.compacted, true);
  assert.equal(res.report.fallback_used, false);
});
