// `npm pack` -> install the tarball into a clean temp project -> a 10-line script
// compacts a shared trace from there. Proves the package is complete.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ROOT, TRACES_DIR, session, traceFiles } from "./helpers.mjs";

const npm = (args, cwd) => execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

test("npm pack -> install in a clean folder -> compact a shared trace", async (t) => {
  const tmp = mkdtempSync(path.join(tmpdir(), "ctxcompact-pack-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));

  const [packed] = JSON.parse(npm(["pack", "--json", "--pack-destination", tmp], ROOT));
  const files = packed.files.map((f) => f.path).sort();
  for (const want of ["package.json", "wasm/ctxcompact.wasm", "bindings/js/index.js", "bindings/js/index.d.ts",
    "bindings/js/runtime.js", "bindings/js/wasi.js", "bindings/js/errors.js", "bindings/js/options.js", "bindings/js/counts.js", "bindings/js/node.js",
    "bindings/js/recall.js", "bindings/js/recall-lock.js", "bindings/js/recall.d.ts", "bindings/js/summarizers.js", "recall/schema.sql"]) {
    assert.ok(files.includes(want), `the tarball has ${want}: ${files.join(", ")}`);
  }
  for (const f of files) assert.doesNotMatch(f, /testdata|\/test\/|bench|\.go$|test\.sh/, f);

  const proj = path.join(tmp, "app");
  mkdirSync(proj);
  writeFileSync(path.join(proj, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  npm(["install", "--no-audit", "--no-fund", "--ignore-scripts", path.join(tmp, packed.filename)], proj);
  assert.ok(existsSync(path.join(proj, "node_modules", "ctxcompact", "wasm", "ctxcompact.wasm")));

  // The trace: a shared one, or (only when ../shared/traces is absent and CI is not
  // set; with CI set traceFiles throws) a synthetic one.
  const traces = traceFiles();
  const trace = traces ? traces.find((f) => f.includes("mini-swe-agent")) ?? traces[0] : path.join(tmp, "synthetic.json");
  if (!traces) {
    t.diagnostic(`NOTE: ${TRACES_DIR} is missing: compacting a synthetic session instead`);
    writeFileSync(trace, JSON.stringify({ messages: session({ turns: 60 }) }));
  }
  const script = `import { readFileSync } from "node:fs";
import { Compactor } from "ctxcompact";
const { messages } = JSON.parse(readFileSync(process.argv[2], "utf8"));
const c = await Compactor.create({ config: { model: { context_length: 32000 } } });
const summarize = async (req) => "Summary of messages " + req.middle.from + " to " + req.middle.to;
const { messages: out, report, archived } = await c.compact(messages, { summarize });
const kept = out.filter((m) => messages.includes(m)).length;
console.log(JSON.stringify({ before: messages.length, after: out.length, kept, archived: archived.length,
  compacted: report.compacted, note: report.system_note_added, valid: c.validate(out).ok }));
`;
  assert.ok(script.trim().split("\n").length <= 10);
  writeFileSync(path.join(proj, "run.mjs"), script);
  const out = JSON.parse(execFileSync(process.execPath, ["run.mjs", trace], { cwd: proj, encoding: "utf8" }));
  assert.equal(out.compacted, true, JSON.stringify(out));
  assert.equal(out.valid, true);
  assert.ok(out.after < out.before, JSON.stringify(out));
  assert.ok(out.kept > 0, "unchanged messages are the caller's objects");
  // Every input message is kept as is or archived (the system prompt as it was before the note).
  assert.equal(out.kept + out.archived, out.before, JSON.stringify(out));

  // The types resolve from the installed package.
  const pkg = JSON.parse(readFileSync(path.join(proj, "node_modules", "ctxcompact", "package.json"), "utf8"));
  assert.ok(existsSync(path.join(proj, "node_modules", "ctxcompact", pkg.exports["."].types)));
  assert.ok(existsSync(path.join(proj, "node_modules", "ctxcompact", pkg.exports["./recall"].types)));

  // ctxcompact/recall from the installed package (its SQLite dependency installed with it):
  // a lossless engine archives the trace to a store file and searches it.
  writeFileSync(path.join(proj, "recall.mjs"), `import { readFileSync } from "node:fs";
import { ContextEngine } from "ctxcompact";
import { RecallStore } from "ctxcompact/recall";
const { messages } = JSON.parse(readFileSync(process.argv[2], "utf8"));
const store = await RecallStore.open("recall.db");
const e = await ContextEngine.create({ config: { model: { context_length: 32000 }, context: { engine: "lossless" } }, store, sessionId: "s" });
await e.compress(messages, { force: true });
const found = JSON.parse(e.handleToolCall("context_search", { query: "the" }));
console.log(JSON.stringify({ ranges: store.ranges("s").map((r) => r.id), tools: e.getToolSchemas().length, total: found.total }));
store.close();
`);
  const rec = JSON.parse(execFileSync(process.execPath, ["recall.mjs", trace], { cwd: proj, encoding: "utf8" }));
  assert.deepEqual({ ranges: rec.ranges, tools: rec.tools }, { ranges: ["r1"], tools: 2 }, JSON.stringify(rec));
  assert.ok(rec.total > 0, JSON.stringify(rec));
});

test("npm install /path/to/checkout -> compact from a clean folder", async (t) => {
  // The README's route for an unpublished checkout: npm links the folder.
  const tmp = mkdtempSync(path.join(tmpdir(), "ctxcompact-dir-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  writeFileSync(path.join(tmp, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  npm(["install", "--no-audit", "--no-fund", "--ignore-scripts", ROOT], tmp);
  const pkg = JSON.parse(readFileSync(path.join(tmp, "node_modules", "ctxcompact", "package.json"), "utf8"));
  assert.equal(pkg.name, "ctxcompact");
  writeFileSync(path.join(tmp, "conv.json"), JSON.stringify({ messages: session({ turns: 60 }) }));
  writeFileSync(path.join(tmp, "run.mjs"), `import { readFileSync } from "node:fs";
import { Compactor } from "ctxcompact";
const { messages } = JSON.parse(readFileSync("conv.json", "utf8"));
const c = await Compactor.create({ config: { model: { context_length: 16000 } } });
const { messages: out, report } = await c.compact(messages, { summarize: async () => "Goal: the task." });
console.log(JSON.stringify({ before: messages.length, after: out.length, compacted: report.compacted, valid: c.validate(out).ok }));
`);
  const out = JSON.parse(execFileSync(process.execPath, ["run.mjs"], { cwd: tmp, encoding: "utf8" }));
  assert.deepEqual({ compacted: out.compacted, valid: out.valid }, { compacted: true, valid: true }, JSON.stringify(out));
  assert.ok(out.after < out.before, JSON.stringify(out));
});
