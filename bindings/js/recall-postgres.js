// ctxcompact/recall on PostgreSQL (docs/RECALL.md "On PostgreSQL"): the recall store
// of many processes and machines, with the SQLite store's methods, checks and
// answers (recall.js), each returning a promise. The tables are
// recall/schema_postgres.sql, shared with the Go and Python stores; a search is
// every term an ASCII case-insensitive substring (ctxc_fold(text) LIKE, which the
// pg_trgm index covers), newest first. The driver is node-postgres (`pg`), an
// optional peer dependency loaded only when a store is opened.

import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CompactError, ErrMissingDependency } from "./errors.js";
import {
  DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, RANGE_ID, TOTAL_CAP, archiveRow, asciiLower, checkParsed, fail, firstRange, int, str,
} from "./recall-query.js";

/** The schema this store runs on a database without ctxc_meta (recall/schema_postgres.sql, packaged with ctxcompact/recall). */
export const PG_SCHEMA_SQL = readFileSync(new URL("../../recall/schema_postgres.sql", import.meta.url), "utf8");

/** The schema version this store reads and writes (ctxc_meta.schema_version). */
const SCHEMA_VERSION = "1";

/** The advisory lock key of ctxcompact's recall store ("ctxc"): alone for the set-up, with hashtext(session) for a session's writers. */
const LOCK_KEY = 1668577379;

/** Rows per INSERT statement, and the bytes of text after which a batch is sent early. */
const BATCH_ROWS = 500;
const BATCH_BYTES = 8 << 20;

/** PostgreSQL's integer column bounds (position, from_index, to_index). */
const INT4_MIN = -2147483648;
const INT4_MAX = 2147483647;

/** The connection string keys the store understands (libpq's names), in a URL's query or a key=value DSN. */
const KEYS = ["host", "port", "dbname", "user", "password", "sslmode", "sslrootcert", "sslcert", "sslkey", "application_name", "connect_timeout"];
const SSLMODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"];

/**
 * Hooks for the tests (undocumented; may change), each may be async, and an error
 * one throws is the operation's, as if the connection had thrown it:
 * onConnection({ pid, attempt, what }) when an operation has its connection (pid:
 * its server process), beforeCommit({ pid, attempt, session, range }) in an
 * archive's transaction after its rows are written, afterCommit({ pid, attempt,
 * query }) after its COMMIT answered.
 */
export const testHooks = { onConnection: null, beforeCommit: null, afterCommit: null };

// ---------------------------------------------------------------------------
// The driver

let pgModule = null;
async function loadPg() {
  if (!pgModule) {
    let mod;
    try {
      mod = await import("pg");
    } catch (err) {
      if (err?.code === "ERR_MODULE_NOT_FOUND" && String(err.message).includes("'pg'")) throw missingPg(err);
      throw err;
    }
    pgModule = mod.default ?? mod;
  }
  return pgModule;
}

// The error when pg cannot be found, naming the step that installs it: in the
// project (pg is a peer dependency), or, for a checkout that `npm install
// /path/to/checkout` linked, in the checkout, whose real path Node resolves it from.
function missingPg(cause) {
  const root = fileURLToPath(new URL("../../", import.meta.url)).replace(/[\\/]+$/, "");
  const step = root.split(/[\\/]/).includes("node_modules")
    ? "npm install pg"
    : `this package is a linked folder (${root}), which resolves pg from its own folder: run \`npm install pg\` in it, or install it as a copy with \`npm install --install-links ${root}\` beside pg`;
  return new ErrMissingDependency("pg", `ctxcompact: the PostgreSQL recall store needs pg (node-postgres): ${step}`, { cause });
}

// ---------------------------------------------------------------------------
// Connection strings

const badURL = (message) => fail(`PostgresRecallStore.open(): ${message}`, "/url");

