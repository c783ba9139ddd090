// The PostgreSQL recall store (docs/RECALL.md "On PostgreSQL") against a real
// server, CTXCOMPACT_TEST_PG_URL (bindings/js/test.sh starts one when it is unset):
// the schema created once by stores opening together, the version refused, the
// SQLite store's answers for the same archives (and the cross-runtime fixture's),
// ASCII-only case folding, the NUL rules, one winner of two archives of one range,
// a lost connection retried once (and store_unavailable after two), the lossless
// engine compacting into it and answering its tools from it, openRecallStore's
// routing, and the load-test worker. Each test makes its own database.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { CompactError, Compactor } from "../index.js";
import { PostgresRecallStore, RecallStore, openRecallStore } from "../recall.js";
import { testHooks } from "../recall-postgres.js";
import { session, sleep } from "./helpers.mjs";
import { FIXTURE, checkFixture, writeFixture } from "./recall-stores.mjs";

const SERVER = process.env.CTXCOMPACT_TEST_PG_URL;
const CI = !["", "0", "false"].includes((process.env.CI ?? "").trim().toLowerCase());
const run = promisify(execFile);
const HERE = path.dirname(new URL(import.meta.url).pathname);
const ROOT = path.resolve(HERE, "../../..");

if (!SERVER) {
  // Not silent: bindings/js/test.sh always sets it (it starts a server), and CI fails here.
  test("PostgreSQL store: CTXCOMPACT_TEST_PG_URL is set", (t) => {
    if (CI) assert.fail("CTXCOMPACT_TEST_PG_URL is not set (bindings/js/test.sh starts a server with internal/pgtest/pg-server.sh)");
    t.diagnostic("SKIPPED, NOT TESTED: the PostgreSQL store (set CTXCOMPACT_TEST_PG_URL, or run bindings/js/test.sh)");
  });
} else {
  defineTests();
}

