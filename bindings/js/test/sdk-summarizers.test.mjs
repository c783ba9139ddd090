// The ready summarizers with the REAL SDK clients (`openai`, `@anthropic-ai/sdk`, dev
// dependencies) pointed at the loopback model of the agent-loop example (issue 18):
// what the SDK sent (model, system/instructions, the size parameter, the serialized
// middle of the SummaryRequest), and what a compaction reports when the API fails
// (500, 400, 429), times out or is aborted, with the SDKs' retries off.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { CompactError, Compactor, anthropicSummarizer, openaiSummarizer } from "../index.js";
import { SUMMARY_MODEL, startLoopback, summaryText } from "../../../examples/agent-loop/node/loopback.mjs";
import { ROOT, sleep } from "./helpers.mjs";

const TRACE = path.join(ROOT, "examples", "astropy-12907.json");
const messages = JSON.parse(readFileSync(TRACE, "utf8")).messages;
const config = { model: { context_length: 16000 } };
const compactor = await Compactor.create({ config });

// The SDK versions these tests run are the dev dependencies' pins, and the README
// names them, with the Node version each one's engines field asks for.
test("the SDKs under test are the pinned ones the README names", () => {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8"));
  const readme = readFileSync(path.join(ROOT, "bindings", "js", "README.md"), "utf8").replace(/\s+/g, " ");
  for (const name of ["openai", "@anthropic-ai/sdk"]) {
    const installed = JSON.parse(readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8"));
    assert.equal(installed.version, pkg.devDependencies[name], `${name}: npm ci installs the pin`);
    assert.ok(readme.includes(`\`${name}\` ${installed.version}`), `bindings/js/README.md names ${name} ${installed.version}`);
    const engines = installed.engines?.node;
    if (engines) assert.ok(readme.includes(`\`${name}\` ${installed.version.split(".")[0]}.x declares Node ${engines.match(/\d+/)[0]} or later`), `the README says ${name} declares node ${engines}`);
  }
});

async function loopback(t) {
  const loop = await startLoopback({ messages, traceName: "astropy-12907" });
  t.after(() => loop.close());
  return loop;
}

const openaiClient = (loop, extra = {}) => new OpenAI({ apiKey: "test", baseURL: `${loop.url}/v1`, maxRetries: 0, ...extra });
const anthropicClient = (loop, extra = {}) => new Anthropic({ apiKey: "test", baseURL: loop.url, maxRetries: 0, ...extra });

/** The summarizer, and the SummaryRequests it was given. */
function spy(summarize) {
  const seen = [];
  return { seen, summarize: (req, ctx) => { seen.push(req); return summarize(req, ctx); } };
}

/** Waits (bounded by a count of turns, not a time) until the loopback saw its last request aborted. */
async function abortedAtServer(loop) {
  for (let k = 0; k < 500 && !loop.requests.at(-1)?.aborted; k++) await sleep(10);
  return loop.requests.at(-1)?.aborted === true;
}

/** The kinds: how each summarizer is made, the path it posts to, and the body it must send for a request. */
const KINDS = {
  "openai chat": {
    path: "/v1/chat/completions",
    make: (loop, model = SUMMARY_MODEL, extra) => openaiSummarizer(openaiClient(loop, extra), { model, api: "chat" }),
    body: (req, model = SUMMARY_MODEL) => ({
      model, messages: [{ role: "system", content: req.messages[0].content }, { role: "user", content: req.messages[1].content }],
      max_tokens: req.max_tokens,
    }),
  },
  "openai responses": {
    path: "/v1/responses",
    make: (loop, model = SUMMARY_MODEL, extra) => openaiSummarizer(openaiClient(loop, extra), { model, api: "responses" }),
    body: (req, model = SUMMARY_MODEL) => ({
      model, instructions: req.messages[0].content, input: req.messages[1].content, max_output_tokens: req.max_tokens, store: false,
    }),
  },
  anthropic: {
    path: "/v1/messages",
    make: (loop, model = SUMMARY_MODEL, extra) => anthropicSummarizer(anthropicClient(loop, extra), { model }),
    body: (req, model = SUMMARY_MODEL) => ({
      model, system: req.messages[0].content, messages: [{ role: "user", content: req.messages[1].content }], max_tokens: req.max_tokens,
    }),
  },
};

for (const [kind, k] of Object.entries(KINDS)) {
  test(`${kind}: the SDK sends the template, the middle and the size; the answer is the summary`, async (t) => {
    const loop = await loopback(t);
    const s = spy(k.make(loop));
    const res = await compactor.compact(messages, { summarize: s.summarize });
    assert.equal(s.seen.length, 1);
    const [req] = s.seen;
    assert.equal(loop.requests.length, 1);
    const got = loop.requests[0];
    assert.equal(got.path, k.path);
    assert.deepEqual(got.body, k.body(req));
    // The template in the system slot, the serialized middle (from its first turn) as the user text.
    assert.match(req.messages[0].content, /^You summarize/);
    assert.ok(req.messages[1].content.includes(`[#${req.middle.from} `), "the middle's first turn is in the user text");
    assert.equal(got.summary, true);
    assert.equal(res.report.summarizer, "host");
    assert.equal(res.report.fallback_used, false);
    assert.equal(res.report.fallback_code, "");
    const n = req.middle.to - req.middle.from;
    const summary = res.messages.find((m) => typeof m.content === "string" && m.content.includes("Replay of astropy-12907."));
    assert.ok(summary, "the loopback's summary is in the result");
    assert.ok(summary.content.includes(summaryText("astropy-12907", n)), `the summary counts the ${n} messages of the middle`);
  });

  for (const [status, extra] of [[500, {}], [400, { message: "bad request: max_tokens too large" }], [429, { retryAfter: 0 }]]) {
    test(`${kind}: a ${status} from the API falls back (fallback_code error), one request (retries off, none of our own)`, async (t) => {
      const loop = await loopback(t);
      loop.setMode({ status, ...extra });
      const res = await compactor.compact(messages, { summarize: k.make(loop) });
      assert.equal(loop.requests.length, 1);
      assert.equal(loop.requests[0].status, status);
      assert.equal(res.report.compacted, true);
      assert.equal(res.report.fallback_used, true);
      assert.equal(res.report.fallback_code, "error");
      assert.match(res.report.fallback_reason, new RegExp(`${status}`));
      if (extra.message) assert.ok(res.report.fallback_reason.includes(extra.message), res.report.fallback_reason);
    });
  }

  test(`${kind}: the client's own retries are used, bounded (maxRetries 2: three requests, then the fallback)`, async (t) => {
    const loop = await loopback(t);
    loop.setMode({ status: 429, retryAfterMs: 1 });
    const res = await compactor.compact(messages, { summarize: k.make(loop, SUMMARY_MODEL, { maxRetries: 2 }) });
    assert.equal(loop.requests.length, 3);
    assert.equal(res.report.fallback_code, "error");
    assert.match(res.report.fallback_reason, /429/);
  });

  test(`${kind}: the compaction's timeout aborts the SDK request (fallback_code timeout)`, async (t) => {
    const loop = await loopback(t);
    loop.setMode({ delayMs: Infinity });
    const res = await compactor.compact(messages, { summarize: k.make(loop), timeoutMs: 200 });
    assert.equal(res.report.fallback_used, true);
    assert.equal(res.report.fallback_code, "timeout");
    assert.equal(await abortedAtServer(loop), true, "the signal reached the SDK: the HTTP request was aborted");
  });

  test(`${kind}: the client's own timeout is reported as a timeout`, async (t) => {
    const loop = await loopback(t);
    loop.setMode({ delayMs: Infinity });
    const res = await compactor.compact(messages, { summarize: k.make(loop, SUMMARY_MODEL, { timeout: 150 }) });
    assert.equal(res.report.fallback_code, "timeout");
    assert.match(res.report.fallback_reason, /timed out/);
    assert.equal(loop.requests.length, 1);
  });

  test(`${kind}: the caller's abort rejects the compaction and aborts the request`, async (t) => {
    const loop = await loopback(t);
    loop.setMode({ delayMs: Infinity });
    const ac = new AbortController();
    const pending = compactor.compact(messages, { summarize: k.make(loop), signal: ac.signal });
    for (let n = 0; n < 500 && loop.requests.length === 0; n++) await sleep(10);
    assert.equal(loop.requests.length, 1, "the request reached the loopback");
    ac.abort();
    await assert.rejects(pending, { name: "AbortError" });
    assert.equal(await abortedAtServer(loop), true);
  });

  test(`${kind}: a request the summarizer's own signal cancels falls back with cancelled`, async (t) => {
    const loop = await loopback(t);
    loop.setMode({ delayMs: Infinity });
    const inner = k.make(loop);
    const mine = new AbortController();
    // A summarizer that cancels its SDK call itself (its own signal, not the compaction's).
    const summarize = (req) => {
      setTimeout(() => mine.abort(), 50);
      return inner(req, { signal: mine.signal });
    };
    const res = await compactor.compact(messages, { summarize });
    assert.equal(res.report.fallback_code, "cancelled");
    assert.equal(await abortedAtServer(loop), true);
  });
}

test("openai chat: reasoning models get max_completion_tokens; maxTokens overrides the request's size", async (t) => {
  const loop = await loopback(t);
  const client = openaiClient(loop);
  const cases = [
    ["gpt-5-mini", undefined, "max_completion_tokens"],
    ["o3", 4000, "max_completion_tokens"],
    ["o4-mini", undefined, "max_completion_tokens"],
    ["gpt-4.1-mini", 900, "max_tokens"],
    ["gpt-4o", undefined, "max_tokens"],
  ];
  for (const [model, maxTokens, key] of cases) {
    const s = spy(openaiSummarizer(client, { model, maxTokens }));
    const res = await compactor.compact(messages, { summarize: s.summarize });
    assert.equal(res.report.fallback_code, "", model);
    const body = loop.requests.at(-1).body;
    const other = key === "max_tokens" ? "max_completion_tokens" : "max_tokens";
    assert.equal(body[key], maxTokens ?? s.seen[0].max_tokens, `${model}: ${key}`);
    assert.equal(other in body, false, `${model}: no ${other}`);
    assert.equal(body.model, model);
  }
});

test("responses and anthropic: maxTokens overrides max_output_tokens / max_tokens", async (t) => {
  const loop = await loopback(t);
  await compactor.compact(messages, { summarize: openaiSummarizer(openaiClient(loop), { model: "gpt-5-mini", api: "responses", maxTokens: 5000 }) });
  assert.equal(loop.requests.at(-1).body.max_output_tokens, 5000);
  await compactor.compact(messages, { summarize: anthropicSummarizer(anthropicClient(loop), { model: "claude-haiku-4-5", maxTokens: 700 }) });
  assert.equal(loop.requests.at(-1).body.max_tokens, 700);
});

test("an answer without text falls back with empty (each API's shape)", async () => {
  const s = spy(async () => "x");
  await compactor.compact(messages, { summarize: s.summarize });
  const [request] = s.seen;
  const empty = [
    openaiSummarizer({ chat: { completions: { create: async () => ({ choices: [{ message: { content: null, refusal: "no" } }] }) } } }, { model: "m" }),
    openaiSummarizer({ responses: { create: async () => ({ output: [{ type: "reasoning", summary: [] }] }) } }, { model: "m", api: "responses" }),
    anthropicSummarizer({ messages: { create: async () => ({ content: [{ type: "thinking", thinking: "…" }] }) } }, { model: "m" }),
  ];
  for (const summarize of empty) {
    assert.equal(await summarize(request, {}), "");
    const res = await compactor.compact(messages, { summarize });
    assert.equal(res.report.fallback_code, "empty");
  }
  // Responses: the output_text parts of message items, when the client does not add output_text.
  const parts = openaiSummarizer({
    responses: {
      create: async () => ({
        output: [{ type: "reasoning" }, { type: "message", content: [{ type: "output_text", text: "## Goal\n" }, { type: "refusal" }, { type: "output_text", text: "x" }] }],
      }),
    },
  }, { model: "m", api: "responses" });
  assert.equal(await parts(request, {}), "## Goal\nx");
  // A malformed answer is an error, not a summary.
  const odd = openaiSummarizer({ chat: { completions: { create: async () => ({}) } } }, { model: "m" });
  await assert.rejects(odd(request, {}), /no choices/);
});

test("options are checked: ctxcompact: errors with codes and paths", () => {
  const chat = { chat: { completions: { create: async () => ({ choices: [] }) } } };
  const cases = [
    [() => openaiSummarizer(undefined, { model: "m" }), "/client", /takes a client with chat\.completions\.create\(\)/],
    [() => openaiSummarizer(chat, { model: "m", api: "responses" }), "/client", /responses\.create\(\).*without/],
    [() => anthropicSummarizer(chat, { model: "m" }), "/client", /messages\.create\(\)/],
    [() => openaiSummarizer(chat), "/model", /needs options\.model/],
    [() => openaiSummarizer(chat, { model: "" }), "/model", /non-empty string/],
    [() => openaiSummarizer(chat, { model: "m", api: "completions" }), "/api", /"chat" or "responses"/],
    [() => openaiSummarizer(chat, { model: "m", maxTokens: 0 }), "/max_tokens", /positive integer/],
    [() => anthropicSummarizer({ messages: { create() {} } }, { model: "m", maxTokens: 1.5 }), "/max_tokens", /positive integer/],
    [() => openaiSummarizer(chat, { model: "m", maxToken: 10 }), "/maxToken", /did you mean maxTokens/],
    [() => openaiSummarizer(chat, "gpt-4o"), "", /takes an options object/],
  ];
  for (const [fn, path, message] of cases) {
    assert.throws(fn, (err) => {
      assert.ok(err instanceof CompactError, String(err));
      assert.equal(err.code, "invalid_request");
      assert.equal(err.path, path, err.message);
      assert.match(err.message, /^ctxcompact: /);
      assert.match(err.message, message);
      return true;
    });
  }
});