/** The key=value pairs of a libpq DSN: values bare (\ escapes a character) or 'quoted' (\' and \\). */
function parseDSN(dsn) {
  const out = [];
  let i = 0;
  const space = (c) => c === " " || c === "\t" || c === "\n" || c === "\r" || c === "\f" || c === "\v";
  while (i < dsn.length) {
    while (i < dsn.length && space(dsn[i])) i++;
    if (i >= dsn.length) break;
    let key = "";
    while (i < dsn.length && dsn[i] !== "=" && !space(dsn[i])) key += dsn[i++];
    while (i < dsn.length && space(dsn[i])) i++;
    if (dsn[i] !== "=") throw badURL(`the connection string has ${JSON.stringify(key)} without "=value" (a DSN is key=value pairs)`);
    i++;
    while (i < dsn.length && space(dsn[i])) i++;
    let value = "";
    if (dsn[i] === "'") {
      i++;
      for (;;) {
        if (i >= dsn.length) throw badURL(`the value of ${key} has no closing quote`);
        const c = dsn[i++];
        if (c === "'") break;
        if (c === "\\" && i < dsn.length) value += dsn[i++];
        else value += c;
      }
    } else {
      while (i < dsn.length && !space(dsn[i])) {
        const c = dsn[i++];
        if (c === "\\" && i < dsn.length) value += dsn[i++];
        else value += c;
      }
    }
    out.push([key, value]);
  }
  return out;
}

/** The pairs of a postgres:// URL: user, password, host, port and dbname from its parts, the rest from its query. */
function parseURL(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    throw badURL(`${JSON.stringify(redactURLText(url))} is not a valid URL (postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=...)`);
  }
  const pairs = [];
  const dec = (s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      throw badURL("the URL has a malformed %-escape");
    }
  };
  if (u.username) pairs.push(["user", dec(u.username)]);
  if (u.password) pairs.push(["password", dec(u.password)]);
  if (u.hostname) pairs.push(["host", dec(u.hostname).replace(/^\[(.*)\]$/, "$1")]);
  if (u.port) pairs.push(["port", u.port]);
  if (u.pathname && u.pathname !== "/") pairs.push(["dbname", dec(u.pathname.slice(1))]);
  for (const [k, v] of u.searchParams) pairs.push([k, v]);
  return { pairs, redacted: redactURL(u) };
}

/** A URL text without its password (for an error message about a URL that does not parse). */
const redactURLText = (url) => url.replace(/^([a-z]+:\/\/[^:@/]*):[^@/]*@/i, "$1@");

function redactURL(u) {
  const r = new URL(u.href);
  r.password = "";
  r.searchParams.delete("password");
  // URLSearchParams writes an empty query as "?" only when one was there.
  return r.href.replace(/\?$/, "");
}

