// countTokens' per-message cache (counts.js): results equal to the uncached path
// (the whole list sent to the core) on every shared trace, growing one message at a
// time as an agent does; only new or changed messages are sent; a message edited in
// place is counted again; errors are the uncached path's.
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { Compactor, CompactError } from "../index.js";
import { TRACES_DIR, loadTrace, traceFiles, tracesSkip } from "./helpers.mjs";

const ENCODINGS = ["o200k_base", "cl100k_base", "rough"];

/** The uncached path: the whole list in one tokens.count request. */
function uncached(c, messages, options = {}) {
  const env = { op: "tokens.count", messages };
  if (options.encoding !== undefined) env.encoding = options.encoding;
  if (options.config !== undefined) env.config = options.config;
  return c.call("tokens.count", env);
}

/** Counts the messages each tokens.count request of c carries. */
function spy(c) {
  const sent = [];
  const raw = c.callRaw.bind(c);
  c.callRaw = (request) => {
    if (request.startsWith('{"op":"tokens.count"')) sent.push(JSON.parse(request).messages.length);
    return raw(request);
  };
  return sent;
}

function traces() {
  const files = traceFiles() ?? [];
  const anthropic = path.join(TRACES_DIR, "anthropic-format");
  return [...files, ...(traceFiles(anthropic) ?? [])];
}

test("cache: a conversation grown one message at a time counts as the whole list, on every shared trace and encoding", { skip: tracesSkip() }, async () => {
  const ref = await Compactor.create();
  for (const file of traces()) {
    const messages = loadTrace(file);
    const name = path.basename(file);
    for (const encoding of ENCODINGS) {
      const c = await Compactor.create({ wasm: ref.module });
      const sent = spy(c);
      const conv = [];
      let last;
      // Compared with the uncached count at a few points on the way and at the end.
      const checks = new Set([1, 2, Math.floor(messages.length / 3), Math.floor((2 * messages.length) / 3), messages.length]);
      for (const m of messages) {
        conv.push(m);
        last = c.countTokens(conv, { encoding });
        if (checks.has(conv.length)) assert.deepEqual(last, uncached(ref, conv, { encoding }), `${name} ${encoding}: ${conv.length} messages`);
      }
      assert.equal(last.per_message.length, messages.length);
      assert.equal(last.total, last.per_message.reduce((a, b) => a + b, 0) + (encoding === "rough" ? 0 : 3), `${name} ${encoding}: sum + reply priming`);
      // Each turn sent the new message alone.
      assert.deepEqual(sent, messages.map(() => 1), `${name} ${encoding}: one message a turn`);
    }
  }
});

test("cache: whole traces counted twice and under a calibration factor equal the uncached counts", { skip: tracesSkip() }, async () => {
  const ref = await Compactor.create();
  const c = await Compactor.create({ wasm: ref.module });
  const sent = spy(c);
  const config = { tokens: { calibration: 1.37 } };
  for (const file of traces()) {
    const messages = loadTrace(file);
    for (const options of [{ encoding: "o200k_base" }, { encoding: "o200k_base", config }, { config }]) {
      const want = uncached(ref, messages, options);
      assert.deepEqual(c.countTokens(messages, options), want, `${path.basename(file)} ${JSON.stringify(options)}`);
      assert.deepEqual(c.countTokens(messages, options), want, `${path.basename(file)} ${JSON.stringify(options)}, cached`);
      assert.deepEqual(c.countTokens([...messages].reverse(), options).per_message, [...want.per_message].reverse());
    }
  }
  // First counts send the list, every later one nothing.
  assert.ok(sent.every((n) => n > 0), "no empty requests");
  assert.equal(sent.length, traces().length * 3);
});

/** Checks that c counts msgs as the uncached path does, and returns what was sent. */
function same(c, ref, msgs, options, why) {
  const got = c.countTokens(msgs, options);
  assert.deepEqual(got, uncached(ref, msgs, options), why);
  return got;
}

test("cache: a message edited in place is counted again", async () => {
  const ref = await Compactor.create();
  const c = await Compactor.create({ wasm: ref.module });
  const sent = spy(c);
  const o = { encoding: "o200k_base" };
  const call = { id: "c1", type: "function", function: { name: "read_file", arguments: '{"path":"a.go"}' } };
  const msgs = [
    { role: "system", content: "You are a coding agent." },
    { role: "user", content: [{ type: "text", text: "fix the bug in a.go" }] },
    { role: "assistant", content: "", tool_calls: [call] },
    { role: "tool", tool_call_id: "c1", content: "package a\n\nfunc A() int { return 1 }\n" },
  ];
  same(c, ref, msgs, o, "first count");
  same(c, ref, msgs, o, "again");
  assert.deepEqual(sent, [4], "the second count sent nothing");

  const edits = [
    ["a string edited", () => { msgs[0].content += " Be brief."; }],
    ["a string replaced by an equal one (a hit)", () => { msgs[0].content = `${msgs[0].content}`; }, 0],
    ["a part's text edited", () => { msgs[1].content[0].text = "fix the bug in b.go"; }],
    ["a part appended", () => { msgs[1].content.push({ type: "text", text: "and add a test" }); }],
    ["a part removed", () => { msgs[1].content.pop(); }],
    ["a nested tool-call argument edited", () => { call.function.arguments = '{"path":"b.go"}'; }],
    ["a tool call appended", () => { msgs[2].tool_calls.push({ id: "c2", type: "function", function: { name: "ls", arguments: "{}" } }); }],
    ["a key added", () => { msgs[3].name = "read_file"; }],
    ["a key deleted", () => { delete msgs[3].name; }],
    ["keys reordered", () => { const { role, ...rest } = msgs[3]; delete msgs[3].role; delete msgs[3].tool_call_id; delete msgs[3].content; Object.assign(msgs[3], rest, { role }); }],
    ["an uncounted field edited", () => { msgs[3].tool_call_id = "c9"; }],
    ["a value changed type", () => { msgs[1].content = "fix it"; }],
    ["a number edited", () => { msgs[2].tool_calls[0].index = 1; }],
    ["a number edited again", () => { msgs[2].tool_calls[0].index = 2; }],
    ["an object under a new prototype with toJSON", () => {
      Object.setPrototypeOf(msgs[0], { toJSON() { return { role: "system", content: "something else entirely" }; } });
    }],
  ];
  for (const [what, edit, resent = 1] of edits) {
    sent.length = 0;
    edit();
    same(c, ref, msgs, o, what);
    assert.deepEqual(sent, resent ? [resent] : [], `${what}: ${resent} message sent`);
  }
});

