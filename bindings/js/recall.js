// ctxcompact/recall: the lossless-recall store, an SQLite file (or memory) holding the
// archived originals of many sessions, in the one schema every runtime reads and
// writes (docs/RECALL.md, SPEC of issue 17). Node only: its own entry point, so the
// plain compactor and the browser never load SQLite.
//
// Drivers: `node:sqlite` where the runtime has it (Node 22.5+ without a flag from
// 22.13), else node-sqlite3-wasm (SQLite 3.53 compiled to WebAssembly, with a VFS on
// node:fs: real file persistence, FTS5 with the trigram tokenizer). Both are
// synchronous, so every method is atomic within a process.
//
// The PostgreSQL store (recall-postgres.js, docs/RECALL.md "On PostgreSQL") has the
// same methods, returning promises; openRecallStore opens either from one string.

import { accessSync, closeSync, constants as fsConstants, existsSync, openSync, readFileSync, readSync } from "node:fs";
import { resolve as resolvePath } from "node:path";
import { fileURLToPath } from "node:url";
import { CompactError, ErrMissingDependency } from "./errors.js";
import { DirLock, testHooks } from "./recall-lock.js";
import {
  DEFAULT_SEARCH_LIMIT, MAX_QUERY_CHARS, MAX_QUERY_TERMS, MAX_SEARCH_LIMIT, MAX_TERM_CHARS, RANGE_ID, TOTAL_CAP,
  archiveRow, checkParsed, firstRange, fail, ftsPhrase, int, parseQuery, str,
} from "./recall-query.js";
import { PostgresRecallStore } from "./recall-postgres.js";

export { ErrMissingDependency };
/** Search bounds (as recall.search_result keeps) and the query splitter, shared with the PostgreSQL store. */
export { DEFAULT_SEARCH_LIMIT, MAX_QUERY_CHARS, MAX_QUERY_TERMS, MAX_SEARCH_LIMIT, MAX_TERM_CHARS, parseQuery };
export { PostgresRecallStore };

/** The schema version this binding writes (ctxc_meta.schema_version). */
export const SCHEMA_VERSION = 1;

const BUSY_TIMEOUT_MS = 5000;

// The schema: recall/schema.sql of the repository (packaged with ctxcompact/recall),
// the one text every runtime's store runs: the part above its "-- fts5" line on
// every open, the part below to create the index of a new file.
const SCHEMA_SQL = readFileSync(new URL("../../recall/schema.sql", import.meta.url), "utf8");
const [SCHEMA, FTS_TABLE] = (() => {
  const at = SCHEMA_SQL.indexOf("\n-- fts5\n");
  if (at < 0) throw new Error("ctxcompact: recall/schema.sql has no -- fts5 line");
  return [SCHEMA_SQL.slice(0, at + 1), SCHEMA_SQL.slice(at + "\n-- fts5\n".length)];
})();
/** The schema text this store runs (recall/schema.sql). */
export { SCHEMA_SQL };

function dbError(what, err) {
  if (err instanceof CompactError) return err; // the lock's own error, or a store error already named
  const msg = err?.message ?? String(err);
  const hint = /locked|busy/i.test(msg)
    ? " (another connection holds SQLite's lock on the file past the 5 s busy timeout)"
    : "";
  return new CompactError("internal", `ctxcompact: recall store: ${what}: ${msg}${hint}`, "", { cause: err });
}

// ---------------------------------------------------------------------------
// Drivers: one small synchronous interface over node:sqlite and node-sqlite3-wasm,
// with prepared statements cached per SQL text.

async function loadNodeSqlite() {
  try {
    const get = globalThis.process?.getBuiltinModule;
    const mod = typeof get === "function" ? get("node:sqlite") : await import("node:sqlite");
    return mod?.DatabaseSync ? mod : null;
  } catch {
    return null; // Node < 22.5, or 22.5-22.12 without --experimental-sqlite
  }
}

let wasmModule = null;
async function loadWasmSqlite(why) {
  if (!wasmModule) {
    let mod;
    try {
      mod = await import("node-sqlite3-wasm");
    } catch (err) {
      if (err?.code === "ERR_MODULE_NOT_FOUND" && String(err.message).includes("'node-sqlite3-wasm'")) throw missingWasmSqlite(why, err);
      throw err;
    }
    wasmModule = mod.default ?? mod;
  }
  return wasmModule;
}

// The error when node-sqlite3-wasm cannot be found, naming the step that installs
// it. A package whose real path is in no node_modules folder is a checkout that
// `npm install /path/to/checkout` linked: npm installs nothing of a linked folder's
// dependencies, and Node resolves them from the folder's real path, so installing
// the dependency in the consumer's project would not help.
function missingWasmSqlite(why, cause) {
  const root = fileURLToPath(new URL("../../", import.meta.url)).replace(/[\\/]+$/, "");
  const step = root.split(/[\\/]/).includes("node_modules")
    ? "npm install node-sqlite3-wasm"
    : `this package is a linked folder (${root}), whose dependencies npm does not install: run \`npm install --omit=dev\` in it, or install it as a copy with \`npm install --install-links ${root}\``;
  return new ErrMissingDependency("node-sqlite3-wasm", `ctxcompact: recall needs node-sqlite3-wasm (${why}): ${step}`, { cause });
}

