// An agent loop with ctxcompact's ContextEngine, replaying a recorded trace against
// a loopback "model" (./loopback.mjs) with the `openai` SDK as the agent's client:
// each turn sends the conversation, appends the answer and the recorded tool
// results, feeds the response's usage to the engine, and compacts when the engine
// says so, with the ready OpenAI summarizer pointed at the same loopback.
//
//   node examples/agent-loop/node/agent.mjs [TRACE] [--window N]
//
// TRACE: an openai-chat trace ({"messages": [...]}), default examples/astropy-12907.json;
// N: the context window in tokens, default 16000. Prints one line per compaction and
// a closing line.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import OpenAI from "openai";
import { ContextEngine, openaiSummarizer } from "ctxcompact";
import { SUMMARY_MODEL, startLoopback } from "./loopback.mjs";

export const DEFAULT_TRACE = fileURLToPath(new URL("../../astropy-12907.json", import.meta.url));
export const DEFAULT_WINDOW = 16000;

/** An answer of the SDK as a plain chat message (what the next request sends). */
function asMessage(m) {
  const out = { role: "assistant", content: m.content ?? null };
  if (m.tool_calls?.length) out.tool_calls = m.tool_calls.map((c) => ({ id: c.id, type: c.type, function: { name: c.function.name, arguments: c.function.arguments } }));
  return out;
}

/**
 * Runs the loop over a trace; `log` gets each line. Returns the counts and the
 * loopback's recorded requests.
 * @param {{trace?: string, window?: number, log?: (line: string) => void}} [options]
 */
export async function runAgent({ trace = DEFAULT_TRACE, window = DEFAULT_WINDOW, log = console.log } = {}) {
  const recorded = JSON.parse(readFileSync(trace, "utf8")).messages;
  const loop = await startLoopback({ messages: recorded, traceName: path.basename(trace, ".json") });
  try {
    const client = new OpenAI({ apiKey: "loopback", baseURL: `${loop.url}/v1`, maxRetries: 0 });
    const engine = await ContextEngine.create({
      config: { model: { context_length: window } },
      summarize: openaiSummarizer(client, { model: SUMMARY_MODEL, api: "chat" }),
    });

    // The conversation up to and including the first user message; then each
    // recorded assistant turn is one model request.
    const firstUser = recorded.findIndex((m) => m.role === "user");
    let messages = recorded.slice(0, firstUser + 1);
    let i = firstUser + 1;
    let turns = 0;
    let compactions = 0;
    while (i < recorded.length) {
      if (recorded[i].role !== "assistant") {
        messages.push(recorded[i++]);
        continue;
      }
      const res = await client.chat.completions.create({ model: "agent-model", messages });
      turns++;
      messages.push(asMessage(res.choices[0].message));
      // The recorded messages that followed this turn: tool results, user turns.
      for (i++; i < recorded.length && recorded[i].role !== "assistant"; i++) messages.push(recorded[i]);
      engine.updateFromResponse(res.usage);
      if (engine.shouldCompress()) {
        const { messages: compacted, report } = await engine.compress(messages);
        compactions++;
        log(`compaction ${compactions} at turn ${turns}: ${report.messages_before} -> ${report.messages_after} messages, ` +
          `${report.tokens_before} -> ${report.tokens_after} tokens (summarizer ${report.summarizer})`);
        messages = compacted;
      }
    }
    log(`done: ${turns} turns, ${compactions} compactions, ${loop.requests.length} model requests`);
    return { turns, compactions, requests: loop.requests, messages };
  } finally {
    await loop.close();
  }
}

function parseArgs(argv) {
  let trace = DEFAULT_TRACE;
  let window = DEFAULT_WINDOW;
  for (let k = 0; k < argv.length; k++) {
    if (argv[k] === "--window") {
      window = Number(argv[++k]);
      if (!Number.isSafeInteger(window) || window <= 0) throw new Error(`--window takes a positive integer, got ${argv[k]}`);
    } else if (argv[k].startsWith("--")) {
      throw new Error(`unknown option ${argv[k]} (usage: agent.mjs [TRACE] [--window N])`);
    } else {
      trace = path.resolve(argv[k]);
    }
  }
  return { trace, window };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  try {
    await runAgent(parseArgs(process.argv.slice(2)));
  } catch (err) {
    console.error(`agent.mjs: ${err.message}`);
    process.exitCode = 1;
  }
}
