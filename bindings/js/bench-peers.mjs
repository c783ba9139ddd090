// ctxcompact's JS binding beside the library a Node user would otherwise reach for
// (gpt-tokenizer, a pinned devDependency), in one process, on the shared traces:
//
//   1. exact o200k counting of whole conversations: countTokens(messages) against
//      gpt-tokenizer counting the same texts by the same chat rule (docs/TOKENS.md);
//      the totals must be equal, so both did the same work;
//   2. an agent's per-turn count: the conversation grown by one message, counted
//      whole by countTokens, against gpt-tokenizer counting only the new message;
//   3. the first compaction in a fresh process: import, compile, instantiate,
//      compact (no peer; the target is absolute).
//
// Every row prints ours, the peer's, the ratio, the target and whether it is met.
// Medians of alternating samples, since these machines are shared. Nothing here is
// asserted on time (no test runs it); a count that differs from the peer's fails.
//
// Usage: node bindings/js/bench-peers.mjs [--passes N] [--runs N] [--only 1,2,3]
// (npm run bench:peers; also in ./build.sh bench). Needs ../shared/traces and
// `npm install` (gpt-tokenizer).

import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const TRACES = path.join(ROOT, "..", "shared", "traces");
const INDEX = pathToFileURL(path.join(ROOT, "bindings", "js", "index.js")).href;
const SUMMARY = "## Goal\nFinish the task.\n## Progress\nDone: earlier steps.\n## Next Steps\nContinue.";
const WINDOW = 32000;

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};

// Child mode: one first compaction in this fresh process, timed from before the
// import of the binding to the compacted result.
if (args[0] === "--first-call") {
  const { messages } = JSON.parse(readFileSync(args[1], "utf8"));
  const t0 = performance.now();
  const { Compactor } = await import(INDEX);
  const t1 = performance.now();
  const c = await Compactor.create();
  const t2 = performance.now();
  const res = await c.compact(messages, { config: { model: { context_length: WINDOW } }, force: true, summarize: () => SUMMARY });
  const t3 = performance.now();
  if (!res.report.compacted) throw new Error("not compacted");
  console.log(JSON.stringify({ import: t1 - t0, create: t2 - t1, compact: t3 - t2, total: t3 - t0 }));
  process.exit(0);
}

const passes = Number(opt("--passes", 7));
const runs = Number(opt("--runs", 7));
const only = new Set(String(opt("--only", "1,2,3")).split(","));

const { Compactor } = await import(INDEX);
const gpt = await import("gpt-tokenizer/encoding/o200k_base");

// ---- the peer: gpt-tokenizer under the chat rule of docs/TOKENS.md ----
const NO_SPECIAL = new Set(); // special-token text is ordinary text, as in the core
const count = (s) => (s === "" ? 0 : gpt.countTokens(s, { disallowedSpecial: NO_SPECIAL }));
const IMAGE_TOKENS = 1000;
const REPLY_PRIMING = 3;
function peerValue(v) {
  if (typeof v === "string") return count(v);
  if (v === null || v === undefined) return 0;
  return count(JSON.stringify(v));
}
function peerContent(c) {
  if (typeof c === "string") return count(c);
  if (Array.isArray(c)) return c.reduce((n, p) => n + peerPart(p), 0);
  return 0;
}
function peerPart(p) {
  if (typeof p === "string") return count(p);
  switch (p?.type) {
    case "text": case "input_text": case "output_text": return peerValue(p.text);
    case "image_url": case "image": case "input_image": return IMAGE_TOKENS;
    case "thinking": return peerValue(p.thinking);
    case "redacted_thinking": return peerValue(p.data);
    case "tool_use": return 3 + peerValue(p.name) + peerValue(p.input);
    case "tool_result": return peerContent(p.content);
  }
  return peerValue(p);
}
function peerMessage(m) {
  let n = 3;
  for (const k of Object.keys(m)) {
    const v = m[k];
    if (k === "role") n += peerValue(v);
    else if (k === "name") n += peerValue(v) + 1;
    else if (k === "content") n += peerContent(v);
    else if (k === "tool_calls") for (const c of v) n += 3 + peerValue(c.function?.name) + peerValue(c.function?.arguments);
  }
  return n;
}

// ---- helpers ----
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const files = readdirSync(TRACES).filter((f) => f.endsWith(".json")).sort();
const traces = files.map((f) => {
  const text = readFileSync(path.join(TRACES, f), "utf8");
  const { messages } = JSON.parse(text);
  return { name: f.replace(/\.json$/, ""), file: path.join(TRACES, f), kb: text.length / 1024, messages, bytes: Buffer.byteLength(JSON.stringify(messages)) };
});
const allBytes = traces.reduce((n, t) => n + t.bytes, 0);
const base = await Compactor.create();
const O200K = { encoding: "o200k_base" };

/**
 * A compactor that has counted nothing of the traces (a fresh instance: the core's
 * per-instance count cache is empty) but has built its o200k rank map, which the
 * first exact count of an instance does once.
 */
async function freshCompactor() {
  const c = await Compactor.create({ wasm: base.module });
  c.countTokens([{ role: "user", content: "warm-up" }], O200K);
  return c;
}