/** True when the file at path is an SQLite database in WAL mode (header bytes 18-19). */
function isWALFile(path) {
  let fd;
  try {
    fd = openSync(path, "r");
  } catch {
    return false;
  }
  try {
    const head = Buffer.alloc(20);
    return readSync(fd, head, 0, 20, 0) === 20 && (head[18] === 2 || head[19] === 2);
  } finally {
    closeSync(fd);
  }
}

class Driver {
  constructor(kind, db) {
    this.kind = kind;
    this.db = db;
    this.cache = new Map();
  }

  stmt(sql) {
    let s = this.cache.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.cache.set(sql, s);
    }
    return s;
  }

  exec(sql) { this.db.exec(sql); }
}

class NodeSqliteDriver extends Driver {
  /** @param {DirLock | null} lock the file's lock directory (null in memory) */
  constructor(kind, db, lock) {
    super(kind, db);
    this.lock = lock;
  }

  #locked(fn) {
    if (!this.lock) return fn();
    this.lock.acquire();
    try {
      return fn();
    } finally {
      this.lock.release();
    }
  }

  // A transaction holds the lock from BEGIN to COMMIT or ROLLBACK.
  exec(sql) {
    const begin = /^\s*BEGIN\b/i.test(sql);
    const end = /^\s*(COMMIT|ROLLBACK)\b/i.test(sql);
    if (this.lock && begin) this.lock.acquire();
    try {
      this.#locked(() => this.db.exec(sql));
    } catch (err) {
      if (this.lock && begin) this.lock.release();
      throw err;
    } finally {
      if (this.lock && end) this.lock.release();
    }
  }

  all(sql, params = []) { return this.#locked(() => this.stmt(sql).all(...params)); }
  get(sql, params = []) { return this.#locked(() => this.stmt(sql).get(...params) ?? null); }
  run(sql, params = []) {
    const r = this.#locked(() => this.stmt(sql).run(...params));
    return { changes: Number(r.changes), lastInsertRowid: Number(r.lastInsertRowid) };
  }
  close() {
    this.cache.clear();
    this.db.close();
  }
}

const isBusy = (err) => /database is locked|SQLITE_BUSY/i.test(err?.message ?? "");

/**
 * node-sqlite3-wasm: its VFS takes the lock directory itself (per statement, or from
 * a transaction's first statement to its end) and answers SQLITE_BUSY while another
 * process holds it. Its SQLite sleeps in the busy handler by spinning a CPU, so the
 * busy timeout is 0 and this driver waits instead (the DirLock's loop: sleeps, a
 * stale lock broken, the timeout honoured). In a transaction it writes the owner file
 * into the VFS's directory, and removes it before the transaction ends.
 */
class WasmDriver extends Driver {
  /** @param {DirLock | null} lock the file's lock directory (null in memory) */
  constructor(kind, db, lock) {
    super(kind, db);
    this.lock = lock;
    this.owner = false;
    this.pendingOwner = false;
  }

  /** Runs attempt, again after waiting while another process holds the lock. */
  #waiting(attempt) {
    if (!this.lock) return attempt();
    let out;
    this.lock.waitFor(() => {
      try {
        out = attempt();
        return true;
      } catch (err) {
        if (isBusy(err) && !this.owner) return false;
        throw err;
      }
    });
    if (this.pendingOwner) {
      this.pendingOwner = false;
      this.#own();
    }
    return out;
  }

  #own() {
    if (this.lock && this.db.inTransaction) {
      this.lock.writeOwner();
      this.owner = true;
    }
  }

  #disown() {
    if (this.owner) {
      this.lock.removeOwner();
      this.owner = false;
    }
    this.pendingOwner = false;
  }

  exec(sql) {
    if (/^\s*(COMMIT|ROLLBACK)\b/i.test(sql)) {
      this.#disown();
      this.db.exec(sql);
      return;
    }
    if (/^\s*BEGIN\s+IMMEDIATE\b/i.test(sql)) {
      this.#waiting(() => this.db.exec(sql));
      this.#own();
      return;
    }
    this.#waiting(() => this.db.exec(sql));
    if (/^\s*BEGIN\b/i.test(sql)) this.pendingOwner = true; // the first statement takes the lock
  }

  /** Runs fn on the cached statement; a statement whose step failed cannot be reset here, so it is dropped. */
  #with(sql, fn) {
    return this.#waiting(() => {
      const st = this.stmt(sql);
      try {
        return fn(st);
      } catch (err) {
        this.cache.delete(sql);
        try { st.finalize(); } catch { /* finalize reports the failed step again */ }
        throw err;
      }
    });
  }

  all(sql, params = []) { return this.#with(sql, (st) => st.all(params)); }
  // Not Statement.get: it leaves the statement unfinished, and an unfinished read
  // keeps the VFS's lock (a `<file>.lock` directory, exclusive) for other processes.
  get(sql, params = []) { return this.all(sql, params)[0] ?? null; }
  run(sql, params = []) {
    const r = this.#with(sql, (st) => st.run(params));
    return { changes: r.changes, lastInsertRowid: Number(r.lastInsertRowid) };
  }
  close() {
    for (const s of this.cache.values()) s.finalize();
    this.cache.clear();
    this.db.close();
  }
}

