// Loading, checking and calling the ctxcompact WebAssembly module (wasm/abi.json).
// No `node:` imports here: file lookup in Node lives in ./node.js and is loaded with a
// dynamic import only when a file: URL or a path has to be read.

import { createWasi } from "./wasi.js";
import { CompactError, ErrABIMismatch, ErrBadBinary } from "./errors.js";

/** The boundary version this binding speaks (wasm/abi.json "abi_version"). */
export const ABI_VERSION = 2;

/** The exports this binding needs: name -> [kind, parameter count] (wasm/abi.json "exports"). */
export const EXPORTS = {
  _initialize: ["function", 0],
  memory: ["memory"],
  ctxc_abi_version: ["function", 0],
  ctxc_alloc: ["function", 1],
  ctxc_free: ["function", 1],
  ctxc_call: ["function", 2],
  ctxc_call_take: ["function", 2],
  ctxc_result_len: ["function", 0],
};

/** wasm/abi.json "max_request_bytes": larger requests are refused before the call. */
export const MAX_REQUEST_BYTES = 268435456;

const DEFAULT_WASM = new URL("../../wasm/ctxcompact.wasm", import.meta.url);

// The module has no BPE rank tables of its own (2.3 MB less to download and
// compile): when it first counts with o200k_base or cl100k_base it asks its host
// through the ctxcompact.vocab_size and vocab_read imports (wasm/abi.json
// "host_imports"). They are served from `vocabularies` given to create(), else, where
// node:fs exists (Node, Deno, Bun), read on first use from the package's
// core/internal/bpe/vocab/<name>.bin; the guest checks each table's length and sum.
const VOCAB_NAMES = ["o200k_base", "cl100k_base"];
const VOCAB_DIR = new URL("../../core/internal/bpe/vocab/", import.meta.url);

/** name -> the table's bytes, once loaded (process-wide: the tables never change). */
const vocab = new Map();
/** (url) => bytes, where node:fs exists; set by prepareVocabularies. */
let readVocabSync;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** @type {Promise<WebAssembly.Module> | undefined} */
let defaultModule;

/**
 * Compiles (once per process for the packaged module) the module named by `wasm`.
 * @param {BufferSource | URL | string | WebAssembly.Module | Response | undefined} wasm
 * @returns {Promise<WebAssembly.Module>}
 */
export function loadModule(wasm) {
  if (wasm === undefined || wasm === null) {
    defaultModule ??= compileFrom(DEFAULT_WASM).catch((err) => {
      defaultModule = undefined; // let a later create() try again
      throw err;
    });
    return defaultModule;
  }
  return compileFrom(wasm);
}

async function compileFrom(wasm) {
  if (wasm instanceof WebAssembly.Module) return wasm;
  const src = await open(wasm, "ctxcompact: options.wasm must be bytes, a URL, a string or a WebAssembly.Module");
  return src.response !== undefined ? compileResponse(src.response) : compileBytes(src.bytes);
}

/**
 * What src names, as bytes or a fetch Response (streamed by the caller): bytes as
 * they are, a Response, a URL (fetched, or read for file:), or a string (a URL, or a
 * path read through node:fs). Throws a TypeError with wrongType for anything else.
 * @returns {Promise<{bytes?: BufferSource, response?: Response}>}
 */
async function open(src, wrongType) {
  if (src instanceof ArrayBuffer || ArrayBuffer.isView(src)) return { bytes: src };
  // A fetch Response, recognized by shape: touching the global Response would load
  // Node's fetch implementation (~10-20 ms) for nothing.
  if (src && typeof src === "object" && !(src instanceof URL) && typeof src.arrayBuffer === "function" && src.headers) {
    return { response: src };
  }
  let url;
  if (src instanceof URL) url = src;
  else if (typeof src === "string") {
    // "C:\x.wasm" is a path, "https://…" and "file:///…" are URLs.
    if (/^[a-z][a-z0-9+.-]+:/i.test(src)) url = new URL(src);
    else {
      const files = await nodeFiles();
      return { bytes: await unreadable(src, () => files.readPath(src)) };
    }
  } else {
    throw new TypeError(wrongType);
  }
  if (url.protocol === "file:") {
    const files = await nodeFiles();
    return { bytes: await unreadable(url.href, () => files.readURL(url)) };
  }
  const res = await unreadable(url.href, () => fetch(url));
  if (!res.ok) throw new ErrBadBinary(`ctxcompact: cannot read the module at ${url.href}: HTTP ${res.status}`);
  return { response: res };
}

