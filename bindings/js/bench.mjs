// Benchmark of the JS binding against the native Go core, in one run:
//   1. end-to-end compact() from JS objects to JS objects, per shared trace, against
//      core.Call natively on the very envelopes the binding sent (bench/main.go);
//   2. first-call latency in fresh processes: import + compile + instantiate + the
//      first compact.
//
// Usage: node bindings/js/bench.mjs [--time MS] [--runs N] [--window TOKENS]
// Needs ../shared/traces and Go (for the native side).

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const TRACES = path.join(ROOT, "..", "shared", "traces");
const SUMMARY = "## Goal\nFinish the task.\n## Progress\nDone: earlier steps.\n## Next Steps\nContinue.";

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : def;
};

// Child mode: one first-call measurement in a fresh process.
if (args[0] === "--first-call") {
  const file = args[1];
  const window = Number(args[2]);
  const { messages } = JSON.parse(readFileSync(file, "utf8"));
  const t0 = performance.now();
  const { Compactor } = await import(pathToFileURL(path.join(ROOT, "bindings", "js", "index.js")).href);
  const t1 = performance.now();
  const c = await Compactor.create();
  const t2 = performance.now();
  const res = await c.compact(messages, { config: { model: { context_length: window } }, force: true, summarize: () => SUMMARY });
  const t3 = performance.now();
  if (!res.report.compacted) throw new Error("not compacted");
  console.log(JSON.stringify({ import: t1 - t0, create: t2 - t1, compact: t3 - t2, total: t3 - t0 }));
  process.exit(0);
}

const minTime = opt("--time", 500);
const runs = opt("--runs", 7);
const window = opt("--window", 32000);
const config = { model: { context_length: window } };

const files = readdirSync(TRACES).filter((f) => f.endsWith(".json")).sort();
const { Compactor } = await import("./index.js");
const c = await Compactor.create();

