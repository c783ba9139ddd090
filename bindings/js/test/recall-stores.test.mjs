// A store written by each runtime (JS here; Go and Python by their stores, run as
// child processes) gives the hits, totals and originals of testdata/recall/stores.json
// when the JS store reads it (the Go and Python tests read all three the same way).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { RecallStore } from "../recall.js";
import { FIXTURE, writeFixture } from "./recall-stores.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const CI = !["", "0", "false"].includes((process.env.CI ?? "").trim().toLowerCase());

function pythonForStores() {
  const env = { ...process.env, PYTHONPATH: path.join(ROOT, "bindings/python/src") };
  for (const p of [process.env.CTXCOMPACT_PYTHON, path.join(ROOT, "bindings/python/build/venv/bin/python"), "python3"]) {
    if (p && spawnSync(p, ["-c", "import ctxcompact.recall"], { env }).status === 0) return { py: p, env };
  }
  return null;
}

test("stores written by JS, Go and Python give the fixture's answers to the JS store", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "ctxc-stores-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const files = { js: path.join(dir, "js.db") };
  await writeFixture(files.js);
  const missing = (what) => {
    if (CI) assert.fail(`cross-runtime store test: ${what}`);
    t.diagnostic(`SKIPPED, NOT TESTED: ${what}`);
  };
  if (spawnSync("go", ["version"]).status === 0) {
    files.go = path.join(dir, "go.db");
    execFileSync("go", ["test", "./recall", "-run", "^TestWriteStoresFixture$", "-count=1"],
      { cwd: ROOT, env: { ...process.env, CTXC_STORES_OUT: files.go }, stdio: "pipe" });
    assert.ok(existsSync(files.go), "the Go writer wrote its store");
  } else {
    missing("no go toolchain");
  }
  const python = pythonForStores();
  if (python) {
    files.python = path.join(dir, "python.db");
    execFileSync(python.py, [path.join(ROOT, "bindings/python/tests/recall_stores.py"), "write", files.python], { env: python.env, stdio: "pipe" });
  } else {
    missing("a python with ctxcompact's dependencies (CTXCOMPACT_PYTHON or bindings/python/build/venv)");
  }
  for (const [who, file] of Object.entries(files)) {
    const s = await RecallStore.open(file, { driver: "wasm" });
    try {
      for (const c of FIXTURE.searches) {
        const got = s.search(c.session, c.query, { limit: c.limit });
        assert.deepEqual(got.hits.map((h) => h.id), c.hits, `${who} store: ${JSON.stringify(c.query)} in ${c.session}, limit ${c.limit}`);
        assert.equal(got.total, c.total, `${who} store: total of ${JSON.stringify(c.query)} in ${c.session}`);
      }
      for (const c of FIXTURE.expands) {
        assert.deepEqual(s.expand(c.session, c.id).messages, c.messages, `${who} store: expand ${c.id} in ${c.session}`);
      }
    } finally {
      s.close();
    }
  }
});