/**
 * Makes the tables available to the instances: the ones given (name -> bytes, URL,
 * path or Response), loaded now; else a reader of the packaged files where node:fs
 * exists. Without either (a browser), an exact count fails with the core's
 * invalid_config naming the missing table.
 * @param {Record<string, unknown> | undefined} given
 */
export async function prepareVocabularies(given) {
  if (given !== undefined && given !== null) {
    if (typeof given !== "object") throw new TypeError("ctxcompact: options.vocabularies must be an object: encoding name -> bytes, URL, path or Response");
    for (const [name, src] of Object.entries(given)) {
      if (!VOCAB_NAMES.includes(name)) throw new TypeError(`ctxcompact: options.vocabularies.${name}: no such encoding; allowed: ${VOCAB_NAMES.join(", ")}`);
      const got = await open(src, `ctxcompact: options.vocabularies.${name} must be bytes, a URL, a path or a Response`);
      vocab.set(name, got.response !== undefined ? new Uint8Array(await got.response.arrayBuffer()) : copyBytes(got.bytes));
    }
    return;
  }
  if (readVocabSync !== undefined || !hasNodeFiles()) return;
  const files = await nodeFiles();
  readVocabSync = files.readURLSync;
}

/** A copy of bytes (an ArrayBuffer or any view of one), which the caller may reuse. */
function copyBytes(b) {
  return ArrayBuffer.isView(b) ? new Uint8Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)) : new Uint8Array(b.slice(0));
}

/** The table of an encoding, or undefined when this host has none. */
function vocabulary(name) {
  let t = vocab.get(name);
  if (t === undefined && readVocabSync !== undefined && VOCAB_NAMES.includes(name)) {
    try {
      t = new Uint8Array(readVocabSync(new URL(`${name}.bin`, VOCAB_DIR)));
      vocab.set(name, t);
    } catch {
      return undefined; // the guest reports the table missing (invalid_config)
    }
  }
  return t;
}

/** The ctxcompact.vocab_* imports of one instance, reading its memory once bound. */
function hostImports(bound) {
  const nameAt = (p, n) => decoder.decode(new Uint8Array(bound.memory.buffer, p >>> 0, n >>> 0));
  return {
    vocab_size(p, n) {
      const t = vocabulary(nameAt(p, n));
      return t === undefined ? -1 : t.length;
    },
    vocab_read(p, n, dst) {
      const t = vocabulary(nameAt(p, n));
      if (t === undefined) return -1;
      new Uint8Array(bound.memory.buffer, dst >>> 0, t.length).set(t);
      return 0;
    },
  };
}

/**
 * read() of the module at `where`, or ErrBadBinary when it cannot be read (a missing
 * file, a failed fetch), as in Python: no module is a bad module, not an fs error.
 */
async function unreadable(where, read) {
  try {
    return await read();
  } catch (err) {
    throw new ErrBadBinary(`ctxcompact: cannot read the module at ${where}: ${err.message}`, { cause: err });
  }
}

function hasNodeFiles() {
  return typeof globalThis.process?.versions?.node === "string" || typeof globalThis.Deno !== "undefined";
}

