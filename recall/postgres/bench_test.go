package postgres

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/internal/pgtest"
	"github.com/ctxcompact/ctxcompact/internal/recalltest"
	"github.com/ctxcompact/ctxcompact/recall"
)

// BenchmarkSearch100MB: context_search on the 100 MB benchmark archive
// (recalltest.BenchArchive), on PostgreSQL and, side by side in the same run, on
// SQLite (FTS5). Not a test: it reports the time per search. The stores are
// written first (outside the timings), on a database of the shared test server.
func BenchmarkSearch100MB(b *testing.B) {
	ctx := context.Background()
	pg, err := Open(ctx, pgtest.Database(b))
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	lite, err := recall.Open(filepath.Join(b.TempDir(), "big.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer lite.Close()
	mb, err := recalltest.BenchArchive(func(a core.RecallArchive) error {
		if err := pg.ArchiveOne(ctx, "bench", a); err != nil {
			return err
		}
		return lite.ArchiveOne(ctx, "bench", a)
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pg.pool.Exec(ctx, `ANALYZE ctxc_messages`); err != nil { // as autovacuum would, soon after
		b.Fatal(err)
	}
	for _, q := range recalltest.BenchQueries {
		for _, st := range []struct {
			name string
			b    recall.Backend
		}{{"postgres", pg}, {"sqlite", lite}} {
			b.Run(q.Name+"/"+st.name, func(b *testing.B) {
				b.ReportMetric(mb, "MB-archived")
				for b.Loop() {
					if _, err := recall.SearchResult(ctx, st.b, "bench", q.Query, 10); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
