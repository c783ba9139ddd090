// The recall stores' shared rules (ctxcompact/recall): the query splitter the core's
// recall.query has, the checks of a query plan and of an archive's rows, and the
// search bounds, one copy for the SQLite store (recall.js) and the PostgreSQL one
// (recall-postgres.js), so both check and answer alike.

import { CompactError } from "./errors.js";

export const fail = (message, path = "", cause) =>
  new CompactError("invalid_request", `ctxcompact: ${message}`, path, cause === undefined ? undefined : { cause });

/** Default and largest number of hits a search returns (as recall.search_result keeps). */
export const DEFAULT_SEARCH_LIMIT = 10;
export const MAX_SEARCH_LIMIT = 50;
/** How far a search counts its `total` by default, the same in every runtime's store. */
export const TOTAL_CAP = 100;

/** LIKE pattern of a term: %term% with %, _ and \ escaped by \. */
function likePattern(term) {
  return `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

// The whitespace of the core's query splitter (Go's unicode.IsSpace).
const SPACE = /[ \t\n\r\f\v\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
const trimSpace = (t) => {
  let a = 0;
  let b = t.length;
  while (a < b && SPACE.test(t[a])) a++;
  while (b > a && SPACE.test(t[b - 1])) b--;
  return t.slice(a, b);
};
export const asciiLower = (t) => t.replace(/[A-Z]/g, (c) => c.toLowerCase());

/**
 * A search query split as the core's recall.query splits it (the engine sends the
 * core's; this is for the store used alone): terms on whitespace, a "quoted
 * phrase" is one term (an unclosed quote: the rest), duplicates (ASCII
 * case-insensitive) kept once; the FTS5 expression quotes each term of 3+
 * characters as a phrase, joined with AND; every term is also a LIKE pattern.
 * @param {string} query
 */
export function parseQuery(query) {
  if (typeof query !== "string") throw fail("recall: query must be a string", "/query");
  const chars = [...query].length;
  if (chars > MAX_QUERY_CHARS) throw fail(`recall: query is too long: ${chars} characters, at most ${MAX_QUERY_CHARS}`, "/query");
  if (query.includes("\0")) throw fail("recall: query must not contain a NUL character (U+0000)", "/query");
  const terms = [];
  const seen = new Set();
  const add = (t) => {
    const k = asciiLower(t);
    if (t !== "" && !seen.has(k)) {
      seen.add(k);
      terms.push(t);
    }
  };
  for (let i = 0; i < query.length;) {
    if (SPACE.test(query[i])) {
      i++;
    } else if (query[i] === '"') {
      const end = query.indexOf('"', i + 1);
      add(trimSpace(query.slice(i + 1, end < 0 ? query.length : end)));
      i = end < 0 ? query.length : end + 1;
    } else {
      let j = i;
      while (j < query.length && !SPACE.test(query[j]) && query[j] !== '"') j++;
      add(query.slice(i, j));
      i = j;
    }
  }
  if (terms.length === 0) throw fail("recall: query has no words to search for", "/query");
  checkTerms(terms.length, terms);
  const fts = terms.filter((t) => [...t].length >= 3).map(ftsPhrase).join(" AND ");
  return { terms, fts, like: terms.map(likePattern) };
}

/** The bounds of a query, the core's (recall.query, recall.check_call). */
export const MAX_QUERY_CHARS = 4000;
export const MAX_QUERY_TERMS = 32;
export const MAX_TERM_CHARS = 1000;

function checkTerms(n, terms) {
  if (n > MAX_QUERY_TERMS) throw fail(`recall: query has ${n} terms, at most ${MAX_QUERY_TERMS} (every term must match; "quote" a phrase to search for it as one term)`, "/query");
  for (const t of terms) {
    const chars = [...t].length;
    if (chars > MAX_TERM_CHARS) throw fail(`recall: a term of the query is too long: ${chars} characters, at most ${MAX_TERM_CHARS}`, "/query");
  }
}

export function checkParsed(q) {
  if (typeof q === "string") return parseQuery(q);
  if (q === null || typeof q !== "object" || !Array.isArray(q.like) || typeof (q.fts ?? "") !== "string" ||
    !q.like.every((p) => typeof p === "string")) {
    throw fail("recall: a query is a string or the result of recall.query ({terms, fts, like})", "/query");
  }
  if (q.like.length === 0 && !q.fts) throw fail("recall: the query has no terms", "/query");
  // A plan made by hand is held to the core's bounds too: the store never runs an unbounded query.
  checkTerms(q.like.length, []);
  if ([q.fts, ...q.like].some((p) => p.includes("\0") || [...p].length > 4 * MAX_QUERY_CHARS)) {
    throw fail("recall: a query plan's fts and like must be bounded strings without NUL (recall.query's result)", "/query");
  }
  return { terms: q.terms ?? [], fts: q.fts ?? "", like: q.like };
}

export const str = (v, path) => {
  if (typeof v !== "string") throw fail(`recall store: ${path} must be a string`, path);
  return v;
};
export const int = (v, path) => {
  if (!Number.isSafeInteger(v)) throw fail(`recall store: ${path} must be an integer`, path);
  return v;
};

/** A message row of range rid, checked, as the INSERT binds it; p is its path. */
export function archiveRow(session, rid, r, p) {
  if (r === null || typeof r !== "object") throw fail(`recall store: ${p} must be an object`, p);
  const id = str(r.id, `${p}/id`);
  const rangeId = str(r.range_id, `${p}/range_id`);
  if (rangeId !== rid) throw fail(`recall store: ${p}/range_id is ${JSON.stringify(rangeId)}, not the range's ${JSON.stringify(rid)}`, `${p}/range_id`);
  return [session, id, rangeId, int(r.position, `${p}/position`), str(r.role, `${p}/role`), str(r.reason, `${p}/reason`),
    str(r.json, `${p}/json`), str(r.text, `${p}/text`)];
}

export const RANGE_ID = /^r[1-9][0-9]*$/;

/**
 * The range of an archive's first part, and its id, checked as every store checks
 * them (done: the parts had none). The store checks the span and summary as it binds them.
 */
export function firstRange(first, done) {
  if (done) throw fail("recall store: an archive with no parts", "");
  if (first === null || typeof first !== "object" || first.range === null || typeof first.range !== "object") {
    throw fail("recall store: an archive's first part holds its range: { range, rows }", "/range");
  }
  const rid = str(first.range.id, "/range/id");
  if (!RANGE_ID.test(rid)) throw fail(`recall store: range id ${JSON.stringify(rid)} is not r<k>`, "/range/id");
  return { range: first.range, rid };
}

/** A term as an FTS5 phrase (the core's recall.query writes the same). */
export const ftsPhrase = (t) => `"${t.replace(/"/g, '""')}"`;