test("cache: messages that are not plain data are sent every time, and count right", async () => {
  const ref = await Compactor.create();
  const c = await Compactor.create({ wasm: ref.module });
  const sent = spy(c);
  const o = { encoding: "cl100k_base" };
  class Msg {
    constructor(role, content) { this.role = role; this.content = content; }
  }
  const when = new Date(0);
  const msgs = [
    { role: "user", content: "plain" },
    new Msg("assistant", "a class instance"),
    { role: "user", content: [{ type: "custom", at: when }] },
    { role: "user", content: "with toJSON", toJSON() { return { role: "user", content: "replaced" }; } },
  ];
  same(c, ref, msgs, o, "first");
  same(c, ref, msgs, o, "second");
  when.setTime(86400000); // changes the Date's JSON, not any property
  msgs[1].content = "edited";
  same(c, ref, msgs, o, "after editing the unplain ones");
  assert.deepEqual(sent, [4, 3, 3]);
});

test("cache: keys apart per encoding and config; empty lists; the same object twice", async () => {
  const ref = await Compactor.create();
  const c = await Compactor.create({ wasm: ref.module });
  const m = { role: "user", content: "héllo wörld, 你好世界 🙂" };
  for (const options of [{}, { encoding: "o200k_base" }, { encoding: "cl100k_base" }, { config: { tokens: { calibration: 2 } } },
    { config: { tokens: { encoding: "o200k_base" } } }, { config: { model: { name: "gpt-4o" }, tokens: { encoding: "auto" } } }]) {
    for (const msgs of [[], [m], [m, m], []]) same(c, ref, msgs, options, `${JSON.stringify(options)} ${msgs.length}`);
  }
  const withConfig = await Compactor.create({ wasm: ref.module, config: { tokens: { encoding: "o200k_base", calibration: 1.5 } } });
  const refWith = await Compactor.create({ wasm: ref.module, config: { tokens: { encoding: "o200k_base", calibration: 1.5 } } });
  for (let i = 0; i < 2; i++) {
    assert.deepEqual(withConfig.countTokens([m]), refWith.call("tokens.count", { messages: [m], config: { tokens: { encoding: "o200k_base", calibration: 1.5 } } }));
    assert.deepEqual(withConfig.countTokens([m], { config: { tokens: { calibration: 1 } } }).per_message, ref.countTokens([m], { encoding: "o200k_base" }).per_message);
  }
});

test("cache: errors are the uncached path's, cached messages or not", async () => {
  const ref = await Compactor.create();
  const c = await Compactor.create({ wasm: ref.module });
  const a = { role: "user", content: "first" };
  const b = { role: "assistant", content: "second" };
  c.countTokens([a, b], { encoding: "o200k_base" });
  const cases = [
    ["a non-object message after cached ones", [a, b, 42], { encoding: "o200k_base" }],
    ["a null message", [a, null, b], { encoding: "o200k_base" }],
    ["an undefined message", [a, b, undefined], { encoding: "o200k_base" }],
    ["NaN in a new message", [a, b, { role: "user", content: [{ type: "x", v: NaN }] }], { encoding: "o200k_base" }],
    ["a cycle in a new message", [a, b, (() => { const x = { role: "user" }; x.content = [x]; return x; })()], { encoding: "o200k_base" }],
    ["an unknown encoding", [a, b], { encoding: "o300k" }],
    ["a bad config", [a, b], { encoding: "o200k_base", config: { tokens: { calibration: -1 } } }],
  ];
  for (const [what, msgs, options] of cases) {
    const fresh = await Compactor.create({ wasm: ref.module });
    const err = (fn) => { try { fn(); } catch (e) { return e; } assert.fail(`${what}: no error`); };
    const want = err(() => fresh.countTokens(msgs, options)); // nothing cached: the whole list, as before the cache
    const got = err(() => c.countTokens(msgs, options));
    assert.ok(got instanceof CompactError, `${what}: ${got}`);
    assert.deepEqual([got.code, got.path, got.message], [want.code, want.path, want.message], what);
  }
  assert.throws(() => c.countTokens("not a list"), (e) => e.code === "invalid_messages" && e.path === "/messages");
  // The cache still answers right after the errors.
  assert.deepEqual(c.countTokens([a, b], { encoding: "o200k_base" }), uncached(ref, [a, b], { encoding: "o200k_base" }));
});
