-- The recall store's schema (docs/RECALL.md): the one file of it. The Go store embeds
-- it, the JS store reads it from its package, the Python store's copy is tested to be
-- it byte for byte. Each runs the part above the fts5 line on every open, and the
-- part below when it creates a file where its SQLite has FTS5 with the trigram
-- tokenizer.
CREATE TABLE IF NOT EXISTS ctxc_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ctxc_ranges (
  session TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL,
  from_index INTEGER NOT NULL, to_index INTEGER NOT NULL,
  summary TEXT NOT NULL,
  PRIMARY KEY (session, id));
CREATE TABLE IF NOT EXISTS ctxc_messages (
  rowid INTEGER PRIMARY KEY,
  session TEXT NOT NULL, id TEXT NOT NULL, range_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  role TEXT NOT NULL, reason TEXT NOT NULL,
  json TEXT NOT NULL,
  text TEXT NOT NULL,
  UNIQUE (session, id));
CREATE INDEX IF NOT EXISTS ctxc_messages_session ON ctxc_messages (session);
-- fts5
CREATE VIRTUAL TABLE IF NOT EXISTS ctxc_fts USING fts5(
  text, content='ctxc_messages', content_rowid='rowid', tokenize='trigram');
