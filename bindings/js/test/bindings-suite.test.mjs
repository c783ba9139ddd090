// The shared bindings suite: every case of testdata/bindings/*.json (format and
// runner rules: testdata/bindings/README.md) through the JS API. A case that does not
// list "js" in `runtimes` is skipped as not applicable (never counted as passed).
// Case id: bindings/<file>/<name>.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { CompactError, Compactor, ErrBadBinary, _instanceOf } from "../index.js";
import { ROOT } from "./helpers.mjs";

const DIR = path.join(ROOT, "testdata", "bindings");
const RUNTIMES = ["js", "python", "go"];
const DOS = ["create", "compact", "trap", "engine.create", "engine.update_from_response", "engine.should_compress",
  "engine.compress", "engine.update_model", "engine.get_status", "engine.on_session_reset"];
const SUMMARIZERS = ["returns", "throws", "returns_value", "hangs", "cancels", "times_out"];
// Wire option names -> JS names; any other key is passed on unchanged (to be rejected).
const JS_NAMES = {
  prompt_tokens: "promptTokens", timeout_ms: "timeoutMs", current_tokens: "currentTokens",
  focus_topic: "focusTopic", max_instance_memory: "maxInstanceMemory",
};

const files = existsSync(DIR) ? readdirSync(DIR).filter((f) => f.endsWith(".json") && f !== "fixtures.json").sort() : [];
const fixtures = existsSync(path.join(DIR, "fixtures.json")) ? JSON.parse(readFileSync(path.join(DIR, "fixtures.json"), "utf8")).fixtures : {};
const suites = files.map((f) => [f.replace(/\.json$/, ""), JSON.parse(readFileSync(path.join(DIR, f), "utf8"))]);

test("testdata/bindings holds case files, well formed", () => {
  assert.ok(suites.length > 0, `no case files in ${DIR}`);
  for (const [file, suite] of suites) {
    assert.ok(Array.isArray(suite.cases) && suite.cases.length > 0, `${file}: cases`);
    const names = new Set();
    for (const c of suite.cases) {
      assert.equal(typeof c.name, "string", `${file}: a case without a name`);
      assert.ok(!names.has(c.name), `${file}: duplicate case name ${c.name}`);
      names.add(c.name);
      for (const r of c.runtimes ?? []) assert.ok(RUNTIMES.includes(r), `${file}/${c.name}: unknown runtime ${r}`);
      assert.ok(Array.isArray(c.steps) && c.steps.length > 0, `${file}/${c.name}: steps`);
      for (const s of c.steps) {
        assert.ok(DOS.includes(s.do), `${file}/${c.name}: unknown do ${JSON.stringify(s.do)}`);
        if (s.summarizer) assert.ok(SUMMARIZERS.some((k) => k in s.summarizer), `${file}/${c.name}: unknown summarizer ${JSON.stringify(s.summarizer)}`);
        if (s.messages?.fixture) assert.ok(s.messages.fixture in fixtures, `${file}/${c.name}: unknown fixture ${s.messages.fixture}`);
        if (s.want?.error) assert.ok(typeof s.want.error.code === "string" && ("path" in s.want.error || "path_prefix" in s.want.error), `${file}/${c.name}: want.error needs code and path`);
      }
    }
  }
});

/** The messages of a step: a list, a fixture, a value, or a value JSON cannot hold. */
function messagesOf(spec) {
  if (Array.isArray(spec)) return structuredClone(spec);
  if (spec === undefined) throw new Error("the step has no messages");
  if ("fixture" in spec) return structuredClone(fixtures[spec.fixture]);
  if ("value" in spec) return structuredClone(spec.value);
  const msgs = structuredClone(fixtures["short-chat"]);
  const m = msgs[1];
  switch (spec.special) {
    case "cycle":
      m.content = [m];
      break;
    case "deep": {
      let v = [];
      for (let i = 0; i < 100000; i++) v = [v];
      m.content = v;
      break;
    }
    case "nan":
      m.score = NaN;
      break;
    case "bigint":
      m.score = 12n;
      break;
    default:
      throw new Error(`JS cannot express messages ${JSON.stringify(spec)}`);
  }
  return msgs;
}

/** A step's options in JS spelling. */
function optionsOf(step, engine = false) {
  if (step.options_raw !== undefined) return step.options_raw;
  if (step.options?.special === "function") return async () => "a summarizer where the options go";
  const out = {};
  for (const [k, v] of Object.entries(step.options ?? {})) {
    out[engine && k === "prompt_tokens" ? "currentTokens" : JS_NAMES[k] ?? k] = v;
  }
  return out;
}

/** The summarizer a step asks for, and where it records what it was asked. */
function summarizerOf(spec, seen) {
  if (!spec) return undefined;
  return async (request) => {
    if (spec.records) seen.push(request);
    if ("returns" in spec) return spec.returns;
    if ("returns_value" in spec) return spec.returns_value;
    if ("throws" in spec) throw new Error(spec.throws);
    if (spec.hangs) return new Promise(() => {});
    if (spec.cancels) throw new DOMException("the summarizer's request was aborted", "AbortError");
    if ("times_out" in spec) throw Object.assign(new Error(spec.times_out), { name: "TimeoutError" });
    throw new Error(`unknown summarizer ${JSON.stringify(spec)}`);
  };
}