/** ./node.js (node:fs), or a clear error where there is no file system. */
async function nodeFiles() {
  const msg = "ctxcompact: reading the module from a file needs node:fs (Node, Deno, Bun); elsewhere pass options.wasm as bytes, an http(s) URL or a WebAssembly.Module";
  // Node and Bun set process.versions.node; Deno has node:fs too. Browsers would
  // only log a failed module load, so do not try there.
  if (!hasNodeFiles()) throw new Error(msg);
  try {
    return await import("./node.js");
  } catch (err) {
    throw new Error(msg, { cause: err });
  }
}

async function compileResponse(res) {
  const type = res.headers.get("content-type") || "";
  if (typeof WebAssembly.compileStreaming === "function" && type.split(";")[0].trim() === "application/wasm") {
    try {
      return await WebAssembly.compileStreaming(res);
    } catch (err) {
      throw new ErrBadBinary(`ctxcompact: the module does not compile: ${err.message}`, { cause: err });
    }
  }
  return compileBytes(await res.arrayBuffer());
}

async function compileBytes(bytes) {
  try {
    return await WebAssembly.compile(bytes);
  } catch (err) {
    throw new ErrBadBinary(`ctxcompact: the module does not compile: ${err.message}`, { cause: err });
  }
}

/**
 * Checks a compiled module's exports and imports against the ABI, before instantiating.
 * @param {WebAssembly.Module} module
 */
export function checkModule(module) {
  const have = new Map(WebAssembly.Module.exports(module).map((e) => [e.name, e.kind]));
  for (const [name, [kind]] of Object.entries(EXPORTS)) {
    if (!have.has(name)) throw new ErrBadBinary(`ctxcompact: the module does not export ${name}; it is not a ctxcompact module`);
    if (have.get(name) !== kind) throw new ErrBadBinary(`ctxcompact: export ${name} is a ${have.get(name)}, want a ${kind}`);
  }
  for (const imp of WebAssembly.Module.imports(module)) {
    const ours = imp.module === "ctxcompact" && (imp.name === "vocab_size" || imp.name === "vocab_read");
    if ((imp.module !== "wasi_snapshot_preview1" && !ours) || imp.kind !== "function") {
      throw new ErrBadBinary(`ctxcompact: the module imports ${imp.module}.${imp.name} (${imp.kind}); only wasi_snapshot_preview1 functions and ctxcompact.vocab_size/vocab_read are provided`);
    }
  }
}

/**
 * One instance of the module: single-threaded, not re-entrant. A trapped instance is
 * corrupt; its owner discards it (see Compactor).
 */
export class Instance {
  #exports;
  #wasi;

  constructor(instance, wasi) {
    this.#exports = instance.exports;
    this.#wasi = wasi;
  }

  /** Instantiates asynchronously (allowed everywhere, for any module size). */
  static async create(module, debug) {
    const wasi = createWasi(module, debug);
    const bound = { memory: null };
    const instance = await WebAssembly.instantiate(module, { ...wasi.imports, ctxcompact: hostImports(bound) });
    return Instance.#start(instance, wasi, bound);
  }

  /** Instantiates synchronously; used to replace a trapped instance inside a sync call. */
  static createSync(module, debug) {
    const wasi = createWasi(module, debug);
    const bound = { memory: null };
    return Instance.#start(new WebAssembly.Instance(module, { ...wasi.imports, ctxcompact: hostImports(bound) }), wasi, bound);
  }

