// The lossless context engine (issue 17) in JS: ContextEngine with config
// context.engine "lossless", a RecallStore and a session id archives every
// compaction's originals (the core's session.run asks for the archive), and answers
// the agent's context_search / context_expand calls (session.run's tool_call: the
// store's SQL is the effect). The acceptance test: a shared trace
// compacted twice, a path from the first summarized range found and its original
// tool output returned byte for byte, from a fresh node process on the same file.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompactError, Compactor, ContextEngine, _instanceOf } from "../index.js";
import { RecallStore } from "../recall.js";
import { loadTrace, session, traceFile, tracesSkip } from "./helpers.mjs";

const c = await Compactor.create();
const LOSSLESS = { model: { context_length: 32000 }, context: { engine: "lossless" } };
const INDEX = new URL("../index.js", import.meta.url).href;
const RECALL = new URL("../recall.js", import.meta.url).href;

function tmpFile(t) {
  const dir = mkdtempSync(path.join(tmpdir(), "ctxc-lossless-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, "recall.db");
}

/** Runs the tool calls in a fresh node process on the store file; returns their results (JSON texts). */
function toolsInFreshProcess(file, sessionId, calls) {
  const script = `import { ContextEngine } from ${JSON.stringify(INDEX)};
import { RecallStore } from ${JSON.stringify(RECALL)};
const [file, sessionId, calls] = [process.argv[1], process.argv[2], JSON.parse(process.argv[3])];
const store = await RecallStore.open(file);
const engine = await ContextEngine.create({ config: { context: { engine: "lossless" } }, store, sessionId });
const out = calls.map(([name, args]) => engine.handleToolCall(name, args));
store.close();
process.stdout.write(JSON.stringify(out));`;
  return JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", script, file, sessionId, JSON.stringify(calls)],
    { encoding: "utf8", maxBuffer: 64 << 20 }));
}

const PATH = /(?:[\w.-]+\/)*[\w-]+\.(?:py|js|ts|go|rs|json|cfg|toml|txt|md|sh)\b/g;

test("acceptance: a shared trace compacted twice; a path from the first range found and its tool output returned byte for byte by a fresh process",
  { skip: tracesSkip() }, async (t) => {
    const file = tmpFile(t);
    const messages = loadTrace(traceFile("mini-swe-agent-deepseek-django-13964.json"));
    const store = await RecallStore.open(file);
    const engine = c.engine({ config: LOSSLESS, store, sessionId: "django-13964" });
    assert.equal(engine.lossless, true);

    // First compaction: the first half of the trace; then the conversation goes on
    // from its result, and the second compaction sees that.
    const half = 160;
    const first = await engine.compress(messages.slice(0, half), { force: true });
    assert.equal(first.report.compacted, true);
    // The summary names what it stands for (the core's lines, from archive_id).
    const named = (r) => JSON.stringify(r.messages.find((m) => JSON.stringify(m.content).includes("[CONTEXT COMPACTION]")).content);
    assert.match(named(first), /Archived as r1 \(messages \d+-\d+ of the conversation before this compaction\)/);
    assert.match(named(first), /Expand for details about: /);
    const history = [...first.messages, ...messages.slice(half)];
    const second = await engine.compress(history, { force: true });
    assert.equal(second.report.compacted, true);
    assert.equal(engine.compressionCount, 2);
    assert.match(named(second), /Archived as r2 /);
    assert.deepEqual(store.ranges("django-13964").map((r) => [r.id, r.seq, r.from_index, r.to_index]),
      [["r1", 1, first.report.summarized.from, first.report.summarized.to], ["r2", 2, second.report.summarized.from, second.report.summarized.to]]);
    store.close();

    // A tool call of the first summarized range that names a path, with its result
    // archived beside it: the path named by the fewest messages of the trace (a
    // search answers the newest 50 hits).
    const r1 = new Map(first.archived.map((a) => [a.index, a]));
    const mentions = (p) => messages.filter((m) => JSON.stringify(m).includes(p)).length;
    let pick = null;
    for (const a of first.archived) {
      if (a.reason !== "summarized" || a.message.role !== "assistant" || !a.message.tool_calls) continue;
      for (const call of a.message.tool_calls) {
        const result = [...r1.values()].find((b) => b.message.role === "tool" && b.message.tool_call_id === call.id);
        for (const p of call.function.arguments.match(PATH) ?? []) {
          if (!p.includes("/") || !result) continue;
          const n = mentions(p);
          if (!pick || n < pick.n) pick = { path: p, call: a, result, n };
        }
      }
    }
    assert.ok(pick, "the first range has a tool call naming a path, with its result");
    t.diagnostic(`path ${pick.path} (named by ${pick.n} messages of the trace), call r1.${pick.call.index}, output r1.${pick.result.index}`);
    const original = pick.result.message;
    const resultId = `r1.${pick.result.index}`;

    const [found, one, range, cut, summary] = toolsInFreshProcess(file, "django-13964", [
      ["context_search", { query: pick.path, limit: 50 }],
      ["context_expand", JSON.stringify({ id: resultId })], // arguments as the model sends them: JSON text
      ["context_expand", { id: "r1" }],
      ["context_expand", { id: "r1", max_tokens: 200 }],
      ["context_expand", { id: "r1.summary" }],
    ]);
    const hits = JSON.parse(found).hits;
    assert.ok(hits.some((h) => h.id === `r1.${pick.call.index}` && h.range === "r1"), `${pick.path}: ${found.slice(0, 400)}`);
    assert.ok(hits.length <= 50 && hits.every((h) => typeof h.snippet === "string" && h.snippet.length > 0));
    // Byte for byte: the answer holds the original message exactly as its object serializes.
    assert.equal(one, `{"id":"${resultId}","messages":[${JSON.stringify(original)}],"truncated":false}`);
    assert.equal(JSON.parse(one).messages[0].content, original.content);
    // The whole range: every archived original of the first compaction, in input order.
    const whole = JSON.parse(range);
    assert.equal(whole.truncated, false);
    assert.deepEqual(whole.messages, first.archived.slice().sort((a, b) => a.index - b.index).map((a) => a.message));
    assert.ok(range.includes(JSON.stringify(original)));
    const short = JSON.parse(cut);
    assert.equal(short.truncated, true);
    assert.match(short.note, /200 tokens/);
    assert.ok(cut.length < range.length);
    // The range's summary row is the summary message the first compaction returned.
    const summaryMessage = first.messages.find((m) => JSON.stringify(m.content).includes("[CONTEXT COMPACTION]"));
    assert.ok(summaryMessage && !messages.includes(summaryMessage));
    assert.equal(summary, `{"id":"r1.summary","messages":[${JSON.stringify(summaryMessage)}],"truncated":false}`);
  });

