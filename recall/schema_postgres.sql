-- The recall store's schema on PostgreSQL (docs/RECALL.md "On PostgreSQL"): the
-- tables and columns of schema.sql, with the same meaning, and substring search on
-- pg_trgm. The Go store embeds this file, the JS store reads it from its package,
-- the Python store's copy is tested to be it byte for byte. Each store runs it as one
-- script, once, when the database has no ctxc_meta table yet: in one transaction
-- holding the advisory lock (1668577379), which every store's set-up takes first, so
-- that processes opening a new database at once create it once.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
-- ASCII lower case, nothing else: the search rule is "every term an ASCII
-- case-insensitive substring", as SQLite's LIKE has it. lower() under the C
-- collation changes only A-Z, whatever the database's locale (which would also fold
-- non-ASCII letters); it is 7 times faster than translate() with the 26 letters on
-- 4 KB texts, and a search rechecks every candidate row with it.
CREATE FUNCTION ctxc_fold(t text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT lower(t COLLATE "C") $$;
CREATE TABLE ctxc_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ctxc_ranges (
  session TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL,
  from_index INTEGER NOT NULL, to_index INTEGER NOT NULL,
  summary TEXT NOT NULL,
  PRIMARY KEY (session, id),
  UNIQUE (session, seq));
-- rowid: the archive order. A session's archives are written one at a time (each
-- holds the session's advisory lock), so within a session it is the commit order.
CREATE TABLE ctxc_messages (
  rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  session TEXT NOT NULL, id TEXT NOT NULL, range_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  role TEXT NOT NULL, reason TEXT NOT NULL,
  json TEXT NOT NULL,
  text TEXT NOT NULL,
  UNIQUE (session, id));
CREATE INDEX ctxc_messages_session ON ctxc_messages (session, rowid);
CREATE INDEX ctxc_messages_range ON ctxc_messages (session, range_id, position);
CREATE INDEX ctxc_messages_trgm ON ctxc_messages USING gin (ctxc_fold(text) gin_trgm_ops);
INSERT INTO ctxc_meta (key, value) VALUES ('schema_version', '1'), ('search', 'pg_trgm');
