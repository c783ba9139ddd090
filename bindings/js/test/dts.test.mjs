// index.d.ts describes what the core really returns: for each op, the result's keys
// equal the properties of its interface (so a field added in the core shows up here).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { Compactor } from "../index.js";
import { ROOT, session } from "./helpers.mjs";

const dts = readFileSync(path.join(ROOT, "bindings", "js", "index.d.ts"), "utf8");

/** The body of `export interface name { ... }`, generic ones too (`PruneResult<M extends Item = Message>`, one level of nesting). */
const body = (name) => dts.match(new RegExp(`export interface ${name}(?:<(?:[^<>]|<[^<>]*>)*>)? \\{\\n([\\s\\S]*?)\\n\\}`));

/** Property names declared in interface name (index signatures excluded). */
function declared(name) {
  const m = body(name);
  assert.ok(m, `interface ${name} in index.d.ts`);
  return [...m[1].matchAll(/^ {2}(\w+)\??:/gm)].map((x) => x[1]).sort();
}

const c = await Compactor.create();
const msgs = session({ turns: 40 });
const small = { model: { context_length: 32000 } };
const begun = c.call("compact.begin", { messages: msgs, config: small, summarizer: "host" });
const finished = await c.compact(msgs, { config: small, summarize: async () => "S" });
const sim = c.cacheSimulate(msgs, { model: "claude-sonnet-4", per_request: true });
const engine = c.engine({ config: small });
const usage = engine.updateFromResponse({ prompt_tokens: 5 });
const nativeConfig = { model: { name: "gpt-5.6", provider: "openai", context_length: 400000 }, compression: { codex_responses_native: true } };
const decision = c.nativePolicy({ config: nativeConfig });
const compaction = { type: "compaction", id: "cmp_1", encrypted_content: "x" };
const observed = c.nativeObserve({ config: nativeConfig, response: { output: [compaction] } });
const nativeEngine = c.engine({ config: nativeConfig });
const prepared = nativeEngine.prepareRequest({ model: "gpt-5.6", input: [{ role: "user", content: "a" }, compaction] });

const cases = {
  InfoResult: c.info(),
  ThresholdResult: c.resolveThreshold(),
  ShouldCompressResult: c.shouldCompress(10),
  HygieneResult: c.hygieneCheck(msgs),
  TokenCountResult: c.countTokens(msgs),
  PruneResult: c.prune(msgs, { config: small }),
  SanitizeResult: c.sanitize(msgs),
  ValidateResult: c.validate(msgs),
  SummaryRequest: begun.summary_request,
  CompactReport: finished.report,
  CompactResult: finished,
  ArchivedEntry: finished.archived[0],
  CacheApplyResult: c.cacheApply(msgs),
  CachePolicyResult: c.cachePolicy({ model: "claude-sonnet-4", provider: "anthropic" }),
  CacheSimulateResult: sim,
  CacheStrategyResult: Object.values(sim.strategies)[0],
  CalibrateResult: c.calibrate(msgs, 30000),
  EngineStatus: engine.getStatus(),
  EngineUsage: usage,
  NativeDecision: decision,
  NativeSession: decision.session,
  NativeObservation: observed,
  NativeSeen: observed.seen[0],
  NativeTrimResult: c.nativeTrim([compaction], { format: "responses", session: observed.session }),
  PreparedRequest: prepared,
};

for (const [name, value] of Object.entries(cases)) {
  test(`index.d.ts ${name} has exactly the keys the core returns`, () => {
    const want = declared(name);
    const got = Object.keys(value).sort();
    // Optional-only declarations (e.g. CacheApplyResult.system) may be absent.
    const optional = [...body(name)[1].matchAll(/^ {2}(\w+)\?:/gm)].map((x) => x[1]);
    assert.deepEqual(got.filter((k) => !optional.includes(k)), want.filter((k) => !optional.includes(k)));
    for (const k of got) assert.ok(want.includes(k), `${k} is declared`);
  });
}

test("index.d.ts ErrorCode lists every code of the module", () => {
  const m = dts.match(/export type ErrorCode =([\s\S]*?);/);
  const codes = [...m[1].matchAll(/"(\w+)"/g)].map((x) => x[1]).sort();
  assert.deepEqual(codes, [...c.info().error_codes].sort());
});
