// Strict inputs (issue 13, items 5 and 7): unknown or misspelled option keys, options
// that are not an object, option values of the wrong type, config validated at
// create, and values JSON cannot hold: each a CompactError with a code and a path.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CompactError, Compactor, _instanceOf } from "../index.js";
import { session } from "./helpers.mjs";

const c = await Compactor.create();
const small = { model: { context_length: 32000 } };
const msgs = session({ turns: 4 });

/** Asserts a CompactError with code and path; returns it for more checks. */
function rejects(fn, code, path) {
  let got;
  try {
    const r = fn();
    if (r && typeof r.then === "function") return r.then(() => assert.fail(`want ${code} at ${path}, got a result`), (e) => check(e));
  } catch (e) {
    got = e;
  }
  return check(got);
  function check(e) {
    assert.ok(e instanceof CompactError, `want CompactError ${code}, got ${e}`);
    assert.deepEqual({ code: e.code, path: e.path }, { code, path }, e.message);
    assert.match(e.message, /^ctxcompact: /);
    return e;
  }
}

test("create: an unknown key throws, naming where the config key belongs", async () => {
  const e = await rejects(() => Compactor.create({ model: { context_length: 32000 } }), "invalid_request", "/model");
  assert.match(e.message, /"model"/);
  assert.match(e.message, /did you mean config: \{ model: … \}\?/);
  const e2 = await rejects(() => Compactor.create({ confg: small }), "invalid_request", "/confg");
  assert.match(e2.message, /did you mean config\?/);
  const e3 = await rejects(() => Compactor.create({ max_instance_memory: 1 }), "invalid_request", "/max_instance_memory");
  assert.match(e3.message, /did you mean maxInstanceMemory\?/);
});

test("create: option values are type-checked; a non-object is refused", async () => {
  await rejects(() => Compactor.create({ config: "small" }), "invalid_request", "/config");
  await rejects(() => Compactor.create({ maxInstanceMemory: -1 }), "invalid_request", "/max_instance_memory");
  await rejects(() => Compactor.create({ maxInstanceMemory: true }), "invalid_request", "/max_instance_memory");
  await rejects(() => Compactor.create({ debug: "yes" }), "invalid_request", "/debug");
  await rejects(() => Compactor.create(() => {}), "invalid_request", "");
  await rejects(() => Compactor.create([]), "invalid_request", "");
  // undefined and null mean "not given".
  assert.equal((await Compactor.create({ config: undefined, debug: null })).info().name, "ctxcompact");
  assert.equal((await Compactor.create(null)).info().name, "ctxcompact");
});

test("create validates the config at once, not at the first call", async () => {
  await rejects(() => Compactor.create({ config: { compression: { tail_mode: "fat" } } }), "invalid_config", "/config/compression/tail_mode");
  await rejects(() => Compactor.create({ config: { modle: {} } }), "invalid_config", "/config/modle");
  await rejects(() => Compactor.create({ config: { model: { context_length: NaN } } }), "invalid_config", "/config/model/context_length");
  const ok = await Compactor.create({ config: small });
  assert.equal(ok.resolveThreshold().context_length, 32000);
});

test("compact: each misspelled option of the issue throws with the closest name", async () => {
  const cases = [
    [{ summarise: async () => "x" }, "/summarise", "summarize"],
    [{ prompt_tokens: 60000 }, "/prompt_tokens", "promptTokens"],
    [{ forse: true }, "/forse", "force"],
    [{ context_length: 32000 }, "/context_length", "config: { model: { context_length } }"],
    [{ timeout: 10 }, "/timeout", "timeoutMs"],
  ];
  for (const [options, path, hint] of cases) {
    const e = await rejects(() => c.compact(msgs, options), "invalid_request", path);
    assert.ok(e.message.includes(`did you mean ${hint}?`), e.message);
    assert.ok(e.message.includes(JSON.stringify(path.slice(1))), `the message names the key: ${e.message}`);
  }
});

test("compact: a function (or any non-object) where the options go throws", async () => {
  let called = false;
  const e = await rejects(() => c.compact(msgs, async () => { called = true; return "x"; }), "invalid_request", "");
  assert.match(e.message, /summarize: fn/);
  assert.equal(called, false);
  for (const bad of ["force", 3, true, [], Symbol("x")]) await rejects(() => c.compact(msgs, bad), "invalid_request", "");
});

