// Strict inputs for the JS API: every options object is checked against the names
// its method takes (an unknown or misspelled key throws, naming the closest valid
// one), option values are type-checked, and values JSON cannot hold (cycles,
// BigInt, NaN, nesting too deep for the core) are found and named by a JSON
// pointer instead of letting JSON.stringify throw a raw error or turn them into null.
// Errors are CompactError with code invalid_request (options), invalid_messages
// (messages) or invalid_config (config), and a path in wire names (snake_case), so a
// failure reads the same in every runtime. No `node:` imports here.

import { CompactError } from "./errors.js";

/** The core's bound on nesting (core.MaxNestingDepth), counted from the request envelope. */
export const MAX_NESTING_DEPTH = 1000;

/** JSON-pointer segment of a key (RFC 6901). */
function seg(key) {
  return String(key).replace(/~/g, "~0").replace(/\//g, "~1");
}

/** camelCase option name -> its snake_case wire name (promptTokens -> prompt_tokens). */
export function wireName(key) {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** What a value is, for messages: "a string", "a function", "null", "an array". */
export function describe(v) {
  if (v === null) return "null";
  if (v === undefined) return "undefined";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "number" && !Number.isFinite(v)) return String(v);
  const t = typeof v;
  if (t === "bigint") return `a BigInt (${v}n)`;
  if (t === "string") return `a string (${JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v)})`;
  if (t === "number" || t === "boolean") return `${t === "number" ? "the number" : "the boolean"} ${v}`;
  if (t === "object") return "an object";
  return `a ${t}`;
}

function isAbortSignal(v) {
  if (typeof AbortSignal === "function" && v instanceof AbortSignal) return true;
  // A signal from another realm (an iframe, a polyfill): the shape compact() uses.
  return v !== null && typeof v === "object" && typeof v.aborted === "boolean" &&
    typeof v.addEventListener === "function" && typeof v.removeEventListener === "function";
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** Value types: [test, what it must be]. */
export const T = {
  any: [() => true, "anything"],
  boolean: [(v) => typeof v === "boolean", "a boolean (true or false)"],
  count: [(v) => typeof v === "number" && Number.isSafeInteger(v) && v >= 0, "a non-negative integer"],
  integer: [(v) => typeof v === "number" && Number.isSafeInteger(v), "an integer"],
  positiveMs: [(v) => typeof v === "number" && v > 0, "a positive number of milliseconds (Infinity: no timeout)"],
  function: [(v) => typeof v === "function", "a function"],
  object: [isObject, "an object"],
  string: [(v) => typeof v === "string", "a string"],
  strings: [(v) => Array.isArray(v) && v.every((s) => typeof s === "string"), "an array of strings"],
  array: [(v) => Array.isArray(v), "an array"],
  pins: [(v) => Array.isArray(v) && v.every((p) => (typeof p === "number" && Number.isSafeInteger(p) && p >= 0) || (typeof p === "string" && p !== "")),
    "an array of message indexes and tool call ids"],
  system: [(v) => typeof v === "string" || Array.isArray(v) || isObject(v), "a string, an array of content parts, or an object (Gemini's systemInstruction)"],
  signal: [isAbortSignal, "an AbortSignal"],
};

// Config sections and their keys (index.d.ts Config), to point a config key given
// as an option at where it belongs: `context_length` -> config.model.context_length.
const CONFIG_KEYS = {
  compression: ["enabled", "threshold", "model_thresholds", "target_ratio", "tail_mode", "prune_first", "protect_first_n",
    "protect_last_n", "min_tail_user_messages", "codex_gpt55_autoraise", "small_context_floor",
    "small_context_limit", "hygiene_threshold", "summary_context_length", "instructions", "prepare_ratio", "codex_responses_native",
    "codex_responses_compact_threshold", "codex_app_server_auto", "codex_gpt55_autoraise_notice", "anthropic_native",
    "anthropic_compact_instructions"],
  prompt_caching: ["cache_ttl"],
  model: ["name", "provider", "context_length"],
  tokens: ["encoding", "calibration"],
  context: ["engine", "archive_part"],
};

const norm = (s) => s.toLowerCase().replace(/[_-]/g, "");

/** Optimal string alignment distance (Levenshtein plus transpositions). */
function distance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/**
 * The suggestion for an unknown option key: the valid name it most likely meant
 * ("did you mean force?"), or where a config key belongs when the method takes a
 * config ("did you mean config: { model: { context_length } }?").
 */
export function suggest(key, names) {
  const k = norm(key);
  const same = names.find((n) => norm(n) === k);
  if (same) return same;
  if (names.includes("config")) {
    const section = Object.keys(CONFIG_KEYS).find((s) => norm(s) === k);
    if (section) return `config: { ${section}: … }`;
    for (const [s, keys] of Object.entries(CONFIG_KEYS)) {
      const hit = keys.find((n) => norm(n) === k);
      if (hit) return `config: { ${s}: { ${hit} } }`;
    }
  }
  let best = names[0];
  let bestD = Infinity;
  for (const n of names) {
    const dist = distance(k, norm(n));
    if (dist < bestD) [best, bestD] = [n, dist];
  }
  return best;
}

/**
 * Checks an options object against a method's spec `{ name: [type, wireName?] }` and
 * returns it (`{}` for undefined or null). Unknown keys, a non-object, and values of
 * the wrong type throw CompactError invalid_request; undefined and null values mean
 * "not given". Paths use wire names: `/prompt_tokens`.
 * @param {string} where e.g. "compact()"
 * @param {unknown} options
 * @param {Record<string, [[(v: unknown) => boolean, string], string?]>} spec
 * @param {string} [argName] what the argument is called in messages
 */
export function checkOptions(where, options, spec, argName = "options") {
  if (options === undefined || options === null) return {};
  if (!isObject(options) || typeof options === "function") {
    throw new CompactError("invalid_request",
      `ctxcompact: ${where} takes an ${argName} object, got ${describe(options)}` +
      (typeof options === "function" ? ` (a summarizer goes in { summarize: fn })` : ""), "");
  }
  const names = Object.keys(spec);
  for (const key of Object.keys(options)) {
    if (!Object.prototype.hasOwnProperty.call(spec, key)) {
      throw new CompactError("invalid_request",
        `ctxcompact: ${where} has no option ${JSON.stringify(key)}; did you mean ${suggest(key, names)}? (its options: ${names.join(", ")})`,
        `/${seg(key)}`);
    }
    const v = options[key];
    if (v === undefined || v === null) continue;
    const [[test, what], wire = wireName(key)] = spec[key];
    if (!test(v)) {
      throw new CompactError("invalid_request", `ctxcompact: option ${key} of ${where} must be ${what}, got ${describe(v)}`, `/${seg(wire)}`);
    }
  }
  return options;
}

/** Throws invalid_request at `/<wire>` unless the value is absent or passes the type. */
export function checkValue(where, name, wire, v, [test, what]) {
  if (v === undefined || v === null) return;
  if (!test(v)) throw new CompactError("invalid_request", `ctxcompact: ${name} of ${where} must be ${what}, got ${describe(v)}`, `/${seg(wire)}`);
}

// ---------------------------------------------------------------------------
// Serialization with pointers

/**
 * JSON text of `value`, sent at pointer `base` (e.g. "/messages") of the request, or
 * a CompactError with `code` and the pointer of the first value JSON cannot hold: a
 * cycle, a BigInt, NaN or ±Infinity (which JSON.stringify would send as null), a
 * toJSON that throws, or nesting deeper than the core accepts (JSON.stringify's
 * RangeError). `depth` is the nesting of `base` in the envelope.
 * @returns {string}
 */
export function serialize(value, base, code, depth = 1) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw unserializable(value, base, code, depth, err);
  }
  if (text === undefined) throw new CompactError(code, `ctxcompact: ${base.slice(1) || "the request"} is ${describe(value)}, which JSON cannot hold`, base);
  // JSON.stringify writes NaN and ±Infinity as null: look for them only when a
  // null was written (a fast walk; the full one below names the value).
  if (text.includes("null") && hasNonFinite(value)) {
    const bad = locate(value, depth);
    if (bad) throw problem(bad, base, code);
  }
  return text;
}

