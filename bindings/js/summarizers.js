// Ready summarizers over the official SDK clients (`openai`, `@anthropic-ai/sdk`):
// each returns a Summarize for compact()/ContextEngine that sends the core's
// SummaryRequest with the client the user already has. Nothing here imports an
// SDK (they are optional peer dependencies): a client is used by its shape.
//
// What each sends (the cross-runtime spec of issue 18):
// - OpenAI chat: chat.completions.create({model, messages: [system, user], max_tokens})
//   (max_completion_tokens for reasoning models, names matching ^(o\d|gpt-5));
// - OpenAI Responses: responses.create({model, instructions, input, max_output_tokens,
//   store: false}) (a summary is not kept on the server: nothing asks for it later);
// - Anthropic: messages.create({model, system, messages: [user], max_tokens}).
// The size is the request's max_tokens unless maxTokens overrides it. The
// compaction's signal goes to the SDK call as its request option, so a timeout or an
// abort ends the HTTP request. Retries are the client's own (maxRetries); there is
// no retry loop here. A failed call rejects, and the compaction falls back to the
// built-in summary: an SDK timeout is reported as fallback_code "timeout", an
// aborted request as "cancelled", any other API error as "error", an answer without
// text as "empty".

import { CompactError } from "./errors.js";
import { T, checkOptions, describe } from "./options.js";

const positiveInt = [(v) => typeof v === "number" && Number.isSafeInteger(v) && v > 0, "a positive integer"];
const OPENAI_OPTIONS = { model: [T.string], api: [T.string], maxTokens: [positiveInt] };
const ANTHROPIC_OPTIONS = { model: [T.string], maxTokens: [positiveInt] };

/** Chat models that take max_completion_tokens instead of max_tokens. */
const REASONING_MODEL = /^(o\d|gpt-5)/;

/** The function at `path` of the client (["chat", "completions", "create"]), bound to its object, or null. */
function method(client, path) {
  let obj = client;
  for (const key of path.slice(0, -1)) {
    obj = obj?.[key];
    if (obj === null || (typeof obj !== "object" && typeof obj !== "function")) return null;
  }
  const fn = obj[path[path.length - 1]];
  return typeof fn === "function" ? fn.bind(obj) : null;
}

function checkModel(where, model) {
  if (typeof model !== "string" || model === "") {
    throw new CompactError("invalid_request", `ctxcompact: ${where} needs options.model, the summary model's name (a non-empty string), got ${describe(model)}`, "/model");
  }
}

function clientMethod(where, client, path, sdk) {
  const fn = client !== null && typeof client === "object" ? method(client, path) : null;
  if (fn === null) {
    throw new CompactError("invalid_request",
      `ctxcompact: ${where} takes a client with ${path.join(".")}() (${sdk}), got ${describe(client)}${client !== null && typeof client === "object" ? ` without ${path.join(".")}()` : ""}`,
      "/client");
  }
  return fn;
}

/** The system and user texts of a SummaryRequest. */
function texts(request) {
  const msgs = request?.messages;
  const system = Array.isArray(msgs) ? msgs.find((m) => m?.role === "system")?.content : undefined;
  const user = Array.isArray(msgs) ? msgs.find((m) => m?.role === "user")?.content : undefined;
  if (typeof system !== "string" || typeof user !== "string") {
    throw new CompactError("invalid_request", "ctxcompact: a summarizer takes the core's SummaryRequest ({messages: [system, user], max_tokens, ...})", "/messages");
  }
  return { system, user };
}

function size(request, maxTokens) {
  return maxTokens ?? request.max_tokens;
}

function named(name, message, cause) {
  const err = new Error(message, { cause });
  err.name = name;
  if (cause?.status !== undefined) err.status = cause.status;
  return err;
}

/**
 * Runs the SDK call; a failure becomes an error the compaction reports by its name:
 * the signal's own reason when the compaction aborted it (a timeout or the caller's
 * abort), TimeoutError for the client's own timeout, AbortError for a request aborted
 * otherwise, else an Error naming the API, with the SDK's error as its cause (and its
 * HTTP status).
 */
