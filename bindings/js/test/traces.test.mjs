// The rule for the shared traces (helpers.mjs): with CI set, a missing
// ../shared/traces fails a trace-based test; without CI it skips, naming the path.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { inCI, traceFile, traceFiles, tracesSkip } from "./helpers.mjs";

test("traces helper: CI set and the folder missing -> the test fails, naming the path", (t) => {
  const tmp = mkdtempSync(path.join(tmpdir(), "ctxcompact-traces-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const missing = path.join(tmp, "shared", "traces");
  for (const CI of ["true", "1", "yes"]) {
    assert.equal(inCI({ CI }), true, CI);
    assert.equal(tracesSkip(missing, { CI }), false, "with CI set the test runs (and fails)");
    assert.throws(() => traceFiles(missing, { CI }), (e) => e.message.includes(missing) && e.message.includes("CI is set"));
    assert.throws(() => traceFile("a.json", missing, { CI }), (e) => e.message.includes(missing));
  }
});

test("traces helper: CI unset and the folder missing -> a skip naming the path", (t) => {
  const tmp = mkdtempSync(path.join(tmpdir(), "ctxcompact-traces-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const missing = path.join(tmp, "shared", "traces");
  for (const env of [{}, { CI: "" }, { CI: "0" }, { CI: "false" }]) {
    assert.equal(inCI(env), false, JSON.stringify(env));
    const reason = tracesSkip(missing, env);
    assert.equal(typeof reason, "string");
    assert.ok(reason.includes(missing) && reason.startsWith("SKIPPED"), reason);
    assert.equal(traceFiles(missing, env), null);
    assert.equal(traceFile("a.json", missing, env), null);
  }
});

test("traces helper: a present folder gives its *.json files, sorted", (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "ctxcompact-traces-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  assert.throws(() => traceFiles(dir, { CI: "true" }), /holds no \*\.json trace/);
  for (const f of ["b.json", "a.json", "notes.txt"]) writeFileSync(path.join(dir, f), "{}");
  assert.equal(tracesSkip(dir, {}), false);
  assert.deepEqual(traceFiles(dir, { CI: "true" }), [path.join(dir, "a.json"), path.join(dir, "b.json")]);
  assert.equal(traceFile("a.json", dir, {}), path.join(dir, "a.json"));
  assert.throws(() => traceFile("c.json", dir, {}), /missing from the shared traces/);
});