function unserializable(value, base, code, depth, err) {
  const bad = locate(value, depth);
  if (bad) return problem(bad, base, code, err);
  return new CompactError(code, `ctxcompact: ${base.slice(1) || "the request"} cannot be serialized as JSON: ${err?.message ?? err}`, base, { cause: err });
}

function problem(bad, base, code, cause) {
  const path = base + bad.segs.map((s) => `/${seg(s)}`).join("");
  return new CompactError(code, `ctxcompact: ${bad.why} (at ${path})`, path, cause === undefined ? undefined : { cause });
}

/** Whether a number that is not finite is reachable (values with toJSON are left to locate). */
function hasNonFinite(root) {
  const stack = [root];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "number") {
      if (!Number.isFinite(v)) return true;
      continue;
    }
    if (v === null || typeof v !== "object") continue;
    if (typeof v.toJSON === "function") return true;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const c = v[i];
        if (typeof c === "number" || (c !== null && typeof c === "object")) stack.push(c);
      }
    } else {
      for (const k of Object.keys(v)) {
        const c = v[k];
        if (typeof c === "number" || (c !== null && typeof c === "object")) stack.push(c);
      }
    }
  }
  return false;
}

/** A value as JSON.stringify sees it: toJSON applied, wrapper objects unwrapped. */
function asJSON(v, key) {
  if (v !== null && (typeof v === "object" || typeof v === "bigint") && typeof v.toJSON === "function") v = v.toJSON(String(key));
  if (v instanceof Number) return Number(v);
  if (v instanceof String) return String(v);
  if (v instanceof Boolean) return v.valueOf();
  return v;
}