/** Whether path is a file this process cannot write (a store then opens read-only). */
function notWritable(path) {
  if (!existsSync(path)) return false;
  try {
    accessSync(path, fsConstants.W_OK);
    return false;
  } catch {
    return true;
  }
}

async function openDriver(path, which, readOnly) {
  const file = path ?? ":memory:";
  if (which === "auto" || which === "node:sqlite") {
    const mod = await loadNodeSqlite();
    if (mod) {
      const lock = path ? new DirLock(`${resolvePath(path)}.lock`, BUSY_TIMEOUT_MS) : null;
      lock?.acquire();
      try {
        const d = new NodeSqliteDriver("node:sqlite", new mod.DatabaseSync(file, readOnly ? { readOnly: true } : {}), lock);
        d.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
        // A rollback journal, as every runtime's store keeps (the wasm driver cannot share a WAL).
        if (path && !readOnly) d.all("PRAGMA journal_mode = DELETE");
        return d;
      } finally {
        lock?.release();
      }
    }
    if (which === "node:sqlite") throw fail("recall store: this runtime has no node:sqlite (Node 22.5+; 22.5-22.12 need --experimental-sqlite)", "/driver");
  }
  const { Database } = await loadWasmSqlite(which === "wasm" ? 'driver "wasm"' : `Node ${process.versions.node} has no node:sqlite`);
  const wal = path && !readOnly ? isWALFile(path) : false;
  const d = new WasmDriver("wasm", new Database(file, readOnly ? { readOnly: true } : {}), path ? new DirLock(`${resolvePath(path)}.lock`, BUSY_TIMEOUT_MS) : null);
  // 0: this driver waits for the lock itself (WasmDriver), its SQLite would spin.
  d.exec("PRAGMA busy_timeout = 0");
  if (wal) {
    // The wasm VFS has no shared memory, so it reads a WAL-mode file (written by
    // node:sqlite, Python or Go) only in exclusive locking mode: take the lock once,
    // checkpoint the log into the file and switch it to a rollback journal, then go
    // back to normal locking (the next statement drops the lock).
    d.all("PRAGMA locking_mode = EXCLUSIVE");
    d.all("PRAGMA journal_mode = DELETE");
    d.all("PRAGMA locking_mode = NORMAL");
    d.all("SELECT count(*) AS n FROM sqlite_master");
  }
  // journal_mode = WAL: this build cannot (no shared memory); it stays a rollback journal.
  return d;
}

