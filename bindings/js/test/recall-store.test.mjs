// The lossless-recall store (ctxcompact/recall, issue 17) with rows written by hand:
// the schema of the shared contract, persistence across processes, two sessions in
// one file, delete_session, the same hits from FTS5 and LIKE, one transaction per
// archive, a WAL-mode file from another runtime (Python's sqlite3).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { RecallStore, parseQuery } from "../recall.js";
import { CompactError } from "../errors.js";

const require = createRequire(import.meta.url);
const { Database } = require("node-sqlite3-wasm");
const RECALL = new URL("../recall.js", import.meta.url).href;
// Tests that read the file with node-sqlite3-wasm directly write it with the same
// driver (a node:sqlite store is in WAL mode, which that build opens only exclusively).
const WASM = { driver: "wasm" };

function tmpStore(t) {
  const dir = mkdtempSync(path.join(tmpdir(), "ctxc-recall-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, "recall.db");
}

/** recall.archive-shaped rows for a range, written by hand: texts[i] is message from+i. */
function range(k, from, texts, { summary = `summary of range ${k}` } = {}) {
  const id = `r${k}`;
  const rows = texts.map((text, i) => ({
    id: `${id}.${from + i}`, range_id: id, position: from + i, role: i % 2 ? "tool" : "assistant",
    reason: "summarized", json: JSON.stringify({ role: i % 2 ? "tool" : "assistant", content: text, n: from + i }), text,
  }));
  rows.push({ id: `${id}.summary`, range_id: id, position: from, role: "summary", reason: "summary",
    json: JSON.stringify({ role: "user", content: summary }), text: summary });
  return { range: { id, from_index: from, to_index: from + texts.length, summary }, rows };
}

/** Runs a script in a fresh node process (the store imported as `R`); returns its JSON output. */
function inChild(code, ...args) {
  const script = `import * as R from ${JSON.stringify(RECALL)};\nconst args = process.argv.slice(1);\n${code}`;
  return JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", script, ...args], { encoding: "utf8" }));
}

test("the file has the contract's schema, meta and FTS5 trigram index", async (t) => {
  const file = tmpStore(t);
  const s = await RecallStore.open(file, WASM);
  assert.equal(s.driver, "wasm");
  assert.equal(s.searchMode, "fts5");
  s.archive("a", range(1, 2, ["read src/app.py"]));
  s.close();
  assert.ok(!existsSync(`${file}.lock`), "no lock left behind");

  const db = new Database(file, { readOnly: true });
  const cols = (table) => db.all(`PRAGMA table_info(${table})`).map((c) => `${c.name} ${c.type}${c.notnull ? " NOT NULL" : ""}${c.pk ? ` pk${c.pk}` : ""}`);
  assert.deepEqual(cols("ctxc_meta"), ["key TEXT pk1", "value TEXT NOT NULL"]);
  assert.deepEqual(cols("ctxc_ranges"), ["session TEXT NOT NULL pk1", "id TEXT NOT NULL pk2", "seq INTEGER NOT NULL",
    "from_index INTEGER NOT NULL", "to_index INTEGER NOT NULL", "summary TEXT NOT NULL"]);
  assert.deepEqual(cols("ctxc_messages"), ["rowid INTEGER pk1", "session TEXT NOT NULL", "id TEXT NOT NULL", "range_id TEXT NOT NULL",
    "position INTEGER NOT NULL", "role TEXT NOT NULL", "reason TEXT NOT NULL", "json TEXT NOT NULL", "text TEXT NOT NULL"]);
  const uniq = db.all("PRAGMA index_list(ctxc_messages)").filter((i) => i.unique);
  assert.deepEqual(uniq.map((i) => db.all(`PRAGMA index_info(${JSON.stringify(i.name)})`).map((c) => c.name)), [["session", "id"]]);
  assert.match(db.get("SELECT sql FROM sqlite_master WHERE name = 'ctxc_fts'").sql,
    /USING fts5\(\s*text, content='ctxc_messages', content_rowid='rowid', tokenize='trigram'\)/);
  assert.deepEqual(db.all("SELECT key, value FROM ctxc_meta ORDER BY key").map((r) => [r.key, r.value]), [["fts", "fts5"], ["schema_version", "1"]]);
  assert.deepEqual(db.all("SELECT session, id, seq, from_index, to_index, summary FROM ctxc_ranges").map((r) => ({ ...r })),
    [{ session: "a", id: "r1", seq: 1, from_index: 2, to_index: 3, summary: "summary of range 1" }]);
  // The index is in sync: FTS5's own check passes, and it finds the row by substring.
  db.close();
  const rw = new Database(file);
  rw.exec("INSERT INTO ctxc_fts(ctxc_fts, rank) VALUES ('integrity-check', 1)");
  assert.deepEqual(rw.all("SELECT m.id FROM ctxc_fts f JOIN ctxc_messages m ON m.rowid = f.rowid WHERE ctxc_fts MATCH '\"app.py\"'").map((r) => r.id), ["r1.2"]);
  rw.close();
});

test("ids, ranges, expand: a range gives its originals in input order, a message id one", async () => {
  const s = await RecallStore.open();
  assert.equal(s.path, null);
  assert.equal(s.nextRangeId("a"), "r1");
  const first = range(1, 1, ["one", "two", "three"]);
  // Rows may arrive in any order; expand orders by position.
  first.rows = [first.rows[2], first.rows[0], first.rows[1], first.rows[3]];
  assert.deepEqual(s.archive("a", first), { range: "r1", messages: 4 });
  assert.equal(s.nextRangeId("a"), "r2");
  s.archive("a", range(2, 2, ["four"]));
  assert.deepEqual(s.ranges("a").map((r) => [r.id, r.seq, r.from_index, r.to_index]), [["r1", 1, 1, 4], ["r2", 2, 2, 3]]);
  assert.deepEqual(s.expand("a", "r1").messages.map((j) => JSON.parse(j).content), ["one", "two", "three"]);
  assert.deepEqual(s.expand("a", "r1.2"), { id: "r1.2", messages: [range(1, 1, ["one", "two"]).rows[1].json] });
  assert.equal(JSON.parse(s.expand("a", "r2.summary").messages[0]).content, "summary of range 2");
  assert.deepEqual(s.expand("a", "r9").messages, []);
  assert.deepEqual(s.expand("a", "R1").messages, [], "ids are case-sensitive");
  assert.deepEqual(s.expand("b", "r1").messages, [], "another session sees nothing");
  s.close();
  assert.throws(() => s.search("a", "one"), CompactError);
});

test("the original JSON comes back byte for byte (unicode, escapes, key order, numbers)", async () => {
  const s = await RecallStore.open();
  const json = '{"z":1,"role":"tool","content":"caf\\u00e9 \u2603 \ud83d\ude00 \\"q\\" \\n","x":1.50,"e":1e3,"tool_call_id":"c1"}';
  const r = range(1, 0, ["x"]);
  r.rows[0].json = json;
  s.archive("a", r);
  assert.equal(s.expand("a", "r1.0").messages[0], json);
  s.close();
});

test("archive is one transaction: a bad row leaves nothing; a range id is archived once", async () => {
  const s = await RecallStore.open();
  const bad = range(1, 0, ["alpha", "beta", "gamma"]);
  bad.rows[2] = { ...bad.rows[2], id: bad.rows[0].id }; // UNIQUE (session, id) fails on the third insert
  assert.throws(() => s.archive("a", bad), (e) => e instanceof CompactError && e.code === "invalid_request");
  assert.deepEqual(s.sessions(), []);
  assert.equal(s.search("a", "alpha").total, 0);
  assert.equal(s.nextRangeId("a"), "r1");
  s.archive("a", range(1, 0, ["alpha"]));
  assert.throws(() => s.archive("a", range(1, 5, ["again"])), (e) => e.code === "invalid_state" && e.path === "/range/id");
  assert.throws(() => s.archive("a", { range: { id: "x1", from_index: 0, to_index: 1, summary: "" }, rows: [] }), (e) => e.path === "/range/id");
  const wrong = range(2, 0, ["w"]);
  wrong.rows[0].range_id = "r3";
  assert.throws(() => s.archive("a", wrong), (e) => e.path === "/rows/0/range_id");
  const noText = range(2, 0, ["w"]);
  delete noText.rows[0].text;
  assert.throws(() => s.archive("a", noText), (e) => e.path === "/rows/0/text");
  assert.equal(s.search("a", "again").total, 0);
  assert.deepEqual(s.ranges("a").map((r) => r.id), ["r1"]);
  s.close();
});

test("two sessions in one file do not see each other; deleteSession removes one", async (t) => {
  const file = tmpStore(t);
  const s = await RecallStore.open(file, WASM);
  s.archive("alice", range(1, 1, ["edit src/app.py for alice", "pytest: 2 failed"]));
  s.archive("bob", range(1, 1, ["edit src/app.py for bob"]));
  s.archive("bob", range(2, 3, ["bob again src/app.py"]));
  assert.deepEqual(s.sessions(), ["alice", "bob"]);
  assert.deepEqual(s.search("alice", "src/app.py").hits.map((h) => h.id), ["r1.1"]);
  assert.deepEqual(s.search("bob", "src/app.py").hits.map((h) => h.id), ["r2.3", "r1.1"], "newest first");
  assert.deepEqual(JSON.parse(s.expand("alice", "r1.1").messages[0]).content, "edit src/app.py for alice");
  assert.deepEqual(JSON.parse(s.expand("bob", "r1.1").messages[0]).content, "edit src/app.py for bob");
  assert.equal(s.search("bob", "pytest").total, 0);

  assert.deepEqual(s.deleteSession("bob"), { ranges: 2, messages: 4 });
  assert.deepEqual(s.sessions(), ["alice"]);
  assert.equal(s.search("bob", "src/app.py").total, 0);
  assert.deepEqual(s.expand("bob", "r1").messages, []);
  assert.equal(s.nextRangeId("bob"), "r1");
  assert.deepEqual(s.search("alice", "src/app.py").hits.map((h) => h.id), ["r1.1"]);
  assert.deepEqual(s.deleteSession("nobody"), { ranges: 0, messages: 0 });
  s.close();
  // The index lost exactly bob's entries: FTS5's check passes and finds alice's row only.
  const db = new Database(file);
  db.exec("INSERT INTO ctxc_fts(ctxc_fts, rank) VALUES ('integrity-check', 1)");
  assert.deepEqual(db.all("SELECT rowid FROM ctxc_fts WHERE ctxc_fts MATCH '\"src/app\"'").length, 1);
  db.close();
});

// Texts and queries where trigram matching, case folding, LIKE's wildcards and short
// terms could make the FTS5 and LIKE modes differ.
const TEXTS = [
  "assistant: read_file {\"path\": \"src/app.py\"}",
  "tool: def main():\n    return app.run()",
  "user: add error handling to src/App.PY please",
  "tool: FAILED tests/test_app.py::test_login - AssertionError",
  "assistant: foo.bar() and foo_bar are different; 100% sure",
  "tool: café CAFÉ Straße naïve",
  "user: go",
  "tool: 50%_off \\backslash\\ path C:\\temp\\x",
  "assistant: the quick brown fox",
  "tool: src/app.pyc is compiled",
  "tool: \u212Aey \u017Fet \u212Aelvin", // KELVIN SIGN and LONG S: the index folds them to k and s, LIKE does not
  "tool: key set kelvin",
];
const QUERIES = ["src/app.py", "SRC/APP.PY", "app", "foo.bar", "foo_bar", "100%", "50%_", "\\backslash\\", "C:\\temp",
  "café", "CAFÉ", "straße", "go", "ap", "\"quick brown\"", "brown quick", "\"brown quick\"", "test_app.py::test_login",
  "tool: py", "nothing-like-this", "a", "é", "\"add error handling\"", "key", "KEY", "set", "elvin", "ey s", "\u212Aey", "tool"];

/** The contract's rule: every term a case-insensitive (ASCII) substring of the text. */
function reference(texts, query) {
  const fold = (x) => x.replace(/[A-Z]/g, (c) => c.toLowerCase());
  const terms = parseQuery(query).terms.map(fold);
  return texts.map((tx, i) => [tx, i]).filter(([tx]) => terms.every((t) => fold(tx).includes(t))).map(([, i]) => i).reverse();
}

test("FTS5 and LIKE give the same hits, the contract's, in the same order", async (t) => {
  const file = tmpStore(t);
  const fts = await RecallStore.open(file, WASM);
  fts.archive("s", range(1, 0, TEXTS));
  fts.archive("other", range(1, 0, TEXTS)); // never a hit in session s
  const like = await RecallStore.open(file, { ...WASM, fts: false }); // the same file, searched with LIKE
  const likeOnly = await RecallStore.open(null, { fts: false }); // a store made without the index
  likeOnly.archive("s", range(1, 0, TEXTS));
  assert.deepEqual([fts.searchMode, like.searchMode, likeOnly.searchMode, likeOnly.fileMode], ["fts5", "like", "like", "like"]);
  for (const q of QUERIES) {
    const want = reference(TEXTS, q).map((i) => `r1.${i}`);
    const ids = (st) => st.search("s", q, { limit: 50 }).hits.map((h) => h.id).filter((id) => id !== "r1.summary");
    assert.deepEqual(ids(fts), want, `fts5: ${q}`);
    assert.deepEqual(ids(like), want, `like: ${q}`);
    assert.deepEqual(ids(likeOnly), want, `like-only file: ${q}`);
  }
  // Summaries are searchable rows too.
  assert.deepEqual(fts.search("s", "summary of range").hits.map((h) => h.id), ["r1.summary"]);
  // limit and total.
  const r = fts.search("s", "tool", { limit: 2 });
  assert.equal(r.hits.length, 2);
  assert.equal(r.total, TEXTS.filter((x) => x.includes("tool")).length);
  assert.equal(fts.search("s", "tool", { limit: 500 }).hits.length, r.total, "the limit is capped at 50, above these hits");
  assert.throws(() => fts.search("s", "  "), (e) => e.code === "invalid_request" && e.path === "/query");
  assert.throws(() => fts.search("s", "x", { limit: 0 }), (e) => e.path === "/limit");
  // countLimit bounds the total ("at least"); the hits are the same.
  const bounded = await RecallStore.open(file, { ...WASM, countLimit: 3 });
  assert.equal(bounded.countLimit, 3);
  const b = bounded.search("s", "tool", { limit: 2 });
  assert.deepEqual(b, { hits: r.hits, total: 3 });
  assert.deepEqual(bounded.search("s", "tool", { limit: 50 }), fts.search("s", "tool", { limit: 50 }), "a limit above the bound: the total counts at least the hits");
  assert.deepEqual(bounded.search("s", "src/app.py"), fts.search("s", "src/app.py"), "fewer hits than the limit: exact");
  bounded.close();
  await assert.rejects(RecallStore.open(null, { countLimit: 0 }), (e) => e.path === "/count_limit");
  // A query parsed by the core (recall.query) is taken as is.
  assert.deepEqual(fts.search("s", parseQuery("src/app.py")).hits.map((h) => h.id), ["r1.9", "r1.2", "r1.0"]);
  for (const s of [fts, like, likeOnly]) s.close();
  const db = new Database(file, { readOnly: true });
  assert.equal(db.get("SELECT count(*) AS n FROM sqlite_master WHERE name = 'ctxc_fts'").n, 1);
  db.close();
});

test("the store persists across processes; an open idle store does not block another process's writes", async (t) => {
  const file = tmpStore(t);
  const wrote = inChild(`const s = await R.RecallStore.open(args[0]);
const id = s.nextRangeId("a");
s.archive("a", { range: { id, from_index: 3, to_index: 4, summary: "S" }, rows: [
  { id: id + ".3", range_id: id, position: 3, role: "tool", reason: "summarized", json: '{"role":"tool","content":"OUT \\\\u00e9"}', text: "cat src/app.py output" }] });
s.close();
console.log(JSON.stringify({ id }));`, file);
  assert.deepEqual(wrote, { id: "r1" });

  // This process keeps the store open (idle) while a child archives r2 and reads both.
  const s = await RecallStore.open(file);
  assert.deepEqual(s.search("a", "src/app.py").hits.map((h) => h.id), ["r1.3"]);
  const again = inChild(`const s = await R.RecallStore.open(args[0]);
const id = s.nextRangeId("a");
s.archive("a", { range: { id, from_index: 5, to_index: 6, summary: "S2" }, rows: [
  { id: id + ".5", range_id: id, position: 5, role: "tool", reason: "summarized", json: "{}", text: "src/app.py again" }] });
const out = { id, hits: s.search("a", "src/app.py").hits.map((h) => h.id), json: s.expand("a", "r1.3").messages[0] };
s.close();
console.log(JSON.stringify(out));`, file);
  assert.deepEqual(again, { id: "r2", hits: ["r2.5", "r1.3"], json: '{"role":"tool","content":"OUT \\u00e9"}' });
  assert.deepEqual(s.search("a", "src/app.py").hits.map((h) => h.id), ["r2.5", "r1.3"], "the open store sees the other process's write");
  s.close();
});

test("writes from two processes at once are serialized by the file lock (busy timeout)", async (t) => {
  const file = tmpStore(t);
  (await RecallStore.open(file)).close();
  const script = (name) => `import * as R from ${JSON.stringify(RECALL)};
const s = await R.RecallStore.open(process.argv[1]);
for (let i = 0; i < 20; i++) {
  s.archive(${JSON.stringify(name)}, { range: { id: "r" + (i + 1), from_index: i, to_index: i + 1, summary: "s" }, rows: [
    { id: "r" + (i + 1) + "." + i, range_id: "r" + (i + 1), position: i, role: "user", reason: "summarized", json: "{}", text: ${JSON.stringify(name)} + " message " + i }] });
}
s.close();`;
  const run = (name) => new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["--input-type=module", "-e", script(name), file], { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    p.stderr.on("data", (d) => { err += d; });
    p.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${name} exited ${code}: ${err}`))));
  });
  await Promise.all([run("left"), run("right")]);
  const s = await RecallStore.open(file);
  assert.deepEqual(s.sessions(), ["left", "right"]);
  assert.equal(s.search("left", "message").total, 20);
  assert.equal(s.search("right", "message").total, 20);
  s.close();
});

const hasPython = (() => {
  try {
    execFileSync("python3", ["-c", "import sqlite3"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

test("a WAL-mode file another runtime wrote (Python's sqlite3) is read and written, and Python reads it back", { skip: hasPython ? false : "SKIPPED, NOT TESTED: no python3 with sqlite3" }, async (t) => {
  const file = tmpStore(t);
  // The contract's schema, written by Python in WAL mode (as the Python and Go stores did before they took the lock directory).
  execFileSync("python3", ["-c", `
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("PRAGMA journal_mode = WAL")
c.executescript("""
CREATE TABLE ctxc_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ctxc_ranges (session TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL, from_index INTEGER NOT NULL, to_index INTEGER NOT NULL, summary TEXT NOT NULL, PRIMARY KEY (session, id));
CREATE TABLE ctxc_messages (rowid INTEGER PRIMARY KEY, session TEXT NOT NULL, id TEXT NOT NULL, range_id TEXT NOT NULL, position INTEGER NOT NULL, role TEXT NOT NULL, reason TEXT NOT NULL, json TEXT NOT NULL, text TEXT NOT NULL, UNIQUE (session, id));
CREATE VIRTUAL TABLE ctxc_fts USING fts5(text, content='ctxc_messages', content_rowid='rowid', tokenize='trigram');
INSERT INTO ctxc_meta VALUES ('schema_version', '1'), ('fts', 'fts5');
INSERT INTO ctxc_ranges VALUES ('py', 'r1', 1, 0, 1, 'from python');
INSERT INTO ctxc_messages VALUES (1, 'py', 'r1.0', 'r1', 0, 'user', 'summarized', '{"role":"user","content":"fix src/py_side.py"}', 'user fix src/py_side.py');
INSERT INTO ctxc_fts(rowid, text) VALUES (1, 'user fix src/py_side.py');
""")
c.commit()
print(c.execute("PRAGMA journal_mode").fetchone()[0])
`, file]);
  const s = await RecallStore.open(file);
  assert.deepEqual(s.search("py", "py_side.py").hits.map((h) => h.id), ["r1.0"]);
  assert.equal(s.nextRangeId("py"), "r2");
  s.archive("py", range(2, 1, ["node wrote src/node_side.js"]));
  s.close();
  const out = execFileSync("python3", ["-c", `
import sqlite3, sys, json
c = sqlite3.connect(sys.argv[1])
rows = c.execute("SELECT m.id FROM ctxc_fts f JOIN ctxc_messages m ON m.rowid = f.rowid WHERE ctxc_fts MATCH ? ORDER BY m.rowid", ('"side"',)).fetchall()
print(json.dumps([r[0] for r in rows]))
`, file], { encoding: "utf8" });
  assert.deepEqual(JSON.parse(out), ["r1.0", "r2.1"]);
});

test("open() checks its arguments", async () => {
  await assert.rejects(RecallStore.open(""), (e) => e.code === "invalid_request" && e.path === "/path");
  await assert.rejects(RecallStore.open(null, { fts: "no" }), (e) => e.path === "/fts");
  await assert.rejects(RecallStore.open(null, { drvier: "wasm" }), (e) => e.path === "/drvier");
  await assert.rejects(RecallStore.open(null, { driver: "sqlite" }), (e) => e.path === "/driver");
  assert.throws(() => new RecallStore(), TypeError);
  // node:sqlite is feature-detected: on a runtime without it, "auto" takes the wasm
  // build and asking for it is an error naming the versions that have it.
  const { getBuiltinModule } = process;
  let hasNodeSqlite = false;
  try { hasNodeSqlite = !!(typeof getBuiltinModule === "function" ? getBuiltinModule("node:sqlite") : await import("node:sqlite")); } catch { /* absent */ }
  const auto = await RecallStore.open();
  assert.equal(auto.driver, hasNodeSqlite ? "node:sqlite" : "wasm");
  auto.close();
  if (!hasNodeSqlite) {
    await assert.rejects(RecallStore.open(null, { driver: "node:sqlite" }), (e) => e.code === "invalid_request" && e.path === "/driver" && /22\.5/.test(e.message));
  }
});

test("the main entry never loads SQLite: recall.js and its driver are outside its import graph", async () => {
  // Static: the import graph of index.js (relative imports followed) has no recall.js and no SQLite.
  const { readFileSync } = await import("node:fs");
  const seen = new Set();
  const walk = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const src = readFileSync(file, "utf8");
    for (const m of src.matchAll(/(?:^|\n)\s*(?:import|export)\s[^"']*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)) {
      const spec = m[1] ?? m[2];
      if (spec.endsWith(".d.ts")) continue; // JSDoc type imports (the types may name RecallStore)
      assert.doesNotMatch(spec, /sqlite|recall/, `${path.basename(file)} imports ${spec}`);
      if (spec.startsWith(".")) walk(path.resolve(path.dirname(file), spec));
    }
  };
  walk(new URL("../index.js", import.meta.url).pathname);
  assert.ok(seen.size >= 4, [...seen].join(", "));
  // At run time: a compaction through the main entry leaves the driver unloaded.
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", `
import { createRequire } from "node:module";
import { Compactor } from ${JSON.stringify(new URL("../index.js", import.meta.url).href)};
const c = await Compactor.create();
const msgs = [{ role: "user", content: "x".repeat(4000) }, { role: "assistant", content: "y" }];
await c.compact(msgs, { force: true });
console.log(JSON.stringify(Object.keys(createRequire(import.meta.url).cache)));`], { encoding: "utf8" });
  assert.deepEqual(JSON.parse(out).filter((f) => /sqlite/.test(f)), []);
});

test("a read-only store (readOnly, or a file this process cannot write) is searched and expanded, never written", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "ctxc-ro-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "ro.db");
  const w = await RecallStore.open(file);
  w.archive("a", range(1, 0, ["wrote this"]));
  w.close();
  const s = await RecallStore.open(file, { readOnly: true });
  assert.equal(s.readOnly, true);
  assert.equal(s.search("a", "wrote").total, 1);
  assert.equal(s.expand("a", "r1").messages.length, 1);
  for (const write of [() => s.archive("a", range(2, 0, ["x"])), () => s.deleteSession("a")]) {
    assert.throws(write, (e) => e instanceof CompactError && e.code === "invalid_state" && e.path === "/path" && /is read-only/.test(e.message));
  }
  s.close();
  await assert.rejects(RecallStore.open(path.join(dir, "none.db"), { readOnly: true }), (e) => e.code === "invalid_state" && e.path === "/path");
  const again = await RecallStore.open(file);
  assert.equal(again.readOnly, false);
  assert.deepEqual(again.ranges("a").map((r) => r.id), ["r1"]);
  again.close();
});
