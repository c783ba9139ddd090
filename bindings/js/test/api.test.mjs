// The idiomatic API: loading, ABI checks, errors, the debug hook, trap recovery.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import {
  ABI_VERSION, CompactError, Compactor, ErrABIMismatch, ErrBadBinary, ErrClosed, _instanceOf,
} from "../index.js";
import { EXPORTS, MAX_REQUEST_BYTES } from "../runtime.js";
import { ROOT, WASM_PATH, tinyModule } from "./helpers.mjs";

const abi = JSON.parse(readFileSync(path.join(ROOT, "wasm", "abi.json"), "utf8"));
const goVersion = readFileSync(path.join(ROOT, "core", "version.go"), "utf8").match(/Version = "([^"]+)"/)[1];
const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8"));

test("the binding's ABI table equals wasm/abi.json", () => {
  assert.equal(ABI_VERSION, abi.abi_version);
  assert.equal(MAX_REQUEST_BYTES, abi.max_request_bytes);
  assert.deepEqual(Object.keys(EXPORTS).sort(), Object.keys(abi.exports).sort());
  for (const [name, spec] of Object.entries(abi.exports)) {
    if (spec.kind === "memory") assert.deepEqual(EXPORTS[name], ["memory"], name);
    else {
      assert.ok(spec.params.every((t) => t === "i32") && spec.results.every((t) => t === "i32"), `${name} is i32-only`);
      assert.deepEqual(EXPORTS[name], ["function", spec.params.length], name);
    }
  }
});

test("package.json version equals core/version.go and the module's info", async () => {
  assert.equal(pkg.version, goVersion);
  const c = await Compactor.create();
  const info = c.info();
  assert.equal(info.name, "ctxcompact");
  assert.equal(info.version, goVersion);
  assert.deepEqual([...info.error_codes].sort(), [...abi.error_codes].sort());
});

test("package.json ships the bindings and the wasm, never tests or testdata", () => {
  assert.equal(pkg.type, "module");
  assert.equal(pkg.exports["."].types, "./bindings/js/index.d.ts");
  assert.equal(pkg.exports["."].default, "./bindings/js/index.js");
  assert.ok(pkg.files.includes("wasm/ctxcompact.wasm"));
  assert.ok(pkg.files.every((f) => !f.includes("test") && !f.includes("bench")), pkg.files.join());
  assert.equal(pkg.engines.node, ">=18");
  // One dependency, pinned: the SQLite build of the recall store, which only the
  // ./recall entry loads (recall-store.test.mjs checks the main entry's import graph).
  assert.deepEqual(pkg.dependencies, { "node-sqlite3-wasm": "0.8.60" });
  assert.deepEqual(pkg.exports["./recall"], { types: "./bindings/js/recall.d.ts", default: "./bindings/js/recall.js" });
});