/** Wraps a store's archive so it keeps each part it is given and can throw at part failAt. */
function partsOf(store, failAt = -1) {
  const seen = [];
  const archive = store.archive.bind(store);
  store.archive = (sessionId, parts) => archive(sessionId, (function* () {
    for (const p of parts) {
      if (seen.length === failAt) throw (seen.thrown = new Error("the connection dropped"));
      seen.push(p);
      yield p;
    }
  })());
  return seen;
}

test("a 9,000-message compaction is archived in two parts of at most 8,192 messages: every archived message as sent, and the summary", async () => {
  const store = await RecallStore.open();
  const seen = partsOf(store);
  const engine = c.engine({ config: LOSSLESS, store, sessionId: "s" });
  const msgs = [{ role: "system", content: "You are a coding agent." }];
  for (let i = 1; i <= 9000; i++) msgs.push({ role: i % 2 ? "user" : "assistant", content: `step ${i} of the build` });
  const res = await engine.compress(msgs, { force: true });
  assert.ok(res.archived.length > 8192, `${res.archived.length} archived`);
  assert.equal(seen.length, 2);
  assert.equal(seen[0].range.id, "r1");
  assert.equal(seen[1].range, undefined, "the range comes with the first part");
  const rows = seen.flatMap((p) => p.rows);
  assert.equal(rows.length, res.archived.length + 1, "every archived message and the summary");
  res.archived.forEach((a, i) => {
    assert.equal(rows[i].id, `r1.${a.index}`);
    assert.equal(rows[i].json, JSON.stringify(a.message));
  });
  const summary = rows.at(-1);
  assert.equal(summary.id, "r1.summary");
  assert.ok(res.messages.some((m) => !msgs.includes(m) && JSON.stringify(m) === JSON.stringify(JSON.parse(summary.json))));
  assert.equal(store.expand("s", "r1").messages.length, res.archived.length, "all of them in the store");
  store.close();
});

