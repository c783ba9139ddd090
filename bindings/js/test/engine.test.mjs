// ContextEngine (issue 13, item 11): a loop over the core's session.run.
// The method set (shouldCompress, compress, updateFromResponse, updateModel,
// getStatus, onSessionReset), fields read from the last status, the state a host
// persists and restores, and the breaker after a nothing_to_compact that does not fit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { CompactError, Compactor, ContextEngine, _instanceOf } from "../index.js";
import { ROOT, session } from "./helpers.mjs";

const c = await Compactor.create();
const small = { model: { context_length: 32000 } };
const fixtures = JSON.parse(readFileSync(path.join(ROOT, "testdata", "bindings", "fixtures.json"), "utf8")).fixtures;

const STATUS_KEYS = ["name", "model", "provider", "context_length", "threshold_tokens", "threshold_percent", "threshold_rule",
  "last_prompt_tokens", "last_completion_tokens", "last_total_tokens", "usage_percent", "compression_count",
  "breaker_tokens", "last_compaction_fits", "last_fallback_used", "last_fallback_code", "compaction_requested", "can_undo"];

/** The ops a compactor's instance is sent, recorded. */
function recordOps(compactor) {
  const inst = _instanceOf(compactor);
  const ops = [];
  const call = inst.call.bind(inst);
  const parts = inst.callParts.bind(inst);
  const name = (q) => (q.op === "session.run" ? `session.run ${q.event}` : q.op);
  inst.call = (r) => { ops.push(name(JSON.parse(r))); return call(r); };
  inst.callParts = (p) => { ops.push(name(JSON.parse(p.map((x) => (typeof x === "string" ? x : new TextDecoder().decode(x))).join("")))); return parts(p); };
  return ops;
}

test("the status has the core's keys; fields read it in camelCase", () => {
  const e = c.engine({ config: { model: { name: "gpt-4o", context_length: 8000 } } });
  const s = e.getStatus();
  assert.deepEqual(Object.keys(s).sort(), [...STATUS_KEYS].sort());
  assert.equal(s.name, "ctxcompact");
  assert.equal(e.model, "gpt-4o");
  assert.equal(e.contextLength, 8000);
  assert.equal(e.thresholdTokens, s.threshold_tokens);
  assert.equal(e.thresholdPercent, s.threshold_percent);
  assert.equal(e.thresholdRule, s.threshold_rule);
  assert.equal(e.lastPromptTokens, 0);
  assert.equal(e.compressionCount, 0);
  assert.equal(e.breakerTokens, null);
  assert.equal(e.lastFallbackCode, null);
  // getStatus() is a copy: changing it changes nothing.
  s.compression_count = 99;
  assert.equal(e.getStatus().compression_count, 0);
});

test("usage shapes are normalised by the core: OpenAI, Anthropic, AI SDK, Gemini", () => {
  const e = c.engine({ config: small });
  assert.equal(e.updateFromResponse({ prompt_tokens: 1000, completion_tokens: 50 }).source, "openai");
  assert.equal(e.lastPromptTokens, 1000);
  assert.equal(e.lastTotalTokens, 1050);
  e.updateFromResponse({ input_tokens: 20000, cache_read_input_tokens: 10000, output_tokens: 7 });
  assert.equal(e.lastPromptTokens, 30000);
  assert.equal(e.lastCompletionTokens, 7);
  assert.equal(e.usagePercent, 93.75);
  e.updateFromResponse({ inputTokens: 1234, outputTokens: 56 });
  assert.equal(e.lastPromptTokens, 1234);
  e.updateFromResponse({ promptTokenCount: 500, candidatesTokenCount: 5, totalTokenCount: 505 });
  assert.equal(e.lastPromptTokens, 500);
  // Nothing to record: the last usage stays.
  assert.equal(e.updateFromResponse(undefined).source, "none");
  assert.equal(e.updateFromResponse(null).source, "none");
  assert.equal(e.lastPromptTokens, 500);
  assert.throws(() => e.updateFromResponse({ prompt_tokens: "7000" }), (err) => err instanceof CompactError && err.code === "invalid_request" && err.path === "/usage/prompt_tokens");
  assert.throws(() => e.updateFromResponse({ prompt_tokens: 7000n }), (err) => err.code === "invalid_request" && err.path === "/usage/prompt_tokens");
  assert.throws(() => e.updateFromResponse("7000"), (err) => err.code === "invalid_request" && err.path === "/usage");
});

