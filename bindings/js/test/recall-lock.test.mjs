// The store's lock directory in JS (docs/RECALL.md "Concurrency"): a wait sleeps
// (the lock clock's sleep, never SQLite's spinning busy handler) and ends at the
// documented 5 s; a lock whose holder is gone (a killed writer) or that is older
// than STALE_AFTER_MS is taken over. The clock is injected: no wall-clock bounds.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { CompactError } from "../index.js";
import { RecallStore } from "../recall.js";
import { STALE_AFTER_MS, lockClock } from "../recall-lock.js";

const RECALL = new URL("../recall.js", import.meta.url).href;
const LOCK = new URL("../recall-lock.js", import.meta.url).href;

function tmpFile(t) {
  const dir = mkdtempSync(path.join(tmpdir(), "ctxc-lock-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, "recall.db");
}

const range = (k, who) => {
  const rid = `r${k}`;
  return { range: { id: rid, from_index: 0, to_index: 1, summary: `${who} ${rid}` },
    rows: [{ id: `${rid}.0`, range_id: rid, position: 0, role: "tool", reason: "summarized", json: JSON.stringify({ role: "tool", content: `${who} ${rid}` }), text: `${who} wrote ${rid}` }] };
};

/** A fake lock clock: sleeping advances it; returns the record of the sleeps. */
function fakeClock(t, onSleep = () => {}) {
  const real = { ...lockClock };
  const rec = { t: 1_000_000_000_000, sleeps: 0, slept: 0 };
  lockClock.now = () => rec.t;
  lockClock.sleep = (ms) => { rec.sleeps++; rec.slept += ms; rec.t += ms; onSleep(rec); };
  t.after(() => Object.assign(lockClock, real));
  return rec;
}

async function drivers() {
  const out = ["wasm"];
  try {
    (await RecallStore.open(null, { driver: "node:sqlite" })).close();
    out.push("node:sqlite");
  } catch { /* Node 20: none */ }
  return out;
}

/** Holds the lock as a live process of this host would. */
function hold(file, at, pid = process.pid) {
  mkdirSync(`${file}.lock`);
  writeFileSync(`${file}.lock/owner`, JSON.stringify({ pid, host: hostname(), runtime: "test", at }));
}

test("a live holder is waited for by sleeping, 5 s in all (not 10-13), then an error naming the lock and its holder", async (t) => {
  for (const driver of await drivers()) {
    const file = tmpFile(t);
    const s = await RecallStore.open(file, { driver });
    s.archive("a", range(1, "js"));
    const clock = fakeClock(t);
    hold(file, clock.t);
    for (const op of [() => s.search("a", "wrote"), () => s.archive("a", range(2, "js")), () => s.ranges("a")]) {
      const before = { ...clock };
      assert.throws(op, (err) => err instanceof CompactError && err.code === "internal" && err.path === "/path" &&
        err.message.includes(`${file}.lock is held by another process for more than 5 s`) &&
        err.message.includes(`holder: pid ${process.pid} on ${hostname()} (test)`), driver);
      assert.equal(clock.slept - before.slept, 5000, `${driver}: the wait is the documented 5 s, slept by the lock clock`);
      assert.ok(clock.sleeps - before.sleeps > 100, `${driver}: short sleeps, not one long one or a spin`);
    }
    rmSync(`${file}.lock`, { recursive: true });
    // Released while an operation waits: it goes on.
    let n = 0;
    lockClock.sleep = (ms) => { clock.t += ms; if (++n === 7) rmSync(`${file}.lock`, { recursive: true }); };
    hold(file, clock.t);
    s.archive("a", range(2, "js"));
    assert.equal(n, 7, "it slept until the holder let go");
    assert.deepEqual(s.ranges("a").map((r) => r.id), ["r1", "r2"]);
    assert.ok(!existsSync(`${file}.lock`), "released after");
    s.close();
  }
});

test("a lock older than STALE_AFTER_MS, or without an owner and an old directory, is taken over at once", async (t) => {
  for (const driver of await drivers()) {
    const file = tmpFile(t);
    const s = await RecallStore.open(file, { driver });
    const clock = fakeClock(t);
    hold(file, clock.t - STALE_AFTER_MS - 1); // a live pid, but for too long
    s.archive("a", range(1, "js"));
    mkdirSync(`${file}.lock`); // node-sqlite3-wasm's own lock: no owner
    const old = (clock.t - STALE_AFTER_MS - 1000) / 1000;
    utimesSync(`${file}.lock`, old, old);
    assert.equal(s.search("a", "wrote").total, 1);
    assert.equal(clock.sleeps, 0, `${driver}: taken over without waiting`);
    assert.ok(!existsSync(`${file}.lock`));
    s.close();
  }
});

test("a writer killed (SIGKILL) in a write transaction leaves its lock; the next use takes it over and the file is as before", async (t) => {
  for (const driver of await drivers()) {
    const file = tmpFile(t);
    const script = `import { writeSync } from "node:fs";
import { RecallStore } from ${JSON.stringify(RECALL)};
import { testHooks } from ${JSON.stringify(LOCK)};
const range = ${range.toString()};
const s = await RecallStore.open(process.argv[1], { driver: ${JSON.stringify(driver)} });
s.archive("a", range(1, "child"));
testHooks.beforeCommit = () => { writeSync(1, "holding\\n"); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); };
s.archive("a", range(2, "child"));`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script, file], { stdio: ["ignore", "pipe", "inherit"] });
    await new Promise((resolve, reject) => {
      child.stdout.on("data", (d) => { if (String(d).includes("holding")) resolve(); });
      child.on("exit", (code) => reject(new Error(`child exited ${code}`)));
    });
    const owner = JSON.parse(readFileSync(`${file}.lock/owner`, "utf8"));
    assert.equal(owner.pid, child.pid);
    child.kill("SIGKILL");
    await new Promise((resolve) => child.on("close", resolve));
    assert.ok(existsSync(`${file}.lock`), "left behind");
    const s = await RecallStore.open(file, { driver });
    s.archive("a", range(2, "parent"));
    assert.deepEqual(s.ranges("a").map((r) => r.summary), ["child r1", "parent r2"]);
    assert.equal(s.search("a", "child wrote r2").total, 0, "the killed transaction is not in the file");
    s.close();
  }
});

test("a holder whose pid no longer runs is taken over at once", async (t) => {
  const gone = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
  const pid = Number(gone.stdout);
  assert.ok(pid > 0);
  for (const driver of await drivers()) {
    const file = tmpFile(t);
    const s = await RecallStore.open(file, { driver });
    const clock = fakeClock(t);
    hold(file, clock.t, pid);
    s.archive("a", range(1, "js"));
    assert.equal(clock.sleeps, 0);
    s.close();
  }
});