test("an archive in parts of 7 messages stores what one part does; a part that fails rolls them all back", { skip: tracesSkip() }, async () => {
  const messages = loadTrace(traceFile("claude-code-spotter-4d5611e5-precompact.json"));
  const run = async (part, failAt) => {
    const store = await RecallStore.open();
    const seen = partsOf(store, failAt);
    const engine = c.engine({ config: { ...LOSSLESS, context: { engine: "lossless", archive_part: part } }, store, sessionId: "s" });
    let error;
    try {
      await engine.compress(messages, { force: true });
    } catch (err) {
      error = err;
    }
    const out = { seen, error, ranges: store.ranges("s"), rows: store.expand("s", "r1").messages, count: engine.compressionCount };
    store.close();
    return out;
  };
  const whole = await run(8192);
  assert.equal(whole.error, undefined);
  assert.equal(whole.seen.length, 1);
  assert.ok(whole.rows.length > 40);
  const parted = await run(7);
  assert.equal(parted.error, undefined);
  assert.ok(parted.seen.length > 5, `${parted.seen.length} parts`);
  assert.deepEqual(parted.rows, whole.rows);
  assert.deepEqual(parted.ranges, whole.ranges);
  assert.equal(parted.count, 1);
  const failed = await run(7, 3);
  assert.equal(failed.error?.message, "ctxcompact: the compaction is not recorded: archiving it as r1 failed: the connection dropped");
  assert.equal(failed.error, failed.seen.thrown, "the part's own error, with the core's message");
  assert.deepEqual(failed.ranges, [], "nothing of the range is kept");
  assert.deepEqual(failed.rows, []);
  assert.equal(failed.count, 0, "nothing recorded");
});

test("after the last compaction every archived path and user request is found, and expands to its original", { skip: tracesSkip() }, async () => {
  const messages = loadTrace(traceFile("mini-swe-agent-deepseek-astropy-12907.json"));
  const store = await RecallStore.open();
  const engine = c.engine({ config: LOSSLESS, store, sessionId: "astropy" });
  const first = await engine.compress(messages.slice(0, 70), { force: true });
  const second = await engine.compress([...first.messages, ...messages.slice(70)], { force: true });
  const all = [["r1", first], ["r2", second]].flatMap(([rid, r]) => r.archived.map((a) => ({ id: `${rid}.${a.index}`, message: a.message })));
  let checked = 0;
  for (const { id, message } of all) {
    const needles = [];
    if (message.role === "user" && typeof message.content === "string") {
      const line = message.content.split("\n").find((l) => l.trim().length >= 3 && !l.includes('"'));
      if (line) needles.push(`"${line.trim().slice(0, 80)}"`);
    }
    for (const call of message.tool_calls ?? []) for (const p of call.function.arguments.match(PATH) ?? []) needles.push(p);
    for (const q of needles) {
      const res = JSON.parse(engine.handleToolCall("context_search", { query: q, limit: 50 }));
      const ids = res.hits.map((h) => h.id);
      // Newest first and capped at 50: a message found by an older, common needle may be past the cap.
      assert.ok(ids.includes(id) || res.total > 50, `${q} finds ${id}: ${ids.join(" ")} (total ${res.total})`);
      checked++;
    }
    assert.deepEqual(JSON.parse(engine.handleToolCall("context_expand", { id })).messages, [message]);
  }
  assert.ok(checked >= 20, `searched ${checked} needles`);
  store.close();
});

test("tool schemas in three shapes; compressor mode has the context tools only and answers recall calls with an error", async () => {
  const store = await RecallStore.open();
  const e = c.engine({ config: LOSSLESS, store, sessionId: "s" });
  const names = (tools, get) => tools.map(get);
  const all = ["context_search", "context_expand", "context_status", "compact_now"];
  assert.deepEqual(names(e.getToolSchemas(), (x) => x.function.name), all);
  assert.deepEqual(names(e.getToolSchemas("openai"), (x) => x.type), ["function", "function", "function", "function"]);
  assert.deepEqual(names(e.getToolSchemas("responses"), (x) => x.name), all);
  const anth = e.getToolSchemas("anthropic");
  assert.deepEqual(names(anth, (x) => x.name), all);
  assert.deepEqual(anth[0].input_schema.required, ["query"]);
  assert.throws(() => e.getToolSchemas("gemini"), (err) => err instanceof CompactError && err.path === "/format");

  const plain = c.engine({ config: { model: { context_length: 32000 } } });
  assert.equal(plain.lossless, false);
  assert.deepEqual(names(plain.getToolSchemas(), (x) => x.function.name), ["context_status", "compact_now"]);
  assert.deepEqual(names(plain.getToolSchemas("anthropic"), (x) => x.name), ["context_status", "compact_now"]);
  assert.match(JSON.parse(plain.handleToolCall("context_search", { query: "x" })).error, /unknown tool "context_search"/);
  // A store given to a compressor engine is left alone: compress archives nothing.
  const withStore = c.engine({ config: { model: { context_length: 16000 } }, store, sessionId: "c" });
  const r = await withStore.compress(session({ turns: 60 }), { force: true });
  assert.equal(r.report.compacted, true);
  assert.deepEqual(store.sessions(), []);
  store.close();
});