// Warm-up over every trace first: V8 compiles the module's functions with its
// baseline compiler and optimizes the hot ones in the background as they run, so the
// first traces measured would otherwise pay for that (up to 2x on the first one).
// First-call latency, with that cost, is measured on its own below.
for (let pass = 0; pass < 3; pass++) {
  for (const f of files) {
    const { messages } = JSON.parse(readFileSync(path.join(TRACES, f), "utf8"));
    await c.compact(messages, { config: { model: { context_length: opt("--window", 32000) } }, force: true, summarize: () => SUMMARY });
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * Alternates samples of the end-to-end call and the wasm-only call until minTime has
 * passed (at least 7 each) and returns their medians in ns: medians, because this
 * machine may be shared and a mean would mostly measure the neighbours.
 */
async function sample(e2e, wasmOnly) {
  for (let i = 0; i < 3; i++) { await e2e(); wasmOnly(); }
  const a = [], b = [];
  const start = performance.now();
  while (a.length < 7 || performance.now() - start < minTime) {
    let t = performance.now();
    await e2e();
    a.push(performance.now() - t);
    t = performance.now();
    wasmOnly();
    b.push(performance.now() - t);
  }
  return [median(a) * 1e6, median(b) * 1e6];
}

const dir = mkdtempSync(path.join(tmpdir(), "ctxcompact-bench-"));
const rows = [];
try {
  for (const f of files) {
    const name = f.replace(/\.json$/, "");
    const text = readFileSync(path.join(TRACES, f), "utf8");
    const { messages } = JSON.parse(text);
    const opts = { config, force: true, summarize: () => SUMMARY };

    const first = await c.compact(messages, opts);
    // The envelopes compact() sends (same fields, same message JSON), for the
    // wasm-only column and for the native side.
    const tail = `,"config":${JSON.stringify(config)},"force":true,"output":"refs","messages":${JSON.stringify(messages)}}`;
    const sent = [`{"op":"compact.begin","summarizer":"host"${tail}`];
    const begun = JSON.parse(c.callRaw(sent[0])).result;
    if (!begun.done) sent.push(`{"op":"compact.finish","state":${JSON.stringify(begun.state)},"summary":${JSON.stringify(SUMMARY)}${tail}`);
    for (const r of sent) if (!JSON.parse(c.callRaw(r)).result) throw new Error(`${name}: ${r.slice(0, 40)} failed`);
    writeFileSync(path.join(dir, `${name}.begin.json`), sent[0]);
    if (sent[1]) writeFileSync(path.join(dir, `${name}.finish.json`), sent[1]);

    // e2e: JS objects to JS objects. wasm: the same envelopes through the module
    // alone (no stringify, no parse, no summarizer await).
    const [jsNs, wasmNs] = await sample(() => c.compact(messages, opts), () => { for (const r of sent) c.callRaw(r); });
    rows.push({ name, kb: text.length / 1024, msgs: messages.length, after: first.messages.length, reason: first.report.reason, jsNs, wasmNs });
  }

  const out = execFileSync("go", ["run", "./bindings/js/bench", "-time", `${minTime}ms`, dir], { cwd: ROOT, encoding: "utf8" });
  const native = new Map(out.trim().split("\n").map((l) => JSON.parse(l)).map((r) => [r.name, r.ns_per_op]));

  const ms = (ns) => (ns / 1e6).toFixed(2).padStart(8);
  console.log(`compact (force, window ${window}, host summarizer), median ms per trace; ratio = JS end-to-end / native Go`);
  console.log(`${"trace".padEnd(52)} ${"KB".padStart(5)} ${"msgs".padStart(9)} ${"native".padStart(8)} ${"wasm".padStart(8)} ${"JS e2e".padStart(8)}  ratio`);
  let sumJs = 0, sumNative = 0, sumWasm = 0, logRatio = 0, worst = 0;
  for (const r of rows) {
    const n = native.get(r.name);
    const ratio = r.jsNs / n;
    sumJs += r.jsNs; sumNative += n; sumWasm += r.wasmNs; logRatio += Math.log(ratio); worst = Math.max(worst, ratio);
    console.log(`${r.name.padEnd(52)} ${r.kb.toFixed(0).padStart(5)} ${`${r.msgs}>${r.after}`.padStart(9)} ${ms(n)} ${ms(r.wasmNs)} ${ms(r.jsNs)}  ${ratio.toFixed(2)}`);
  }
  console.log(`${"all traces (sum)".padEnd(68)} ${ms(sumNative)} ${ms(sumWasm)} ${ms(sumJs)}  ${(sumJs / sumNative).toFixed(2)}`);
  console.log(`JS/native: total ${(sumJs / sumNative).toFixed(2)}, geometric mean ${Math.exp(logRatio / rows.length).toFixed(2)}, worst ${worst.toFixed(2)}; wasm alone/native ${(sumWasm / sumNative).toFixed(2)}; JS glue ${(((sumJs - sumWasm) / sumJs) * 100).toFixed(0)}% of JS time`);

  // First-call latency in fresh processes, on the smallest and on the median-size trace.
  const bySize = [...rows].sort((a, b) => a.kb - b.kb);
  for (const t of [bySize[0], bySize[Math.floor(rows.length / 2)]]) {
    const firsts = [];
    for (let i = 0; i < runs; i++) {
      const o = execFileSync(process.execPath, [fileURLToPath(import.meta.url), "--first-call", path.join(TRACES, `${t.name}.json`), String(window)], { encoding: "utf8" });
      firsts.push(JSON.parse(o));
    }
    const med = (k) => median(firsts.map((x) => x[k]));
    console.log(`first compaction in a fresh process (${t.name}, ${t.kb.toFixed(0)} KB), median of ${runs}: ` +
      `import ${med("import").toFixed(1)} + load/compile/instantiate ${med("create").toFixed(1)} + compact ${med("compact").toFixed(1)} = ${med("total").toFixed(1)} ms ` +
      `(min ${Math.min(...firsts.map((x) => x.total)).toFixed(0)})`);
  }
  console.log(`node ${process.version}, ${process.platform}/${process.arch}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