test("shouldCompress: the last reported prompt, or the given one", () => {
  const e = c.engine({ config: small });
  e.updateFromResponse({ prompt_tokens: 1000 });
  assert.equal(e.shouldCompress(), false);
  e.updateFromResponse({ prompt_tokens: 30000 });
  assert.equal(e.shouldCompress(), true);
  assert.equal(e.shouldCompress(10), false);
  assert.throws(() => e.shouldCompress("30000"), (err) => err.code === "invalid_request" && err.path === "/prompt_tokens");
});

test("compress: compacts with the engine's config and summarizer, then records the report", async () => {
  let asked;
  const e = c.engine({ config: small, summarize: async (req) => { asked = req; return "ENGINE-SUMMARY"; } });
  e.updateFromResponse({ prompt_tokens: 30000 });
  const msgs = session({ turns: 40 });
  const res = await e.compress(msgs, { focusTopic: "the FastAPI routes" });
  assert.equal(res.report.compacted, true);
  assert.equal(res.report.threshold_tokens, e.thresholdTokens, "the engine's config (32K window), not the 200K default");
  assert.match(asked.messages.at(-1).content, /Focus topic: give priority to everything about the FastAPI routes\./);
  assert.ok(JSON.stringify(res.messages).includes("ENGINE-SUMMARY"));
  assert.equal(e.compressionCount, 1);
  assert.equal(e.lastPromptTokens, res.report.tokens_after);
  assert.equal(e.lastCompactionFits, true);
  assert.equal(e.lastFallbackUsed, false);
  assert.equal(e.lastFallbackCode, "");
  assert.equal(e.breakerTokens, null);
  await assert.rejects(e.compress(msgs, { prompt_tokens: 5 }), (err) => err.code === "invalid_request" && err.path === "/prompt_tokens");
  await assert.rejects(e.compress(msgs, { currentTokens: "5" }), (err) => err.code === "invalid_request" && err.path === "/current_tokens");
});

test("the breaker engages after a nothing_to_compact that does not fit (the JS engine's bug)", async () => {
  const e = c.engine({ config: { model: { context_length: 8000 } } });
  e.updateFromResponse({ prompt_tokens: 7000 });
  assert.equal(e.shouldCompress(), true);
  const res = await e.compress(fixtures["oversized-head"]);
  assert.equal(res.report.compacted, false);
  assert.equal(res.report.reason, "nothing_to_compact");
  assert.equal(res.report.fits, false);
  assert.equal(e.compressionCount, 0);
  assert.equal(e.breakerTokens, res.report.tokens_after);
  assert.equal(e.lastCompactionFits, false);
  // The next turn reports a prompt just as big: the trigger is held back.
  e.updateFromResponse({ prompt_tokens: res.report.tokens_after + 10 });
  assert.equal(e.shouldCompress(), false, "the breaker holds the trigger back");
  // A model switch clears it.
  e.updateModel("claude-sonnet-4", 200000, { provider: "anthropic", baseUrl: "https://api.anthropic.com", apiKey: "sk-secret", apiMode: "anthropic_messages" });
  assert.equal(e.breakerTokens, null);
  assert.equal(e.contextLength, 200000);
  assert.equal(e.model, "claude-sonnet-4");
  assert.equal(e.provider, "anthropic");
  assert.ok(!JSON.stringify(e.state).includes("sk-secret"), "the API key is never stored");
});

test("updateModel checks its arguments; the core checks the window", () => {
  const e = c.engine();
  assert.throws(() => e.updateModel("gpt-4o", 0), (err) => err.code === "invalid_request" && err.path === "/context_length");
  assert.throws(() => e.updateModel("gpt-4o", "128000"), (err) => err.code === "invalid_request" && err.path === "/context_length");
  assert.throws(() => e.updateModel(4, 128000), (err) => err.code === "invalid_request" && err.path === "/model");
  assert.throws(() => e.updateModel("gpt-4o", 128000, { providr: "openai" }), (err) => err.code === "invalid_request" && err.path === "/providr" && /did you mean provider\?/.test(err.message));
  e.updateModel("gpt-4o", 128000);
  assert.equal(e.contextLength, 128000);
});

