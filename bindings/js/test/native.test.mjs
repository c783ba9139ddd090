// Provider-native compaction through the JS binding (issue 16): the typed wrappers
// (nativePolicy, nativeObserve, nativeTrim) and the ContextEngine's request cycle
// (prepareRequest, observeResponse, observeError, observeEvent) driven by the real
// `openai` SDK against a loopback stand-in for the OpenAI Responses API.
//
// The route: the engine is told the requests go to https://api.openai.com/v1
// (updateModel's baseUrl, as a host on the real API would), and the SDK's baseURL
// points at the loopback server, which stands in for that API. prepareRequest has no
// route override: the route is the engine's.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { CompactError, Compactor, _instanceOf } from "../index.js";
import { RecallStore } from "../recall.js";

const c = await Compactor.create();

const OPENAI = "https://api.openai.com/v1";
/** gpt-5.6 on a 100K window, opted in: threshold_tokens 75,000 (the small-context floor), N = 75,000 - 8,192. */
const NATIVE = {
  model: { name: "gpt-5.6", provider: "openai", context_length: 100000 },
  compression: { codex_responses_native: true },
};
const N = 66808;

const REJECTION = {
  error: {
    message: "Unsupported parameter: 'context_management'",
    type: "invalid_request_error",
    param: "context_management",
    code: "unsupported_parameter",
  },
};

/**
 * A loopback API (the Responses API at /v1/responses, Anthropic Messages at
 * /v1/messages): each request recorded (path, headers, parsed body) and answered by
 * the next function of `plan` (body -> {status?, json}).
 */