/** A DSN written back without its password, its values quoted where they need it. */
function redactDSN(pairs) {
  const quote = (v) => (v === "" || /[\s'\\]/.test(v) ? `'${v.replace(/[\\']/g, (c) => `\\${c}`)}'` : v);
  return pairs.filter(([k]) => k !== "password").map(([k, v]) => `${k}=${quote(v)}`).join(" ");
}

function readPEM(path, key) {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw badURL(`cannot read ${key} ${path}: ${err.message}`);
  }
}

/**
 * pg's config from a postgres:// URL or a key=value DSN (PG* environment variables
 * fill what it leaves out, as libpq has it: pg reads PGHOST, PGPORT, PGDATABASE,
 * PGUSER, PGPASSWORD and ~/.pgpass itself; sslmode falls back to PGSSLMODE, then
 * libpq's "prefer"). Returns the config, the text without its password, and the sslmode.
 */
export function connectionConfig(url) {
  const { pairs, redacted } = /^postgres(ql)?:\/\//i.test(url) ? parseURL(url) : (() => {
    const p = parseDSN(url);
    return { pairs: p, redacted: redactDSN(p) };
  })();
  const got = new Map();
  for (const [k, v] of pairs) {
    if (!KEYS.includes(k)) throw badURL(`unknown connection parameter ${JSON.stringify(k)} (this store takes ${KEYS.join(", ")})`);
    got.set(k, v);
  }
  const config = { keepAlive: true };
  const set = (k, v) => {
    if (v !== undefined && v !== "") config[k] = v;
  };
  set("host", got.get("host"));
  set("database", got.get("dbname"));
  set("user", got.get("user"));
  set("password", got.get("password"));
  set("application_name", got.get("application_name"));
  if (config.application_name === undefined && !process.env.PGAPPNAME) config.application_name = "ctxcompact";
  const port = got.get("port");
  if (port !== undefined && port !== "") {
    if (!/^[0-9]+$/.test(port) || Number(port) < 1 || Number(port) > 65535) throw badURL(`port ${JSON.stringify(port)} is not a port number`);
    config.port = Number(port);
  }
  const timeout = got.get("connect_timeout");
  if (timeout !== undefined && timeout !== "") {
    if (!/^[0-9]+$/.test(timeout)) throw badURL(`connect_timeout ${JSON.stringify(timeout)} is not a number of seconds`);
    // libpq: 0 waits forever; less than 2 seconds is 2.
    if (Number(timeout) > 0) config.connectionTimeoutMillis = Math.max(2, Number(timeout)) * 1000;
  }
  const sslmode = got.get("sslmode") || process.env.PGSSLMODE || "prefer";
  if (!SSLMODES.includes(sslmode)) throw badURL(`sslmode ${JSON.stringify(sslmode)} is not one of ${SSLMODES.join(", ")}`);
  const tls = {};
  const root = got.get("sslrootcert");
  if (root && root !== "system") tls.ca = readPEM(root, "sslrootcert");
  if (got.get("sslcert")) tls.cert = readPEM(got.get("sslcert"), "sslcert");
  if (got.get("sslkey")) tls.key = readPEM(got.get("sslkey"), "sslkey");
  // libpq's modes: disable and allow connect in the clear (allow falls back to TLS,
  // which a server that refuses plain connections has no need of here); prefer
  // tries TLS and falls back (open() probes); require encrypts without checking
  // the certificate unless a root certificate is given (then as verify-ca);
  // verify-ca checks the chain, verify-full the chain and the host name.
  let mode = sslmode;
  if (mode === "require" && tls.ca !== undefined) mode = "verify-ca";
  if (mode === "disable" || mode === "allow") config.ssl = false;
  else if (mode === "prefer" || mode === "require") config.ssl = { ...tls, rejectUnauthorized: false };
  else if (mode === "verify-ca") config.ssl = { ...tls, rejectUnauthorized: true, checkServerIdentity: () => undefined };
  else config.ssl = { ...tls, rejectUnauthorized: true };
  return { config, redacted, sslmode };
}

// ---------------------------------------------------------------------------
// Errors

/** Node's socket errors that mean the connection is gone (or never came). */
const SOCKET_CODES = new Set(["ECONNRESET", "ECONNREFUSED", "ECONNABORTED", "EPIPE", "ETIMEDOUT", "ENOTCONN", "EHOSTUNREACH",
  "EHOSTDOWN", "ENETUNREACH", "ENETDOWN", "EAI_AGAIN", "ENOTFOUND", "ENOENT"]);

/**
 * Whether err is a lost connection rather than the server's answer: the socket
 * closed, reset or timed out (pg's own messages for these), or the server ended the
 * session (SQLSTATE class 08, 57P01 admin shutdown, 57P02 crash shutdown, 57P03
 * cannot connect now).
 */
export function isLostConnection(err) {
  if (err === null || typeof err !== "object") return false;
  const code = typeof err.code === "string" ? err.code : "";
  if (/^[0-9A-Z]{5}$/.test(code) && err.severity !== undefined) return code.startsWith("08") || ["57P01", "57P02", "57P03"].includes(code);
  if (SOCKET_CODES.has(code) || (err.syscall !== undefined && code.startsWith("E"))) return true;
  return /Connection terminated|connection error and is not queryable|Client was closed and is not queryable|Connection timed out|socket hang up/i.test(String(err.message));
}

/** A server's error (not a lost connection) of what the store was doing. */
function pgError(what, err) {
  if (err instanceof CompactError) return err;
  const sqlstate = typeof err?.code === "string" && err?.severity !== undefined ? ` (SQLSTATE ${err.code})` : "";
  return new CompactError("internal", `ctxcompact: recall store: ${what}: ${err?.message ?? String(err)}${sqlstate}`, "", { cause: err });
}

/** A thrown value to pass on as it is, never retried (what an archive's parts throw). */
class AsIs {
  constructor(err) { this.err = err; }
}

// ---------------------------------------------------------------------------

const kOpen = Symbol("ctxcompact.recall.postgres.open");
const noop = () => {};
const hasNul = (s) => s.includes("\0");

/**
 * The recall store on a PostgreSQL database: many sessions' archived ranges, shared
 * by every process (of any runtime) that opens the database. Every method returns a
 * promise; the engine awaits them. Writers of one session take turns (an advisory
 * lock per session); readers never wait.
 */
export class PostgresRecallStore {
  #Client;
  #config;
  #pool = null;
  #path;
  #countLimit;
  #closed = false;
  /** Connections whose ROLLBACK failed (destroyed, not given back to the pool). */
  #broken = new WeakSet();

  /** Use PostgresRecallStore.open. */
  constructor(token, Client, config, path, countLimit) {
    if (token !== kOpen) throw new TypeError("ctxcompact: use `await PostgresRecallStore.open(url)`");
    this.#Client = Client;
    this.#config = config;
    this.#path = path;
    this.#countLimit = countLimit;
  }

  /**
   * Opens the store on a database: url a postgres:// (or postgresql://) URL or a
   * key=value DSN. Creates the schema when the database has none (once, however
   * many processes open it at once); refuses a database of another schema version
   * (invalid_state at /path). Rejects with ErrMissingDependency when pg is not installed.
   * @param {string} url
   * @param {{ countLimit?: number | null, pool?: number }} [options] countLimit as
   *   RecallStore's (default 100, null: exact); pool: at most this many connections (default 10)
   */
  static async open(url, options = {}) {
    if (typeof url !== "string" || url.trim() === "") throw fail("PostgresRecallStore.open(): url must be a postgres:// URL or a key=value connection string", "/url");
    if (options === null || typeof options !== "object") throw fail("PostgresRecallStore.open(): options must be an object", "");
    for (const k of Object.keys(options)) {
      if (!["countLimit", "pool"].includes(k)) throw fail(`PostgresRecallStore.open(): unknown option ${JSON.stringify(k)} (countLimit, pool)`, `/${k}`);
    }
    const countLimit = options.countLimit === undefined ? TOTAL_CAP : options.countLimit;
    if (countLimit !== null && !(Number.isSafeInteger(countLimit) && countLimit >= 1)) throw fail("PostgresRecallStore.open(): countLimit must be an integer of at least 1", "/count_limit");
    const poolSize = options.pool ?? 10;
    if (!(Number.isSafeInteger(poolSize) && poolSize >= 1 && poolSize <= 1000)) throw fail("PostgresRecallStore.open(): pool must be an integer from 1 to 1000", "/pool");
    const { config, redacted, sslmode } = connectionConfig(url);
    const pg = await loadPg();
    // The connect timeout is the connection's only: pg's pool would also apply it to
    // a wait for a free connection, which is not a lost connection.
    const timeout = config.connectionTimeoutMillis;
    delete config.connectionTimeoutMillis;
    const Client = timeout === undefined ? pg.Client : class extends pg.Client {
      constructor(o) { super({ ...o, connectionTimeoutMillis: timeout }); }
    };
    if (sslmode === "prefer") config.ssl = await preferTLS(Client, config);
    const store = new PostgresRecallStore(kOpen, Client, config, redacted, countLimit);
    store.#pool = new pg.Pool({ ...config, max: poolSize, Client });
    // An idle connection the server closes is dropped by the pool; its error is not the caller's.
    store.#pool.on("error", noop);
    store.#pool.on("connect", (c) => c.on("error", noop));
    try {
      await store.#setUp();
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }

  /** The schema when the database has none, in one transaction under the set-up lock; then its version, checked. */
  async #setUp() {
    const version = await this.#run(`cannot open ${this.#path}`, (c) => this.#tx(c, async () => {
      await c.query(`SELECT pg_advisory_xact_lock(${LOCK_KEY})`);
      // Reading pg_class first makes the server take in the catalog changes committed
      // while this connection waited for the lock (to_regclass alone can answer from
      // a cache that predates them).
      const missing = (await c.query("SELECT to_regclass('ctxc_meta') IS NULL AS missing FROM pg_catalog.pg_class LIMIT 1")).rows[0].missing;
      // One script, simple-query protocol (no parameters): every runtime runs this text.
      if (missing) await c.query(PG_SCHEMA_SQL);
      return (await c.query("SELECT value FROM ctxc_meta WHERE key = 'schema_version'")).rows[0]?.value;
    }));
    if (version !== SCHEMA_VERSION) {
      throw new CompactError("invalid_state", version === undefined
        ? `ctxcompact: the recall store ${this.#path} has a ctxc_meta table without a schema_version: not a store this ctxcompact can read`
        : `ctxcompact: the recall store ${this.#path} has schema version ${version}; this ctxcompact reads and writes version ${SCHEMA_VERSION} (open it with a ctxcompact of its version)`, "/path");
    }
  }

  /** The URL (or DSN) without its password. */
  get path() { return this.#path; }

  /** The driver: node-postgres. */
  get driver() { return "pg"; }

  /** How searches run: ctxc_fold(text) LIKE each term, on the pg_trgm index. */
  get searchMode() { return "pg_trgm"; }

  get closed() { return this.#closed; }

  /** A PostgreSQL store is always written (read-only access is the database's grants). */
  get readOnly() { return false; }

  /** The bound on a search's total (null: exact); a total equal to it means "at least". */
  get countLimit() { return this.#countLimit; }

  /** Every method returns a promise (the engine's synchronous methods refuse such a store up front). */
  get asynchronous() { return true; }

  #live() {
    if (this.#closed) throw fail("recall store: the store is closed", "");
  }

  /** A connection of the pool, and how to give it back (destroyed when broken). */
  async #pooled() {
    const c = await this.#pool.connect();
    return [c, (broken) => c.release(broken ? true : undefined)];
  }

  /** A new connection, outside the pool (a retry's: the pool may hold more of a lost server's). */
  async #fresh() {
    const c = new this.#Client(this.#config);
    c.on("error", noop);
    try {
      await c.connect();
    } catch (err) {
      c.end().catch(noop);
      throw err;
    }
    return [c, () => c.end().catch(noop)];
  }

  /**
   * Runs fn(connection, attempt, lost) on a connection of the pool; when the
   * connection is lost (not a server's error), once more from the start on a new
   * one (lost: the first loss). A second loss is store_unavailable; `unwritten`
   * is what the message adds (an archive's: nothing of it was written).
   */
  async #run(what, fn, unwritten = "") {
    this.#live();
    let lost;
    for (let attempt = 1; ; attempt++) {
      let conn;
      let release;
      try {
        [conn, release] = attempt === 1 ? await this.#pooled() : await this.#fresh();
      } catch (err) {
        if (!isLostConnection(err)) throw pgError(what, err);
        if (lost !== undefined) throw unavailable(what, lost, err, unwritten);
        lost = err;
        continue;
      }
      let broken = false;
      try {
        await testHooks.onConnection?.({ pid: conn.processID, attempt, what });
        return await fn(conn, attempt, lost);
      } catch (err) {
        broken = isLostConnection(err) || this.#broken.has(conn);
        if (err instanceof AsIs) throw err.err;
        if (!isLostConnection(err)) throw pgError(what, err);
        if (lost !== undefined) throw unavailable(what, lost, err, unwritten);
        lost = err;
      } finally {
        release(broken);
      }
    }
  }

  /** body() in a transaction on c: COMMIT after it, ROLLBACK when it throws (unless the connection is gone). */
  async #tx(c, body, commitHooks) {
    await c.query("BEGIN");
    try {
      const out = await body();
      await commitHooks?.before?.();
      await c.query("COMMIT");
      await commitHooks?.after?.();
      return out;
    } catch (err) {
      if (!isLostConnection(err)) {
        try {
          await c.query("ROLLBACK");
        } catch {
          // The connection cannot be given back in a transaction: it is destroyed instead.
          this.#broken.add(c);
        }
      }
      throw err;
    }
  }

  /** One read statement (retried once on a lost connection). */
  async #read(what, sql, params) {
    return (await this.#run(what, (c) => c.query(sql, params))).rows;
  }

  /** The ranges of a session, oldest first: [{ id, seq, from_index, to_index, summary }]. */
  async ranges(session) {
    str(session, "/session");
    this.#live();
    if (hasNul(session)) return [];
    const rows = await this.#read(`ranges of session ${JSON.stringify(session)}`,
      "SELECT id, seq, from_index, to_index, summary FROM ctxc_ranges WHERE session = $1 ORDER BY seq", [session]);
    return rows.map((r) => ({ id: r.id, seq: r.seq, from_index: r.from_index, to_index: r.to_index, summary: r.summary }));
  }

  /** The id the next compaction of a session archives under: r<k>, k = 1 + its ranges. */
  async nextRangeId(session) {
    str(session, "/session");
    this.#live();
    if (hasNul(session)) return "r1";
    const rows = await this.#read(`next range id of session ${JSON.stringify(session)}`,
      "SELECT count(*) AS n FROM ctxc_ranges WHERE session = $1", [session]);
    return `r${Number(rows[0].n) + 1}`;
  }

  /**
   * Inserts one compaction's rows under a session, in one transaction: the core's
   * recall.archive result, or an iterable (or async iterable) of its parts, the
   * first holding the range, each written as it comes. The range must be the
   * session's next (`r<n+1>`, n its ranges): else invalid_state at /range/id and
   * nothing is written. Text holding U+0000 is stored with U+FFFD in its place; a
   * json holding it raw is refused (invalid_request at /rows/<i>/json). A lost
   * connection is retried once from BEGIN with the parts seen so far (kept until
   * the commit); a second loss is store_unavailable, nothing of the range written.
   * @returns {Promise<{ range: string, messages: number }>}
   */
  async archive(session, archived) {
    str(session, "/session");
    if (hasNul(session)) throw fail("recall store: /session must not contain a NUL character (U+0000): PostgreSQL text cannot hold it", "/session");
    this.#live();
    const whole = archived !== null && typeof archived === "object" && !Array.isArray(archived) && "range" in archived;
    const parts = whole ? [archived] : archived;
    const asyncIt = parts !== null && typeof parts === "object" && typeof parts[Symbol.asyncIterator] === "function";
    if (parts === null || typeof parts !== "object" || (!asyncIt && typeof parts[Symbol.iterator] !== "function")) {
      throw fail("recall store: archive() takes the result of recall.archive: { range, rows }, or an iterable of its parts", "");
    }
    const it = asyncIt ? parts[Symbol.asyncIterator]() : parts[Symbol.iterator]();
    let done = false;
    let partErr;
    // The next part; what the parts throw is kept, to be thrown as it is.
    const next = async () => {
      try {
        const r = await it.next();
        done = r.done === true;
        return r.value;
      } catch (err) {
        done = true;
        partErr = { err };
        throw new AsIs(err);
      }
    };
    try {
      const first = await next();
      const { range, rid } = firstRange(first, done);
      const from = int4(range.from_index, "/range/from_index");
      const to = int4(range.to_index, "/range/to_index");
      const summary = str(range.summary, "/range/summary").replaceAll("\0", "\uFFFD");
      // The parts seen so far, their rows checked as the INSERT binds them: a retry writes them again.
      const seen = [];
      let count = 0;
      const take = (part, k) => {
        if (k > 0 && part?.range !== undefined) throw fail(`recall store: part ${k} of ${rid} holds a range; only the first does`, "/range");
        if (part === null || typeof part !== "object" || !Array.isArray(part.rows)) throw fail(`recall store: part ${k} of ${rid} must be { rows }`, "/rows");
        const rows = part.rows.map((r, i) => pgRow(session, rid, r, `/rows/${count + i}`));
        count += rows.length;
        seen.push(rows);
        return rows;
      };
      take(first, 0);
      const pull = async () => {
        const part = await next();
        return done ? null : take(part, seen.length);
      };
      // The transaction's body: the session's lock, the range's check, every part's rows.
      const write = async (c, lost) => {
        await c.query(`SELECT pg_advisory_xact_lock(${LOCK_KEY}, hashtext($1))`, [session]);
        const n = Number((await c.query("SELECT count(*) AS n FROM ctxc_ranges WHERE session = $1", [session])).rows[0].n);
        if (rid !== `r${n + 1}`) {
          const have = (await c.query("SELECT from_index, to_index, summary FROM ctxc_ranges WHERE session = $1 AND id = $2", [session, rid])).rows[0];
          // A retry after a lost connection: the first COMMIT may have landed (its answer lost).
          if (have !== undefined && lost !== undefined) {
            while (!done) await pull();
            const stored = (await c.query("SELECT id, json FROM ctxc_messages WHERE session = $1 AND range_id = $2 ORDER BY rowid", [session, rid])).rows;
            const rows = seen.flat();
            if (have.from_index === from && have.to_index === to && have.summary === summary && stored.length === rows.length &&
              stored.every((s, i) => s.id === rows[i][1] && s.json === rows[i][6])) return { range: rid, messages: count };
          }
          throw new CompactError("invalid_state", have !== undefined
            ? `ctxcompact: recall store: session ${JSON.stringify(session)} already has a range ${rid}: another compaction of the session archived first (nothing of this one is written; compact again)`
            : `ctxcompact: recall store: session ${JSON.stringify(session)} has ${n} range${n === 1 ? "" : "s"}: its next is r${n + 1}, not ${rid} (nothing of this one is written; compact again)`, "/range/id");
        }
        await c.query("INSERT INTO ctxc_ranges (session, id, seq, from_index, to_index, summary) VALUES ($1, $2, $3, $4, $5, $6)",
          [session, rid, n + 1, from, to, summary]);
        for (const rows of seen) await insertRows(c, session, rows);
        while (!done) {
          const rows = await pull();
          if (rows !== null) await insertRows(c, session, rows);
        }
        return { range: rid, messages: count };
      };
      const hooks = (c, attempt) => ({
        before: () => testHooks.beforeCommit?.({ pid: c.processID, attempt, session, range: rid }),
        after: () => testHooks.afterCommit?.({ pid: c.processID, attempt, query: (sql) => c.query(sql) }),
      });
      const what = `archive ${rid} of session ${JSON.stringify(session)}`;
      return await this.#run(what, (c, attempt, lost) => this.#tx(c, () => write(c, lost), hooks(c, attempt)), `: nothing of ${rid} was written`);
    } catch (err) {
      if (!done) {
        try {
          await it.return?.();
        } catch {
          // the parts' own clean-up failing does not hide the archive's error
        }
      }
      throw partErr ? partErr.err : err instanceof AsIs ? err.err : err;
    }
  }

  /**
   * Archived messages (and summaries) of a session matching every term of the query
   * (ASCII case-insensitive substrings of their searchable text), newest first: the
   * SQLite store's answer for the same rows. The newest max(countLimit, limit)
   * matches are read (all of them with countLimit null); the hits are the first
   * `limit`, the total how many were read.
   * @param {string} session
   * @param {string | {terms?: string[], fts: string, like: string[]}} query a string, or the core's recall.query result (its like patterns; fts is SQLite's)
   * @param {{ limit?: number }} [options] at most this many hits (default 10, at most 50)
   * @returns {Promise<{ hits: Array<{ id: string, range_id: string, position: number, role: string, text: string }>, total: number }>}
   */
  async search(session, query, options = {}) {
    str(session, "/session");
    const q = checkParsed(query);
    const limit = options?.limit ?? DEFAULT_SEARCH_LIMIT;
    if (!Number.isSafeInteger(limit) || limit < 1) throw fail("recall store: limit must be a positive integer", "/limit");
    this.#live();
    if (q.like.length === 0) throw fail("recall: the PostgreSQL store searches with the plan's like patterns, and this plan has none", "/query");
    if (hasNul(session)) return { hits: [], total: 0 };
    const max = Math.min(limit, MAX_SEARCH_LIMIT);
    const want = this.#countLimit === null ? null : Math.max(this.#countLimit, max);
    // The core's patterns (%, _ and \ escaped by \, PostgreSQL's default LIKE escape), lowered as ctxc_fold lowers the text.
    const where = q.like.map((_, i) => ` AND ctxc_fold(text) LIKE $${i + 2}`).join("");
    const sql = `WITH w AS (SELECT rowid FROM ctxc_messages WHERE session = $1${where} ORDER BY rowid DESC${want === null ? "" : ` LIMIT ${want}`})
SELECT m.id, m.range_id, m.position, m.role, m.text, (SELECT count(*) FROM w) AS total
FROM (SELECT rowid FROM w ORDER BY rowid DESC LIMIT ${max}) t JOIN ctxc_messages m ON m.rowid = t.rowid ORDER BY m.rowid DESC`;
    const rows = await this.#read(`search in session ${JSON.stringify(session)}`, sql, [session, ...q.like.map(asciiLower)]);
    return {
      hits: rows.map((r) => ({ id: r.id, range_id: r.range_id, position: r.position, role: r.role, text: r.text })),
      total: rows.length === 0 ? 0 : Number(rows[0].total),
    };
  }

  /**
   * The original message JSON texts behind an id: a range `r<k>` (its archived
   * messages in input order, the summary row left out) or one message `r<k>.<index>`
   * (or `r<k>.summary`). Unknown ids give no messages.
   * @returns {Promise<{ id: string, messages: string[] }>}
   */
  async expand(session, id) {
    str(session, "/session");
    str(id, "/id");
    this.#live();
    if (hasNul(session) || hasNul(id)) return { id, messages: [] };
    const rows = RANGE_ID.test(id)
      ? await this.#read(`expand ${id} in session ${JSON.stringify(session)}`,
        "SELECT json FROM ctxc_messages WHERE session = $1 AND range_id = $2 AND reason <> 'summary' ORDER BY position, rowid", [session, id])
      : await this.#read(`expand ${id} in session ${JSON.stringify(session)}`,
        "SELECT json FROM ctxc_messages WHERE session = $1 AND id = $2", [session, id]);
    return { id, messages: rows.map((r) => r.json) };
  }

  /**
   * Removes a session's ranges and messages (under the session's lock: not amid its
   * archive); returns what went. Retried once on a lost connection, so after a lost
   * COMMIT answer the counts are the retry's (none).
   */
  async deleteSession(session) {
    str(session, "/session");
    this.#live();
    if (hasNul(session)) return { ranges: 0, messages: 0 };
    return this.#run(`delete session ${JSON.stringify(session)}`, (c) => this.#tx(c, async () => {
      await c.query(`SELECT pg_advisory_xact_lock(${LOCK_KEY}, hashtext($1))`, [session]);
      const messages = (await c.query("DELETE FROM ctxc_messages WHERE session = $1", [session])).rowCount;
      const ranges = (await c.query("DELETE FROM ctxc_ranges WHERE session = $1", [session])).rowCount;
      return { ranges, messages };
    }));
  }

  /** The sessions the store holds, in byte order (as SQLite sorts them). */
  async sessions() {
    this.#live();
    const rows = await this.#read("list sessions", 'SELECT session FROM (SELECT session FROM ctxc_ranges UNION SELECT session FROM ctxc_messages) s ORDER BY session COLLATE "C"', []);
    return rows.map((r) => r.session);
  }

  /** Closes the pool's connections (idempotent); an operation under way finishes first. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    await this.#pool?.end().catch(noop);
  }
}

/** The error of a connection lost twice. */
function unavailable(what, first, second, unwritten) {
  return new CompactError("store_unavailable",
    `ctxcompact: recall store: ${what}: the connection to PostgreSQL was lost twice (${first?.message ?? first}; then ${second?.message ?? second})${unwritten}`,
    "", { cause: second });
}