test("compact: option values are type-checked with wire-name paths", async () => {
  const cases = [
    [{ force: "false" }, "/force"],
    [{ force: 1 }, "/force"],
    [{ promptTokens: "60000" }, "/prompt_tokens"],
    [{ promptTokens: 47999.9 }, "/prompt_tokens"],
    [{ promptTokens: -1 }, "/prompt_tokens"],
    [{ promptTokens: true }, "/prompt_tokens"],
    [{ promptTokens: NaN }, "/prompt_tokens"],
    [{ promptTokens: 60000n }, "/prompt_tokens"],
    [{ timeoutMs: 0 }, "/timeout"],
    [{ timeoutMs: -5 }, "/timeout"],
    [{ timeoutMs: "100" }, "/timeout"],
    [{ timeoutMs: NaN }, "/timeout"],
    [{ signal: {} }, "/signal"],
    [{ signal: true }, "/signal"],
    [{ summarize: "gpt-4o" }, "/summarize"],
    [{ config: "small" }, "/config"],
    [{ config: [] }, "/config"],
    [{ format: 1 }, "/format"],
    [{ system: 7 }, "/system"],
  ];
  for (const [options, path] of cases) await rejects(() => c.compact(msgs, options), "invalid_request", path);
  // The core's own checks keep their paths too.
  await rejects(() => c.compact(msgs, { format: "xml" }), "invalid_request", "/format");
  // Accepted: Infinity as "no timeout", an AbortSignal, null as "not given".
  const ac = new AbortController();
  const res = await c.compact(msgs, { timeoutMs: Infinity, signal: ac.signal, promptTokens: null, force: undefined });
  assert.equal(res.report.compacted, false);
});

test("every other method checks its options the same way", () => {
  rejects(() => c.shouldCompress(1000, { lastCompactionToken: 5 }), "invalid_request", "/lastCompactionToken");
  rejects(() => c.shouldCompress(1000, { lastCompactionTokens: "5" }), "invalid_request", "/last_compaction_tokens");
  rejects(() => c.shouldCompress("1000"), "invalid_request", "/prompt_tokens");
  rejects(() => c.shouldCompress(1000, () => {}), "invalid_request", "");
  rejects(() => c.hygieneCheck(msgs, { prompt_tokens: 5 }), "invalid_request", "/prompt_tokens");
  rejects(() => c.hygieneCheck(msgs, { promptTokens: 1.5 }), "invalid_request", "/prompt_tokens");
  rejects(() => c.countTokens(msgs, { encodeing: "o200k_base" }), "invalid_request", "/encodeing");
  rejects(() => c.countTokens(msgs, { encoding: 5 }), "invalid_request", "/encoding");
  rejects(() => c.prune(msgs, { force: true }), "invalid_request", "/force");
  rejects(() => c.cacheApply(msgs, { lyout: "openai" }), "invalid_request", "/lyout");
  rejects(() => c.cachePolicy({ modle: "claude" }), "invalid_request", "/modle");
  rejects(() => c.cacheSimulate(msgs, { perRequest: true }), "invalid_request", "/perRequest");
  rejects(() => c.cacheSimulate(msgs, { per_request: "yes" }), "invalid_request", "/per_request");
  rejects(() => c.calibrate(msgs, 3000, { fixedOverhead: 5 }), "invalid_request", "/fixedOverhead");
  rejects(() => c.calibrate(msgs, "3000"), "invalid_request", "/prompt_tokens");
  rejects(() => c.resolveThreshold("32000"), "invalid_request", "/config");
  const e = rejects(() => c.cacheSimulate(msgs, { perRequest: true }), "invalid_request", "/perRequest");
  assert.match(e.message, /did you mean per_request\?/);
  rejects(() => c.engine({ sumarize: async () => "x" }), "invalid_request", "/sumarize");
  rejects(() => c.engine(async () => "x"), "invalid_request", "");
  // The accepted spellings still work.
  assert.equal(c.cacheSimulate(msgs, { per_request: true, model: "claude-sonnet-4" }).requests > 0, true);
  assert.equal(c.shouldCompress(1000, { lastCompactionTokens: undefined }).should_compress, false);
});

test("a per-call config is validated with /config paths", async () => {
  await rejects(() => c.compact(msgs, { config: { compression: { threshold: "half" } } }), "invalid_config", "/config/compression/threshold");
  rejects(() => c.resolveThreshold({ model: { context_length: -1 } }), "invalid_config", "/config/model/context_length");
});

// ---------------------------------------------------------------------------
// Item 7: input JSON cannot hold