/** Whether the connection's SQLite has FTS5 with the trigram tokenizer. */
function hasTrigramFTS(d) {
  try {
    d.exec("CREATE VIRTUAL TABLE temp.ctxc_probe USING fts5(x, tokenize='trigram'); DROP TABLE temp.ctxc_probe;");
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------
// Queries

/** Whether the trigram index decides a term alone (see RecallStore#conditions). */
const decidedByIndex = (t) => [...t].length >= 3 && /^[\x00-\x7f]*$/.test(t) && !/[ksKS]/.test(t);

/** A bounded search reads the index in bands of rowids, newest first, the first this wide (then 16 times as wide each time). */
const BAND_ROWIDS = 256;
/** A term with this many matches in the first band is common (left out of a MATCH of several terms). */
const PROBE_HITS = 64;

// ---------------------------------------------------------------------------

/**
 * The store: one SQLite file (or memory) holding many sessions' archived ranges.
 * Methods are synchronous after `await RecallStore.open(path)`.
 */
export class RecallStore {
  #d;
  #path;
  /** "fts5" | "like": what the file keeps (meta fts). */
  #fileFTS;
  /** Whether searches use the FTS index (false: LIKE, forced or for lack of FTS5). */
  #useFTS;
  /** Whether this connection's SQLite has FTS5 with trigram (can keep the index). */
  #canFTS;
  /** Searches count their total up to this many (null: exactly). */
  #countLimit = null;
  #closed = false;
  #readOnly = false;

  /** Use RecallStore.open. */
  constructor(driver, path, fileFTS, useFTS, canFTS, token) {
    if (token !== kOpen) throw new TypeError("ctxcompact: use `await RecallStore.open(path)`");
    this.#d = driver;
    this.#path = path;
    this.#fileFTS = fileFTS;
    this.#useFTS = useFTS;
    this.#canFTS = canFTS;
  }

  /**
   * Opens (creating when missing) a store file, or an in-memory store without a path.
   * @param {string | null} [path]
   * @param {{ driver?: "auto" | "node:sqlite" | "wasm", fts?: boolean }} [options]
   *   fts: false searches with LIKE (a new file is then created without the FTS index).
   */
  static async open(path, options = {}) {
    if (path !== undefined && path !== null && (typeof path !== "string" || path === "")) throw fail("RecallStore.open(): path must be a file path (or absent: in memory)", "/path");
    if (options === null || typeof options !== "object") throw fail("RecallStore.open(): options must be an object", "");
    for (const k of Object.keys(options)) {
      if (!["driver", "fts", "countLimit", "readOnly"].includes(k)) throw fail(`RecallStore.open(): unknown option ${JSON.stringify(k)} (driver, fts, countLimit, readOnly)`, `/${k}`);
    }
    const which = options.driver ?? "auto";
    if (!["auto", "node:sqlite", "wasm"].includes(which)) throw fail('RecallStore.open(): driver is "auto", "node:sqlite" or "wasm"', "/driver");
    if (options.fts !== undefined && typeof options.fts !== "boolean") throw fail("RecallStore.open(): fts must be a boolean", "/fts");
    // 100 by default, as the Go and Python stores count (docs/RECALL.md), so every
    // runtime answers a search with the same text; null counts every match.
    const countLimit = options.countLimit === undefined ? TOTAL_CAP : options.countLimit;
    if (countLimit !== null && !(Number.isSafeInteger(countLimit) && countLimit >= 1)) throw fail("RecallStore.open(): countLimit must be an integer of at least 1", "/count_limit");
    if (options.readOnly !== undefined && typeof options.readOnly !== "boolean") throw fail("RecallStore.open(): readOnly must be a boolean", "/read_only");
    const file = path === ":memory:" ? null : path ?? null;
    // Read-only (asked, or a file this process cannot write): searched and expanded, never written.
    const readOnly = file !== null && (options.readOnly === true || notWritable(file));
    if (readOnly && !existsSync(file)) throw new CompactError("invalid_state", `ctxcompact: the recall store ${file} is to be read only and does not exist: nothing to read`, "/path");
    let d;
    try {
      d = await openDriver(file, which, readOnly);
    } catch (err) {
      if (err instanceof CompactError || err instanceof ErrMissingDependency) throw err;
      throw dbError(`cannot open ${file ?? "an in-memory database"}`, err);
    }
    try {
      const canFTS = hasTrigramFTS(d);
      // The version first: a store of another schema version may not take this
      // one's schema (a missing column), and must say which version it is.
      const hasMeta = Number(d.get("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'ctxc_meta'").n) > 0;
      const version = hasMeta ? d.get("SELECT value FROM ctxc_meta WHERE key = 'schema_version'")?.value : undefined;
      if (version !== undefined && version !== String(SCHEMA_VERSION)) {
        throw new CompactError("invalid_state", `ctxcompact: the recall store ${file} has schema version ${version}; this ctxcompact reads and writes version ${SCHEMA_VERSION} (open it with a ctxcompact of its version)`, "/path");
      }
      if (readOnly) {
        if (version === undefined) throw new CompactError("invalid_state", `ctxcompact: the recall store ${file} is read-only and holds no store (no schema_version): nothing to read`, "/path");
        const fileFTS = d.get("SELECT value FROM ctxc_meta WHERE key = 'fts'")?.value ?? "like";
        const store = new RecallStore(d, file, fileFTS, fileFTS === "fts5" && canFTS && options.fts !== false, canFTS, kOpen);
        store.#countLimit = countLimit;
        store.#readOnly = true;
        return store;
      }
      d.exec("BEGIN IMMEDIATE");
      let fileFTS;
      try {
        d.exec(SCHEMA);
        fileFTS = d.get("SELECT value FROM ctxc_meta WHERE key = 'fts'")?.value;
        if (fileFTS === undefined) {
          fileFTS = canFTS && options.fts !== false ? "fts5" : "like";
          if (fileFTS === "fts5") d.exec(FTS_TABLE);
          d.run("INSERT OR REPLACE INTO ctxc_meta(key, value) VALUES ('schema_version', ?), ('fts', ?)", [String(SCHEMA_VERSION), fileFTS]);
        }
        d.exec("COMMIT");
      } catch (err) {
        d.exec("ROLLBACK");
        throw err;
      }
      const useFTS = fileFTS === "fts5" && canFTS && options.fts !== false;
      const store = new RecallStore(d, file, fileFTS, useFTS, canFTS, kOpen);
      store.#countLimit = countLimit;
      return store;
    } catch (err) {
      d.close();
      if (err instanceof CompactError) throw err;
      throw dbError(`cannot set up ${file ?? "an in-memory database"}`, err);
    }
  }

  /** The file path, or null for an in-memory store. */
  get path() { return this.#path; }

  /** "node:sqlite" or "wasm". */
  get driver() { return this.#d.kind; }

  /** How searches run: "fts5" (the trigram index, then LIKE on its candidates) or "like". */
  get searchMode() { return this.#useFTS ? "fts5" : "like"; }

  /** What the file keeps: "fts5" (the index ctxc_fts exists) or "like". */
  get fileMode() { return this.#fileFTS; }

  get closed() { return this.#closed; }

  /** Whether the store was opened read-only (asked, or a file this process cannot write). */
  get readOnly() { return this.#readOnly; }

  /** The bound on a search's total (null: exact); a total equal to it means "at least". */
  get countLimit() { return this.#countLimit; }

  #db() {
    if (this.#closed) throw fail("recall store: the store is closed", "");
    return this.#d;
  }

  /** Runs fn in one write transaction (BEGIN IMMEDIATE: the file lock, with the busy timeout). */
  #write(what, fn) {
    const d = this.#db();
    if (this.#readOnly) throw new CompactError("invalid_state", `ctxcompact: the recall store ${this.#path} is read-only (its file is not writable, or it was opened with readOnly): it can be searched and expanded, not written`, "/path");
    try {
      d.exec("BEGIN IMMEDIATE");
    } catch (err) {
      throw dbError(what, err);
    }
    try {
      const out = fn(d);
      testHooks.beforeCommit?.();
      d.exec("COMMIT");
      return out;
    } catch (err) {
      try { d.exec("ROLLBACK"); } catch { /* already rolled back */ }
      if (err instanceof CompactError) throw err;
      throw dbError(what, err);
    }
  }

  #writableIndex() {
    if (this.#fileFTS === "fts5" && !this.#canFTS) {
      throw new CompactError("invalid_state", "ctxcompact: recall store: the file has an FTS5 index that this SQLite build cannot update (no FTS5 trigram); open it with a build that has it", "/path");
    }
    return this.#fileFTS === "fts5";
  }

  /** The ranges of a session, oldest first: [{ id, seq, from_index, to_index, summary }]. */
  ranges(session) {
    str(session, "/session");
    return this.#db().all("SELECT id, seq, from_index, to_index, summary FROM ctxc_ranges WHERE session = ? ORDER BY seq", [session]).map((r) => ({ ...r }));
  }

  /** The id the next compaction of a session archives under: r<k>, k = 1 + its ranges. */
  nextRangeId(session) {
    str(session, "/session");
    const r = this.#db().get("SELECT count(*) AS n FROM ctxc_ranges WHERE session = ?", [session]);
    return `r${Number(r.n) + 1}`;
  }

  /**
   * Inserts one compaction's rows under a session, in one transaction: the result
   * of the core's recall.archive (`{ range: { id, from_index, to_index, summary },
   * rows: [{ id, range_id, position, role, reason, json, text }] }`), or an
   * iterable of its parts (docs/SESSION.md "An archive in parts": the first holds
   * the range, each rows of it), each written as it comes. A range id the session
   * already has is refused (invalid_state at /range/id); an error thrown by the
   * parts, or a bad part, rolls every part back and is thrown.
   * @returns {{ range: string, messages: number }}
   */
  archive(session, archived) {
    str(session, "/session");
    const whole = archived !== null && typeof archived === "object" && !Array.isArray(archived) && "range" in archived;
    const parts = whole ? [archived] : archived;
    if (parts === null || typeof parts !== "object" || typeof parts[Symbol.iterator] !== "function") {
      throw fail("recall store: archive() takes the result of recall.archive: { range, rows }, or an iterable of its parts", "");
    }
    const it = parts[Symbol.iterator]();
    let done = false;
    let partErr;
    // The next part; what the parts throw is kept, to be thrown as it is.
    const pull = () => {
      try {
        const r = it.next();
        done = r.done;
        return r.value;
      } catch (err) {
        done = true;
        partErr = { err };
        throw err;
      }
    };
    try {
      const first = pull();
      const { range, rid } = firstRange(first, done);
      const from = int(range.from_index, "/range/from_index");
      const to = int(range.to_index, "/range/to_index");
      const summary = str(range.summary, "/range/summary");
      return this.#write(`archive ${rid} of session ${JSON.stringify(session)}`, (d) => {
        const fts = this.#writableIndex();
        if (d.get("SELECT 1 AS x FROM ctxc_ranges WHERE session = ? AND id = ?", [session, rid])) {
          // One code in every runtime: another compaction of the session archived this id first.
          throw new CompactError("invalid_state", `ctxcompact: recall store: session ${JSON.stringify(session)} already has a range ${rid}: another compaction of the session archived first (nothing of this one is written; compact again)`, "/range/id");
        }
        const seq = Number(d.get("SELECT count(*) AS n FROM ctxc_ranges WHERE session = ?", [session]).n) + 1;
        d.run("INSERT INTO ctxc_ranges(session, id, seq, from_index, to_index, summary) VALUES (?, ?, ?, ?, ?, ?)", [session, rid, seq, from, to, summary]);
        let n = 0;
        for (let part = first, k = 0; !done; part = pull(), k++) {
          if (k > 0 && part?.range !== undefined) throw fail(`recall store: part ${k} of ${rid} holds a range; only the first does`, "/range");
          if (part === null || typeof part !== "object" || !Array.isArray(part.rows)) throw fail(`recall store: part ${k} of ${rid} must be { rows }`, "/rows");
          for (const [i, r] of part.rows.entries()) {
            const row = archiveRow(session, rid, r, `/rows/${n + i}`);
            let info;
            try {
              info = d.run("INSERT INTO ctxc_messages(session, id, range_id, position, role, reason, json, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row);
            } catch (err) {
              if (/UNIQUE/i.test(err?.message ?? "")) throw fail(`recall store: session ${JSON.stringify(session)} already has a message ${row[1]}`, "/rows");
              throw err;
            }
            if (fts) d.run("INSERT INTO ctxc_fts(rowid, text) VALUES (?, ?)", [info.lastInsertRowid, row[7]]);
          }
          n += part.rows.length;
        }
        return { range: rid, messages: n };
      });
    } catch (err) {
      if (!done) it.return?.();
      throw partErr ? partErr.err : err;
    }
  }

  /**
   * Archived messages (and summaries) of a session matching every term of the query
   * (case-insensitive substrings of their searchable text), newest first.
   * @param {string} session
   * @param {string | {terms?: string[], fts: string, like: string[]}} query a string, or the core's recall.query result
   * @param {{ limit?: number }} [options] at most this many hits (default 10, at most 50)
   * @returns {{ hits: Array<{ id: string, range_id: string, position: number, role: string, text: string }>, total: number }}
   */
  search(session, query, options = {}) {
    str(session, "/session");
    const q = checkParsed(query);
    const limit = options?.limit ?? DEFAULT_SEARCH_LIMIT;
    if (!Number.isSafeInteger(limit) || limit < 1) throw fail("recall store: limit must be a positive integer", "/limit");
    const d = this.#db();
    const max = Math.min(limit, MAX_SEARCH_LIMIT);
    // One read transaction: the search's statements see one state of the file, and
    // the file's lock (the `<file>.lock` directory, a mkdir and an rmdir: about 3 ms
    // on a busy ext4 disk) is taken once, not once per statement.
    try {
      d.exec("BEGIN");
    } catch (err) {
      throw dbError(`search in session ${JSON.stringify(session)}`, err);
    }
    try {
      if (this.#countLimit === null) return this.#searchExact(d, session, q, max);
      return this.#searchBounded(d, session, q, max, Math.max(this.#countLimit, max));
    } catch (err) {
      throw dbError(`search in session ${JSON.stringify(session)}`, err);
    } finally {
      try { d.exec("COMMIT"); } catch { try { d.exec("ROLLBACK"); } catch { /* none open */ } }
    }
  }

  /** How the last search found its rows (a diagnostic for tests and the benchmark). */
  get lastSearchPlan() { return this.#plan; }

  #plan = null;

  /**
   * The WHERE conditions of a search over `ctxc_messages m` (joined to `ctxc_fts f`
   * when `match` is not empty): the MATCH expression of the terms `match` holds,
   * and LIKE for every other term and for the terms the index cannot decide.
   *
   * The hits must be exactly the LIKE fallback's (every term an ASCII
   * case-insensitive substring of the text). The trigram index matches a term of 3+
   * characters as a substring with Unicode case folding, which for an ASCII term
   * differs only where the text has one of the two non-ASCII characters the
   * tokenizer folds to ASCII letters (U+212A KELVIN SIGN to k, U+017F LONG S to s;
   * found by indexing every code point); for any term, MATCH finds every row LIKE
   * finds. So a term in the MATCH needs no LIKE when it is ASCII, 3+ characters
   * and has no k or s; any other term is checked with LIKE (which reads the text),
   * whether it is in the MATCH or not: any subset of the terms in the MATCH gives
   * the same rows.
   */
  #conditions(session, q, match) {
    const where = [];
    const params = [];
    if (match === null || match.length > 0) {
      where.push("ctxc_fts MATCH ?");
      params.push(match === null || (match.length === q.terms.length && q.terms.length > 0) ? q.fts : match.map(ftsPhrase).join(" AND "));
    }
    // With a MATCH the index's rows are the outer loop (CROSS JOIN) and the session
    // is a test on each (+: not a lookup of the session's rows in its index, which
    // would then run the MATCH once per row).
    where.push(where.length > 0 ? "+m.session = ?" : "m.session = ?");
    params.push(session);
    const inMatch = new Set(match ?? []);
    q.like.forEach((p, i) => {
      const t = match !== null ? q.terms[i] : undefined;
      if (!(t !== undefined && inMatch.has(t) && decidedByIndex(t))) {
        where.push("m.text LIKE ? ESCAPE '\\'");
        params.push(p);
      }
    });
    return { where, params, from: where[0].startsWith("ctxc_fts") ? "ctxc_fts f CROSS JOIN ctxc_messages m ON m.rowid = f.rowid" : "ctxc_messages m" };
  }

  /** The terms the index can take (3+ characters), or null when the query has no terms to choose from. */
  #ftsTerms(q) {
    if (!this.#useFTS || q.fts === "") return [];
    if (q.terms.length !== q.like.length) return null; // a hand-made plan: its fts as given, LIKE for all
    return q.terms.filter((t) => [...t].length >= 3);
  }

  /** Exact totals (countLimit null): one pass over all the matches, then the newest `max` rows. */
  #searchExact(d, session, q, max) {
    const terms = this.#ftsTerms(q);
    const fts = terms === null || terms.length > 0;
    const { where, params, from } = this.#conditions(session, q, terms);
    // Ascending: FTS5 walks its doclists forwards much faster than backwards.
    const ids = d.all(`SELECT m.rowid AS r FROM ${from} WHERE ${where.join(" AND ")} ORDER BY ${fts ? "f" : "m"}.rowid`, params);
    this.#plan = { exact: true, match: fts ? (terms ?? q.terms) : [] };
    const rowids = [];
    for (let i = ids.length - 1; i >= 0 && rowids.length < max; i--) rowids.push(ids[i].r);
    return { hits: this.#rows(d, rowids), total: ids.length };
  }

  /**
   * Bounded totals: the session's newest `want` matching rows (want = max(limit,
   * countLimit)); the hits are the first `max` of them, the total how many there are.
   *
   * With the index, the rows are read in bands of rowids from the newest down
   * (the first BAND_ROWIDS rowids, then 16 times as many each time), each band in
   * ascending order: FTS5 reads a doclist forwards cheaply, but backwards
   * (ORDER BY rowid DESC) it first loads the whole doclist of every trigram of a
   * phrase, which for a common word is most of the index. A common query is
   * answered from the first band; a rare one reads the index about once.
   *
   * When two or more terms go to the index, each is first counted in the first
   * band (up to PROBE_HITS matches); a term found that often is left out of the
   * MATCH and checked with LIKE on the other terms' candidates instead (a phrase
   * is matched by positions, and a common word's position lists are long),
   * unless every term is common. Any subset of the terms in the MATCH gives the
   * same rows (RecallStore#conditions), and the bands cover every rowid below the
   * session's newest once, newest band first: the rows are those of one query
   * over the whole session, newest first.
   */
  #searchBounded(d, session, q, max, want) {
    let terms = this.#ftsTerms(q);
    if (terms !== null && terms.length === 0) {
      // LIKE alone: one pass over the session's rows.
      const { where, params } = this.#conditions(session, q, []);
      this.#plan = { exact: false, match: [], bands: 0 };
      const rows = d.all(`SELECT m.rowid AS r FROM ctxc_messages m WHERE ${where.join(" AND ")} ORDER BY m.rowid DESC LIMIT ?`, [...params, want]);
      return this.#answer(d, rows.map((r) => r.r), max);
    }
    const top = d.get("SELECT max(rowid) AS r FROM ctxc_messages WHERE session = ?", [session])?.r;
    if (top === null || top === undefined) {
      this.#plan = { exact: false, match: terms ?? q.terms, bands: 0 };
      return { hits: [], total: 0 };
    }
    let hi = Number(top) + 1;
    if (terms !== null && terms.length > 1) {
      const lo = Math.max(0, hi - BAND_ROWIDS);
      const counts = terms.map((t) => Number(d.get(
        `SELECT count(*) AS n FROM (SELECT 1 FROM ctxc_fts WHERE ctxc_fts MATCH ? AND rowid >= ? AND rowid < ? LIMIT ${PROBE_HITS})`,
        [ftsPhrase(t), lo, hi]).n));
      const rare = terms.filter((_, i) => counts[i] < PROBE_HITS);
      if (rare.length > 0) terms = rare;
    }
    const { where, params, from } = this.#conditions(session, q, terms);
    const sql = `SELECT m.rowid AS r FROM ${from} WHERE f.rowid >= ? AND f.rowid < ? AND ${where.join(" AND ")} ORDER BY f.rowid`;
    const found = [];
    let size = BAND_ROWIDS;
    let bands = 0;
    while (hi > 0 && found.length < want) {
      const lo = Math.max(0, hi - size);
      const rows = d.all(sql, [lo, hi, ...params]);
      bands++;
      for (let i = rows.length - 1; i >= 0 && found.length < want; i--) found.push(rows[i].r);
      hi = lo;
      size *= 16;
    }
    this.#plan = { exact: false, match: terms ?? q.terms, bands };
    return this.#answer(d, found, max);
  }

  #answer(d, rowids, max) {
    return { hits: this.#rows(d, rowids.slice(0, max)), total: rowids.length };
  }

  /** The hit rows of rowids, in that order. */
  #rows(d, rowids) {
    if (rowids.length === 0) return [];
    const byId = new Map();
    for (const r of d.all(`SELECT rowid AS r, id, range_id, position, role, text FROM ctxc_messages WHERE rowid IN (${rowids.map(() => "?").join(", ")})`, rowids)) {
      byId.set(r.r, { id: r.id, range_id: r.range_id, position: r.position, role: r.role, text: r.text });
    }
    return rowids.map((r) => byId.get(r));
  }

  /**
   * The original message JSON texts behind an id: a range `r<k>` (its archived
   * messages in input order, the summary row left out) or one message `r<k>.<index>`
   * (or `r<k>.summary`). Unknown ids give no messages.
   * @returns {{ id: string, messages: string[] }}
   */
  expand(session, id) {
    str(session, "/session");
    str(id, "/id");
    const d = this.#db();
    const rows = RANGE_ID.test(id)
      ? d.all("SELECT json FROM ctxc_messages WHERE session = ? AND range_id = ? AND reason <> 'summary' ORDER BY position, rowid", [session, id])
      : d.all("SELECT json FROM ctxc_messages WHERE session = ? AND id = ?", [session, id]);
    return { id, messages: rows.map((r) => r.json) };
  }

  /** Removes a session's ranges and messages (and their index entries); returns what went. */
  deleteSession(session) {
    str(session, "/session");
    return this.#write(`delete session ${JSON.stringify(session)}`, (d) => {
      if (this.#writableIndex()) {
        for (const r of d.all("SELECT rowid AS rowid, text FROM ctxc_messages WHERE session = ?", [session])) {
          d.run("INSERT INTO ctxc_fts(ctxc_fts, rowid, text) VALUES ('delete', ?, ?)", [r.rowid, r.text]);
        }
      }
      const messages = d.run("DELETE FROM ctxc_messages WHERE session = ?", [session]).changes;
      const ranges = d.run("DELETE FROM ctxc_ranges WHERE session = ?", [session]).changes;
      return { ranges, messages };
    });
  }

  /** The sessions the store holds, sorted. */
  sessions() {
    return this.#db().all("SELECT session FROM ctxc_ranges UNION SELECT session FROM ctxc_messages ORDER BY 1").map((r) => r.session);
  }

  /** Closes the connection (idempotent). */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#d.close();
  }
}

const kOpen = Symbol("ctxcompact.recall.open");

/**
 * Opens a recall store from one string (docs/RECALL.md "Opening by URL"), the
 * argument or else the environment variable CTXCOMPACT_RECALL_URL: a postgres:// or
 * postgresql:// URL, or a key=value DSN (`host=... dbname=...`), opens the
 * PostgreSQL store; `sqlite:PATH`, `sqlite::memory:` or a plain path the SQLite
 * store. options go to that store's open (RecallStore's, or PostgresRecallStore's).
 * @param {string} [url]
 * @param {object} [options]
 * @returns {Promise<RecallStore | PostgresRecallStore>}
 */
export async function openRecallStore(url = process.env.CTXCOMPACT_RECALL_URL, options) {
  if (url === undefined || url === null || url === "") {
    throw fail("openRecallStore(): no store to open: pass a URL (postgres://..., a key=value DSN, sqlite:PATH, or a path) or set CTXCOMPACT_RECALL_URL", "/url");
  }
  if (typeof url !== "string") throw fail("openRecallStore(): url must be a string (postgres://..., a key=value DSN, sqlite:PATH, or a path)", "/url");
  if (/^postgres(ql)?:\/\//i.test(url) || /^\s*[A-Za-z_][A-Za-z0-9_]*\s*=/.test(url)) return PostgresRecallStore.open(url, options);
  if (/^sqlite:/i.test(url)) {
    const path = url.slice("sqlite:".length);
    if (path === "") throw fail("openRecallStore(): sqlite: names no file (sqlite:PATH, or sqlite::memory: for a store in memory)", "/url");
    return RecallStore.open(path, options);
  }
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(url);
  if (scheme) throw fail(`openRecallStore(): ${JSON.stringify(scheme[1])} is not a store's scheme (postgres://, postgresql://, sqlite:PATH; or a plain path)`, "/url");
  return RecallStore.open(url, options);
}
