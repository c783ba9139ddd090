// A loopback "model" for the agent-loop example and the SDK tests (issue 18's
// cross-runtime spec): an in-process HTTP server on 127.0.0.1 (a free port) that
// speaks /v1/chat/completions, /v1/responses and /v1/messages, records every
// request, answers summary requests with a fixed summary and agent turns with the
// next recorded assistant message of a trace. The traces record no usage per turn,
// so usage is computed from the request it got: prompt tokens = ceil(length of the
// JSON of the request's messages / 4), completion tokens = ceil(length of the JSON
// of the answer / 4). Error modes for tests: a status (429 with retry-after, 500,
// 400, as each API writes its errors) and a delay (Infinity: never answer).
import http from "node:http";

/** The model name the examples give their summarizer; requests for it are summary requests. */
export const SUMMARY_MODEL = "summary-model";

/** The summary every summary request gets (the same text in the Python and Go examples). */
export function summaryText(traceName, n) {
  return `## Goal\nReplay of ${traceName}.\n## Progress\n${n} messages summarized.`;
}

/** Text of a content field: a string, or the text of its parts. */
function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((p) => (typeof p === "string" ? p : typeof p?.text === "string" ? p.text : "")).join("");
}

/** The request's messages (what its prompt tokens are computed from), its system text and its user text. */
function parse(api, body) {
  if (api === "responses") {
    const input = body.input;
    const items = Array.isArray(input) ? input : [];
    const sys = items.filter((m) => m?.role === "system" || m?.role === "developer").map((m) => textOf(m.content)).join("\n");
    const user = typeof input === "string" ? input : items.filter((m) => m?.role === "user").map((m) => textOf(m.content)).join("\n");
    return { messages: input ?? [], system: typeof body.instructions === "string" ? body.instructions : sys, user };
  }
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const user = messages.filter((m) => m?.role === "user").map((m) => textOf(m.content)).join("\n");
  if (api === "anthropic") return { messages, system: textOf(body.system), user };
  const system = messages.filter((m) => m?.role === "system" || m?.role === "developer").map((m) => textOf(m.content)).join("\n");
  return { messages, system, user };
}

const tokens = (value) => Math.ceil(JSON.stringify(value ?? null).length / 4);

/** How each API writes an error. */
function errorBody(api, status, message) {
  if (api === "anthropic") {
    const type = status === 429 ? "rate_limit_error" : status >= 500 ? "api_error" : "invalid_request_error";
    return { type: "error", error: { type, message } };
  }
  const type = status === 429 ? "rate_limit_exceeded" : status >= 500 ? "server_error" : "invalid_request_error";
  return { error: { message, type, param: null, code: status === 429 ? "rate_limit_exceeded" : null } };
}

/** An assistant message (content, tool_calls) in the answer shape of an API, with usage. */
function answer(api, model, msg, promptTokens, n) {
  const content = msg.content ?? null;
  const calls = Array.isArray(msg.tool_calls) ? msg.tool_calls : [];
  const completion = tokens({ role: "assistant", content, ...(calls.length ? { tool_calls: calls } : {}) });
  const id = `loopback-${n}`;
  if (api === "chat") {
    const message = { role: "assistant", content, refusal: null };
    if (calls.length) message.tool_calls = calls;
    return {
      id, object: "chat.completion", created: 0, model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: calls.length ? "tool_calls" : "stop" }],
      usage: { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion },
    };
  }
  if (api === "responses") {
    const output = [];
    const text = textOf(content);
    if (text) output.push({ type: "message", id: `msg-${n}`, role: "assistant", status: "completed", content: [{ type: "output_text", text, annotations: [] }] });
    for (const c of calls) {
      output.push({ type: "function_call", id: `fc-${n}-${output.length}`, call_id: c.id, name: c.function?.name, arguments: c.function?.arguments ?? "{}", status: "completed" });
    }
    return {
      id, object: "response", created_at: 0, model, status: "completed", output,
      usage: { input_tokens: promptTokens, output_tokens: completion, total_tokens: promptTokens + completion },
    };
  }
  const blocks = [];
  const text = textOf(content);
  if (text) blocks.push({ type: "text", text });
  for (const c of calls) {
    let input;
    try {
      input = JSON.parse(c.function?.arguments ?? "{}");
    } catch {
      input = { arguments: c.function?.arguments };
    }
    blocks.push({ type: "tool_use", id: c.id, name: c.function?.name, input });
  }
  return {
    id, type: "message", role: "assistant", model, content: blocks,
    stop_reason: calls.length ? "tool_use" : "end_turn", stop_sequence: null,
    usage: { input_tokens: promptTokens, output_tokens: completion },
  };
}

