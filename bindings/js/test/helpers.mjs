// Shared test helpers: paths, a hand-assembled stand-in module for loader errors,
// and the shared traces.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
export const WASM_PATH = path.join(ROOT, "wasm", "ctxcompact.wasm");
export const TRACES_DIR = path.join(ROOT, "..", "shared", "traces");

/** CI is set (to anything but "", "0" or "false"): missing inputs fail, not skip. */
export function inCI(env = process.env) {
  return !["", "0", "false"].includes(String(env.CI ?? "").trim().toLowerCase());
}

const missingTraces = (dir) => `shared traces not found at ${dir} (the ../shared folder beside the repository)`;

/**
 * Trace files (openai-chat, *.json) in ../shared/traces. When the folder is missing:
 * throws (failing the test) if CI is set, else returns null (the caller skips or
 * falls back, and says so).
 */
export function traceFiles(dir = TRACES_DIR, env = process.env) {
  if (!existsSync(dir)) {
    if (inCI(env)) throw new Error(`${missingTraces(dir)}; CI is set, so trace-based tests must not skip`);
    return null;
  }
  const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort().map((f) => path.join(dir, f));
  if (files.length === 0) throw new Error(`${dir} exists but holds no *.json trace`);
  return files;
}

/** One shared trace by its path under ../shared/traces (the same rule as traceFiles). */
export function traceFile(relative, dir = TRACES_DIR, env = process.env) {
  if (traceFiles(dir, env) === null) return null;
  const file = path.join(dir, relative);
  if (!existsSync(file)) throw new Error(`${file} is missing from the shared traces`);
  return file;
}

export function loadTrace(file) {
  return JSON.parse(readFileSync(file, "utf8")).messages;
}

/**
 * The `skip` option of a trace-based test: a reason naming the missing folder, or
 * false. With CI set it is always false: the test runs, and traceFiles fails it.
 */
export function tracesSkip(dir = TRACES_DIR, env = process.env) {
  if (existsSync(dir) || inCI(env)) return false;
  return `SKIPPED, NOT TESTED: ${missingTraces(dir)}`;
}

const leb = (n) => {
  const out = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
};
const sleb = (n) => {
  const out = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && !(b & 0x40)) || (n === -1 && b & 0x40)) { out.push(b); return out; }
    out.push(b | 0x80);
  }
};
const str = (s) => [...leb(s.length), ...new TextEncoder().encode(s)];
const section = (id, bytes) => [id, ...leb(bytes.length), ...bytes];
const vec = (items) => [...leb(items.length), ...items.flat()];

/**
 * A tiny hand-assembled module shaped like ctxcompact's boundary, for loader tests.
 * @param {{abi?: number, omit?: string[], allocParams?: number, extraImport?: boolean | [string, string]}} o
 */
export function tinyModule({ abi = 2, omit = [], allocParams = 1, extraImport = false } = {}) {
  const I32 = 0x7f;
  const types = [
    [0x60, 0, 0], // 0: () -> ()
    [0x60, 0, 1, I32], // 1: () -> i32
    [0x60, allocParams, ...Array(allocParams).fill(I32), 1, I32], // 2: alloc
    [0x60, 1, I32, 0], // 3: (i32) -> ()
    [0x60, 2, I32, I32, 1, I32], // 4: (i32, i32) -> i32
  ];
  const [impMod, impName] = Array.isArray(extraImport) ? extraImport : ["env", "host_fn"];
  const imports = extraImport ? [[...str(impMod), ...str(impName), 0x00, 0]] : [];
  const nImp = imports.length;
  const funcs = [
    ["_initialize", 0, [0x0b]],
    ["ctxc_abi_version", 1, [0x41, ...sleb(abi), 0x0b]],
    ["ctxc_alloc", 2, [0x41, 0, 0x0b]],
    ["ctxc_free", 3, [0x0b]],
    ["ctxc_call", 4, [0x41, 0, 0x0b]],
    ["ctxc_call_take", 4, [0x41, 0, 0x0b]],
    ["ctxc_result_len", 1, [0x41, 0, 0x0b]],
  ];
  const exports = [];
  funcs.forEach(([name], i) => { if (!omit.includes(name)) exports.push([...str(name), 0x00, ...leb(i + nImp)]); });
  if (!omit.includes("memory")) exports.push([...str("memory"), 0x02, 0]);
  const bytes = [
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, vec(types)),
    ...(nImp ? section(2, vec(imports)) : []),
    ...section(3, vec(funcs.map(([, t]) => leb(t)))),
    ...section(5, vec([[0x00, 1]])),
    ...section(7, vec(exports)),
    ...section(10, vec(funcs.map(([, , body]) => { const b = [0, ...body]; return [...leb(b.length), ...b]; }))),
  ];
  return new Uint8Array(bytes);
}

export { session, sleep } from "./fixtures.mjs";