async function startLoopback(t) {
  const requests = [];
  const plan = [];
  const server = http.createServer((req, res) => {
    let data = "";
    req.setEncoding("utf8");
    req.on("data", (d) => { data += d; });
    req.on("end", () => {
      const body = JSON.parse(data);
      requests.push({ method: req.method, path: req.url, headers: req.headers, body });
      const next = plan.shift();
      const { status = 200, json } = next ? next(body)
        : { status: 500, json: { error: { message: "no answer planned", type: "server_error", param: null, code: null } } };
      res.writeHead(status, { "content-type": "application/json", "x-request-id": `req_${requests.length}` });
      res.end(JSON.stringify(json));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  return { requests, plan, url: `http://127.0.0.1:${server.address().port}` };
}

/** The loopback with the `openai` SDK pointed at it. */
async function startResponses(t) {
  const loop = await startLoopback(t);
  return { ...loop, client: new OpenAI({ apiKey: "test", baseURL: `${loop.url}/v1`, maxRetries: 0 }) };
}

let responses = 0;
/** A Responses API response object with these output items and usage. */
function responseOf(body, output, inputTokens) {
  responses++;
  return {
    json: {
      id: `resp_${responses}`, object: "response", created_at: 1764590000, model: body.model, status: "completed",
      output, parallel_tool_calls: true, tool_choice: "auto", tools: [],
      usage: {
        input_tokens: inputTokens, input_tokens_details: { cached_tokens: 0 },
        output_tokens: 20, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: inputTokens + 20,
      },
    },
  };
}

const said = (id, text) => ({ type: "message", id, role: "assistant", status: "completed", content: [{ type: "output_text", text, annotations: [] }] });
const COMPACTION = { type: "compaction", id: "cmp_1", encrypted_content: "gAAAA-opaque-summary-of-turns-1-and-2" };

/**
 * One agent turn as a host writes it: the user message appended, the body prepared
 * by the engine, sent with the SDK; a rejection the engine says to retry is sent
 * again, prepared anew. The output items are appended to the history.
 */
async function turn(engine, client, history, text, log = {}) {
  history.push({ role: "user", content: text });
  for (let attempt = 0; ; attempt++) {
    const prepared = engine.prepareRequest({ model: engine.model, input: history, store: false });
    (log.prepared ??= []).push(prepared);
    try {
      const r = await client.responses.create(prepared.body);
      engine.updateFromResponse(r.usage);
      (log.observed ??= []).push(engine.observeResponse(r));
      history.push(...r.output);
      return r;
    } catch (err) {
      if (attempt > 0 || !(err instanceof OpenAI.APIError)) throw err;
      const seen = engine.observeError(err);
      (log.errors ??= []).push(seen);
      if (!seen.retry) throw err;
    }
  }
}

/** An engine on gpt-5.6 that knows its requests go to api.openai.com. */
function openaiEngine(config = NATIVE) {
  const e = c.engine({ config });
  e.updateModel(config.model.name, config.model.context_length, { provider: "openai", baseUrl: OPENAI, apiMode: "codex_responses" });
  return e;
}

const big = (k) => `Step ${k}: ` + `the build log of module ${k} reads ok; `.repeat(600);

test("N is min(codex_responses_compact_threshold, threshold_tokens - 8192) for the config", () => {
  const t = c.resolveThreshold(NATIVE);
  assert.equal(t.threshold_tokens, 75000);
  assert.equal(Math.min(200000, t.threshold_tokens - 8192), N);
  const d = c.nativePolicy({ config: NATIVE, route: { base_url: OPENAI } });
  assert.equal(d.compact_threshold, N);
  // The configured threshold wins when it is the lower one.
  const low = c.nativePolicy({ config: { ...NATIVE, compression: { ...NATIVE.compression, codex_responses_compact_threshold: 40000 } }, route: { base_url: OPENAI } });
  assert.deepEqual(low.body, { context_management: [{ type: "compaction", compact_threshold: 40000 }] });
  // A bigger window: the configured default 200,000 is below threshold_tokens - 8192.
  const wide = c.nativePolicy({ config: { ...NATIVE, model: { ...NATIVE.model, context_length: 1050000 } }, route: { base_url: OPENAI } });
  assert.equal(wide.compact_threshold, 200000);
});

test("multi-turn on the Responses API: the field, the compaction item carried, a rejection, then the local compressor", async (t) => {
  const { requests, plan, client } = await startResponses(t);
  const engine = openaiEngine();
  assert.equal("native" in engine.state, false, "no native session before the first request");
  const history = [{ role: "developer", content: "You are terse." }];
  const log = {};

  // Turn 1: the request carries the field with N for this config.
  plan.push((body) => responseOf(body, [said("msg_1", "Hello.")], 1200));
  await turn(engine, client, history, "Hi, set up the build.", log);
  assert.equal(requests.length, 1);
  assert.equal(requests[0].path, "/v1/responses");
  assert.deepEqual(requests[0].body.context_management, [{ type: "compaction", compact_threshold: N }]);
  assert.equal(log.prepared[0].decision.reason, "sent");
  assert.equal(log.prepared[0].decision.route, "openai");
  assert.deepEqual(requests[0].body.input, history.slice(0, 2));
  assert.equal(engine.state.native.route, "openai");

  // Turn 2: the server compacts and returns a compaction item before its reply.
  plan.push((body) => responseOf(body, [COMPACTION, said("msg_2", "Building.")], 70000));
  await turn(engine, client, history, "Run it.", log);
  assert.deepEqual(log.observed[1].seen, [{ kind: "openai_compaction", key: "cmp_1", issuer: "openai" }]);
  assert.deepEqual(engine.state.native.issuers, { cmp_1: "openai" });
  // The server compacts first: N is below the local threshold, which stays quiet.
  assert.equal(engine.lastPromptTokens, 70000);
  assert.equal(engine.shouldCompress(), false);

  // Turn 3: the compaction item goes back in the input, standing in for what it
  // pruned: what preceded it is not sent (the leading developer message is).
  plan.push((body) => responseOf(body, [said("msg_3", "Done.")], 9000));
  await turn(engine, client, history, "Status?", log);
  const sent3 = requests[2].body;
  assert.deepEqual(sent3.context_management, [{ type: "compaction", compact_threshold: N }]);
  assert.deepEqual(sent3.input.map((m) => m.type === "compaction" ? m.id : m.id ?? m.content),
    ["You are terse.", "cmp_1", "msg_2", "Status?"]);
  assert.deepEqual(sent3.input[1], COMPACTION, "the opaque item is sent back byte for byte");
  assert.equal(history.length, 8, "the host's history keeps every message; only the request is trimmed");

  // Turn 4: a structured 400 rejection of the field: disabled for the session, the
  // request sent again without it.
  plan.push((body) => (body.context_management ? { status: 400, json: REJECTION } : responseOf(body, [said("msg_4", "Ok.")], 12000)));
  plan.push((body) => (body.context_management ? { status: 400, json: REJECTION } : responseOf(body, [said("msg_4", "Ok.")], 12000)));
  await turn(engine, client, history, "Next module.", log);
  assert.equal(requests.length, 5, "the rejected request and its retry");
  assert.ok(requests[3].body.context_management, "the rejected request had the field");
  assert.equal("context_management" in requests[4].body, false, "the retry has no field");
  assert.deepEqual(requests[4].body.input, requests[3].body.input, "the retry sends the same input");
  assert.equal(log.errors.length, 1);
  assert.equal(log.errors[0].disabled, "openai_compaction");
  assert.equal(log.errors[0].retry, true);
  assert.equal(log.errors[0].reason, "rejected");
  assert.deepEqual(engine.state.native.disabled, ["openai_compaction"]);
  assert.equal(log.prepared.at(-1).decision.reason, "rejected");
  assert.deepEqual(log.prepared.at(-1).decision.remove, ["context_management"]);
  // A restored engine keeps the session: still no field.
  const restored = c.engine({ state: engine.state });
  const again = restored.prepareRequest({ model: "gpt-5.6", input: history, context_management: [{ type: "compaction", compact_threshold: 1 }] });
  assert.equal("context_management" in again.body, false, "remove deletes the caller's own field too");
  assert.equal(again.decision.reason, "rejected");

  // The local compressor takes over: the prompt grows past its threshold.
  for (let k = 5; k <= 10; k++) {
    plan.push((body) => responseOf(body, [said(`msg_${k}`, big(k))], k === 10 ? 80000 : 30000 + k * 1000));
    await turn(engine, client, history, `Module ${k}?`, log);
    assert.equal("context_management" in requests.at(-1).body, false, `turn ${k} sends no field`);
  }
  assert.equal(engine.lastPromptTokens, 80000);
  assert.equal(engine.shouldCompress(), true);
  const before = history.length;
  const res = await engine.compress(history, { format: "responses" });
  assert.equal(res.report.compacted, true, JSON.stringify(res.report));
  assert.equal(res.report.reason, "compacted");
  assert.ok(res.messages.length < before);
  const at = history.indexOf(history.find((m) => m.type === "compaction"));
  assert.ok(res.report.summarized.from > at, "the summary starts after the compaction item (a head boundary)");
  assert.ok(res.messages.includes(history[at]), "the compaction item is kept, as the caller's object");
  assert.equal(res.archived.some((a) => a.message?.type === "compaction"), false);
  assert.equal(engine.compressionCount, 1);

  // The next request: the compacted history, trimmed before the compaction item, no field.
  const compacted = res.messages;
  plan.push((body) => responseOf(body, [said("msg_11", "Fine.")], 20000));
  await turn(engine, client, compacted, "And now?", log);
  const last = requests.at(-1).body;
  assert.equal("context_management" in last, false);
  assert.equal(last.input[0].role, "developer");
  assert.match(last.input[0].content, /^You are terse\.\n\n\[Note: earlier turns of this conversation were compacted/, "the developer message, with the compaction note");
  assert.deepEqual(last.input[1], COMPACTION);
  assert.ok(last.input.length < requests.at(-2).body.input.length, "the compacted input is shorter");
});

test("a switch to a non-eligible model stops the field; another route drops the recorded compaction items", async (t) => {
  const { requests, plan, client } = await startResponses(t);
  const engine = openaiEngine();
  const history = [{ role: "developer", content: "You are terse." }];
  plan.push((body) => responseOf(body, [COMPACTION, said("msg_1", "Hello.")], 70000));
  await turn(engine, client, history, "Hi.", {});
  assert.ok(requests[0].body.context_management);
  assert.deepEqual(engine.state.native.issuers, { cmp_1: "openai" });

  // gpt-4o on the same API: no field (the caller's own is removed too).
  engine.updateModel("gpt-4o", 128000, { provider: "openai", baseUrl: OPENAI, apiMode: "codex_responses" });
  history.push({ role: "user", content: "Again." });
  const p = engine.prepareRequest({ model: "gpt-4o", input: history, context_management: [{ type: "compaction", compact_threshold: 5 }] });
  assert.equal(p.decision.reason, "model_not_eligible");
  assert.equal("context_management" in p.body, false);
  plan.push((body) => responseOf(body, [said("msg_2", "Yes.")], 3000));
  const r = await client.responses.create(p.body);
  engine.observeResponse(r);
  history.push(...r.output);
  assert.equal("context_management" in requests[1].body, false);
  assert.deepEqual(p.decision.drop_issuers, [], "the same route: its items are still its issuer's");
  assert.deepEqual(requests[1].body.input[1], COMPACTION, "and still sent, with what preceded it trimmed");

  // Another route (OpenRouter): the items issued by api.openai.com are not sent, and
  // with them gone nothing is trimmed: the host's full history goes.
  engine.updateModel("openai/gpt-4o", 128000, { provider: "openrouter", baseUrl: "https://openrouter.ai/api/v1" });
  history.push({ role: "user", content: "Once more." });
  const q = engine.prepareRequest({ model: "openai/gpt-4o", input: history });
  assert.deepEqual(q.decision.drop_issuers, ["openai"]);
  assert.equal(q.decision.route, "other:openrouter.ai");
  plan.push((body) => responseOf(body, [said("msg_3", "Sure.")], 3000));
  await client.responses.create(q.body);
  const sent = requests[2].body;
  assert.equal("context_management" in sent, false);
  assert.equal(sent.input.some((m) => m.type === "compaction"), false, "no compaction item from another issuer");
  assert.deepEqual(sent.input, history.filter((m) => m.type !== "compaction"));
  assert.equal(engine.state.native.route, "other:openrouter.ai");
  // /new: the session's bookkeeping goes with the conversation.
  engine.onSessionReset();
  assert.equal("native" in engine.state, false);
});

test("an unrelated error disables nothing and is not retried", async (t) => {
  const { requests, plan, client } = await startResponses(t);
  const engine = openaiEngine();
  plan.push(() => ({ status: 500, json: { error: { message: "The server had an error", type: "server_error", param: null, code: null } } }));
  await assert.rejects(turn(engine, client, [], "Hi.", {}), (err) => err instanceof OpenAI.APIError && err.status === 500);
  assert.equal(requests.length, 1);
  const seen = engine.observeError(500, { error: { message: "The server had an error", type: "server_error" } });
  assert.deepEqual([seen.retry, seen.disabled, seen.reason], [false, null, "unrelated"]);
  assert.deepEqual(engine.state.native.disabled, []);
  assert.ok(engine.prepareRequest({ model: "gpt-5.6", input: [] }).body.context_management);
  // (status, body) as the wire has them: the same rejection as the SDK error gives.
  const text = engine.observeError(400, JSON.stringify(REJECTION));
  assert.deepEqual([text.retry, text.disabled], [true, "openai_compaction"]);
});

/** An Anthropic Message with these content blocks and usage. */
function messageOf(body, content, inputTokens) {
  responses++;
  return {
    json: {
      id: `msg_${responses}`, type: "message", role: "assistant", model: body.model, content,
      stop_reason: "end_turn", stop_sequence: null,
      usage: { input_tokens: inputTokens, output_tokens: 20, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    },
  };
}

/** One agent turn on Anthropic's beta Messages API: the betas the decision names go in the header. */
async function anthropicTurn(engine, client, history, text, log) {
  history.push({ role: "user", content: text });
  for (let attempt = 0; ; attempt++) {
    const prepared = engine.prepareRequest({ model: engine.model, max_tokens: 1024, messages: history });
    log.prepared.push(prepared);
    try {
      // (An empty betas list would still send an empty anthropic-beta header.)
      const betas = prepared.betas.length > 0 ? { betas: prepared.betas } : {};
      const r = await client.beta.messages.create({ ...prepared.body, ...betas });
      engine.updateFromResponse(r.usage);
      log.observed.push(engine.observeResponse(r));
      history.push({ role: "assistant", content: r.content });
      return r;
    } catch (err) {
      if (attempt > 0 || !(err instanceof Anthropic.APIError)) throw err;
      const seen = engine.observeError(err);
      log.errors.push(seen);
      if (!seen.retry) throw err;
    }
  }
}

test("multi-turn on Anthropic Messages: the compact_20260112 edit and its beta, the block carried, a rejection, then the local compressor", async (t) => {
  const loop = await startLoopback(t);
  const client = new Anthropic({ apiKey: "test", baseURL: loop.url, maxRetries: 0 });
  const { requests, plan } = loop;
  // An 80K window: threshold_tokens 60,000 (the small-context floor), the trigger
  // 60,000 - 8,192 = 51,808, above the API's minimum of 50,000.
  const config = {
    model: { name: "claude-sonnet-4-6", provider: "anthropic", context_length: 80000 },
    compression: { anthropic_native: "threshold" },
  };
  const engine = c.engine({ config });
  engine.updateModel("claude-sonnet-4-6", 80000, { provider: "anthropic", baseUrl: "https://api.anthropic.com", apiMode: "anthropic_messages" });
  assert.equal(engine.thresholdTokens, 60000);
  const history = [];
  const log = { prepared: [], observed: [], errors: [] };
  const EDIT = { edits: [{ type: "compact_20260112", trigger: { type: "input_tokens", value: 51808 } }] };

  plan.push((body) => messageOf(body, [{ type: "text", text: "Hello." }], 1200));
  await anthropicTurn(engine, client, history, "Hi, set up the build.", log);
  assert.equal(requests[0].path, "/v1/messages");
  assert.deepEqual(requests[0].body.context_management, EDIT);
  assert.equal(requests[0].headers["anthropic-beta"], "compact-2026-01-12");
  assert.equal("betas" in requests[0].body, false, "the SDK sends betas as the header");

  // The server compacts: the summary block comes first in the assistant content.
  const block = { type: "compaction", content: "Summary: the user set up the build.", encrypted_content: "opaque-1" };
  plan.push((body) => messageOf(body, [block, { type: "text", text: "Building." }], 55000));
  await anthropicTurn(engine, client, history, "Run it.", log);
  assert.equal(log.observed[1].seen.length, 1);
  assert.deepEqual([log.observed[1].seen[0].kind, log.observed[1].seen[0].issuer], ["anthropic_compaction", "anthropic"]);
  assert.equal(engine.shouldCompress(), false, "the server compacts before the local threshold");

  // The block is sent back first; the messages before the one holding it are not.
  plan.push((body) => messageOf(body, [{ type: "text", text: "Done." }], 9000));
  await anthropicTurn(engine, client, history, "Status?", log);
  assert.deepEqual(requests[2].body.messages, history.slice(3, 5));
  assert.deepEqual(requests[2].body.messages[0].content[0], block);
  assert.equal(requests[2].headers["anthropic-beta"], "compact-2026-01-12");

  // A structured 400 naming the edit: disabled, retried without the edit and the beta;
  // the block is not sent (its readable summary stays, as text), so nothing is cut.
  const rejection = { type: "error", error: { type: "invalid_request_error", message: "context_management.edits.0.type: 'compact_20260112' is not enabled for this organization" } };
  const answer = (body) => (body.context_management ? { status: 400, json: rejection } : messageOf(body, [{ type: "text", text: "Ok." }], 12000));
  plan.push(answer, answer);
  await anthropicTurn(engine, client, history, "Next module.", log);
  assert.equal(requests.length, 5);
  assert.ok(requests[3].body.context_management);
  assert.equal("context_management" in requests[4].body, false);
  assert.equal(requests[4].headers["anthropic-beta"], undefined, "no beta header on the retry");
  assert.deepEqual([log.errors[0].disabled, log.errors[0].retry, log.errors[0].reason], ["anthropic_compaction", true, "rejected"]);
  const retried = requests[4].body.messages;
  assert.equal(retried.length, history.length - 1, "the whole history but the answer to come");
  assert.equal(retried.some((m) => Array.isArray(m.content) && m.content.some((b) => b.type === "compaction")), false);
  assert.equal(retried[3].content[0].type, "text");
  assert.match(retried[3].content[0].text, /Summary: the user set up the build\.$/);

  // The local compressor takes over past its threshold.
  for (let k = 5; k <= 10; k++) {
    plan.push((body) => messageOf(body, [{ type: "text", text: big(k) }], k === 10 ? 62000 : 20000 + k * 1000));
    await anthropicTurn(engine, client, history, `Module ${k}?`, log);
    assert.equal("context_management" in requests.at(-1).body, false);
  }
  assert.equal(engine.shouldCompress(), true);
  const res = await engine.compress(history, { format: "anthropic" });
  assert.equal(res.report.compacted, true, JSON.stringify(res.report));
  assert.ok(res.report.summarized.from > 3, "the summary starts after the message holding the block (a head boundary)");
  assert.ok(res.messages.includes(history[3]), "the message holding the block is kept, as the caller's object");
});

test("Anthropic threshold compaction: the edit, its beta, and messages trimmed at the newest block", () => {
  const config = {
    model: { name: "claude-sonnet-4-6", provider: "anthropic", context_length: 200000 },
    compression: { anthropic_native: "threshold", anthropic_compact_instructions: "Keep file paths." },
  };
  const engine = c.engine({ config });
  const threshold = engine.thresholdTokens;
  const block = { type: "compaction", content: "Summary of the first turns." };
  const msgs = [
    { role: "user", content: "first" },
    { role: "assistant", content: [{ type: "text", text: "one" }] },
    { role: "user", content: "second" },
    { role: "assistant", content: [block, { type: "text", text: "two" }] },
    { role: "user", content: "third" },
  ];
  const seen = engine.observeResponse({ type: "message", role: "assistant", content: msgs[3].content, stop_reason: "end_turn" });
  assert.equal(seen.seen.length, 1);
  assert.equal(seen.seen[0].kind, "anthropic_compaction");
  assert.equal(seen.seen[0].issuer, "anthropic");
  const p = engine.prepareRequest({ model: "claude-sonnet-4-6", max_tokens: 1024, messages: msgs });
  assert.equal(p.decision.mechanism, "anthropic_threshold");
  assert.deepEqual(p.betas, ["compact-2026-01-12"]);
  assert.deepEqual(p.body.context_management, {
    edits: [{ type: "compact_20260112", trigger: { type: "input_tokens", value: threshold - 8192 }, instructions: "Keep file paths." }],
  });
  assert.deepEqual(p.body.messages, msgs.slice(3), "the messages before the one holding the newest block are not sent");
  assert.equal(p.body.messages[0], msgs[3], "kept messages are the caller's objects");
  assert.equal(p.body.max_tokens, 1024);
});

test("observeEvent: the app-server compaction events recorded in the session", () => {
  const engine = c.engine({ config: { model: { name: "gpt-5.5", provider: "openai-codex", context_length: 272000 }, compression: { codex_app_server_auto: "hermes" } } });
  engine.updateModel("gpt-5.5", 272000, { provider: "openai-codex", apiMode: "codex_app_server" });
  const d0 = engine.prepareRequest({}, { tokens: 10 });
  assert.equal(d0.decision.mechanism, "app_server");
  assert.equal(d0.decision.local.rewrite, false);
  assert.deepEqual(d0.decision.app_server, { mode: "hermes", initiator: "host", compact_now: false });
  assert.equal(engine.prepareRequest({}, { tokens: engine.thresholdTokens }).decision.app_server.compact_now, true);
  engine.observeEvent({ method: "item/started", params: { item: { type: "contextCompaction", id: "c1" } } });
  assert.equal(engine.state.native.app_server.pending, true);
  assert.equal(engine.prepareRequest({}, { tokens: engine.thresholdTokens }).decision.app_server.compact_now, false, "not while one is pending");
  const done = engine.observeEvent({ method: "item/completed", params: { item: { type: "contextCompaction", id: "c1" } } }, 42);
  assert.equal(done.seen[0].kind, "app_server_compaction");
  assert.deepEqual(engine.state.native.app_server, { pending: false, compactions: 1, boundaries: [42] });
  assert.equal(engine.observeEvent({ method: "turn/started", params: {} }).reason, "unrelated");
});

test("the Compactor wrappers: config merged, wire names, option errors, references", () => {
  const compactor = c;
  // nativePolicy merges the call's config over the compactor's (none here) and names each gate.
  const gate = (over, route = { base_url: OPENAI }) => compactor.nativePolicy({ config: { ...NATIVE, ...over }, route }).reason;
  assert.equal(gate({ compression: {} }), "not_enabled");
  assert.equal(gate({ model: { ...NATIVE.model, name: "gpt-5.5" } }), "model_not_eligible");
  assert.equal(gate({ model: { ...NATIVE.model, name: "openai/GPT-5.6-mini" } }), "sent");
  assert.equal(gate({}, { base_url: "https://openrouter.ai/api/v1" }), "route_not_eligible");
  assert.equal(gate({}, { base_url: "https://chatgpt.com/backend-api/codex" }), "sent");
  assert.equal(gate({}, { base_url: OPENAI, api_mode: "chat_completions" }), "not_responses_api");
  assert.equal(compactor.nativePolicy({ config: NATIVE, route: { base_url: OPENAI }, session: { v: 1, route: "openai", disabled: ["openai_compaction"], issuers: {}, app_server: { pending: false, compactions: 0, boundaries: [] }, notice_shown: "" } }).reason, "rejected");
  assert.throws(() => compactor.nativePolicy({ route: { base_url: OPENAI }, token: 5 }),
    (err) => err instanceof CompactError && err.code === "invalid_request" && err.path === "/token" && /did you mean tokens\?/.test(err.message));
  assert.throws(() => compactor.nativePolicy({ config: { compression: { anthropic_native: "always" } } }),
    (err) => err instanceof CompactError && err.code === "invalid_config" && err.path === "/config/compression/anthropic_native");
  // nativeObserve takes the error under its wire name.
  const obs = compactor.nativeObserve({ config: NATIVE, route: { base_url: OPENAI }, error: { status: 400, body: REJECTION } });
  assert.deepEqual([obs.disabled, obs.retry, obs.reason], ["openai_compaction", true, "rejected"]);
  assert.deepEqual(obs.session.disabled, ["openai_compaction"]);
  // nativeTrim: kept items are the caller's objects; what it drops is listed with its index.
  const items = [{ role: "developer", content: "d" }, { role: "user", content: "u1" }, COMPACTION, { role: "user", content: "u2" }];
  const session = compactor.nativeObserve({ config: NATIVE, route: { base_url: OPENAI }, response: { output: [COMPACTION] } }).session;
  const trimmed = compactor.nativeTrim(items, { format: "responses", session, route: { base_url: OPENAI } });
  assert.equal(trimmed.changed, true);
  assert.deepEqual(trimmed.messages, [items[0], items[2], items[3]]);
  assert.ok(trimmed.messages.every((m, i) => m === [items[0], items[2], items[3]][i]));
  assert.deepEqual(trimmed.dropped, [{ index: 1, reason: "before_compaction" }]);
  assert.deepEqual(trimmed.dropped_messages, [items[1]]);
  const other = compactor.nativeTrim(items, { format: "responses", session, route: { base_url: "https://openrouter.ai/api/v1" } });
  assert.deepEqual(other.dropped, [{ index: 2, reason: "other_issuer" }]);
  const kept = compactor.nativeTrim(items, { format: "responses", session, drop_before_newest: false, route: { base_url: OPENAI } });
  assert.equal(kept.changed, false);
  assert.throws(() => compactor.nativeTrim(items, { dropBeforeNewest: false }),
    (err) => err.code === "invalid_request" && err.path === "/dropBeforeNewest" && /drop_before_newest/.test(err.message));
});

test("the engine's native methods check their arguments", () => {
  const engine = openaiEngine();
  assert.throws(() => engine.prepareRequest([]), (err) => err instanceof CompactError && err.code === "invalid_request" && err.path === "/body");
  assert.throws(() => engine.prepareRequest({}, { tokenz: 5 }), (err) => err.code === "invalid_request" && err.path === "/tokenz" && /tokens/.test(err.message));
  assert.throws(() => engine.prepareRequest({}, { tokens: -1 }), (err) => err.code === "invalid_request" && err.path === "/tokens");
  assert.throws(() => engine.observeResponse("ok"), (err) => err.code === "invalid_request" && err.path === "/response");
  assert.throws(() => engine.observeError("400"), (err) => err.code === "invalid_request" && err.path === "/error/status");
  assert.throws(() => engine.observeEvent(null), (err) => err.code === "invalid_request" && err.path === "/event");
  assert.throws(() => engine.observeEvent({ method: "thread/compacted" }, 1.5), (err) => err.code === "invalid_request" && err.path === "/messages_count");
  // An item the core refuses is named in the body's terms.
  assert.throws(() => engine.prepareRequest({ input: [{ type: "compaction", id: "c" }, "text"] }),
    (err) => err instanceof CompactError && err.code === "invalid_messages" && err.path === "/body/input/1");
  assert.throws(() => engine.prepareRequest({ input: [{ type: "compaction", id: "c", n: 1n }] }),
    (err) => err instanceof CompactError && err.code === "invalid_messages" && err.path === "/body/input/0/n");
  // Nothing failed recorded a session.
  assert.equal("native" in engine.state, false);
});

test("the rules are the core's: each native method is one session.run step, prepare or an observe event", async () => {
  const d = await Compactor.create();
  const ops = [];
  const inst = _instanceOf(d);
  const call = inst.call.bind(inst);
  const parts = inst.callParts.bind(inst);
  const name = (q) => (q.op === "session.run" ? `session.run ${q.event}` : q.op);
  inst.call = (r) => { ops.push(name(JSON.parse(r))); return call(r); };
  inst.callParts = (p) => { ops.push(name(JSON.parse(p.map((x) => (typeof x === "string" ? x : new TextDecoder().decode(x))).join("")))); return parts(p); };
  const e = d.engine({ config: NATIVE });
  ops.length = 0;
  e.prepareRequest({ model: "gpt-5.6", input: [{ role: "user", content: "a" }] });
  e.observeResponse({ output: [COMPACTION] });
  e.prepareRequest({ model: "gpt-5.6", input: [{ role: "user", content: "a" }, COMPACTION] });
  e.observeError(400, REJECTION);
  e.observeEvent({ method: "turn/completed", params: {} });
  assert.deepEqual(ops, ["session.run prepare", "session.run observe_response", "session.run prepare",
    "session.run observe_error", "session.run observe_event"]);
});

test("prepareRequest merges the compaction edit into the host's own edits and returns the on-demand compaction body", () => {
  const clear = { type: "clear_tool_uses_20250919", trigger: { type: "input_tokens", value: 30000 } };
  const history = [
    { role: "user", content: "one" }, { role: "assistant", content: "two" },
    { role: "user", content: "three" },
  ];
  const threshold = c.engine({ config: { model: { name: "claude-opus-4-7", provider: "anthropic", context_length: 1000000 }, compression: { anthropic_native: "threshold" } } });
  const body = { model: "claude-opus-4-7", max_tokens: 1024, messages: history, context_management: { edits: [clear] } };
  const p = threshold.prepareRequest(body);
  assert.deepEqual(p.body.context_management.edits.map((e) => e.type), ["clear_tool_uses_20250919", "compact_20260112"]);
  assert.equal(p.body.context_management.edits[1].trigger.value, 500000 - 8192);
  assert.deepEqual(p.betas, ["compact-2026-01-12"]);
  assert.equal(p.body.messages, history, "a list without native items is the caller's, untouched");
  assert.deepEqual(body.context_management.edits, [clear], "the input body is not changed");
  assert.equal(p.compactionBody, null);

  const onDemand = c.engine({ config: { model: { name: "claude-opus-4-7", provider: "anthropic", context_length: 200000 }, compression: { anthropic_native: "on_demand" } } });
  const q = onDemand.prepareRequest(body, { tokens: 150000 });
  assert.equal(q.decision.compact_now, true);
  assert.deepEqual(q.compactionBody.compaction, { type: "summarize" });
  assert.equal("context_management" in q.compactionBody, false, "the API does not take compaction with context_management");
  assert.equal(q.compactionBody.messages, history);
  assert.deepEqual(q.body.context_management.edits, [clear], "on-demand leaves the host's edits on ordinary requests");
});

test("nativePrepare is native.prepare's result as the core writes it", () => {
  const body = { model: "gpt-5.6", input: [{ role: "user", content: "hi" }, COMPACTION, { role: "user", content: "next" }] };
  const p = c.nativePrepare(body, { config: NATIVE, route: { base_url: OPENAI } });
  assert.equal(p.decision.reason, "sent");
  assert.deepEqual(p.body.context_management, [{ type: "compaction", compact_threshold: N }]);
  assert.deepEqual(p.body.input, [COMPACTION, { role: "user", content: "next" }]);
  assert.deepEqual(p.trimmed.dropped, [{ index: 0, reason: "before_compaction" }]);
  assert.equal(p.compaction_body, null);
  assert.throws(() => c.nativePrepare([]), (err) => err instanceof CompactError && err.path === "/body");
});

test("a lossless engine archives what the provider's compaction stands for, once", async () => {
  const store = await RecallStore.open();
  const e = c.engine({ config: { ...NATIVE, context: { engine: "lossless" } }, store, sessionId: "s1" });
  e.updateModel("gpt-5.6", NATIVE.model.context_length, { baseUrl: OPENAI, provider: "openai" });
  const history = [
    { role: "user", content: "the flaky test is tests/test_io.py" },
    { role: "assistant", content: "fixed by a retry" },
    COMPACTION, { role: "user", content: "next" },
  ];
  const p = e.prepareRequest({ model: "gpt-5.6", input: history });
  assert.deepEqual(p.body.input, [COMPACTION, history[3]]);
  assert.equal(p.trimmed.archivedAs, "r1");
  assert.equal(p.trimmed.archive.length, 2);
  assert.match(e.handleToolCall("context_search", { query: "test_io.py" }), /r1/);
  const again = e.prepareRequest({ model: "gpt-5.6", input: history });
  assert.equal(again.trimmed.dropped.length, 2, "dropped again from what is sent");
  assert.equal(again.trimmed.archivedAs, null, "but archived once");
  assert.match(e.handleToolCall("context_expand", { id: "r1" }), /tests\/test_io\.py/);
  store.close();
});

test("applyCompaction swaps the on-demand block in, archives what it summarized and resets the prompt's size", async () => {
  const store = await RecallStore.open();
  const e = c.engine({
    config: { model: { name: "claude-opus-4-7", provider: "anthropic", context_length: 200000 }, compression: { anthropic_native: "on_demand" }, context: { engine: "lossless" } },
    store, sessionId: "s1",
  });
  const history = [
    { role: "user", content: "the schema lives in db/schema.sql" }, { role: "assistant", content: "noted" },
    { role: "user", content: "add a column" }, { role: "assistant", content: "done" },
  ];
  e.updateFromResponse({ input_tokens: 150000, output_tokens: 10 });
  const due = e.prepareRequest({ model: "claude-opus-4-7", max_tokens: 1024, messages: history });
  assert.equal(due.decision.compact_now, true);
  const block = { type: "compaction", content: "Summary: schema in db/schema.sql; a column was added.", signature: "sig" };
  const res = e.applyCompaction(history, { type: "message", role: "assistant", stop_reason: "compaction", content: [block] });
  assert.deepEqual(res.messages, [{ role: "assistant", content: [block] }]);
  assert.deepEqual(res.dropped_messages, history);
  assert.equal(res.archivedAs, "r1");
  assert.match(e.handleToolCall("context_search", { query: "schema.sql" }), /r1/);
  assert.ok(e.getStatus().last_prompt_tokens < 1000, `the swapped conversation's estimate, got ${e.getStatus().last_prompt_tokens}`);
  const next = e.prepareRequest({ model: "claude-opus-4-7", max_tokens: 1024, messages: [...res.messages, { role: "user", content: "go on" }] });
  assert.equal(next.decision.compact_now, false, "not due again");
  assert.deepEqual(next.body.messages[0].content[0], block, "the block goes first, as returned");
  assert.throws(() => e.applyCompaction(history, { content: [{ type: "text", text: "no" }] }), (err) => err.path === "/response/content");
  store.close();
});
