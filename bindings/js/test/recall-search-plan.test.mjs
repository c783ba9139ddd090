// The recall store's search plan (bands of rowids read ascending, common terms left
// out of a MATCH of several) gives exactly the rows of the previous plan, one query
// newest first (ORDER BY rowid DESC) with a count beside it, and of the LIKE rule
// itself (every term an ASCII case-insensitive substring), on a generated archive:
// three interleaved sessions, words from very common to rare, paths, identifiers,
// short terms, terms with k or s, non-ASCII text (the Kelvin sign and the long s the
// trigram tokenizer folds to ASCII), quoted phrases.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { RecallStore, parseQuery } from "../recall.js";

const require = createRequire(import.meta.url);
const { Database } = require("node-sqlite3-wasm");

// mulberry32, seeded: the archive and the queries are the same on every run.
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const COMMON = ["the", "error", "failed", "tool", "output"]; // in most rows
const MEDIUM = ["traceback", "import", "parser", "warning", "request"]; // in ~10%
const RARE = ["zebra", "quokka", "src/app.py", "foo.bar_baz", "tests/test_x.py::test_k"]; // in ~0.5%
const ODD = ["Straße", "\u212Aelvin", "cla\u017Fs", "na\u00efve", "日本語", "50%_off", "a\\b"]; // non-ASCII, LIKE escapes

function message(r) {
  const words = [];
  const n = 20 + Math.floor(r() * 30);
  for (let i = 0; i < n; i++) {
    const x = r();
    if (x < 0.5) words.push(COMMON[Math.floor(r() * COMMON.length)]);
    else if (x < 0.56) words.push(MEDIUM[Math.floor(r() * MEDIUM.length)]);
    else if (x < 0.565) words.push(RARE[Math.floor(r() * RARE.length)]);
    else if (x < 0.58) words.push(ODD[Math.floor(r() * ODD.length)]);
    else words.push(`w${Math.floor(r() * 500)}`);
  }
  // Case varies: LIKE and the index fold ASCII case.
  return words.map((w) => (r() < 0.1 ? w.toUpperCase() : w)).join(r() < 0.2 ? "\n" : " ");
}

/** The previous search, as it was: one MATCH of every term of 3+ characters, newest first, a count to the bound. */
function previousSearch(db, session, query, limit, countLimit) {
  const q = parseQuery(query);
  const where = [];
  const params = [];
  if (q.fts !== "") {
    where.push("ctxc_fts MATCH ?");
    params.push(q.fts);
  }
  // "+": a plan hint only (the file now has an index on session, which the old
  // JOIN would have used to run the MATCH once per row of the session).
  where.push("+m.session = ?");
  params.push(session);
  q.like.forEach((p, i) => {
    const t = q.terms[i];
    const decided = q.fts !== "" && [...t].length >= 3 && /^[\x00-\x7f]*$/.test(t) && !/[ksKS]/.test(t);
    if (!decided) {
      where.push("m.text LIKE ? ESCAPE '\\'");
      params.push(p);
    }
  });
  const from = q.fts !== "" ? "ctxc_fts f JOIN ctxc_messages m ON m.rowid = f.rowid" : "ctxc_messages m";
  const key = q.fts !== "" ? "f.rowid" : "m.rowid";
  const cond = `${from} WHERE ${where.join(" AND ")}`;
  const max = Math.min(limit, 50);
  const hits = db.all(`SELECT m.id AS id, m.range_id AS range_id, m.position AS position, m.role AS role, m.text AS text FROM ${cond} ORDER BY ${key} DESC LIMIT ?`, [...params, max]);
  const all = db.all(`SELECT m.rowid AS r FROM ${cond}`, params).length;
  const total = countLimit === null ? all : hits.length < max ? hits.length : Math.min(all, Math.max(countLimit, max));
  return { hits: hits.map((h) => ({ ...h })), total };
}

/** The rule itself, in JS: every term an ASCII case-insensitive substring of the text. */
function likeRule(rows, session, query, limit, countLimit) {
  const lower = (s) => s.replace(/[A-Z]/g, (c) => c.toLowerCase());
  const terms = parseQuery(query).terms.map(lower);
  const all = rows.filter((r) => r.session === session && terms.every((t) => lower(r.text).includes(t))).reverse();
  const max = Math.min(limit, 50);
  const total = countLimit === null ? all.length : Math.min(all.length, Math.max(countLimit, max));
  return { hits: all.slice(0, max).map(({ id, range_id, position, role, text }) => ({ id, range_id, position, role, text })), total };
}