test("lossless mode needs a store and a session id; the options are checked", async () => {
  const store = await RecallStore.open();
  assert.throws(() => c.engine({ config: LOSSLESS, sessionId: "s" }), (e) => e.code === "invalid_request" && e.path === "/store");
  assert.throws(() => c.engine({ config: LOSSLESS, store }), (e) => e.code === "invalid_request" && e.path === "/session_id");
  assert.throws(() => c.engine({ config: LOSSLESS, store, sessionId: "" }), (e) => e.path === "/session_id");
  assert.throws(() => c.engine({ config: LOSSLESS, store: "recall.db", sessionId: "s" }), (e) => e.path === "/store");
  assert.throws(() => c.engine({ config: LOSSLESS, store: {}, sessionId: "s" }), (e) => e.path === "/store");
  assert.throws(() => c.engine({ config: LOSSLESS, store, sessionID: "s" }), (e) => e.path === "/sessionID" && /sessionId/.test(e.message));
  assert.throws(() => c.engine({ config: { context: { engine: "magic" } } }), (e) => e.code === "invalid_config" && e.path === "/config/context/engine");
  // ContextEngine.create passes them on; a saved state keeps lossless mode.
  const e = await ContextEngine.create({ config: LOSSLESS, store, sessionId: "s" });
  assert.equal(e.store, store);
  assert.equal(e.sessionId, "s");
  const again = e.compactor.engine({ state: e.state, store, sessionId: "s" });
  assert.equal(again.lossless, true);
  assert.throws(() => e.compactor.engine({ state: e.state }), (err) => err.path === "/store");
  store.close();
});

test("tool-call arguments: objects or JSON text; errors are results, not exceptions", async () => {
  const store = await RecallStore.open();
  const e = c.engine({ config: LOSSLESS, store, sessionId: "s" });
  await e.compress(session({ turns: 60 }), { force: true });
  const ok = JSON.parse(e.handleToolCall("context_search", '{"query": "turn", "limit": 3}'));
  assert.equal(ok.hits.length, 3);
  assert.ok(ok.total > 3);
  assert.deepEqual(JSON.parse(e.handleToolCall("context_search", { query: "turn", limit: 3 })), ok);
  for (const [name, args, want] of [
    ["context_search", {}, /query is required/],
    ["context_search", "{not json", /not valid JSON/],
    ["context_search", { query: "x", limit: 0 }, /limit/],
    ["context_search", { query: "   " }, /no words/],
    ["context_expand", { id: 3 }, /id is required/],
    ["context_expand", { id: "r9" }, /no archived message or range with id r9/],
    ["context_expand", { id: "r1.999" }, /no archived message or range with id r1\.999/],
    ["context_expand", { id: "r1", max_tokens: -1 }, /max_tokens/],
    ["lcm_grep", { query: "x" }, /unknown tool "lcm_grep"/],
  ]) {
    const out = e.handleToolCall(name, args);
    assert.equal(typeof out, "string");
    assert.match(JSON.parse(out).error, want, `${name} ${JSON.stringify(args)}: ${out}`);
  }
  assert.throws(() => e.handleToolCall(42, {}), (err) => err.code === "invalid_request" && err.path === "/name");
  store.close();
});

