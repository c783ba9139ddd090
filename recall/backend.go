package recall

import (
	"context"
	_ "embed"
	"fmt"
	"iter"
	"os"
	"strings"
	"sync"

	"github.com/ctxcompact/ctxcompact/core"
)

// Backend is what every recall store does, on SQLite (*Store) or on PostgreSQL
// (package recall/postgres): host.RecallStore's methods, which a lossless engine
// calls, and the reading and upkeep the CLI, Export and Import need. Its methods are
// safe for concurrent use.
type Backend interface {
	// NextRangeID is the id of the session's next range: r<k>, k = 1 + its ranges.
	NextRangeID(ctx context.Context, session string) (string, error)
	// Archive stores one compaction's range and rows, in parts, in one transaction.
	Archive(ctx context.Context, session string, parts iter.Seq2[core.RecallArchive, error]) error
	// Find returns the session's rows matching query, newest first.
	Find(ctx context.Context, session, query string, limit int) ([]core.RecallHit, int, error)
	// Messages returns the original JSON behind a range or message id, in order.
	Messages(ctx context.Context, session, id string) ([]string, error)
	// Expand is Messages with each row's id, role, reason and position.
	Expand(ctx context.Context, session, id string) ([]Message, error)
	// Ranges lists the session's ranges in order.
	Ranges(ctx context.Context, session string) ([]Range, error)
	// RangeRows returns every row of one range (its summary row too) in the order
	// they were archived: what Export writes.
	RangeRows(ctx context.Context, session, rangeID string) ([]core.RecallRow, error)
	// Sessions lists the sessions in the store, in byte order.
	Sessions(ctx context.Context) ([]string, error)
	// DeleteSession removes a session's ranges and messages in one transaction.
	DeleteSession(ctx context.Context, session string) error
	// Close closes the store.
	Close() error
}

var _ Backend = (*Store)(nil)

// PostgresSchemaSQL is the schema of the PostgreSQL store (package recall/postgres),
// recall/schema_postgres.sql, kept here beside schema.sql: one home for both.
//
//go:embed schema_postgres.sql
var PostgresSchemaSQL string

// CodeStoreUnavailable is the code of a store operation that lost its connection to
// the server, and again on its one retry: nothing of a write was written.
const CodeStoreUnavailable core.ErrorCode = "store_unavailable"

// EnvURL is the environment variable OpenURL reads when given no URL.
const EnvURL = "CTXCOMPACT_RECALL_URL"

// Opener opens a store of one kind from its URL (Register).
type Opener func(ctx context.Context, url string) (Backend, error)

var (
	openersMu sync.Mutex
	openers   = map[string]Opener{}
)

// Register makes OpenURL open URLs of a scheme ("postgres") with open. Package
// recall/postgres registers itself when imported, as database/sql drivers do, so
// that a program that uses only SQLite does not link a PostgreSQL driver.
func Register(scheme string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	openers[scheme] = open
}

// Kind is the kind of store a URL names: "sqlite" or "postgres", and what to open
// (the path for SQLite, the URL or DSN as given for PostgreSQL).
func Kind(url string) (kind, target string) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return "postgres", url
	case strings.HasPrefix(url, "sqlite:"):
		return "sqlite", strings.TrimPrefix(url, "sqlite:")
	case !strings.Contains(url, "://") && strings.Contains(url, "=") && !strings.ContainsAny(url, `/\`):
		return "postgres", url // a key=value DSN: host=... dbname=...
	}
	return "sqlite", url
}

// OpenURL opens the store a URL names (docs/RECALL.md "On PostgreSQL"): a
// postgres:// or postgresql:// URL, or a key=value DSN, is a PostgreSQL store (import
// github.com/ctxcompact/ctxcompact/recall/postgres for it); "sqlite:PATH",
// "sqlite::memory:" or a path is a SQLite store. An empty url reads EnvURL.
func OpenURL(ctx context.Context, url string) (Backend, error) {
	if url == "" {
		url = os.Getenv(EnvURL)
	}
	if url == "" {
		return nil, &core.Error{Code: core.CodeInvalidRequest, Path: "/url", Message: "ctxcompact: no recall store named: give a store URL (postgres://..., sqlite:PATH or a path) or set " + EnvURL}
	}
	kind, target := Kind(url)
	if kind == "sqlite" {
		if target == "" {
			return nil, &core.Error{Code: core.CodeInvalidRequest, Path: "/url", Message: "ctxcompact: a sqlite: store URL names no path (sqlite:PATH, or sqlite::memory:)"}
		}
		return Open(target)
	}
	openersMu.Lock()
	open := openers[kind]
	openersMu.Unlock()
	if open == nil {
		return nil, fmt.Errorf("ctxcompact: %s is a PostgreSQL store and this program has no PostgreSQL driver: import _ \"github.com/ctxcompact/ctxcompact/recall/postgres\"", Redact(url))
	}
	return open(ctx, target)
}

// Redact is a store URL with its password replaced by "xxxxx", for messages.
func Redact(url string) string {
	if scheme, rest, ok := strings.Cut(url, "://"); ok {
		auth, host, ok := strings.Cut(rest, "@")
		if !ok {
			return url
		}
		if user, _, ok := strings.Cut(auth, ":"); ok {
			return scheme + "://" + user + ":xxxxx@" + host
		}
		return url
	}
	fields := strings.Fields(url)
	for i, f := range fields {
		if strings.HasPrefix(f, "password=") {
			fields[i] = "password=xxxxx"
		}
	}
	return strings.Join(fields, " ")
}

// SearchResult is context_search's answer (a JSON string) for query in session, as
// the core's recall.search_result writes it: at most limit hits (10 when 0 or less,
// at most 50).
func SearchResult(ctx context.Context, b Backend, session, query string, limit int) (string, error) {
	if limit <= 0 {
		limit = 10
	}
	limit = min(limit, 50)
	hits, total, err := b.Find(ctx, session, query, limit)
	if err != nil {
		return "", err
	}
	return core.SearchResult(query, hits, limit, total), nil
}

// ExpandResult is context_expand's answer (a JSON string) for id in session, cut to
// about maxTokens when it is above 0, as the core's recall.expand_result writes it.
func ExpandResult(ctx context.Context, b Backend, session, id string, maxTokens int) (string, error) {
	ms, err := b.Messages(ctx, session, id)
	if err != nil {
		return "", err
	}
	return core.ExpandResult(id, ms, maxTokens), nil
}