test("the core binding path has no node: imports", () => {
  for (const f of ["index.js", "runtime.js", "wasi.js", "errors.js", "options.js"]) {
    const src = readFileSync(path.join(ROOT, "bindings", "js", f), "utf8");
    assert.doesNotMatch(src, /from\s+["']node:|import\(["']node:|require\(/, f);
  }
});

test("create() accepts bytes, a file URL, a path and a compiled module", async () => {
  const bytes = readFileSync(WASM_PATH);
  const a = await Compactor.create({ wasm: bytes });
  const b = await Compactor.create({ wasm: pathToFileURL(WASM_PATH) });
  const c = await Compactor.create({ wasm: WASM_PATH });
  const d = await Compactor.create({ wasm: a.module });
  const e = await Compactor.create({ wasm: pathToFileURL(WASM_PATH).href });
  for (const x of [a, b, c, d, e]) assert.equal(x.info().name, "ctxcompact");
  assert.equal(d.module, a.module);
});

test("the packaged module is compiled once per process", async () => {
  const a = await Compactor.create();
  const b = await Compactor.create();
  assert.equal(a.module, b.module);
});

test("ErrBadBinary: not wasm, missing export, wrong arity, foreign import", async () => {
  await assert.rejects(Compactor.create({ wasm: new Uint8Array([1, 2, 3, 4]) }), ErrBadBinary);
  await assert.rejects(Compactor.create({ wasm: tinyModule({ omit: ["ctxc_call"] }) }), (err) => {
    assert.ok(err instanceof ErrBadBinary);
    assert.match(err.message, /^ctxcompact: .*ctxc_call/);
    return true;
  });
  await assert.rejects(Compactor.create({ wasm: tinyModule({ omit: ["memory"] }) }), ErrBadBinary);
  await assert.rejects(Compactor.create({ wasm: tinyModule({ allocParams: 2 }) }), /ctxc_alloc takes 2 parameters/);
  await assert.rejects(Compactor.create({ wasm: tinyModule({ extraImport: true }) }), /env\.host_fn/);
});

test("ErrABIMismatch: a module speaking another ABI version", async () => {
  await assert.rejects(Compactor.create({ wasm: tinyModule({ abi: 1 }) }), (err) => {
    assert.ok(err instanceof ErrABIMismatch);
    assert.match(err.message, /ABI version 1/);
    return true;
  });
  // The stand-in itself is accepted when it speaks ABI 2: the checks above are what failed.
  const ok = await Compactor.create({ wasm: tinyModule({ abi: 2 }) });
  assert.equal(ok.closed, false);
});

test("ErrClosed after close()", async () => {
  const c = await Compactor.create();
  c.close();
  assert.equal(c.closed, true);
  assert.throws(() => c.info(), ErrClosed);
  await assert.rejects(c.compact([]), ErrClosed);
});

test("countTokens after close() throws ErrClosed, even for counts it has cached", async () => {
  const c = await Compactor.create();
  const messages = [{ role: "user", content: "hello there" }, { role: "assistant", content: "hi" }];
  assert.equal(c.countTokens(messages).per_message.length, 2); // now cached
  c.close();
  assert.throws(() => c.countTokens(messages), ErrClosed);
  assert.throws(() => c.countTokens(messages, { format: "openai" }), ErrClosed);
});

test("error envelopes become CompactError with code and path", async () => {
  const c = await Compactor.create();
  assert.throws(() => c.call("no.such.op"), (err) => {
    assert.ok(err instanceof CompactError);
    assert.equal(err.code, "unknown_op");
    assert.equal(err.path, "/op");
    assert.match(err.message, /^ctxcompact: /);
    return true;
  });
  const raw = JSON.parse(c.callRaw("{not json"));
  assert.equal(raw.error.code, "invalid_json");
  assert.equal(JSON.parse(c.callRaw("[1]")).error.code, "invalid_request");
  assert.equal(JSON.parse(c.callRaw('{"op":7}')).error.path, "/op");
});

test("non-ASCII requests round-trip through guest memory", async () => {
  const c = await Compactor.create();
  // unknown_op echoes the op name: the bytes went in and came back intact.
  const name = "ünïcödé-操作-🧪";
  const env = JSON.parse(c.callRaw(JSON.stringify({ op: name })));
  assert.equal(env.error.code, "unknown_op");
  assert.ok(env.error.message.includes(name), env.error.message);
});

/** An info request padded with n bytes of whitespace (info takes no field to pad). */
const padded = (n) => `{"op":"info"${" ".repeat(n)}}`;

test("large requests (> 1 MiB, the exact-length path) reach the core", async () => {
  const c = await Compactor.create();
  const count = (content) => JSON.parse(c.callRaw(JSON.stringify({ op: "tokens.count", messages: [{ role: "user", content }] })));
  const env = count("x".repeat(3 << 20));
  assert.ok(env.result.total > 0, JSON.stringify(env).slice(0, 200));
  const env2 = count("é".repeat(1 << 20)); // 2 MiB of UTF-8 from 1 Mi UTF-16 units
  assert.ok(env2.result.total > 0, JSON.stringify(env2).slice(0, 200));
});

test("a trapped instance is replaced: that call throws internal, the next one works", async () => {
  const seen = [];
  const c = await Compactor.create({ debug: (fd, text) => seen.push([fd, text]) });
  const before = _instanceOf(c);
  // Corrupt the guest's memory: the next call traps inside the module.
  new Uint8Array(before.exports.memory.buffer).fill(0xaa);
  assert.throws(() => c.info(), (err) => {
    assert.ok(err instanceof CompactError);
    assert.equal(err.code, "internal");
    assert.match(err.message, /trapped/);
    assert.ok(err.cause instanceof Error, "the trap is the cause");
    return true;
  });
  const after = _instanceOf(c);
  assert.ok(after && after !== before, "a fresh instance took over");
  assert.equal(c.info().name, "ctxcompact");
  await c.ready();
});

test("the WASI shim provides every import the module has, and stubs unknown ones with ENOSYS", async () => {
  const { createWasi } = await import("../wasi.js");
  const c = await Compactor.create();
  const wasi = createWasi(c.module).imports.wasi_snapshot_preview1;
  for (const imp of WebAssembly.Module.imports(c.module)) {
    if (imp.module === "ctxcompact") continue; // the host imports: runtime.js serves them (vocabularies test)
    assert.equal(typeof wasi[imp.name], "function", imp.name);
  }
  // A module importing a preview1 function the shim does not implement gets ENOSYS.
  const other = new WebAssembly.Module(tinyModule({ extraImport: ["wasi_snapshot_preview1", "sock_accept"] }));
  assert.equal(createWasi(other).imports.wasi_snapshot_preview1.sock_accept(0, 0, 0), 52);
});

test("the debug hook gets the guest's stderr; the console gets nothing", async () => {
  const { createWasi } = await import("../wasi.js");
  const c = await Compactor.create();
  const got = [];
  const w = createWasi(c.module, (fd, text) => got.push([fd, text]));
  const mem = new WebAssembly.Memory({ initial: 1 });
  w.bind({ exports: { memory: mem } });
  const bytes = new Uint8Array(mem.buffer);
  bytes.set(new TextEncoder().encode("panic: boom\n"), 100);
  const dv = new DataView(mem.buffer);
  dv.setUint32(16, 100, true);
  dv.setUint32(20, 12, true);
  const origErr = console.error, origLog = console.log;
  let consoleUsed = false;
  console.error = console.log = () => { consoleUsed = true; };
  try {
    assert.equal(w.imports.wasi_snapshot_preview1.fd_write(2, 16, 1, 32), 0);
  } finally {
    console.error = origErr;
    console.log = origLog;
  }
  assert.equal(dv.getUint32(32, true), 12);
  assert.deepEqual(got, [[2, "panic: boom\n"]]);
  assert.equal(consoleUsed, false);
  assert.equal(w.stderrTail(), "panic: boom\n");
  // proc_exit throws instead of exiting the process.
  assert.throws(() => w.imports.wasi_snapshot_preview1.proc_exit(3), /exited with code 3/);
});

test("an instance grown past maxInstanceMemory is replaced after the call, results intact", async () => {
  const c = await Compactor.create({ maxInstanceMemory: 40 << 20 });
  const first = _instanceOf(c);
  assert.equal(c.info().name, "ctxcompact");
  assert.equal(_instanceOf(c), first, "a small call keeps the instance");
  // A 45 MB request (read in place: the guest keeps no copy of it) grows the
  // guest's memory past 40 MiB.
  const env = JSON.parse(c.callRaw(padded(45 << 20)));
  assert.equal(env.result.name, "ctxcompact", "the call that grew the memory still returns its result");
  const second = _instanceOf(c);
  assert.notEqual(second, first, "the grown instance was replaced");
  assert.ok(second.memoryBytes < 40 << 20);
  assert.equal(c.info().name, "ctxcompact");
});

test("where synchronous instantiation is refused, replacements start asynchronously", async (t) => {
  const c = await Compactor.create({ maxInstanceMemory: 40 << 20 });
  const Orig = WebAssembly.Instance;
  // Like a browser main thread with a module over its synchronous limit.
  WebAssembly.Instance = function () { throw new RangeError("WebAssembly.Instance is disallowed on the main thread"); };
  t.after(() => { WebAssembly.Instance = Orig; });

  // A grown (healthy) instance keeps serving until its replacement is up.
  const big = _instanceOf(c);
  c.callRaw(padded(45 << 20));
  assert.equal(_instanceOf(c), big, "still the grown instance");
  assert.equal(c.info().name, "ctxcompact");
  for (let i = 0; i < 200 && _instanceOf(c) === big; i++) await new Promise((r) => setTimeout(r, 10));
  assert.notEqual(_instanceOf(c), big, "replaced once the async instantiation finished");

  // A trapped instance: the failing call and sync calls before the replacement is up
  // throw internal; ready() waits for it; compact() waits by itself.
  new Uint8Array(_instanceOf(c).exports.memory.buffer).fill(0xaa);
  assert.throws(() => c.info(), (e) => e.code === "internal" && /trapped/.test(e.message));
  assert.throws(() => c.info(), (e) => e.code === "internal" && /still starting/.test(e.message));
  await c.ready();
  assert.equal(c.info().name, "ctxcompact");
  new Uint8Array(_instanceOf(c).exports.memory.buffer).fill(0xaa);
  assert.throws(() => c.info(), (e) => e.code === "internal");
  const res = await c.compact([{ role: "user", content: "hi" }]);
  assert.equal(res.report.compacted, false);
});

test("by default an instance grown past 64 MiB is replaced after the call, results intact", async () => {
  const c = await Compactor.create();
  const msgs = [
    { role: "system", content: "You are a coding agent." },
    ...Array.from({ length: 40 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `step ${i}: ${"build and test ".repeat(20)}` })),
  ];
  const before = await c.compact(msgs, { force: true, config: { model: { context_length: 4000 } } });
  const first = _instanceOf(c);
  // A 70 MB request, read in place, grows the guest's memory past 64 MiB.
  const env = JSON.parse(c.callRaw(padded(70 << 20)));
  assert.equal(env.result.name, "ctxcompact");
  const second = _instanceOf(c);
  assert.notEqual(second, first, "the grown instance was replaced");
  assert.ok(second.memoryBytes <= 64 << 20, `${second.memoryBytes} bytes`);
  const after = await c.compact(msgs, { force: true, config: { model: { context_length: 4000 } } });
  assert.deepEqual(after, before);
});
