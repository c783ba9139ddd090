// Types of ctxcompact/recall, the lossless-recall store (Node only), written by hand.
// Rows and hits keep the wire names of the shared schema (snake_case).

/** The schema version this binding writes and reads (ctxc_meta.schema_version). */
export declare const SCHEMA_VERSION: 1;
export declare const DEFAULT_SEARCH_LIMIT: 10;
export declare const MAX_SEARCH_LIMIT: 50;
/** The bounds of a search query, the core's (recall.query, recall.check_call). */
export declare const MAX_QUERY_CHARS: 4000;
export declare const MAX_QUERY_TERMS: 32;
export declare const MAX_TERM_CHARS: 1000;

export interface RecallStoreOptions {
  /** "auto" (default): node:sqlite where the runtime has it, else the wasm build (node-sqlite3-wasm). */
  driver?: "auto" | "node:sqlite" | "wasm";
  /** false: search with LIKE (a new file is then made without the FTS5 index). Default true. */
  fts?: boolean;
  /** Count a search's total up to this many (a total equal to it means "at least"); default 100 (as Go and Python); null: exact. */
  countLimit?: number | null;
  /** true: open for reading only (search, expand; a write is invalid_state at /path). A file this process cannot write opens so without it. */
  readOnly?: boolean;
}

/** A search query split the documented way (the core's recall.query result). */
export interface ParsedQuery {
  terms: string[];
  /** The FTS5 MATCH expression (terms of 3+ characters as quoted phrases, AND); "" when none. */
  fts: string;
  /** One `%term%` LIKE pattern per term (`\` escapes). */
  like: string[];
}

/** One archived message row, as the core's recall.archive returns it. */
export interface RecallRow {
  /** `r<k>.<index>` (index in the compaction's input) or `r<k>.summary`. */
  id: string;
  range_id: string;
  position: number;
  /** The message's role, or "summary" for the summary row. */
  role: string;
  /** archived[].reason, or "summary". */
  reason: string;
  /** The original message JSON, byte for byte. */
  json: string;
  /** What search reads. */
  text: string;
}

export interface RecallRange {
  /** `r<k>`. */
  id: string;
  from_index: number;
  to_index: number;
  /** The summary message's text. */
  summary: string;
}

/** The core's recall.archive result: one compaction's rows. */
export interface RecallArchive {
  range: RecallRange;
  rows: RecallRow[];
}

/** A part of an archive after the first (docs/SESSION.md "An archive in parts"): rows of the first part's range. */
export interface RecallArchivePart {
  rows: RecallRow[];
}

export interface StoredRange extends RecallRange {
  seq: number;
}

export interface RecallHit {
  id: string;
  range_id: string;
  position: number;
  role: string;
  text: string;
}

export interface RecallSearch {
  /** Newest first (insertion order), at most `limit`. */
  hits: RecallHit[];
  /** How many rows match in all. */
  total: number;
}

export interface RecallExpansion {
  id: string;
  /** The original message JSON texts (a range: its messages in input order, the summary left out). */
  messages: string[];
}

/** One SQLite file (or memory) holding many sessions' archived ranges. */
export declare class RecallStore {
  private constructor();
  /**
   * Opens (creating when missing) a store file; no path (or ":memory:"): in memory.
   * Rejects with ErrMissingDependency when the wasm driver is needed and
   * node-sqlite3-wasm is not installed (the message names the install step).
   */
  static open(path?: string | null, options?: RecallStoreOptions): Promise<RecallStore>;
  /** The file path, or null in memory. */
  readonly path: string | null;
  readonly driver: "node:sqlite" | "wasm";
  /** How searches run: "fts5" (trigram index, then LIKE on its candidates) or "like". */
  readonly searchMode: "fts5" | "like";
  /** What the file keeps (meta fts). */
  readonly fileMode: "fts5" | "like";
  readonly closed: boolean;
  /** Whether the store was opened read-only (asked, or a file this process cannot write). */
  readonly readOnly: boolean;
  /** The bound on a search's total, or null (exact). */
  readonly countLimit: number | null;
  /** How the last search ran (a diagnostic): the terms given to the FTS5 MATCH, the bands of rowids it read, whether its total was exact. */
  readonly lastSearchPlan: { exact: boolean; match: string[]; bands?: number } | null;
  /** The id the next compaction archives under: `r<k>`, k = 1 + the session's ranges. */
  nextRangeId(session: string): string;
  ranges(session: string): StoredRange[];
  /**
   * Inserts one compaction's rows in one transaction: one archive, or its parts
   * (the first holds the range), each written as the iterable gives it; an error
   * the iterable throws rolls every part back. A range id the session has is refused.
   */
  archive(session: string, archived: RecallArchive | Iterable<RecallArchive | RecallArchivePart>): { range: string; messages: number };
  search(session: string, query: string | ParsedQuery, options?: { limit?: number }): RecallSearch;
  /** The originals behind a range or message id (none for an unknown id). */
  expand(session: string, id: string): RecallExpansion;
  deleteSession(session: string): { ranges: number; messages: number };
  sessions(): string[];
  close(): void;
}

