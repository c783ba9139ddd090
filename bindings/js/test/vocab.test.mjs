// The exact encodings' rank tables live beside the module, not in it (wasm/abi.json
// "host_imports"): read from the package on the first exact count, or given to
// create() as `vocabularies`. A wrong table is refused by the guest, never counted
// with. The tables are process-wide, so each case runs in a fresh process.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const INDEX = fileURLToPath(new URL("../index.js", import.meta.url));
const VOCAB = fileURLToPath(new URL("../../../core/internal/bpe/vocab/", import.meta.url));
const MSGS = JSON.stringify([{ role: "user", content: "hello world" }]);

/** Runs body (an async function's text, with Compactor and readFileSync in scope) in a fresh node. */
function fresh(body) {
  const src = `import { Compactor } from ${JSON.stringify(INDEX)}; import { readFileSync } from "node:fs";
    const out = await (async () => { ${body} })(); console.log(JSON.stringify(out));`;
  return JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", src], { encoding: "utf8" }));
}

test("exact counts read the packaged table on first use, only the encoding in use", () => {
  const r = fresh(`const c = await Compactor.create();
    return c.countTokens(${MSGS}, { encoding: "cl100k_base" });`);
  assert.equal(r.encoding, "cl100k_base");
  assert.equal(r.total, 9);
});

test("vocabularies given as bytes or a path serve the module", () => {
  const r = fresh(`const c = await Compactor.create({ vocabularies: {
      o200k_base: readFileSync(${JSON.stringify(VOCAB + "o200k_base.bin")}), cl100k_base: ${JSON.stringify(VOCAB + "cl100k_base.bin")} } });
    return [c.countTokens(${MSGS}, { encoding: "o200k_base" }).total, c.countTokens(${MSGS}, { encoding: "cl100k_base" }).total];`);
  assert.deepEqual(r, [9, 9]);
});

test("a wrong table is refused with invalid_request at /encoding, naming the file it is not", () => {
  const r = fresh(`const c = await Compactor.create({ vocabularies: { o200k_base: readFileSync(${JSON.stringify(VOCAB + "cl100k_base.bin")}) } });
    try { c.countTokens(${MSGS}, { encoding: "o200k_base" }); return "counted"; } catch (e) { return { code: e.code, path: e.path, message: e.message }; }`);
  assert.equal(r.code, "invalid_request");
  assert.equal(r.path, "/encoding");
  assert.match(r.message, /^ctxcompact: encoding o200k_base cannot be used: the o200k_base vocabulary is 744101 bytes, want 1597683/);
});

test("vocabularies must name known encodings", () => {
  const r = fresh(`try { await Compactor.create({ vocabularies: { p50k_base: new Uint8Array(1) } }); return "created"; } catch (e) { return e.message; }`);
  assert.match(r, /options\.vocabularies\.p50k_base: no such encoding; allowed: o200k_base, cl100k_base/);
});
