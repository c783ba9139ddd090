// One case of bench/memory (see main.go) in Node: node child.mjs compact|lossless INPUT STORE.
// Prints one JSON line: the output's count and SHA-256, the archived count, the
// resident set after the call and after a full GC (when run with --expose-gc; three
// seconds later, see below), and the live instance's linear memory.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { Compactor, _instanceOf } from "../../bindings/js/index.js";

const [which, input, storePath] = process.argv.slice(2);
const c = await Compactor.create();
const before = process.memoryUsage().rss / 2 ** 20;
const messages = JSON.parse(readFileSync(input, "utf8"));
const start = performance.now();
let res;
if (which === "compact") {
  res = await c.compact(messages, { force: true });
} else if (which === "lossless") {
  const { RecallStore } = await import("../../bindings/js/recall.js");
  const store = await RecallStore.open(storePath);
  const engine = c.engine({ config: { context: { engine: "lossless" } }, store, sessionId: "bench" });
  res = await engine.compress(messages, { force: true });
  store.close();
} else {
  throw new Error(`unknown case ${which} (compact, lossless)`);
}
const seconds = (performance.now() - start) / 1000;
const out = {
  messages: res.messages.length,
  sha256: createHash("sha256").update(JSON.stringify(res.messages)).digest("hex"),
  archived: res.archived.length,
  rss_after_mb: process.memoryUsage().rss / 2 ** 20,
  seconds,
  rss_before_mb: before,
  instance_mb: (_instanceOf(c)?.memoryBytes ?? 0) / 2 ** 20,
};
res = undefined;
messages.length = 0;
// V8 frees a dropped instance's memory some collections later, not at the first:
// collect three times, a second apart.
if (globalThis.gc) {
  for (let i = 0; i < 3; i++) {
    globalThis.gc();
    await new Promise((r) => setTimeout(r, 1000));
  }
  globalThis.gc();
}
out.rss_after_gc_mb = process.memoryUsage().rss / 2 ** 20;
console.log(JSON.stringify(out));