const ROUTES = { "/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/messages": "anthropic" };

/**
 * Starts the server.
 * @param {{messages?: object[], traceName?: string, summaryModel?: string}} [options]
 *   messages: the trace whose assistant turns answer agent requests, in order.
 * @returns {Promise<Loopback>}
 */
export async function startLoopback({ messages = [], traceName = "trace", summaryModel = SUMMARY_MODEL } = {}) {
  const turns = messages.filter((m) => m?.role === "assistant");
  let cursor = 0;
  let mode = {};
  /** @type {{path: string, api: string, body: any, summary: boolean, promptTokens: number, status: number, aborted: boolean}[]} */
  const requests = [];
  const timers = new Set();

  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const api = ROUTES[req.url.split("?")[0]];
      const send = (status, body, headers = {}) => {
        if (res.destroyed) return;
        res.writeHead(status, { "content-type": "application/json", "x-request-id": `loopback-${requests.length}`, ...headers });
        res.end(JSON.stringify(body));
      };
      if (req.method !== "POST" || !api) {
        send(404, errorBody("chat", 404, `loopback: no route ${req.method} ${req.url}`));
        return;
      }
      let body;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch (err) {
        send(400, errorBody(api, 400, `loopback: the body is not JSON: ${err.message}`));
        return;
      }
      const { messages: sent, system, user } = parse(api, body);
      const firstSentence = system.split(".")[0];
      const summary = body.model === summaryModel || /summar/i.test(firstSentence);
      const entry = { path: req.url, api, body, summary, promptTokens: tokens(sent), status: 0, aborted: false };
      requests.push(entry);
      res.on("close", () => {
        if (!res.writableFinished) entry.aborted = true;
      });
      const { status, retryAfter, retryAfterMs, delayMs = 0, message } = mode;
      const reply = () => {
        if (status) {
          entry.status = status;
          const headers = {};
          if (retryAfter !== undefined) headers["retry-after"] = String(retryAfter);
          if (retryAfterMs !== undefined) headers["retry-after-ms"] = String(retryAfterMs);
          send(status, errorBody(api, status, message ?? `loopback: status ${status} (test mode)`), headers);
          return;
        }
        let msg;
        if (summary) {
          // The turns of the serialized middle are marked "[#<index> <role>...]".
          msg = { role: "assistant", content: summaryText(traceName, (user.match(/^\[#\d+ /gm) ?? []).length) };
        } else if (cursor < turns.length) {
          msg = turns[cursor++];
        } else {
          entry.status = 400;
          send(400, errorBody(api, 400, `loopback: the trace has no assistant turn left (it has ${turns.length})`));
          return;
        }
        entry.status = 200;
        send(200, answer(api, body.model ?? "loopback", msg, entry.promptTokens, requests.length));
      };
      if (delayMs === 0) {
        reply();
      } else if (Number.isFinite(delayMs)) {
        const t = setTimeout(() => { timers.delete(t); reply(); }, delayMs);
        timers.add(t);
        res.on("close", () => { clearTimeout(t); timers.delete(t); });
      } // Infinity: never answers; the client aborts, or close() ends the connection.
    });
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const url = `http://127.0.0.1:${server.address().port}`;

  return {
    /** http://127.0.0.1:<port> (OpenAI clients take `${url}/v1` as baseURL, Anthropic clients `url`). */
    url,
    /** Every request, in order: path, api, parsed body, summary or agent turn, computed prompt tokens, status, aborted. */
    requests,
    /** How many recorded assistant turns were answered. */
    get turnsServed() { return cursor; },
    /**
     * Sets how later requests are answered: `{status, retryAfter?, retryAfterMs?, message?}`
     * fails them with that status (and the retry-after / retry-after-ms headers the SDKs
     * read); `{delayMs}` answers after a delay (Infinity: never). `{}` resets.
     */
    setMode(next = {}) { mode = { ...next }; },
    /** Stops the server and ends open connections. */
    async close() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
