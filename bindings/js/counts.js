// countTokens' cache: the count of each message object, so that an agent counting
// its conversation on every turn sends the module only the messages it has not
// counted yet. No `node:` imports here.
//
// Why the result is the uncached one: the core counts every message on its own
// (its count depends on the message's JSON bytes and the counter alone) and adds a
// constant once per non-empty list (the reply priming), so a conversation's count
// is the sum of its messages' counts plus that constant. The counter is decided by
// the encoding and the call's config, which are the cache key; the compactor's own
// config never changes. test/counts.test.mjs checks equality on every shared trace.
//
// Mutation: a WeakMap keyed by the object alone would go stale when the caller edits
// a message in place (agents do: they truncate a tool result, append to content).
// So each entry keeps a snapshot of what JSON.stringify saw: the message's keys and
// primitive values in order, depth first, with its arrays' lengths (strings are held
// by reference, not copied). Every lookup walks the message again and compares;
// any difference (an edited string, an added or removed key or part, a reordered
// key) is a miss and the message is counted again. The walk touches each key once
// and compares strings by reference first, so it costs a small fraction of
// serializing. Only plain data is cached: objects whose prototype is Object.prototype
// or null and arrays; a message holding anything else (a Date, a class instance,
// any value with toJSON, a function) is sent every time, as without the cache.

import { serialize } from "./options.js";

const OBJECT = Symbol("object");
const ARRAY = Symbol("array");

/** How many counters (encoding + config combinations) keep counts at once. */
const MAX_KEYS = 8;

/**
 * Appends v's snapshot to out. Returns false when v is not plain JSON data (then
 * the message is not cached).
 */
function snapshot(v, out) {
  if (v === null || typeof v !== "object") {
    const t = typeof v;
    if (t === "function" || t === "bigint" || t === "symbol") return false;
    out.push(v);
    return true;
  }
  const proto = Object.getPrototypeOf(v);
  if (Array.isArray(v)) {
    if (proto !== Array.prototype) return false;
    out.push(ARRAY, v.length);
    for (let i = 0; i < v.length; i++) if (!snapshot(v[i], out)) return false;
    return true;
  }
  if (proto !== Object.prototype && proto !== null) return false;
  const keys = Object.keys(v);
  out.push(OBJECT, keys.length);
  for (let i = 0; i < keys.length; i++) {
    out.push(keys[i]);
    if (!snapshot(v[keys[i]], out)) return false;
  }
  return true;
}

/** The index after v's part of the snapshot s from i, or -1 when v differs from it. */
function walk(v, s, i) {
  if (v === null || typeof v !== "object") return s[i] === v ? i + 1 : -1;
  if (Array.isArray(v)) {
    if (s[i] !== ARRAY || s[i + 1] !== v.length || Object.getPrototypeOf(v) !== Array.prototype) return -1;
    i += 2;
    for (let k = 0; k < v.length && i >= 0; k++) i = walk(v[k], s, i);
    return i;
  }
  if (s[i] !== OBJECT) return -1;
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return -1;
  // for-in goes over the same keys in the same order as Object.keys here (a plain
  // object's prototype has no enumerable keys) without making an array of them.
  const n = s[i + 1];
  let seen = 0;
  i += 2;
  for (const k in v) {
    if (++seen > n || s[i] !== k) return -1;
    i = walk(v[k], s, i + 1);
    if (i < 0) return -1;
  }
  return seen === n ? i : -1;
}

export class CountCache {
  /** key -> {meta: {encoding, calibration, calibration_source, priming} | null, counts: WeakMap<object, {snap, n}>} */
  #slots = new Map();

  #slot(key) {
    let slot = this.#slots.get(key);
    if (slot === undefined) {
      if (this.#slots.size >= MAX_KEYS) this.#slots.delete(this.#slots.keys().next().value);
      slot = { meta: null, counts: new WeakMap() };
      this.#slots.set(key, slot);
    }
    return slot;
  }

  /**
   * The tokens.count result for messages under key. `send(messagesJSON)` runs the
   * op on a JSON array of messages and returns its result (or throws).
   * @param {string} key
   * @param {unknown[]} messages
   * @param {(body: string) => {encoding: string, calibration: number, calibration_source: string, total: number, per_message: number[]}} send
   */
  count(key, messages, send) {
    const slot = this.#slot(key);
    const per = new Array(messages.length);
    /** @type {number[]} indices of the messages to count */
    const missing = [];
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i];
      const e = m !== null && typeof m === "object" ? slot.counts.get(m) : undefined;
      if (e !== undefined && walk(m, e.snap, 0) === e.snap.length) per[i] = e.n;
      else missing.push(i);
    }
    if (missing.length === 0 && slot.meta !== null) return result(slot.meta, per);

    let res;
    if (missing.length === messages.length) {
      res = send(serializeAll(messages));
    } else {
      // Some are cached: send the others. Anything unusual (a message that does
      // not serialize, an error from the core, whose paths would index the subset)
      // is left to the whole request, which fails exactly as without the cache.
      try {
        res = send(`[${missing.map((i) => serializeOne(messages[i], i)).join(",")}]`);
      } catch {
        res = send(serializeAll(messages));
        missing.length = 0;
        for (let i = 0; i < messages.length; i++) missing.push(i);
      }
    }
    const got = res.per_message;
    if (!Array.isArray(got) || got.length !== missing.length) return res; // not a count to keep
    let sum = 0;
    for (let j = 0; j < missing.length; j++) {
      const i = missing[j];
      per[i] = got[j];
      sum += got[j];
      const m = messages[i];
      if (m !== null && typeof m === "object") {
        const snap = [];
        if (snapshot(m, snap)) slot.counts.set(m, { snap, n: got[j] });
        else slot.counts.delete(m);
      }
    }
    if (missing.length > 0) slot.meta = { encoding: res.encoding, calibration: res.calibration, calibration_source: res.calibration_source, priming: res.total - sum };
    return slot.meta === null ? res : result(slot.meta, per);
  }
}

function result(meta, per) {
  let total = per.length > 0 ? meta.priming : 0;
  for (let i = 0; i < per.length; i++) total += per[i];
  return { encoding: meta.encoding, calibration: meta.calibration, calibration_source: meta.calibration_source, total, per_message: per };
}

/** JSON of a message list, as every op sends it (its errors and paths). */
function serializeAll(messages) {
  return serialize(messages, "/messages", "invalid_messages");
}

/** JSON of message i of a list. */
function serializeOne(m, i) {
  return serialize(m, `/messages/${i}`, "invalid_messages", 2);
}
