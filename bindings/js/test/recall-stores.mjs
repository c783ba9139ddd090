// The cross-runtime store fixture (testdata/recall/stores.json): writes its sessions
// into a store with the JS store, and checks a store's answers against it. The JS,
// Go and Python tests run it:
//   node bindings/js/test/recall-stores.mjs write TARGET [SESSION...]
//   node bindings/js/test/recall-stores.mjs check TARGET
// TARGET is an SQLite file (written with the wasm driver, which reads every
// runtime's files) or a postgres:// URL / key=value DSN (openRecallStore). write
// writes every session, or only those named, range by range in write_order (so
// several runtimes can each write some of them into one database); check runs every
// search and expand of the fixture and prints `ok <searches> <expands>`, or the
// first mismatch (exit 1).
import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { fileURLToPath } from "node:url";
import { RecallStore, openRecallStore } from "../recall.js";

export const FIXTURE = JSON.parse(readFileSync(new URL("../../../testdata/recall/stores.json", import.meta.url), "utf8"));

/** Whether target names a PostgreSQL database (as openRecallStore routes it). */
export const isPostgresTarget = (target) => /^postgres(ql)?:\/\//i.test(target) || /^\s*[A-Za-z_][A-Za-z0-9_]*\s*=/.test(target);

/** The store at target: PostgreSQL by URL, else an SQLite file with the given options (the wasm driver by default). */
export async function openTarget(target, options = { driver: "wasm" }) {
  return isPostgresTarget(target) ? openRecallStore(target) : RecallStore.open(target, options);
}

/**
 * Writes the fixture's sessions (all, or those named) into the store at target,
 * range by range in its write order.
 */
export async function writeFixture(target, options = { driver: "wasm" }, sessions = undefined) {
  for (const s of sessions ?? []) {
    if (!(s in FIXTURE.sessions)) throw new Error(`the fixture has no session ${JSON.stringify(s)} (it has ${Object.keys(FIXTURE.sessions).join(", ")})`);
  }
  const s = await openTarget(target, options);
  try {
    for (const [k, round] of FIXTURE.write_order.entries()) {
      for (const session of round) {
        if (sessions === undefined || sessions.includes(session)) await s.archive(session, FIXTURE.sessions[session][k]);
      }
    }
  } finally {
    await s.close();
  }
}

/**
 * Runs every fixture search and expand on the store at target: null and the counts
 * when every answer is the fixture's, else the first mismatch (a sentence).
 */
export async function checkFixture(target) {
  const s = await openTarget(target);
  try {
    for (const c of FIXTURE.searches) {
      const got = await s.search(c.session, c.query, { limit: c.limit });
      const ids = got.hits.map((h) => h.id);
      if (!isDeepStrictEqual(ids, c.hits) || got.total !== c.total) {
        return { mismatch: `search ${JSON.stringify(c.query)} in ${c.session}, limit ${c.limit}: hits ${JSON.stringify(ids)} total ${got.total}; the fixture has ${JSON.stringify(c.hits)} total ${c.total}` };
      }
    }
    for (const c of FIXTURE.expands) {
      const got = (await s.expand(c.session, c.id)).messages;
      if (!isDeepStrictEqual(got, c.messages)) {
        return { mismatch: `expand ${c.id} in ${c.session}: ${got.length} messages ${JSON.stringify(got).slice(0, 300)}; the fixture has ${c.messages.length}: ${JSON.stringify(c.messages).slice(0, 300)}` };
      }
    }
    return { mismatch: null, searches: FIXTURE.searches.length, expands: FIXTURE.expands.length };
  } finally {
    await s.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [what, target, ...sessions] = process.argv.slice(2);
  if (!["write", "check"].includes(what) || !target || (what === "check" && sessions.length > 0)) {
    console.error("usage: node recall-stores.mjs write TARGET [SESSION...] | check TARGET  (TARGET: an SQLite file, or a postgres:// URL)");
    process.exit(2);
  }
  if (what === "write") {
    await writeFixture(target, undefined, sessions.length > 0 ? sessions : undefined);
    console.log("ok");
  } else {
    const r = await checkFixture(target);
    if (r.mismatch !== null) {
      console.error(`mismatch: ${r.mismatch}`);
      process.exit(1);
    }
    console.log(`ok ${r.searches} ${r.expands}`);
  }
}