  static #start(instance, wasi, bound) {
    const ex = instance.exports;
    bound.memory = ex.memory;
    for (const [name, [kind, params]] of Object.entries(EXPORTS)) {
      if (kind === "function" && ex[name].length !== params) {
        throw new ErrBadBinary(`ctxcompact: export ${name} takes ${ex[name].length} parameters, want ${params}`);
      }
    }
    wasi.bind(instance);
    ex._initialize();
    const v = ex.ctxc_abi_version();
    if (v !== ABI_VERSION) {
      throw new ErrABIMismatch(`ctxcompact: the module speaks ABI version ${v}; this binding speaks ${ABI_VERSION}`);
    }
    return new Instance(instance, wasi);
  }

  /** The last bytes the guest wrote to stderr (a Go panic trace before a trap). */
  get stderrTail() { return this.#wasi.stderrTail(); }

  /** Current size of the instance's linear memory in bytes. */
  get memoryBytes() { return this.#exports.memory.buffer.byteLength; }

  /** Raw exports, for tests. */
  get exports() { return this.#exports; }

  /**
   * Sends one request envelope and returns the response envelope, both JSON text.
   * Throws whatever the instance throws (a trap); the caller decides what that means.
   * @param {string} request
   * @returns {string}
   */
  call(request) {
    const ex = this.#exports;
    // Encode straight into guest memory: ask for the UTF-8 upper bound when it is
    // small, otherwise encode first to learn the exact length.
    let p, n;
    if (request.length <= 1 << 20) {
      const cap = request.length * 3 || 1;
      p = ex.ctxc_alloc(cap);
      if (p === 0) return tooLarge(cap);
      n = encoder.encodeInto(request, new Uint8Array(ex.memory.buffer, p >>> 0, cap)).written;
    } else {
      const bytes = encoder.encode(request);
      n = bytes.length;
      if (n > MAX_REQUEST_BYTES) return tooLarge(n);
      p = ex.ctxc_alloc(n);
      if (p === 0) return tooLarge(n);
      new Uint8Array(ex.memory.buffer, p >>> 0, n).set(bytes);
    }
    return this.#finish(p, n);
  }

  /**
   * Like call, for a request given as pieces: strings (encoded here) and UTF-8 bytes
   * (copied as they are). compact() encodes the messages once and sends the same
   * bytes to compact.begin and compact.finish.
   * @param {(string | Uint8Array)[]} parts
   * @returns {string}
   */
  callParts(parts) {
    const ex = this.#exports;
    const bufs = parts.map((part) => (typeof part === "string" ? encoder.encode(part) : part));
    let n = 0;
    for (const b of bufs) n += b.length;
    if (n > MAX_REQUEST_BYTES) return tooLarge(n);
    const p = ex.ctxc_alloc(n || 1);
    if (p === 0) return tooLarge(n);
    const mem = new Uint8Array(ex.memory.buffer, p >>> 0, n);
    let off = 0;
    for (const b of bufs) {
      mem.set(b, off);
      off += b.length;
    }
    return this.#finish(p, n);
  }

  #finish(p, n) {
    const ex = this.#exports;
    // ctxc_call_take: the request buffer is the guest's from here on (never written,
    // passed or freed again), so a compact.begin keeps it for compact.finish
    // without a copy.
    const r = ex.ctxc_call_take(p, n) >>> 0;
    const len = ex.ctxc_result_len() >>> 0;
    return decoder.decode(new Uint8Array(ex.memory.buffer, r, len));
  }
}

/** UTF-8 bytes of a string, for Instance.callParts. */
export function utf8(s) {
  return encoder.encode(s);
}

function tooLarge(n) {
  return JSON.stringify({ error: { code: "input_too_large", message: `ctxcompact: request is ${n} bytes; the limit is ${MAX_REQUEST_BYTES}`, path: "" } });
}

/**
 * Parses a response envelope: the result, or a thrown CompactError.
 * @param {string} response
 */
export function unwrap(response) {
  let env;
  try {
    env = JSON.parse(response);
  } catch (err) {
    throw new CompactError("internal", `ctxcompact: the module returned invalid JSON: ${err.message}`, "", { cause: err });
  }
  if (env !== null && typeof env === "object") {
    if ("result" in env) return env.result;
    if (env.error && typeof env.error.code === "string") {
      throw new CompactError(env.error.code, env.error.message ?? `ctxcompact: ${env.error.code}`, env.error.path ?? "");
    }
  }
  throw new CompactError("internal", "ctxcompact: the module returned an envelope with neither result nor error");
}