test("the search plan finds the previous plan's rows, in its order, with its totals", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "ctxc-recall-plan-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "recall.db");
  const r = rng(42);
  const sessions = ["s-one", "s-two", "s-three"];
  const store = await RecallStore.open(file, { driver: "wasm" });
  const stored = []; // [{ session, id, ..., text }] in rowid order
  const next = new Map(sessions.map((s) => [s, 1]));
  // 5,000 rows: more than the first two bands (256 + 4,096 rowids) of one session.
  for (let n = 0; stored.length < 5000; n++) {
    // Sessions interleave, and one of them is mostly older (it stops early).
    const session = n < 40 ? "s-three" : sessions[Math.floor(r() * 2)];
    const k = next.get(session);
    next.set(session, k + 1);
    const rows = [];
    const count = 5 + Math.floor(r() * 20);
    for (let i = 0; i < count; i++) {
      const text = message(r);
      rows.push({ id: `r${k}.${i}`, range_id: `r${k}`, position: i, role: i % 2 ? "tool" : "assistant", reason: "summarized", json: JSON.stringify({ content: text }), text });
    }
    const summary = `summary ${k}: ${message(r).slice(0, 60)}`;
    rows.push({ id: `r${k}.summary`, range_id: `r${k}`, position: 0, role: "summary", reason: "summary", json: JSON.stringify({ content: summary }), text: summary });
    store.archive(session, { range: { id: `r${k}`, from_index: 0, to_index: count, summary }, rows });
    for (const row of rows) stored.push({ session, ...row });
  }
  store.close();

  const queries = [...COMMON, ...MEDIUM, ...RARE, ...ODD, "a", "of", "w1", "ERROR", "Failed", "kelvin", "class", "STRASSE", "zz_none"];
  const q2 = (a, b) => `${a} ${b}`;
  for (let i = 0; i < 16; i++) {
    const pool = [COMMON, MEDIUM, RARE, ODD];
    const a = pool[i % 4][Math.floor(r() * 5) % pool[i % 4].length];
    const b = pool[(i >> 2) % 4][Math.floor(r() * 7) % pool[(i >> 2) % 4].length];
    queries.push(q2(a, b), `${a} ${b} ${COMMON[i % COMMON.length]}`);
  }
  queries.push('"error failed"', '"the tool" traceback', "w12 w1", "the error failed tool output");

  const db = new Database(file, { readOnly: true });
  t.after(() => db.close());
  const plans = { subset: 0, bands: new Set(), like: 0 };
  let compared = 0;
  for (const countLimit of [100, null, 1]) {
    const s = await RecallStore.open(file, { driver: "wasm", countLimit });
    const like = await RecallStore.open(file, { driver: "wasm", countLimit, fts: false });
    try {
      for (const query of queries) {
        for (const session of sessions) {
          for (const limit of countLimit === 100 ? [10, 1, 50] : [10]) {
            const want = previousSearch(db, session, query, limit, countLimit);
            const got = s.search(session, query, { limit });
            const plan = s.lastSearchPlan;
            assert.deepEqual(got, want, `${JSON.stringify(query)} in ${session}, limit ${limit}, countLimit ${countLimit}: ${JSON.stringify(plan)}`);
            assert.deepEqual(got, likeRule(stored, session, query, limit, countLimit), `the LIKE rule: ${JSON.stringify(query)}`);
            if (limit === 10) {
              assert.deepEqual(like.search(session, query, { limit }), want, `LIKE mode: ${JSON.stringify(query)}`);
              // The core's plan of the query (terms, fts, like) gives the same.
              assert.deepEqual(s.search(session, parseQuery(query), { limit }), want);
            }
            if (!plan.exact && plan.match.length > 0 && plan.match.length < parseQuery(query).terms.filter((x) => [...x].length >= 3).length) plans.subset++;
            if (!plan.exact) plans.bands.add(plan.bands);
            if (plan.match.length === 0) plans.like++;
            compared++;
          }
        }
      }
    } finally {
      s.close();
      like.close();
    }
  }
  // Every branch of the plan was taken: terms left out of the MATCH, one to three bands, LIKE alone.
  assert.ok(plans.subset > 0, "some searches left a common term out of the MATCH");
  assert.ok(plans.bands.has(1) && plans.bands.has(2) && plans.bands.has(3), `bands taken: ${[...plans.bands]}`);
  assert.ok(plans.like > 0, "some searches had no term for the index");
  assert.ok(compared > 1000, `${compared} searches compared`);
});