test("onSessionReset zeroes counters, usage and breaker; keeps the config", async () => {
  const e = c.engine({ config: small, summarize: async () => "S" });
  e.updateFromResponse({ prompt_tokens: 30000, completion_tokens: 9 });
  await e.compress(session({ turns: 40 }));
  assert.equal(e.compressionCount, 1);
  e.onSessionReset();
  const s = e.getStatus();
  assert.equal(s.compression_count, 0);
  assert.equal(s.last_prompt_tokens, 0);
  assert.equal(s.last_completion_tokens, 0);
  assert.equal(s.last_compaction_fits, null);
  assert.equal(s.context_length, 32000);
});

test("state: a JSON object to persist; a new engine restores it", async () => {
  const e = c.engine({ config: small });
  e.updateFromResponse({ prompt_tokens: 12345, completion_tokens: 6 });
  const saved = JSON.parse(JSON.stringify(e.state));
  assert.equal(saved.config.model.context_length, 32000);
  // The getter is a copy: changing it does not change the engine.
  e.state.last_prompt_tokens = 1;
  assert.equal(e.lastPromptTokens, 12345);
  const d = await Compactor.create();
  const restored = d.engine({ state: saved });
  assert.deepEqual(restored.getStatus(), e.getStatus());
  assert.equal(restored.contextLength, 32000);
  assert.throws(() => d.engine({ state: { nonsense: true } }), (err) => err.code === "invalid_state" && err.path.startsWith("/state"));
  assert.throws(() => d.engine({ state: saved, config: small }), (err) => err.code === "invalid_request" && err.path === "/config");
});

test("the engine's config merges over the compactor's (by config.merge), validated at creation", async () => {
  const d = await Compactor.create({ config: { model: { name: "gpt-4o", context_length: 8000 } } });
  const e = d.engine({ config: { model: { context_length: 16000 } } });
  assert.equal(e.model, "gpt-4o");
  assert.equal(e.contextLength, 16000);
  assert.equal(d.engine().contextLength, 8000);
  assert.throws(() => d.engine({ config: { compression: { threshold: "high" } } }), (err) => err.code === "invalid_config" && err.path === "/config/compression/threshold");
});

test("ContextEngine.create makes its own compactor; the constructor is not public", async () => {
  const e = await ContextEngine.create({ config: small, summarize: async () => "x" });
  assert.equal(e.contextLength, 32000);
  assert.ok(e.compactor instanceof Compactor);
  await assert.rejects(ContextEngine.create({ modle: "x" }), (err) => err.code === "invalid_request" && err.path === "/modle");
  assert.throws(() => new ContextEngine(c, {}), TypeError);
});

test("every engine method is a session.run sequence (the rules live in the core)", async () => {
  const d = await Compactor.create();
  const ops = recordOps(d);
  // A summarizer with room for the whole middle: one summary request (no chunks).
  const e = d.engine({ config: { ...small, compression: { summary_context_length: 1000000 } }, summarize: async () => "S" });
  e.updateFromResponse({ prompt_tokens: 30000 });
  e.shouldCompress();
  await e.compress(session({ turns: 40 }));
  e.updateModel("gpt-4o", 64000);
  e.getStatus();
  e.onSessionReset();
  // compress: one step asks for the summary, the next sends it and ends.
  assert.deepEqual(ops, ["engine.start", "session.run usage", "session.run should_compress", "session.run compress",
    "session.run compress", "session.run update_model", "session.run reset"]);
});

test("compress passes timeoutMs and signal on; a timeout is recorded as last_fallback_code", async () => {
  const e = c.engine({ config: small, summarize: () => new Promise(() => {}), timeoutMs: 20 });
  await e.compress(session({ turns: 40 }));
  assert.equal(e.lastFallbackUsed, true);
  assert.equal(e.lastFallbackCode, "timeout");
  const ac = new AbortController();
  const p = e.compress(session({ turns: 40 }), { signal: ac.signal, timeoutMs: 60000 });
  ac.abort(new Error("stop"));
  await assert.rejects(p, /stop/);
  assert.equal(e.compressionCount, 1, "an aborted compress records nothing");
});
