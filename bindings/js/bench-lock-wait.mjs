// How a JS store (Node 20's wasm driver) waits for a store lock another live
// process holds: wall time, CPU time and sleeps of a search, an archive and a
// listing that each wait the documented 5 s and fail (docs/RECALL.md
// "Concurrency"). The first wait also pays the module's warm-up.
// Run: node bindings/js/bench-lock-wait.mjs
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { RecallStore } from "./recall.js";
import { lockClock } from "./recall-lock.js";

let sleeps = 0;
const sleep = lockClock.sleep;
lockClock.sleep = (ms) => { sleeps++; sleep(ms); };
const dir = mkdtempSync(path.join(tmpdir(), "ctxc-wait-"));
const file = path.join(dir, "recall.db");
const s = await RecallStore.open(file, { driver: "wasm" });
mkdirSync(`${file}.lock`); // held by a live process of this host: this one, as another would
writeFileSync(`${file}.lock/owner`, JSON.stringify({ pid: process.pid, host: hostname(), runtime: "bench", at: Date.now() }));
for (const [name, op] of [["ranges (first, with warm-up)", () => s.ranges("a")], ["search", () => s.search("a", "x")],
  ["archive", () => s.archive("a", { range: { id: "r1", from_index: 0, to_index: 1, summary: "" }, rows: [] })], ["ranges", () => s.ranges("a")]]) {
  sleeps = 0;
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  let code = "none";
  try { op(); } catch (err) { code = err.code; }
  const c = process.cpuUsage(c0);
  console.log(`${name}: waited ${((performance.now() - t0) / 1000).toFixed(2)} s, CPU ${((c.user + c.system) / 1e6).toFixed(2)} s, ${sleeps} sleeps, then ${code}`);
}
s.close();
rmSync(dir, { recursive: true, force: true });