test("two engines on one store: ranges numbered per session, searches see only their own", async () => {
  const store = await RecallStore.open();
  const a = c.engine({ config: LOSSLESS, store, sessionId: "alice" });
  const b = c.engine({ config: LOSSLESS, store, sessionId: "bob" });
  const conv = (who) => session({ turns: 50 }).map((m) => (m.role === "user" && typeof m.content === "string" ? { ...m, content: `${m.content} (${who}-marker)` } : m));
  // Interleaved, concurrently.
  await Promise.all([a.compress(conv("alice"), { force: true }), b.compress(conv("bob"), { force: true })]);
  const ra = await a.compress([...(await a.compress(conv("alice"), { force: true })).messages, ...conv("alice").slice(-6)], { force: true });
  assert.equal(ra.report.compacted, true);
  assert.deepEqual(store.ranges("alice").map((r) => r.id), ["r1", "r2", "r3"]);
  assert.deepEqual(store.ranges("bob").map((r) => r.id), ["r1"]);
  const seen = (e, q) => JSON.parse(e.handleToolCall("context_search", { query: q, limit: 50 })).total;
  assert.ok(seen(a, "alice-marker") > 0);
  assert.equal(seen(a, "bob-marker"), 0);
  assert.ok(seen(b, "bob-marker") > 0);
  assert.equal(seen(b, "alice-marker"), 0);
  store.deleteSession("alice");
  assert.equal(seen(a, "alice-marker"), 0);
  assert.ok(seen(b, "bob-marker") > 0);
  store.close();
});

test("compress asks the store for a range id r<k> and archives under it in lossless mode only", async () => {
  const comp = await Compactor.create();
  const inst = _instanceOf(comp);
  const asked = [];
  const parts = inst.callParts.bind(inst);
  inst.callParts = (p) => {
    const out = parts(p);
    const effect = JSON.parse(out).result?.effect;
    if (effect) asked.push([effect.type, effect.range_id ?? null]);
    return out;
  };
  const store = await RecallStore.open();
  const summarize = async () => "Goal: the task.";
  // Summarizers with room for the whole middle: one summary request each (no chunks).
  const roomy = { compression: { summary_context_length: 1000000 } };
  const e = comp.engine({ config: { ...LOSSLESS, ...roomy }, store, sessionId: "s", summarize });
  const r = await e.compress(session({ turns: 60 }), { force: true });
  assert.match(JSON.stringify(r.messages), /Archived as r1/);
  await e.compress([...r.messages, ...session({ turns: 30 })], { force: true });
  await comp.engine({ config: { model: { context_length: 32000 }, ...roomy }, summarize }).compress(session({ turns: 60 }), { force: true });
  assert.deepEqual(asked, [["next_range_id", null], ["summarize", null], ["archive", "r1"],
    ["next_range_id", null], ["summarize", null], ["archive", "r2"], ["summarize", null]]);
  assert.deepEqual(store.ranges("s").map((x) => x.id), ["r1", "r2"]);
  store.close();
});

test("a store that fails leaves the engine as it was (the caller keeps its history)", async () => {
  const store = await RecallStore.open();
  const e = c.engine({ config: LOSSLESS, store, sessionId: "s" });
  store.close();
  await assert.rejects(e.compress(session({ turns: 60 }), { force: true }), (err) => err instanceof CompactError);
  assert.equal(e.compressionCount, 0);
});

test("queries past the core's bounds (a NUL, 998 words, one 50,000-character word) are {error} results, in the store alone an invalid_request", async (t) => {
  for (const driver of ["wasm", "node:sqlite"]) {
    let store;
    try {
      store = await RecallStore.open(tmpFile(t), { driver });
    } catch (err) {
      if (driver === "node:sqlite") continue; // Node 20: no node:sqlite
      throw err;
    }
    const e = c.engine({ config: LOSSLESS, store, sessionId: "s" });
    await e.compress(session({ turns: 60 }), { force: true });
    const words = (n) => Array.from({ length: n }, (_, i) => `w${i}`).join(" ");
    for (const [query, want] of [
      ["turn\0", /must not contain a NUL character/],
      ["tu\0rn of", /must not contain a NUL character/],
      [words(998), /query is too long: \d+ characters, at most 4000/],
      ["w".repeat(50000), /query is too long: 50000 characters, at most 4000/],
      [words(33), /query has 33 terms, at most 32/],
      ["x".repeat(1001), /a term of the query is too long: 1001 characters, at most 1000/],
    ]) {
      const out = e.handleToolCall("context_search", { query });
      assert.match(JSON.parse(out).error, want, `${driver}: ${out.slice(0, 200)}`);
      assert.throws(() => store.search("s", query), (err) => err instanceof CompactError && err.code === "invalid_request" && want.test(err.message));
    }
    assert.equal(JSON.parse(e.handleToolCall("context_search", { query: `${words(31)} turn` })).total, 0);
    store.close();
  }
});