function defineTests() {
  const admin = new pg.Client({ connectionString: SERVER });
  const made = [];
  let adminReady;
  const sql = async (text, params) => {
    adminReady ??= admin.connect();
    await adminReady;
    return (await admin.query(text, params)).rows;
  };
  after(async () => {
    testHooks.onConnection = testHooks.beforeCommit = testHooks.afterCommit = null;
    for (const db of made) await sql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`).catch(() => {});
    if (adminReady) await admin.end();
  });

  /** A new database on the server; its URL. */
  async function freshDb(tag) {
    const db = `ctxc_js_${process.pid}_${tag}`;
    await sql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    await sql(`CREATE DATABASE ${db}`);
    made.push(db);
    const u = new URL(SERVER);
    u.pathname = `/${db}`;
    return u.href;
  }

  /** Runs queries on the database at url (a connection of its own). */
  async function onDb(url, fn) {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      return await fn((text, params) => c.query(text, params).then((r) => r.rows));
    } finally {
      await c.end();
    }
  }

  /** Ends a server process (as an administrator would) and waits until it is gone. */
  async function kill(pid) {
    assert.ok(Number.isInteger(pid) && pid > 0, `a backend pid: ${pid}`);
    await sql("SELECT pg_terminate_backend($1)", [pid]);
    for (let i = 0; i < 500; i++) {
      if ((await sql("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid])).length === 0) return;
      await sleep(10);
    }
    assert.fail(`backend ${pid} did not end`);
  }

  const hooks = (t) => t.after(() => { testHooks.onConnection = testHooks.beforeCommit = testHooks.afterCommit = null; });
  const isErr = (code, p, re) => (err) => {
    assert.ok(err instanceof CompactError, `a CompactError: ${err?.stack ?? err}`);
    assert.equal(err.code, code, err.message);
    assert.equal(err.path, p, err.message);
    assert.match(err.message, /^ctxcompact: /);
    if (re) assert.match(err.message, re);
    return true;
  };

  /** recall.archive-shaped rows for range k of texts (each message from+i), its summary last. */
  function range(k, from, texts, { summary = `summary of range ${k}`, json } = {}) {
    const id = `r${k}`;
    const rows = texts.map((text, i) => ({
      id: `${id}.${from + i}`, range_id: id, position: from + i, role: i % 2 ? "tool" : "assistant",
      reason: "summarized", json: json?.(i) ?? JSON.stringify({ role: i % 2 ? "tool" : "assistant", content: text, n: from + i }), text,
    }));
    rows.push({ id: `${id}.summary`, range_id: id, position: from, role: "summary", reason: "summary",
      json: JSON.stringify({ role: "user", content: summary }), text: summary });
    return { range: { id, from_index: from, to_index: from + texts.length, summary }, rows };
  }

  /** An archive as parts of `size` rows (the first holding the range), counting what was pulled. */
  function inParts(archived, size, onPart) {
    const pulled = [];
    const parts = (function* () {
      for (let at = 0, k = 0; at < archived.rows.length; at += size, k++) {
        onPart?.(k);
        pulled.push(k);
        const rows = archived.rows.slice(at, at + size);
        yield k === 0 ? { range: archived.range, rows } : { rows };
      }
    })();
    return { parts, pulled };
  }

  /** Writes the fixture's archives into an open store, in its write order. */
  async function feed(store) {
    for (const [k, round] of FIXTURE.write_order.entries()) {
      for (const s of round) await store.archive(s, FIXTURE.sessions[s][k]);
    }
  }

  test("8 stores opening a new database at once create the schema once; the meta and tables are the contract's", async () => {
    const url = await freshDb("setup");
    const stores = await Promise.all(Array.from({ length: 8 }, () => PostgresRecallStore.open(url)));
    try {
      assert.deepEqual(await Promise.all(stores.map((s) => s.nextRangeId("a"))), Array(8).fill("r1"));
      const s = stores[0];
      assert.equal(s.driver, "pg");
      assert.equal(s.searchMode, "pg_trgm");
      assert.equal(s.readOnly, false);
      assert.equal(s.countLimit, 100);
      assert.equal(s.path, url);
      await onDb(url, async (q) => {
        assert.deepEqual(await q("SELECT key, value FROM ctxc_meta ORDER BY key"), [{ key: "schema_version", value: "1" }, { key: "search", value: "pg_trgm" }]);
        const cols = await q("SELECT table_name AS t, column_name AS c, data_type AS d FROM information_schema.columns WHERE table_name LIKE 'ctxc_%' ORDER BY table_name, ordinal_position");
        assert.deepEqual(cols.map((r) => `${r.t}.${r.c} ${r.d}`), [
          "ctxc_messages.rowid bigint", "ctxc_messages.session text", "ctxc_messages.id text", "ctxc_messages.range_id text",
          "ctxc_messages.position integer", "ctxc_messages.role text", "ctxc_messages.reason text", "ctxc_messages.json text", "ctxc_messages.text text",
          "ctxc_meta.key text", "ctxc_meta.value text",
          "ctxc_ranges.session text", "ctxc_ranges.id text", "ctxc_ranges.seq integer", "ctxc_ranges.from_index integer", "ctxc_ranges.to_index integer", "ctxc_ranges.summary text"]);
        assert.equal((await q("SELECT count(*)::int AS n FROM pg_proc WHERE proname = 'ctxc_fold'"))[0].n, 1);
        assert.ok((await q("SELECT indexdef FROM pg_indexes WHERE indexname = 'ctxc_messages_trgm'"))[0].indexdef.includes("gin_trgm_ops"));
      });
      // One store's archive is every store's.
      await stores[3].archive("a", range(1, 0, ["read src/app.py"]));
      assert.deepEqual((await stores[5].search("a", "APP.PY")).hits.map((h) => h.id), ["r1.0"]);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  test("a database of another schema version is refused (invalid_state at /path), and the password never shows", async () => {
    const url = await freshDb("version");
    (await PostgresRecallStore.open(url)).close();
    await onDb(url, (q) => q("UPDATE ctxc_meta SET value = '2' WHERE key = 'schema_version'"));
    const withPassword = url.replace("://ctxcompact@", "://ctxcompact:s3cret@");
    await assert.rejects(PostgresRecallStore.open(withPassword), (err) => {
      isErr("invalid_state", "/path", /has schema version 2; this ctxcompact reads and writes version 1/)(err);
      assert.doesNotMatch(err.message, /s3cret/);
      return true;
    });
    await onDb(url, (q) => q("DELETE FROM ctxc_meta WHERE key = 'schema_version'"));
    await assert.rejects(PostgresRecallStore.open(url), isErr("invalid_state", "/path", /without a schema_version/));
    await onDb(url, (q) => q("INSERT INTO ctxc_meta VALUES ('schema_version', '1')"));
    const s = await PostgresRecallStore.open(withPassword);
    assert.equal(s.path, url, "the URL without its password");
    await s.close();
  });

  test("the fixture's archives: every answer equals the in-memory SQLite store's and the fixture's", async () => {
    const url = await freshDb("parity");
    for (const countLimit of [undefined, null]) {
      const opts = countLimit === undefined ? {} : { countLimit };
      const lite = await RecallStore.open(null, opts);
      const pgs = await PostgresRecallStore.open(url, opts);
      try {
        await feed(lite);
        await feed(pgs);
        for (const c of FIXTURE.searches) {
          const want = lite.search(c.session, c.query, { limit: c.limit });
          const got = await pgs.search(c.session, c.query, { limit: c.limit });
          assert.deepEqual(got, want, `${JSON.stringify(c.query)} in ${c.session}, limit ${c.limit}`);
          if (countLimit === undefined) {
            assert.deepEqual(got.hits.map((h) => h.id), c.hits);
            assert.equal(got.total, c.total);
          }
        }
        for (const c of FIXTURE.expands) {
          const got = await pgs.expand(c.session, c.id);
          assert.deepEqual(got, lite.expand(c.session, c.id));
          assert.deepEqual(got.messages, c.messages, `expand ${c.id} in ${c.session}`);
        }
        // More queries: short terms, phrases, escapes, letters the trigram index folds, limits past 50.
        for (const s of Object.keys(FIXTURE.sessions)) {
          for (const q of ["a", "src", '"parser src"', "KELVIN", "request failed", "a\\b", "foo.bar_baz", "%", "_", "\\", "kelvin s", "nothing-matches-this", "ÉCOLE"]) {
            for (const limit of [1, 10, 50, 80]) {
              assert.deepEqual(await pgs.search(s, q, { limit }), lite.search(s, q, { limit }), `${q} in ${s}, limit ${limit}`);
            }
          }
          assert.deepEqual(await pgs.search(s, { terms: ["src"], fts: '"src"', like: ["%SRC%"] }), lite.search(s, { terms: ["src"], fts: '"src"', like: ["%SRC%"] }));
          assert.deepEqual(await pgs.ranges(s), lite.ranges(s));
          assert.equal(await pgs.nextRangeId(s), lite.nextRangeId(s));
          for (const id of ["r1", "r2.3", "r1.summary", "r9", "r1.999", "x"]) assert.deepEqual(await pgs.expand(s, id), lite.expand(s, id));
        }
        assert.deepEqual(await pgs.sessions(), lite.sessions());
        assert.deepEqual(await pgs.search("nobody", "src"), lite.search("nobody", "src"));
        assert.deepEqual(await pgs.deleteSession("beta"), lite.deleteSession("beta"));
        assert.deepEqual(await pgs.deleteSession("beta"), { ranges: 0, messages: 0 });
        assert.deepEqual(await pgs.sessions(), lite.sessions());
        assert.deepEqual(await pgs.sessions(), ["alpha", "gamma"]);
        for (const s of ["alpha", "beta", "gamma"]) await pgs.deleteSession(s);
        assert.deepEqual(await pgs.sessions(), []);
      } finally {
        lite.close();
        await pgs.close();
      }
    }
  });

  test("the fixture script writes sessions by name into one database and checks it (as the cross-runtime test runs it)", async () => {
    const url = await freshDb("fixture");
    const script = path.join(HERE, "recall-stores.mjs");
    assert.equal((await run(process.execPath, [script, "write", url, "alpha"])).stdout.trim(), "ok");
    await assert.rejects(run(process.execPath, [script, "check", url]), (err) => err.code === 1 && /^mismatch: search .* in beta/.test(err.stderr));
    await run(process.execPath, [script, "write", url, "gamma", "beta"]);
    assert.equal((await run(process.execPath, [script, "check", url])).stdout.trim(), `ok ${FIXTURE.searches.length} ${FIXTURE.expands.length}`);
    assert.deepEqual(await checkFixture(url), { mismatch: null, searches: FIXTURE.searches.length, expands: FIXTURE.expands.length });
    // And as a DSN; the SQLite file route is unchanged (write FILE, check FILE).
    const u = new URL(url);
    const dsn = `host=${u.hostname} port=${u.port} dbname=${u.pathname.slice(1)} user=${u.username} sslmode=disable`;
    assert.equal((await run(process.execPath, [script, "check", dsn])).stdout.trim(), `ok ${FIXTURE.searches.length} ${FIXTURE.expands.length}`);
    const dir = mkdtempSync(path.join(tmpdir(), "ctxc-pgfix-"));
    try {
      const file = path.join(dir, "js.db");
      await writeFixture(file);
      assert.equal((await run(process.execPath, [script, "check", file])).stdout.trim(), `ok ${FIXTURE.searches.length} ${FIXTURE.expands.length}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    await assert.rejects(run(process.execPath, [script, "write", url, "delta"]), /no session "delta"/);
  });

  test("case folding is ASCII only, and LIKE's % _ \\ in a term are literal", async () => {
    const url = await freshDb("fold");
    const s = await PostgresRecallStore.open(url);
    const lite = await RecallStore.open();
    try {
      const texts = ["ÉCOLE primaire", "école maternelle", "HELLO world", "100% done", "a_b underscore", "aXb cross", "back\\slash", "a\\%b literal"];
      for (const st of [s, lite]) await st.archive("f", range(1, 0, texts));
      const ids = async (q) => (await s.search("f", q, { limit: 50 })).hits.map((h) => h.text);
      assert.deepEqual(await ids("école"), ["école maternelle"]);
      assert.deepEqual(await ids("ÉCOLE"), ["ÉCOLE primaire"]);
      assert.deepEqual(await ids("cole"), ["école maternelle", "ÉCOLE primaire"]);
      assert.deepEqual(await ids("hello"), ["HELLO world"]);
      assert.deepEqual(await ids("hElLo WORLD"), ["HELLO world"]);
      assert.deepEqual(await ids("%"), ["a\\%b literal", "100% done"]);
      assert.deepEqual(await ids("100%"), ["100% done"]);
      assert.deepEqual(await ids("a_b"), ["a_b underscore"]);
      assert.deepEqual(await ids("_"), ["a_b underscore"]);
      assert.deepEqual(await ids("\\"), ["a\\%b literal", "back\\slash"]);
      assert.deepEqual(await ids("a\\%b"), ["a\\%b literal"]);
      for (const q of ["école", "ÉCOLE", "cole", "hello", "%", "_", "\\", "a\\%b", "a%b", "x"]) {
        assert.deepEqual(await s.search("f", q, { limit: 50 }), lite.search("f", q, { limit: 50 }), q);
      }
    } finally {
      await s.close();
      lite.close();
    }
  });

  test("NUL: a text's U+0000 is stored as U+FFFD, a json's raw one refused at /rows/<i>/json (counted across parts), nothing written", async () => {
    const url = await freshDb("nul");
    const s = await PostgresRecallStore.open(url);
    try {
      const ok = range(1, 0, ["before\0after", "plain"], { summary: "sum\0mary", json: (i) => (i === 0 ? '{"role":"tool","content":"a\\u0000b"}' : undefined) });
      assert.deepEqual(await s.archive("n", ok), { range: "r1", messages: 3 });
      const hit = (await s.search("n", "before")).hits[0];
      assert.equal(hit.text, "before\uFFFDafter");
      assert.equal((await s.search("n", "before\uFFFDafter")).total, 1);
      assert.deepEqual((await s.expand("n", "r1.0")).messages, ['{"role":"tool","content":"a\\u0000b"}'], "the json as given, its escape kept");
      assert.equal((await s.ranges("n"))[0].summary, "sum\uFFFDmary");

      const bad = range(2, 2, ["one", "two", "three", "four"]);
      bad.rows[3].json = '{"role":"tool","content":"raw\0nul"}';
      const { parts } = inParts(bad, 2);
      await assert.rejects(s.archive("n", parts), isErr("invalid_request", "/rows/3/json", /raw NUL/));
      assert.deepEqual((await s.ranges("n")).map((r) => r.id), ["r1"], "nothing of r2");
      assert.deepEqual((await s.expand("n", "r2")).messages, []);
      for (const [field, p] of [["id", "/rows/1/id"], ["role", "/rows/1/role"], ["reason", "/rows/1/reason"]]) {
        const a = range(2, 2, ["x", "y"]);
        a.rows[1][field] = field === "id" ? "r2.3\0" : "to\0ol";
        await assert.rejects(s.archive("n", a), isErr("invalid_request", p, /NUL/));
      }
      await assert.rejects(s.archive("n\0", range(1, 0, ["x"])), isErr("invalid_request", "/session", /NUL/));
      // Reads with a NUL find nothing (no such row can be stored), as SQLite answers.
      assert.deepEqual(await s.search("n\0", "x"), { hits: [], total: 0 });
      assert.deepEqual(await s.expand("n", "r1\0"), { id: "r1\0", messages: [] });
      assert.deepEqual(await s.ranges("n\0"), []);
      assert.equal(await s.nextRangeId("n\0"), "r1");
      assert.deepEqual(await s.deleteSession("n\0"), { ranges: 0, messages: 0 });
      await assert.rejects(s.search("n", "x\0"), isErr("invalid_request", "/query", /NUL/));
      assert.deepEqual(await s.sessions(), ["n"]);
    } finally {
      await s.close();
    }
  });

  test("the SQLite store's checks: arguments, parts, ranges that are not the next, duplicates; each refused with nothing written", async () => {
    const url = await freshDb("checks");
    const s = await PostgresRecallStore.open(url);
    try {
      await assert.rejects(s.archive("c", range(3, 0, ["x"])), isErr("invalid_state", "/range/id", /has 0 ranges: its next is r1, not r3/));
      await assert.rejects(s.archive("c", { range: { id: "x1", from_index: 0, to_index: 1, summary: "" }, rows: [] }), isErr("invalid_request", "/range/id"));
      await assert.rejects(s.archive("c", { range: { id: "r1", from_index: 2 ** 40, to_index: 1, summary: "" }, rows: [] }), isErr("invalid_request", "/range/from_index", /PostgreSQL integer/));
      await assert.rejects(s.archive("c", 42), isErr("invalid_request", ""));
      await assert.rejects(s.archive("c", []), isErr("invalid_request", "", /no parts/));
      await assert.rejects(s.archive(7, range(1, 0, ["x"])), isErr("invalid_request", "/session"));
      const dup = range(1, 0, ["x", "y"]);
      dup.rows[1].id = dup.rows[0].id;
      await assert.rejects(s.archive("c", dup), isErr("invalid_request", "/rows", /already has a message r1\.0/));
      const wrongRange = range(1, 0, ["x", "y", "z"]);
      wrongRange.rows[2].range_id = "r2";
      const { parts } = inParts(wrongRange, 2);
      await assert.rejects(s.archive("c", parts), isErr("invalid_request", "/rows/2/range_id"));
      const boom = new Error("the parts failed");
      await assert.rejects(s.archive("c", (function* () { yield range(1, 0, ["x"]); throw boom; })()), (err) => err === boom);
      await assert.rejects(s.archive("c", [range(1, 0, ["x"]), range(1, 0, ["y"])]), isErr("invalid_request", "/range", /part 1 of r1 holds a range/));
      assert.deepEqual(await s.sessions(), [], "nothing written by any of them");
      // Async iterables of parts are taken too.
      const a = range(1, 0, ["one", "two", "three"]);
      assert.deepEqual(await s.archive("c", (async function* () { yield { range: a.range, rows: a.rows.slice(0, 2) }; yield { rows: a.rows.slice(2) }; })()),
        { range: "r1", messages: 4 });
      await assert.rejects(s.archive("c", range(1, 0, ["again"])), isErr("invalid_state", "/range/id", /already has a range r1: another compaction of the session archived first/));
      await assert.rejects(s.search("c", "x", { limit: 0 }), isErr("invalid_request", "/limit"));
      await assert.rejects(s.search("c", { fts: '"abc"', like: [] }), isErr("invalid_request", "/query", /like patterns/));
      await assert.rejects(s.expand("c", 5), isErr("invalid_request", "/id"));
      await assert.rejects(PostgresRecallStore.open(url, { driver: "pg" }), isErr("invalid_request", "/driver", /unknown option "driver"/));
      await assert.rejects(PostgresRecallStore.open(url, { countLimit: 0 }), isErr("invalid_request", "/count_limit"));
      await assert.rejects(PostgresRecallStore.open(url, { pool: 0 }), isErr("invalid_request", "/pool"));
      await assert.rejects(PostgresRecallStore.open(""), isErr("invalid_request", "/url"));
      await assert.rejects(PostgresRecallStore.open(`${url}&target_session_attrs=any`), isErr("invalid_request", "/url", /unknown connection parameter "target_session_attrs"/));
      await assert.rejects(PostgresRecallStore.open(`${url.replace(/\?.*/, "")}?sslmode=sometimes`), isErr("invalid_request", "/url", /sslmode "sometimes"/));
      await assert.rejects(PostgresRecallStore.open("host=x port=nope"), isErr("invalid_request", "/url", /port "nope"/));
      await assert.rejects(PostgresRecallStore.open("host='x"), isErr("invalid_request", "/url", /no closing quote/));
    } finally {
      await s.close();
    }
    // Closed: every method rejects; close is idempotent.
    await s.close();
    assert.equal(s.closed, true);
    await assert.rejects(s.search("c", "x"), isErr("invalid_request", "", /closed/));
    await assert.rejects(s.archive("c", range(2, 0, ["x"])), isErr("invalid_request", "", /closed/));
    await assert.rejects(s.sessions(), isErr("invalid_request", "", /closed/));
  });

  test("two archives of one session's next range at once: exactly one is written, the other is invalid_state at /range/id and writes nothing", async (t) => {
    hooks(t);
    const url = await freshDb("race");
    const [a, b] = await Promise.all([PostgresRecallStore.open(url), PostgresRecallStore.open(url)]);
    try {
      // The writer that has the session's lock holds its transaction open before
      // COMMIT until the other waits on that lock (polled; 30 s bounds a hang, a
      // correct build sees it within milliseconds).
      let waited = 0;
      testHooks.beforeCommit = async () => {
        for (let i = 0; i < 3000; i++) {
          if ((await sql("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"))[0].n > 0) {
            waited++;
            return;
          }
          await sleep(10);
        }
      };
      for (let k = 1; k <= 3; k++) {
        const next = await a.nextRangeId("s");
        assert.equal(next, `r${k}`);
        const mine = (who) => range(k, k * 10, [`${who} first ${k}`, `${who} second ${k}`]);
        const results = await Promise.allSettled([a.archive("s", mine("alice")), b.archive("s", mine("bob"))]);
        const won = results.filter((r) => r.status === "fulfilled");
        const lost = results.filter((r) => r.status === "rejected");
        assert.equal(won.length, 1, JSON.stringify(results.map((r) => r.status)));
        assert.deepEqual(won[0].value, { range: `r${k}`, messages: 3 });
        isErr("invalid_state", "/range/id", new RegExp(`already has a range r${k}`))(lost[0].reason);
        const winner = results[0].status === "fulfilled" ? "alice" : "bob";
        const rows = await a.expand("s", `r${k}`);
        assert.deepEqual(rows.messages.map((m) => JSON.parse(m).content), [`${winner} first ${k}`, `${winner} second ${k}`], "the winner's rows only");
      }
      assert.equal(waited, 3, "in every round the other writer waited on the session's lock");
      assert.deepEqual((await b.ranges("s")).map((r) => [r.id, r.seq]), [["r1", 1], ["r2", 2], ["r3", 3]]);
      await onDb(url, async (q) => assert.equal((await q("SELECT count(*)::int AS n FROM ctxc_messages"))[0].n, 9));
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("a connection lost inside an archive's transaction is retried once, on a new connection, with the parts seen: exactly one copy", async (t) => {
    hooks(t);
    const url = await freshDb("lost");
    const s = await PostgresRecallStore.open(url);
    const rowsOf = (sess) => onDb(url, (q) => q("SELECT id, json FROM ctxc_messages WHERE session = $1 ORDER BY rowid", [sess]));
    try {
      // Before COMMIT: the transaction is rolled back by the server, the retry writes it all.
      const big = range(1, 0, Array.from({ length: 1200 }, (_, i) => `message ${i} of the big range`));
      const seen = [];
      testHooks.beforeCommit = async ({ pid, attempt }) => {
        seen.push([attempt, pid]);
        if (attempt === 1) await kill(pid);
      };
      const { parts, pulled } = inParts(big, 500);
      assert.deepEqual(await s.archive("a", parts), { range: "r1", messages: 1201 });
      assert.deepEqual(seen.map((x) => x[0]), [1, 2]);
      assert.notEqual(seen[0][1], seen[1][1], "the retry's connection is a new one");
      assert.deepEqual(pulled, [0, 1, 2], "each part pulled once: the retry writes the parts it kept");
      assert.deepEqual((await rowsOf("a")).map((r) => [r.id, r.json]), big.rows.map((r) => [r.id, r.json]), "one copy, in order");

      // Between parts: the next INSERT finds the connection gone.
      const mid = range(1, 0, ["m0", "m1", "m2", "m3", "m4"]);
      let pid;
      const attempts = [];
      testHooks.beforeCommit = null;
      testHooks.onConnection = ({ pid: p, attempt, what }) => {
        if (what.startsWith("archive")) attempts.push(attempt);
        if (attempt === 1 && what.startsWith("archive")) pid = p;
      };
      const pulledMid = [];
      const parts2 = (async function* () {
        pulledMid.push(0);
        yield { range: mid.range, rows: mid.rows.slice(0, 2) };
        await kill(pid); // part 0 is written in the transaction; the connection goes before part 1's rows
        pulledMid.push(1);
        yield { rows: mid.rows.slice(2, 4) };
        pulledMid.push(2);
        yield { rows: mid.rows.slice(4) };
      })();
      assert.deepEqual(await s.archive("b", parts2), { range: "r1", messages: 6 });
      assert.deepEqual(attempts, [1, 2]);
      assert.deepEqual(pulledMid, [0, 1, 2]);
      assert.deepEqual((await rowsOf("b")).map((r) => r.id), mid.rows.map((r) => r.id));

      // After COMMIT, its answer lost: the retry finds the range with the same rows, and succeeds.
      testHooks.onConnection = null;
      const done = [];
      testHooks.afterCommit = async ({ pid: p, attempt, query }) => {
        done.push(attempt);
        if (attempt === 1) {
          await kill(p);
          await query("SELECT 1"); // the lost connection's own error
        }
      };
      const landed = range(1, 0, ["c0", "c1"]);
      assert.deepEqual(await s.archive("c", landed), { range: "r1", messages: 3 });
      assert.deepEqual(done, [1, 2]);
      assert.deepEqual((await rowsOf("c")).map((r) => r.id), landed.rows.map((r) => r.id), "one copy");
      assert.deepEqual((await s.ranges("c")).map((r) => r.id), ["r1"]);
    } finally {
      await s.close();
    }
  });

  test("a connection lost twice is store_unavailable, with nothing written; reads are retried once too", async (t) => {
    hooks(t);
    const url = await freshDb("twice");
    const s = await PostgresRecallStore.open(url);
    try {
      const attempts = [];
      testHooks.beforeCommit = async ({ pid, attempt }) => {
        attempts.push(attempt);
        await kill(pid);
      };
      await assert.rejects(s.archive("a", range(1, 0, ["x", "y"])), isErr("store_unavailable", "", /lost twice .*: nothing of r1 was written$/));
      assert.deepEqual(attempts, [1, 2]);
      await onDb(url, async (q) => {
        assert.equal((await q("SELECT count(*)::int AS n FROM ctxc_messages"))[0].n, 0);
        assert.equal((await q("SELECT count(*)::int AS n FROM ctxc_ranges"))[0].n, 0);
      });
      testHooks.beforeCommit = null;
      assert.deepEqual(await s.archive("a", range(1, 0, ["x", "y"])), { range: "r1", messages: 3 }, "the store goes on");

      // A read whose connection is lost is asked again on a new one; lost twice, store_unavailable.
      const reads = [];
      testHooks.onConnection = async ({ pid, attempt, what }) => {
        reads.push(attempt);
        if (attempt === 1) await kill(pid);
      };
      assert.deepEqual((await s.search("a", "x")).hits.map((h) => h.id), ["r1.0"]);
      assert.deepEqual(reads, [1, 2]);
      testHooks.onConnection = async ({ pid }) => kill(pid);
      await assert.rejects(s.expand("a", "r1"), isErr("store_unavailable", "", /expand r1 in session "a": the connection to PostgreSQL was lost twice/));
      await assert.rejects(s.sessions(), isErr("store_unavailable", ""));
      testHooks.onConnection = null;
      assert.deepEqual(await s.sessions(), ["a"]);
    } finally {
      await s.close();
    }
    // No server at all: lost twice at open.
    const port = await new Promise((resolve) => {
      const srv = createServer().listen(0, "127.0.0.1", () => {
        const p = srv.address().port;
        srv.close(() => resolve(p));
      });
    });
    await assert.rejects(PostgresRecallStore.open(`postgres://ctxcompact@127.0.0.1:${port}/x?sslmode=disable`), isErr("store_unavailable", "", /lost twice/));
  });

  test("the lossless engine compacts into PostgreSQL and answers context_search / context_expand from it, as with SQLite", async () => {
    const url = await freshDb("engine");
    const c = await Compactor.create();
    const LOSSLESS = { model: { context_length: 32000 }, context: { engine: "lossless", archive_part: 7 } };
    const pgs = await PostgresRecallStore.open(url);
    const lite = await RecallStore.open();
    try {
      const convo = session({ turns: 60 });
      const engines = [pgs, lite].map((store) => c.engine({ config: LOSSLESS, store, sessionId: "eng" }));
      const results = [];
      for (const e of engines) {
        const first = await e.compress(convo, { force: true });
        assert.equal(first.report.compacted, true);
        const second = await e.compress([...first.messages, ...session({ turns: 30, tag: " later" })], { force: true });
        assert.equal(second.report.compacted, true);
        assert.equal(e.compressionCount, 2);
        results.push([first, second]);
      }
      assert.deepEqual(results[0][1].messages, results[1][1].messages, "the same compaction on both stores");
      assert.deepEqual(await pgs.ranges("eng"), lite.ranges("eng"));
      assert.deepEqual((await pgs.ranges("eng")).map((r) => r.id), ["r1", "r2"]);
      const [onPg, onLite] = engines;
      const calls = [
        ["context_search", { query: "module_12.py" }],
        ["context_search", { query: "def f_3", limit: 50 }],
        ["context_search", '{"query": "later", "limit": 3}'],
        ["context_search", { query: "RETURN X" }],
        ["context_expand", { id: "r1" }],
        ["context_expand", { id: "r2", max_tokens: 200 }],
        ["context_expand", { id: "r1.summary" }],
        ["context_expand", { id: "r9" }],
        ["context_search", { query: "x", limit: 0 }],
      ];
      for (const [name, args] of calls) {
        const got = await onPg.handleToolCallAsync(name, args);
        assert.equal(got, onLite.handleToolCall(name, args), `${name} ${JSON.stringify(args)}`);
        assert.equal(got, await onLite.handleToolCallAsync(name, args));
      }
      const found = JSON.parse(await onPg.handleToolCallAsync("context_search", { query: "module_12.py" }));
      assert.ok(found.total > 0 && found.hits.every((h) => h.snippet.includes("module_12.py")), JSON.stringify(found).slice(0, 300));
      // Byte for byte: the originals of r1 are the first compaction's archived messages.
      const r1 = JSON.parse(await onPg.handleToolCallAsync("context_expand", { id: "r1" }));
      assert.deepEqual(r1.messages, results[0][0].archived.slice().sort((x, y) => x.index - y.index).map((a) => a.message));
      // The synchronous tool call cannot await a PostgreSQL store: refused, naming the way.
      assert.throws(() => onPg.handleToolCall("context_search", { query: "module" }), (err) => err instanceof CompactError && err.code === "invalid_request" && err.path === "/store" && /handleToolCallAsync/.test(err.message));
    } finally {
      await pgs.close();
      lite.close();
    }
  });

  test("openRecallStore: postgres URL, DSN, sqlite:PATH, sqlite::memory:, a path, CTXCOMPACT_RECALL_URL; none is invalid_request at /url", async (t) => {
    const url = await freshDb("route");
    const dir = mkdtempSync(path.join(tmpdir(), "ctxc-route-"));
    const saved = process.env.CTXCOMPACT_RECALL_URL;
    t.after(() => {
      rmSync(dir, { recursive: true, force: true });
      if (saved === undefined) delete process.env.CTXCOMPACT_RECALL_URL;
      else process.env.CTXCOMPACT_RECALL_URL = saved;
    });
    const opened = [];
    const open = async (...args) => {
      const s = await openRecallStore(...args);
      opened.push(s);
      return s;
    };
    try {
      const p = await open(url);
      assert.ok(p instanceof PostgresRecallStore);
      assert.equal(p.path, url);
      assert.ok((await open(url.replace(/^postgres:/, "postgresql:"))) instanceof PostgresRecallStore);
      const u = new URL(url);
      const dsn = `host=${u.hostname} port=${u.port} dbname='${u.pathname.slice(1)}' user=${u.username} password=hush sslmode=disable`;
      const d = await open(dsn);
      assert.ok(d instanceof PostgresRecallStore);
      assert.equal(d.path, `host=${u.hostname} port=${u.port} dbname=${u.pathname.slice(1)} user=${u.username} sslmode=disable`, "the DSN without its password");
      await d.archive("route", range(1, 0, ["via the DSN"]));
      assert.equal((await p.search("route", "dsn")).total, 1, "one database");

      const file = path.join(dir, "a.db");
      const f = await open(file);
      assert.ok(f instanceof RecallStore);
      assert.equal(f.path, file);
      const g = await open(`sqlite:${path.join(dir, "b.db")}`, { countLimit: 7 });
      assert.ok(g instanceof RecallStore);
      assert.equal(g.path, path.join(dir, "b.db"));
      assert.equal(g.countLimit, 7, "options go to the store");
      const m = await open("sqlite::memory:");
      assert.ok(m instanceof RecallStore);
      assert.equal(m.path, null);

      process.env.CTXCOMPACT_RECALL_URL = url;
      const e = await open();
      assert.ok(e instanceof PostgresRecallStore);
      assert.equal((await e.search("route", "dsn")).total, 1);
      process.env.CTXCOMPACT_RECALL_URL = `sqlite:${file}`;
      assert.ok((await open()) instanceof RecallStore);
      delete process.env.CTXCOMPACT_RECALL_URL;
      await assert.rejects(openRecallStore(), isErr("invalid_request", "/url", /CTXCOMPACT_RECALL_URL/));
      await assert.rejects(openRecallStore(""), isErr("invalid_request", "/url", /CTXCOMPACT_RECALL_URL/));
      await assert.rejects(openRecallStore("sqlite:"), isErr("invalid_request", "/url"));
      await assert.rejects(openRecallStore("mysql://h/db"), isErr("invalid_request", "/url", /"mysql" is not a store's scheme/));
      await assert.rejects(openRecallStore(url, { driver: "wasm" }), isErr("invalid_request", "/driver"), "PostgresRecallStore's options");
      await assert.rejects(openRecallStore(file, { pool: 2 }), isErr("invalid_request", "/pool"), "RecallStore's options");
    } finally {
      for (const s of opened) await s.close();
    }
  });

  test("without pg installed, opening names the install step (ErrMissingDependency)", async (t) => {
    // The store's files alone, in a folder where no node_modules has pg: once as a
    // linked checkout would be, once inside a node_modules.
    const tmp = mkdtempSync(path.join(tmpdir(), "ctxc-nopg-"));
    t.after(() => rmSync(tmp, { recursive: true, force: true }));
    for (const root of [path.join(tmp, "checkout"), path.join(tmp, "app", "node_modules", "ctxcompact")]) {
      mkdirSync(path.join(root, "bindings", "js"), { recursive: true });
      mkdirSync(path.join(root, "recall"), { recursive: true });
      for (const f of ["recall-postgres.js", "recall-query.js", "errors.js"]) copyFileSync(path.join(HERE, "..", f), path.join(root, "bindings", "js", f));
      copyFileSync(path.join(ROOT, "recall", "schema_postgres.sql"), path.join(root, "recall", "schema_postgres.sql"));
      const mod = new URL(`file://${path.join(root, "bindings", "js", "recall-postgres.js")}`).href;
      const script = `import { PostgresRecallStore } from ${JSON.stringify(mod)};
try { await PostgresRecallStore.open("postgres://u@h/db"); } catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, dependency: e.dependency, message: e.message })); }`;
      const out = JSON.parse((await run(process.execPath, ["--input-type=module", "-e", script], { cwd: tmp })).stdout);
      assert.deepEqual([out.name, out.code, out.dependency], ["ErrMissingDependency", "missing_dependency", "pg"]);
      assert.equal(out.message, root.includes("node_modules")
        ? "ctxcompact: the PostgreSQL recall store needs pg (node-postgres): npm install pg"
        : `ctxcompact: the PostgreSQL recall store needs pg (node-postgres): this package is a linked folder (${root}), which resolves pg from its own folder: run \`npm install pg\` in it, or install it as a copy with \`npm install --install-links ${root}\` beside pg`);
    }
  });

  test("the load-test worker: three at once on two sessions archive every op once (conflicts asked again), and every search hit holds its terms", async () => {
    const url = await freshDb("load");
    const worker = path.join(HERE, "pg-load-worker.mjs");
    const [ops, searches, sessions] = [12, 9, 2];
    const outs = await Promise.all([0, 1, 2].map(async (w) => JSON.parse((await run(process.execPath, [worker, url, String(w), String(ops), String(searches), String(sessions)])).stdout)));
    const archived = [];
    for (const [w, o] of outs.entries()) {
      assert.deepEqual(Object.keys(o), ["worker", "runtime", "archived", "conflicts", "errors", "searches", "search_errors"]);
      assert.equal(o.worker, w);
      assert.equal(o.runtime, "node");
      assert.deepEqual(o.errors, []);
      assert.equal(o.searches, searches);
      assert.equal(o.search_errors, 0);
      assert.equal(o.archived.length, ops);
      assert.deepEqual(o.archived.map((a) => a[2]), Array.from({ length: ops }, (_, i) => `w${w}o${i}`));
      archived.push(...o.archived);
    }
    const s = await PostgresRecallStore.open(url);
    try {
      assert.deepEqual(await s.sessions(), ["load-s0", "load-s1"]);
      for (const sess of await s.sessions()) {
        const mine = archived.filter((a) => a[0] === sess);
        const ranges = await s.ranges(sess);
        assert.deepEqual(ranges.map((r) => r.id), ranges.map((_, i) => `r${i + 1}`), "contiguous ids");
        assert.deepEqual(ranges.map((r) => [r.id, r.summary]).sort(), mine.map(([, id, tag]) => [id, `summary ${tag}`]).sort());
        for (const [, id, tag] of mine) {
          const msgs = (await s.expand(sess, id)).messages.map((m) => JSON.parse(m));
          assert.deepEqual(msgs.map((m) => m.role), ["user", "assistant", "tool"]);
          assert.ok(msgs.every((m, j) => m.content.startsWith(`${tag} row${j} `)));
        }
      }
      // The worker's terms, %, _ and case mixed, are found literally.
      const hit = (await s.search("load-s0", "fox%trot", { limit: 50 })).hits;
      assert.ok(hit.length > 0 && hit.every((h) => h.text.includes("fox%trot")));
    } finally {
      await s.close();
    }
  });
}
