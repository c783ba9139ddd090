// The module and the API in headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core), loading the binding and the .wasm from a localhost page.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import { ROOT } from "./helpers.mjs";

const CHROMIUM = "/usr/bin/chromium";
const TYPES = { ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".html": "text/html" };
const PAGE = `<!doctype html><meta charset="utf-8"><title>ctxcompact</title><link rel="icon" href="data:,">
<script type="module" src="/bindings/js/test/browser-page.mjs"></script>`;

function serve() {
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    if (url.pathname === "/") {
      res.writeHead(200, { "content-type": "text/html" }).end(PAGE);
      return;
    }
    // Only the binding, the module and the exact encodings' tables are served.
    const rel = path.normalize(decodeURIComponent(url.pathname)).replace(/^\/+/, "");
    const ok = (rel.startsWith("bindings/js/") && !rel.includes("..")) || rel === "wasm/ctxcompact.wasm" ||
      rel === "core/internal/bpe/vocab/o200k_base.bin";
    const file = path.join(ROOT, rel);
    if (!ok || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": TYPES[path.extname(file)] ?? "application/octet-stream" }).end(readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

test("headless Chromium: default and URL loading, an op, compactions, errors, trap recovery, memory recycling", async (t) => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: bindings/js/test.sh installs the Debian chromium package`);
  const server = await serve();
  const profile = mkdtempSync(path.join(tmpdir(), "ctxcompact-chromium-"));
  let context;
  // One hook, in order: the browser must be gone before its profile is removed.
  t.after(async () => {
    await context?.close().catch(() => {});
    server.close();
    rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      "--disable-breakpad", "--disable-crash-reporter"],
  });
  const page = context.pages()[0] ?? await context.newPage();
  const logs = [];
  page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
  const { port } = server.address();
  await page.goto(`http://127.0.0.1:${port}/`);
  await page.waitForFunction(() => window.__result !== undefined, null, { timeout: 60000 });
  const r = await page.evaluate(() => window.__result);

  assert.equal(r.failure, undefined, r.failure);
  assert.equal(r.info.name, "ctxcompact");
  assert.equal(r.byUrl, "ctxcompact");
  assert.equal(r.byResponse, "ctxcompact");
  assert.match(r.pathError, /needs node:fs/);
  assert.equal(r.threshold.threshold_tokens, 100000);
  assert.equal(r.report.compacted, true);
  assert.equal(r.report.summarizer, "host");
  assert.equal(r.report.fallback_used, false);
  assert.equal(r.sameTail, true);
  assert.equal(r.hasSummary, true);
  assert.equal(r.fallbackUsed, true);
  assert.equal(r.timeoutCode, "timeout");
  assert.deepEqual(r.optionError, { code: "invalid_request", path: "/forse" });
  assert.equal(r.engineTriggers, true);
  assert.deepEqual(r.error, { isCompactError: true, code: "unknown_op", path: "/op" });
  assert.equal(r.trapCode, "internal");
  assert.equal(r.replaced, true);
  assert.equal(r.afterTrap, "ctxcompact");
  assert.equal(r.trapCode2, "internal");
  assert.equal(r.compactAfterTrap, true);
  assert.equal(r.grownStillServes, "ctxcompact");
  assert.equal(r.grownReplaced, true);
  assert.equal(r.afterGrow, "ctxcompact");
  assert.equal(r.noVocab.code, "invalid_request");
  assert.equal(r.noVocab.path, "/encoding");
  assert.match(r.noVocab.message, /no o200k_base vocabulary/);
  assert.equal(r.withVocab.total, 9, "o200k_base: the message 3 + role 1 + text 2, the reply priming 3, as in Node");
  assert.deepEqual(logs, [], "nothing on the browser console");
  t.diagnostic(`synchronous instantiation on the main thread: ${r.syncInstantiate}; create() took ${r.createMs.toFixed(0)} ms`);
});
