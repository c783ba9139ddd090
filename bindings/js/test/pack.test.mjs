// `npm pack` -> install the tarball into a clean temp project -> a 10-line script
// compacts a shared trace from there. Proves the package is complete.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
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
  assert.deepEqual({ ranges: rec.ranges, tools: rec.tools }, { ranges: ["r1"], tools: 4 }, JSON.stringify(rec));
  assert.ok(rec.total > 0, JSON.stringify(rec));
});

test("npm install /path/to/checkout -> compact, and recall once the checkout has its dependency", async (t) => {
  // The README's route for an unpublished checkout: npm links the folder, and installs
  // none of its dependencies. The checkout here is a copy of the package's files and
  // package-lock.json with no node_modules, as a fresh clone has (the repository's
  // own has npm ci's). npm reads the registry only for what its cache lacks.
  const tmp = realpathSync(mkdtempSync(path.join(tmpdir(), "ctxcompact-dir-")));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const co = path.join(tmp, "checkout");
  const [dry] = JSON.parse(npm(["pack", "--dry-run", "--json"], ROOT));
  for (const f of [...dry.files.map((x) => x.path), "package-lock.json"]) {
    mkdirSync(path.dirname(path.join(co, f)), { recursive: true });
    copyFileSync(path.join(ROOT, f), path.join(co, f));
  }
  const install = ["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"];
  const app = (name) => {
    const dir = path.join(tmp, name);
    mkdirSync(dir);
    writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name, private: true, type: "module" }));
    writeFileSync(path.join(dir, "conv.json"), JSON.stringify({ messages: session({ turns: 60 }) }));
    writeFileSync(path.join(dir, "run.mjs"), `import { readFileSync } from "node:fs";
import { Compactor } from "ctxcompact";
const { messages } = JSON.parse(readFileSync("conv.json", "utf8"));
const c = await Compactor.create({ config: { model: { context_length: 16000 } } });
const { messages: out, report } = await c.compact(messages, { summarize: async () => "Goal: the task." });
console.log(JSON.stringify({ before: messages.length, after: out.length, compacted: report.compacted, valid: c.validate(out).ok }));
`);
    // The wasm driver, the one every Node without node:sqlite uses (Node 20 here).
    writeFileSync(path.join(dir, "recall.mjs"), `import { RecallStore, ErrMissingDependency } from "ctxcompact/recall";
try {
  const store = await RecallStore.open(":memory:", { driver: "wasm" });
  console.log(JSON.stringify({ driver: store.driver, sessions: store.sessions() }));
  store.close();
} catch (e) {
  console.log(JSON.stringify({ name: e.name, code: e.code, dependency: e.dependency, message: e.message, is: e instanceof ErrMissingDependency }));
}
`);
    return dir;
  };
  const run = (dir, script) => JSON.parse(execFileSync(process.execPath, [script], { cwd: dir, encoding: "utf8" }));
  const opened = { driver: "wasm", sessions: [] };

  const linked = app("linked");
  npm([...install, co], linked);
  assert.ok(lstatSync(path.join(linked, "node_modules", "ctxcompact")).isSymbolicLink(), "npm links the folder");
  const out = run(linked, "run.mjs");
  assert.deepEqual({ compacted: out.compacted, valid: out.valid }, { compacted: true, valid: true }, JSON.stringify(out));
  assert.ok(out.after < out.before, JSON.stringify(out));
  // recall without the checkout's dependency: an error naming both ways to install it.
  const missing = run(linked, "recall.mjs");
  assert.deepEqual({ name: missing.name, code: missing.code, dependency: missing.dependency, is: missing.is },
    { name: "ErrMissingDependency", code: "missing_dependency", dependency: "node-sqlite3-wasm", is: true }, JSON.stringify(missing));
  assert.equal(missing.message, `ctxcompact: recall needs node-sqlite3-wasm (driver "wasm"): this package is a linked folder (${co}), ` +
    `whose dependencies npm does not install: run \`npm install --omit=dev\` in it, or install it as a copy with \`npm install --install-links ${co}\``);

  // The first step the error names (and the README), taken in a second copy: the
  // linked package then finds its dependency.
  const copy = app("copied");
  npm([...install, "--install-links", co], copy);
  assert.ok(!lstatSync(path.join(copy, "node_modules", "ctxcompact")).isSymbolicLink(), "--install-links copies the folder");
  assert.deepEqual(run(copy, "recall.mjs"), opened);
  assert.equal(run(copy, "run.mjs").compacted, true);
  // An installed package without the dependency (removed by hand) names the plain install.
  rmSync(path.join(copy, "node_modules", "node-sqlite3-wasm"), { recursive: true });
  assert.equal(run(copy, "recall.mjs").message, 'ctxcompact: recall needs node-sqlite3-wasm (driver "wasm"): npm install node-sqlite3-wasm');

  // The other step: the checkout's own install, after which the linked package works.
  npm([...install, "--omit=dev"], co);
  assert.deepEqual(run(linked, "recall.mjs"), opened);
});