async function send(what, call, signal) {
  try {
    return await call();
  } catch (err) {
    if (signal?.aborted) throw signal.reason ?? named("AbortError", `ctxcompact: the ${what} request was aborted`, err);
    const kind = err?.constructor?.name ?? "";
    if (kind === "APIConnectionTimeoutError" || err?.name === "TimeoutError") {
      throw named("TimeoutError", `ctxcompact: the ${what} request timed out (the client's timeout): ${err.message}`, err);
    }
    if (kind === "APIUserAbortError" || err?.name === "AbortError") {
      throw named("AbortError", `ctxcompact: the ${what} request was aborted: ${err.message}`, err);
    }
    throw named("Error", `ctxcompact: the ${what} request failed: ${err?.message ?? String(err)}`, err);
  }
}

/** The text of a Responses API answer: output_text (the SDK's), else the output_text parts of its message items. */
function responsesText(res) {
  if (typeof res?.output_text === "string") return res.output_text;
  let text = "";
  for (const item of Array.isArray(res?.output) ? res.output : []) {
    if (item?.type !== "message" || !Array.isArray(item.content)) continue;
    for (const part of item.content) if (part?.type === "output_text" && typeof part.text === "string") text += part.text;
  }
  return text;
}

/**
 * A summarizer that asks an OpenAI model through the `openai` SDK client (or
 * anything shaped like it: chat.completions.create, or responses.create for
 * `api: "responses"`).
 * @param {object} client e.g. `new OpenAI({ maxRetries: 2 })`
 * @param {import("./index.d.ts").OpenAISummarizerOptions} options
 * @returns {import("./index.d.ts").Summarize}
 */
export function openaiSummarizer(client, options) {
  const where = "openaiSummarizer()";
  const o = checkOptions(where, options, OPENAI_OPTIONS);
  checkModel(where, o.model);
  const api = o.api ?? "chat";
  if (api !== "chat" && api !== "responses") {
    throw new CompactError("invalid_request", `ctxcompact: option api of ${where} must be "chat" or "responses", got ${describe(api)}`, "/api");
  }
  const { model } = o;
  const maxTokens = o.maxTokens ?? undefined;
  if (api === "responses") {
    const create = clientMethod(where, client, ["responses", "create"], "an OpenAI client");
    return async (request, context) => {
      const { system, user } = texts(request);
      const signal = context?.signal;
      const body = { model, instructions: system, input: user, max_output_tokens: size(request, maxTokens), store: false };
      const res = await send("OpenAI responses", () => create(body, { signal }), signal);
      return responsesText(res);
    };
  }
  const create = clientMethod(where, client, ["chat", "completions", "create"], "an OpenAI client");
  const sizeKey = REASONING_MODEL.test(model) ? "max_completion_tokens" : "max_tokens";
  return async (request, context) => {
    const { system, user } = texts(request);
    const signal = context?.signal;
    const body = { model, messages: [{ role: "system", content: system }, { role: "user", content: user }], [sizeKey]: size(request, maxTokens) };
    const res = await send("OpenAI chat completions", () => create(body, { signal }), signal);
    if (!Array.isArray(res?.choices)) {
      throw new Error(`ctxcompact: the OpenAI chat completions answer has no choices: ${describe(res)}`);
    }
    const content = res.choices[0]?.message?.content;
    return typeof content === "string" ? content : "";
  };
}

/**
 * A summarizer that asks a Claude model through the `@anthropic-ai/sdk` client (or
 * anything with messages.create).
 * @param {object} client e.g. `new Anthropic({ maxRetries: 2 })`
 * @param {import("./index.d.ts").AnthropicSummarizerOptions} options
 * @returns {import("./index.d.ts").Summarize}
 */
export function anthropicSummarizer(client, options) {
  const where = "anthropicSummarizer()";
  const o = checkOptions(where, options, ANTHROPIC_OPTIONS);
  checkModel(where, o.model);
  const { model } = o;
  const maxTokens = o.maxTokens ?? undefined;
  const create = clientMethod(where, client, ["messages", "create"], "an Anthropic client");
  return async (request, context) => {
    const { system, user } = texts(request);
    const signal = context?.signal;
    const body = { model, system, messages: [{ role: "user", content: user }], max_tokens: size(request, maxTokens) };
    const res = await send("Anthropic messages", () => create(body, { signal }), signal);
    if (!Array.isArray(res?.content)) {
      throw new Error(`ctxcompact: the Anthropic messages answer has no content: ${describe(res)}`);
    }
    let text = "";
    for (const block of res.content) if (block?.type === "text" && typeof block.text === "string") text += block.text;
    return text;
  };
}
