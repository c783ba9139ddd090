// Benchmark (not a test) of the recall store: a search over a ~100 MB archive.
//
//   node bindings/js/bench-recall.mjs [--mb 100] [--store FILE] [--runs 21] [--driver auto|wasm|node:sqlite]
//
// Builds (once: an existing --store file is reused) a store whose archived messages
// hold --mb MB of original JSON, deterministic (a seeded generator: tool outputs with
// file paths, identifiers and words) in 1,000 ranges of one session plus a second
// session of the same size, then prints the median and min time of search() for a
// few queries (the SQL the engine runs for context_search: FTS5 candidates, LIKE
// terms, newest first, limit 10, the total).
import { existsSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { RecallStore } from "./recall.js";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const MB = Number(opt("mb", "100"));
const RUNS = Number(opt("runs", "21"));
const driver = opt("driver", "auto");
const file = opt("store", path.join(tmpdir(), `ctxcompact-recall-bench-${MB}mb.db`));

// A small deterministic generator (mulberry32).
let seed = 17;
const rand = () => {
  seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const WORDS = ("the a of to in and is for on with that this it as be at by from are was not or have an error test file " +
  "function return value import class self def module config request response data user system message tool call result " +
  "output input path line failed passed assert expected actual raise exception traceback warning build run install").split(" ");
const DIRS = ["src", "lib", "tests", "pkg", "internal", "app", "core", "docs"];
const NAMES = ["app", "main", "utils", "models", "views", "parser", "server", "client", "config", "store", "engine", "cache"];
const EXT = [".py", ".js", ".go", ".ts", ".rs", ".md"];
const filePath = () => `${pick(DIRS)}/${pick(NAMES)}_${Math.floor(rand() * 400)}${pick(EXT)}`;
const ident = () => `${pick(NAMES)}.${pick(WORDS)}_${Math.floor(rand() * 1000)}`;

function text(bytes) {
  const out = [];
  let n = 0;
  while (n < bytes) {
    const r = rand();
    const w = r < 0.05 ? filePath() : r < 0.08 ? ident() : r < 0.09 ? "\n" : pick(WORDS);
    out.push(w);
    n += w.length + 1;
  }
  return out.join(" ");
}

async function build() {
  const s = await RecallStore.open(file, { driver });
  const perMessage = 8 * 1024;
  const total = MB * 1024 * 1024;
  const ranges = 1000;
  const perRange = Math.max(1, Math.round(total / perMessage / ranges / 2)); // two sessions
  let bytes = 0;
  const t0 = performance.now();
  for (const session of ["bench-a", "bench-b"]) {
    for (let k = 1; k <= ranges; k++) {
      const id = `r${k}`;
      const rows = [];
      for (let i = 0; i < perRange; i++) {
        const content = text(perMessage);
        const json = JSON.stringify({ role: "tool", tool_call_id: `call_${k}_${i}`, content });
        bytes += json.length;
        rows.push({ id: `${id}.${i + 1}`, range_id: id, position: i + 1, role: "tool", reason: "summarized", json, text: `tool ${content}` });
      }
      const summary = `Summary of range ${k}: worked on ${filePath()}.`;
      rows.push({ id: `${id}.summary`, range_id: id, position: 1, role: "summary", reason: "summary", json: JSON.stringify({ role: "user", content: summary }), text: summary });
      s.archive(session, { range: { id, from_index: 1, to_index: perRange + 1, summary }, rows });
    }
  }
  s.close();
  return { bytes, seconds: (performance.now() - t0) / 1000 };
}

let built = null;
if (!existsSync(file)) built = await build();
const s = await RecallStore.open(file, { driver });
const fileMB = statSync(file).size / 1024 / 1024;
console.log(`store ${file}: ${fileMB.toFixed(0)} MB on disk, driver ${s.driver}, search ${s.searchMode}` +
  (built ? `; built now: ${(built.bytes / 1024 / 1024).toFixed(0)} MB of message JSON in ${built.seconds.toFixed(0)} s` : " (reused)"));

// A path the archive has: the one range 500's summary names.
const named = s.ranges("bench-a")[499].summary.match(/worked on (\S+)\.$/)[1];
const QUERIES = [
  ["a path", named],
  ["a path, no k/s", "app/main_20.go"],
  ["an identifier", "engine.traceback_7"],
  ["two terms", "tests/parser_9 failed"],
  ["a common word", "traceback"],
  ["no hit", "zzqx_not_there"],
];
console.log(`search(session, query, { limit: 10 }), ${RUNS} runs, ms`);
for (const [what, q] of QUERIES) {
  s.search("bench-a", q); // warm
  const times = [];
  const cpu = [];
  let r;
  for (let i = 0; i < RUNS; i++) {
    const c = process.cpuUsage();
    const t = performance.now();
    r = s.search("bench-a", q, { limit: 10 });
    times.push(performance.now() - t);
    const u = process.cpuUsage(c);
    cpu.push((u.user + u.system) / 1000);
  }
  times.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  console.log(`${what.padEnd(16)} ${JSON.stringify(q).padEnd(26)} hits ${String(r.hits.length).padStart(2)} total ${String(r.total).padStart(6)}  median ${times[times.length >> 1].toFixed(2).padStart(8)}  min ${times[0].toFixed(2).padStart(8)}  cpu median ${cpu[cpu.length >> 1].toFixed(2).padStart(7)}`);
}
// The agent's tool call: recall.query (core), the search, recall.search_result
// (core: the snippets), the JS<->wasm copies of the hits' text.
const { ContextEngine } = await import("./index.js");
const engine = await ContextEngine.create({ config: { context: { engine: "lossless" } }, store: s, sessionId: "bench-a" });
for (const q of ["tests/parser_9 failed", "traceback"]) {
  const args = { query: q, limit: 10 };
  engine.handleToolCall("context_search", args);
  const et = [];
  const ec = [];
  for (let i = 0; i < RUNS; i++) {
    const c = process.cpuUsage();
    const t = performance.now();
    engine.handleToolCall("context_search", args);
    et.push(performance.now() - t);
    const u = process.cpuUsage(c);
    ec.push((u.user + u.system) / 1000);
  }
  et.sort((a, b) => a - b);
  ec.sort((a, b) => a - b);
  console.log(`${"context_search".padEnd(16)} ${JSON.stringify(q).padEnd(26)} the tool call   median ${et[et.length >> 1].toFixed(2).padStart(8)}  min ${et[0].toFixed(2).padStart(8)}  cpu median ${ec[ec.length >> 1].toFixed(2).padStart(7)}`);
}
engine.close?.();
s.close();

// A total counted up to 1,000 (countLimit) instead of exactly.
const bounded = await RecallStore.open(file, { driver, countLimit: 1000 });
for (const q of ["traceback", "tests/parser_9 failed"]) {
  bounded.search("bench-a", q);
  const bt = [];
  let br;
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    br = bounded.search("bench-a", q, { limit: 10 });
    bt.push(performance.now() - t);
  }
  bt.sort((a, b) => a - b);
  console.log(`${"countLimit 1000".padEnd(16)} ${JSON.stringify(q).padEnd(26)} hits ${String(br.hits.length).padStart(2)} total ${String(br.total).padStart(6)}  median ${bt[bt.length >> 1].toFixed(2).padStart(8)}  min ${bt[0].toFixed(2).padStart(8)}`);
}
bounded.close();

// The LIKE fallback (a store without FTS5) scans the session's rows.
const like = await RecallStore.open(file, { driver, fts: false });
const lt = [];
let lr;
for (let i = 0; i < 3; i++) {
  const t = performance.now();
  lr = like.search("bench-a", named, { limit: 10 });
  lt.push(performance.now() - t);
}
lt.sort((a, b) => a - b);
console.log(`${"LIKE fallback".padEnd(16)} ${JSON.stringify(named).padEnd(26)} hits ${String(lr.hits.length).padStart(2)} total ${String(lr.total).padStart(6)}  median ${lt[1].toFixed(2).padStart(8)}  min ${lt[0].toFixed(2).padStart(8)}`);
like.close();
