// Runs in headless Chromium (see browser.test.mjs): loads the binding as a browser
// would, fetches the .wasm over http, runs ops and compactions, reports to the test.
import { Compactor, CompactError, _instanceOf } from "/bindings/js/index.js";
import { session, sleep } from "/bindings/js/test/fixtures.mjs";

async function run() {
  const out = {};
  // 1. Default loading: the binding finds ../../wasm/ctxcompact.wasm next to itself.
  const t0 = performance.now();
  const c = await Compactor.create();
  out.createMs = performance.now() - t0;
  out.info = c.info();
  // 2. An explicit URL, and a Response.
  const byUrl = await Compactor.create({ wasm: new URL("/wasm/ctxcompact.wasm", location.href) });
  out.byUrl = byUrl.info().name;
  const byResponse = await Compactor.create({ wasm: await fetch("/wasm/ctxcompact.wasm") });
  out.byResponse = byResponse.info().name;
  // A file path cannot be read in a browser: a clear error.
  try { await Compactor.create({ wasm: "wasm/ctxcompact.wasm" }); } catch (e) { out.pathError = e.message; }
  // 3. A pure op.
  out.threshold = c.resolveThreshold({ compression: { small_context_floor: 0 }, model: { context_length: 200000 } });
  // 4. A compaction with an async summarizer, and one with a rejecting summarizer.
  const msgs = session({ turns: 40 });
  const config = { model: { context_length: 32000 } };
  const res = await c.compact(msgs, { config, summarize: async () => { await sleep(20); return "BROWSER-SUMMARY"; } });
  out.report = res.report;
  out.sameTail = res.messages.at(-1) === msgs.at(-1);
  out.hasSummary = res.messages.some((m) => typeof m.content === "string" && m.content.includes("BROWSER-SUMMARY"));
  const failed = await c.compact(msgs, { config, summarize: async () => { throw new Error("offline"); } });
  out.fallbackUsed = failed.report.fallback_used;
  // A hanging summarizer times out (the browser's timers, AbortController); a
  // misspelled option throws; the engine runs on the core's engine ops.
  const hung = await c.compact(msgs, { config, timeoutMs: 30, summarize: () => new Promise(() => {}) });
  out.timeoutCode = hung.report.fallback_code;
  try { await c.compact(msgs, { forse: true }); } catch (e) { out.optionError = { code: e.code, path: e.path }; }
  const engine = c.engine({ config });
  engine.updateFromResponse({ inputTokens: 30000, outputTokens: 5 });
  out.engineTriggers = engine.shouldCompress();
  // 5. An error envelope.
  try { c.call("nope"); } catch (e) { out.error = { isCompactError: e instanceof CompactError, code: e.code, path: e.path }; }
  // 6. A trap on the main thread. Where the browser refuses synchronous
  // instantiation (large modules on a main thread), the replacement starts
  // asynchronously and ready() waits; where it allows it (syncInstantiate below),
  // ready() returns at once.
  const before = _instanceOf(c);
  new Uint8Array(before.exports.memory.buffer).fill(0xaa);
  try { c.info(); } catch (e) { out.trapCode = e.code; }
  await c.ready();
  out.replaced = _instanceOf(c) !== before && _instanceOf(c) !== null;
  out.afterTrap = c.info().name;
  // compact() waits for the replacement by itself.
  new Uint8Array(_instanceOf(c).exports.memory.buffer).fill(0xaa);
  try { c.info(); } catch (e) { out.trapCode2 = e.code; }
  out.compactAfterTrap = (await c.compact(msgs, { config })).report.compacted;
  // 7. An instance grown past maxInstanceMemory keeps serving until its
  // (asynchronous, here) replacement is up.
  const g = await Compactor.create({ maxInstanceMemory: 24 << 20 });
  const big = _instanceOf(g);
  g.callRaw(`{"op":"info"${" ".repeat(20 << 20)}}`); // info padded with whitespace
  out.grownStillServes = g.info().name;
  for (let i = 0; i < 100 && _instanceOf(g) === big; i++) await sleep(50);
  out.grownReplaced = _instanceOf(g) !== big;
  out.afterGrow = g.info().name;
  // Whether this browser lets the main thread instantiate the module synchronously
  // (decides whether a trapped instance is replaced inside the failing call).
  try {
    const { createWasi } = await import("/bindings/js/wasi.js");
    new WebAssembly.Instance(c.module, { ...createWasi(c.module).imports, ctxcompact: { vocab_size: () => -1, vocab_read: () => -1 } });
    out.syncInstantiate = "allowed";
  } catch (e) {
    out.syncInstantiate = String(e.message);
  }
  // 8. The exact encodings' tables: a browser has no files to read them from, so an
  // exact count without them names what is missing; given as a URL, they are fetched.
  try { c.countTokens(msgs.slice(0, 3), { encoding: "o200k_base" }); } catch (e) { out.noVocab = { code: e.code, path: e.path, message: e.message }; }
  const v = await Compactor.create({ vocabularies: { o200k_base: new URL("/core/internal/bpe/vocab/o200k_base.bin", location.href) } });
  out.withVocab = v.countTokens([{ role: "user", content: "hello world" }], { encoding: "o200k_base" });
  return out;
}

run().then((r) => { window.__result = r; }, (e) => { window.__result = { failure: String(e && e.stack || e) }; });