/** Every key of want is in got, equal (numbers by value). */
function assertSubset(got, want, what) {
  assert.ok(got !== null && typeof got === "object", `${what}: got ${JSON.stringify(got)}`);
  for (const [k, v] of Object.entries(want)) {
    assert.ok(k in got, `${what}.${k} is missing: ${JSON.stringify(got).slice(0, 600)}`);
    assert.deepEqual(got[k], v, `${what}.${k}: got ${JSON.stringify(got[k])}, want ${JSON.stringify(v)}`);
  }
}

/** Runs one step on the case's world ({compactor, engine}); returns its value, or throws. */
async function run(step, world, seen) {
  const compactor = async () => (world.compactor ??= await Compactor.create());
  switch (step.do) {
    case "create": {
      const opts = optionsOf(step);
      world.compactor = await Compactor.create(typeof opts === "function" ? opts : { ...("config" in step ? { config: step.config } : {}), ...opts });
      return undefined;
    }
    case "compact": {
      const c = await compactor();
      const opts = optionsOf(step);
      const summarize = summarizerOf(step.summarizer, seen);
      const options = typeof opts === "function" || !summarize ? opts : { ...opts, summarize };
      return c.compact(messagesOf(step.messages), options);
    }
    case "trap": {
      // The test hook of the JS binding: garbage over the live instance's memory,
      // so its next call traps inside the module.
      const inst = _instanceOf(await compactor());
      new Uint8Array(inst.exports.memory.buffer).fill(0xaa);
      return undefined;
    }
    case "engine.create": {
      const c = await compactor();
      const summarize = summarizerOf(step.summarizer, seen);
      world.engine = c.engine({ ...("config" in step ? { config: step.config } : {}), ...optionsOf(step), ...(summarize ? { summarize } : {}) });
      return undefined;
    }
  }
  const e = world.engine;
  assert.ok(e, `${step.do} before engine.create`);
  switch (step.do) {
    case "engine.update_from_response":
      return e.updateFromResponse(step.usage);
    case "engine.should_compress":
      return e.shouldCompress(step.prompt_tokens);
    case "engine.compress":
      return e.compress(messagesOf(step.messages), optionsOf(step, true));
    case "engine.update_model":
      return e.updateModel(step.model, step.context_length, step.provider === undefined ? undefined : { provider: step.provider });
    case "engine.get_status":
      return e.getStatus();
    case "engine.on_session_reset":
      return e.onSessionReset();
  }
  throw new Error(`unknown do ${step.do}`);
}

for (const [file, suite] of suites) {
  for (const c of suite.cases) {
    const applies = !c.runtimes || c.runtimes.includes("js");
    test(`bindings/${file}/${c.name}`, { skip: applies ? false : `not applicable to js (runtimes: ${c.runtimes.join(", ")})` }, async () => {
      const world = {};
      for (const [i, step] of c.steps.entries()) {
        const where = `step ${i} (${step.do})`;
        const want = step.want ?? {};
        const seen = [];
        let got;
        let err;
        try {
          got = await run(step, world, seen);
        } catch (e) {
          err = e;
        }
        if (want.bad_binary) {
          assert.ok(err instanceof ErrBadBinary, `${where}: want ErrBadBinary, got ${err?.stack ?? err}`);
          assert.ok(err.message.startsWith(want.bad_binary), `${where}: message ${err.message}`);
          continue;
        }
        if (want.error) {
          assert.ok(err, `${where}: want error ${want.error.code} at ${want.error.path ?? want.error.path_prefix}, got success`);
          assert.ok(err instanceof CompactError, `${where}: want CompactError ${want.error.code}, got ${err?.stack ?? err}`);
          assert.match(err.message, /^ctxcompact:/, `${where}: message`);
          assert.equal(err.code, want.error.code, `${where}: code (${err.message})`);
          if ("path" in want.error) assert.equal(err.path, want.error.path, `${where}: path (${err.message})`);
          else assert.ok(err.path.startsWith(want.error.path_prefix), `${where}: path ${err.path} starts with ${want.error.path_prefix}`);
          continue;
        }
        if (err) throw new Error(`${where}: want success, got ${err?.stack ?? err}`, { cause: err });
        if (want.report) assertSubset(got.report, want.report, `${where} report`);
        if ("messages_count" in want) assert.equal(got.messages.length, want.messages_count, `${where}: messages_count`);
        if (want.summary_request) {
          assert.equal(seen.length, 1, `${where}: the summarizer was asked once`);
          assertSubset(seen[0], want.summary_request, `${where} summary_request`);
        }
        if ("value" in want) assert.equal(got, want.value, `${where}: value`);
        if (want.status) {
          assert.ok(world.engine, `${where}: want status without an engine`);
          assertSubset(world.engine.getStatus(), want.status, `${where} status`);
        }
      }
    });
  }
}