const rows = [];
function row(what, ours, peer, ratio, target, met) {
  rows.push({ what, ours, peer, ratio, target, met });
  console.log(`  ${what}: ours ${ours}, peer ${peer}, ratio ${ratio}, target ${target}: ${met ? "met" : "NOT MET"}`);
}

// Warm-up: V8 tiers both sides' code up as it runs; a few rounds first so the
// samples measure steady state (first use is row 3's business).
if (only.has("1") || only.has("2")) {
  for (let i = 0; i < 2; i++) {
    const c = await freshCompactor();
    for (const t of traces) {
      c.countTokens(t.messages, O200K);
      for (const m of t.messages) peerMessage(m);
    }
  }
}

// ---- 1. whole conversations ----
if (only.has("1")) {
  console.log(`1. exact o200k count of each whole trace (${files.length} traces, ${(allBytes / 1e6).toFixed(2)} MB of message JSON); ` +
    `each pass on a fresh instance (empty count cache) and an emptied gpt-tokenizer merge cache; median of ${passes} passes`);
  const ours = [], peer = [];
  for (let p = 0; p < passes; p++) {
    const c = await freshCompactor();
    const totals = [];
    let t = performance.now();
    for (const tr of traces) totals.push(c.countTokens(tr.messages, O200K).total);
    ours.push(performance.now() - t);
    peer.push(peerCounts(totals));
  }
  const mbs = (ms) => allBytes / 1e6 / (ms / 1e3);
  const o = mbs(median(ours)), q = mbs(median(peer));
  row("exact o200k, whole traces", `${o.toFixed(2)} MB/s (${median(ours).toFixed(0)} ms)`, `${q.toFixed(2)} MB/s (${median(peer).toFixed(0)} ms)`,
    `${(o / q).toFixed(2)}x its speed`, ">= 1.00x", o >= q);
}

/**
 * gpt-tokenizer's time (ms) to count every trace's messages under the core's rule,
 * from an emptied merge cache; each trace's count must equal ours (totals).
 */
function peerCounts(totals) {
  gpt.clearMergeCache();
  const t = performance.now();
  for (let i = 0; i < traces.length; i++) {
    let n = REPLY_PRIMING;
    for (const m of traces[i].messages) n += peerMessage(m);
    if (n !== totals[i]) throw new Error(`${traces[i].name}: countTokens total ${totals[i]}, gpt-tokenizer under the same rule ${n}`);
  }
  return performance.now() - t;
}

// ---- 2. one more message ----
if (only.has("2")) {
  const steps = traces.reduce((n, t) => n + t.messages.length, 0);
  console.log(`2. each trace replayed as an agent does: push the next message, count the whole conversation (${steps} counts); ` +
    `peer: gpt-tokenizer counts only the pushed message; fresh instance and emptied merge cache each pass; median of ${passes} passes`);
  const ours = [], peer = [];
  for (let p = 0; p < passes; p++) {
    const c = await freshCompactor();
    const totals = [];
    let t = performance.now();
    for (const tr of traces) {
      const conv = [];
      let last;
      for (const m of tr.messages) {
        conv.push(m);
        last = c.countTokens(conv, O200K);
      }
      totals.push(last.total);
    }
    ours.push(performance.now() - t);
    peer.push(peerCounts(totals));
  }
  const o = median(ours), q = median(peer);
  const us = (ms) => `${((ms * 1e3) / steps).toFixed(1)} µs a turn (${ms.toFixed(0)} ms)`;
  row("count after one more message", us(o), us(q), `${(o / q).toFixed(2)}x its time`, "<= 1.00x", o <= q);
}

// ---- 3. first compaction in a fresh process ----
if (only.has("3")) {
  console.log(`3. first compaction in a fresh process: import + compile + instantiate + compact (force, window ${WINDOW}, host summarizer); median of ${runs} processes`);
  const bySize = [...traces].sort((a, b) => a.kb - b.kb);
  for (const t of [bySize[0], bySize[Math.floor(bySize.length / 2)]]) {
    const firsts = [];
    for (let i = 0; i < runs; i++) {
      const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), "--first-call", t.file], { encoding: "utf8" });
      firsts.push(JSON.parse(out));
    }
    const med = (k) => median(firsts.map((x) => x[k])).toFixed(1);
    const total = median(firsts.map((x) => x.total));
    row(`first compaction, ${t.name} (${t.kb.toFixed(0)} KB)`,
      `${total.toFixed(1)} ms (import ${med("import")} + create ${med("create")} + compact ${med("compact")}; min ${Math.min(...firsts.map((x) => x.total)).toFixed(1)})`,
      "-", "-", "< 60 ms", total < 60);
  }
}

console.log("");
console.log(`| what | ctxcompact | gpt-tokenizer | ratio | target | met |`);
console.log(`|---|---|---|---|---|---|`);
for (const r of rows) console.log(`| ${r.what} | ${r.ours} | ${r.peer} | ${r.ratio} | ${r.target} | ${r.met ? "yes" : "no"} |`);
console.log(`node ${process.version}, ${process.platform}/${process.arch}, gpt-tokenizer ${JSON.parse(readFileSync(path.join(ROOT, "node_modules", "gpt-tokenizer", "package.json"), "utf8")).version}`);