test("a cycle is invalid_messages at the value that refers back", async () => {
  const m = { role: "user", content: "x" };
  m.content = m;
  const input = [...msgs, m];
  await rejects(() => c.compact(input), "invalid_messages", `/messages/${msgs.length}/content`);
  rejects(() => c.countTokens(input), "invalid_messages", `/messages/${msgs.length}/content`);
  rejects(() => c.validate(input), "invalid_messages", `/messages/${msgs.length}/content`);
  // A value shared twice is not a cycle.
  const part = { type: "text", text: "shared" };
  assert.equal(c.validate([{ role: "user", content: [part, part] }]).ok, true);
});

test("a BigInt is invalid_messages at its pointer", async () => {
  const input = [{ role: "user", content: "hi", tokens: 12n }];
  const e = await rejects(() => c.compact(input), "invalid_messages", "/messages/0/tokens");
  assert.match(e.message, /BigInt/);
});

test("100,000-deep nesting is invalid_messages at the message member, not a RangeError", async () => {
  let deep = "leaf";
  for (let i = 0; i < 100000; i++) deep = [deep];
  const input = [...msgs, { role: "user", content: deep }];
  const e = await rejects(() => c.compact(input), "invalid_messages", `/messages/${msgs.length}/content`);
  assert.match(e.message, /more than 1000 levels deep/);
  assert.ok(e.cause instanceof RangeError, "the RangeError is the cause");
  // The compactor is fine afterwards (nothing reached the module).
  assert.equal(c.info().name, "ctxcompact");
});

test("NaN and Infinity are invalid_messages, not silently sent as null", async () => {
  const input = [
    { role: "user", content: "read it" },
    { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "read", input: { path: "a", limit: NaN } }] },
  ];
  await rejects(() => c.compact(input), "invalid_messages", "/messages/1/content/0/input/limit");
  rejects(() => c.countTokens([{ role: "user", content: "x", score: -Infinity }]), "invalid_messages", "/messages/0/score");
  // null itself is fine.
  assert.equal(c.validate([{ role: "assistant", content: null, tool_calls: [] }, { role: "user", content: "x" }]).problems.length >= 0, true);
});

test("a toJSON that throws is invalid_messages at its value; a Date is its string", () => {
  rejects(() => c.countTokens([{ role: "user", content: "x", meta: { toJSON() { throw new Error("no"); } } }]), "invalid_messages", "/messages/0/meta");
  assert.ok(c.countTokens([{ role: "user", content: "x", at: new Date(0) }]).total > 0);
});

test("bad values in other arguments get their own code and pointer", async () => {
  rejects(() => c.cacheSimulate(msgs, { timestamps: [1, 2n] }), "invalid_request", "/timestamps/1");
  await rejects(() => c.compact(msgs, { system: [{ type: "text", text: "s", n: 1n }] }), "invalid_messages", "/system/0/n");
  await rejects(() => c.compact(msgs, { config: { compression: { threshold: NaN } } }), "invalid_config", "/config/compression/threshold");
  const loop = {};
  loop.self = loop;
  rejects(() => c.call("info", { pad: loop }), "invalid_request", "/pad/self");
});

test("messages that are not an array are invalid_messages at /messages", async () => {
  await rejects(() => c.compact({ role: "user" }), "invalid_messages", "/messages");
  await rejects(() => c.compact(undefined), "invalid_messages", "/messages");
  rejects(() => c.validate("hi"), "invalid_messages", "/messages");
});

test("an empty request is invalid_json, as the core answers", () => {
  for (const raw of ["", "   ", "\n\t"]) {
    const env = JSON.parse(c.callRaw(raw));
    assert.deepEqual({ code: env.error.code, path: env.error.path }, { code: "invalid_json", path: "" });
  }
  rejects(() => c.callRaw(undefined), "invalid_request", "");
});

test("rejected inputs never reach the module", async () => {
  const d = await Compactor.create();
  const inst = _instanceOf(d);
  let calls = 0;
  const real = inst.call.bind(inst);
  const realParts = inst.callParts.bind(inst);
  inst.call = (r) => { calls++; return real(r); };
  inst.callParts = (p) => { calls++; return realParts(p); };
  await rejects(() => d.compact(msgs, { forse: true }), "invalid_request", "/forse");
  await rejects(() => d.compact(msgs, { promptTokens: "1" }), "invalid_request", "/prompt_tokens");
  await rejects(() => d.compact([{ role: "user", content: 1n }]), "invalid_messages", "/messages/0/content");
  assert.equal(calls, 0);
});