export interface PostgresRecallStoreOptions {
  /** Count a search's total up to this many (a total equal to it means "at least"); default 100, as every store; null: exact. */
  countLimit?: number | null;
  /** At most this many connections to the server (default 10). */
  pool?: number;
}

/**
 * The recall store on a PostgreSQL database (docs/RECALL.md "On PostgreSQL"): the
 * SQLite store's methods and answers, as promises; many processes and machines
 * write one database at once. Needs the `pg` package (`npm install pg`).
 */
export declare class PostgresRecallStore {
  private constructor();
  /**
   * Opens the store: url a postgres:// (or postgresql://) URL or a key=value DSN
   * (host, port, dbname, user, password, sslmode, sslrootcert, sslcert, sslkey,
   * application_name, connect_timeout; PG* environment variables fill the rest).
   * Creates the schema on a database without one; a database of another schema
   * version is invalid_state at /path. Rejects with ErrMissingDependency when pg is
   * not installed.
   */
  static open(url: string, options?: PostgresRecallStoreOptions): Promise<PostgresRecallStore>;
  /** The URL (or DSN) without its password. */
  readonly path: string;
  readonly driver: "pg";
  readonly searchMode: "pg_trgm";
  readonly closed: boolean;
  readonly readOnly: false;
  readonly countLimit: number | null;
  /** Every method returns a promise (the engine's synchronous methods refuse the store; use handleToolCallAsync). */
  readonly asynchronous: true;
  nextRangeId(session: string): Promise<string>;
  ranges(session: string): Promise<StoredRange[]>;
  /**
   * Inserts one compaction's rows in one transaction (the range must be the
   * session's next, else invalid_state at /range/id and nothing is written). A lost
   * connection is retried once; a second loss is store_unavailable.
   */
  archive(session: string, archived: RecallArchive | Iterable<RecallArchive | RecallArchivePart> | AsyncIterable<RecallArchive | RecallArchivePart>): Promise<{ range: string; messages: number }>;
  search(session: string, query: string | ParsedQuery, options?: { limit?: number }): Promise<RecallSearch>;
  expand(session: string, id: string): Promise<RecallExpansion>;
  deleteSession(session: string): Promise<{ ranges: number; messages: number }>;
  sessions(): Promise<string[]>;
  close(): Promise<void>;
}

/**
 * Opens a store from one string, the argument or else CTXCOMPACT_RECALL_URL: a
 * postgres:// URL or key=value DSN (PostgresRecallStore), or `sqlite:PATH`,
 * `sqlite::memory:`, a path (RecallStore). options go to that store's open.
 */
export declare function openRecallStore(url?: string, options?: RecallStoreOptions | PostgresRecallStoreOptions): Promise<RecallStore | PostgresRecallStore>;

/** Splits a query as the core's recall.query does. */
export declare function parseQuery(query: string): ParsedQuery;

/** The store's schema, recall/schema.sql (the one every runtime's store runs). */
export declare const SCHEMA_SQL: string;

/**
 * A package a feature needs is not installed: node-sqlite3-wasm, for the wasm driver
 * (every Node without node:sqlite), or pg, for PostgresRecallStore. The message
 * names the install step.
 */
export declare class ErrMissingDependency extends Error {
  constructor(dependency: string, message: string, options?: { cause?: unknown });
  readonly code: "missing_dependency";
  readonly dependency: string;
}