/** An integer PostgreSQL's integer columns hold. */
function int4(v, path) {
  int(v, path);
  if (v < INT4_MIN || v > INT4_MAX) throw fail(`recall store: ${path} must be an integer from ${INT4_MIN} to ${INT4_MAX} (a PostgreSQL integer)`, path);
  return v;
}

/** A message row as the INSERT binds it: the SQLite store's checks, then PostgreSQL's NUL rules. */
function pgRow(session, rid, r, p) {
  const row = archiveRow(session, rid, r, p);
  int4(row[3], `${p}/position`);
  for (const [i, name] of [[1, "id"], [4, "role"], [5, "reason"]]) {
    if (hasNul(row[i])) throw fail(`recall store: ${p}/${name} must not contain a NUL character (U+0000): PostgreSQL text cannot hold it`, `${p}/${name}`);
  }
  if (hasNul(row[6])) throw fail(`recall store: ${p}/json holds a raw NUL character (U+0000), which PostgreSQL text cannot hold (JSON writes it \\u0000)`, `${p}/json`);
  row[7] = row[7].replaceAll("\0", "\uFFFD");
  return row;
}

/** Inserts rows (in order: their rowids are the archive's order) in multi-row INSERTs of at most BATCH_ROWS rows. */
async function insertRows(c, session, rows) {
  let at = 0;
  while (at < rows.length) {
    let end = at;
    let bytes = 0;
    while (end < rows.length && end - at < BATCH_ROWS && (end === at || bytes < BATCH_BYTES)) {
      bytes += rows[end][6].length + rows[end][7].length;
      end++;
    }
    const values = [];
    const params = [session];
    for (let i = at; i < end; i++) {
      const r = rows[i];
      const k = params.length;
      values.push(`($1, $${k + 1}, $${k + 2}, $${k + 3}, $${k + 4}, $${k + 5}, $${k + 6}, $${k + 7})`);
      params.push(r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
    }
    try {
      await c.query(`INSERT INTO ctxc_messages (session, id, range_id, position, role, reason, json, text) VALUES ${values.join(", ")}`, params);
    } catch (err) {
      if (err?.code === "23505") {
        const id = /\(session, id\)=\(.*, (.*)\)/.exec(err.detail ?? "")?.[1];
        throw fail(`recall store: session ${JSON.stringify(session)} already has a message ${id ?? "of these ids"}`, "/rows", err);
      }
      throw err;
    }
    at = end;
  }
}

/**
 * The TLS setting of sslmode prefer (libpq's default): TLS without checking the
 * certificate when the server offers it, else a plain connection.
 */
async function preferTLS(Client, config) {
  const tls = config.ssl;
  const c = new Client({ ...config, ssl: tls });
  c.on("error", noop);
  try {
    await c.connect();
    return tls;
  } catch (err) {
    return /does not support SSL/i.test(String(err?.message)) ? false : tls;
  } finally {
    await c.end().catch(noop);
  }
}