/**
 * The first value (depth first, in key order, as JSON.stringify goes) that JSON
 * cannot hold, as path segments below the root and a reason; null when there is
 * none. Iterative, so a 100,000-deep value is walked without a stack overflow.
 * A value nested too deep is named by the member of its message (two segments:
 * `/messages/3/content`), not by a pointer 1,000 segments long.
 */
function locate(root, depth0) {
  const segs = [];
  const onPath = new Set();
  /** @type {{obj: any, keys: string[] | null, i: number}[]} */
  const frames = [];
  const enter = (v, key) => {
    try {
      v = asJSON(v, key);
    } catch (err) {
      return { why: `toJSON threw ${err?.name ?? "an error"}: ${err?.message ?? err}` };
    }
    if (typeof v === "bigint") return { why: `${describe(v)} cannot be written as JSON; pass a number or a string` };
    if (typeof v === "number" && !Number.isFinite(v)) return { why: `${v} is not a JSON number (JSON.stringify would send null)` };
    if (v === null || typeof v !== "object") return null;
    if (onPath.has(v)) return { why: "a value refers to itself or to a value containing it (a cycle)" };
    if (depth0 + frames.length + 1 > MAX_NESTING_DEPTH) {
      segs.length = Math.min(segs.length, 2);
      return { why: `this value nests arrays and objects more than ${MAX_NESTING_DEPTH} levels deep` };
    }
    onPath.add(v);
    frames.push({ obj: v, keys: Array.isArray(v) ? null : Object.keys(v), i: 0 });
    return null;
  };
  let bad = enter(root, "");
  while (!bad && frames.length > 0) {
    const f = frames[frames.length - 1];
    const n = f.keys === null ? f.obj.length : f.keys.length;
    if (f.i >= n) {
      frames.pop();
      onPath.delete(f.obj);
      segs.pop();
      continue;
    }
    const key = f.keys === null ? f.i : f.keys[f.i];
    f.i++;
    const before = frames.length;
    segs.push(key);
    bad = enter(f.obj[key], key);
    if (!bad && frames.length === before) segs.pop(); // a leaf: done with it
  }
  return bad ? { ...bad, segs } : null;
}
