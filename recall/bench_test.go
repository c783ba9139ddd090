package recall

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/internal/recalltest"
)

// benchStore is a store of about 100 MB of archived tool outputs (one session,
// 250 ranges of 100 messages of ~4 KB), built once, by BenchmarkSearch100MB.
var benchStore struct {
	once sync.Once
	dir  string
	path string
	mb   float64
	err  error
}

func bigStore(b *testing.B) string {
	benchStore.once.Do(func() {
		benchStore.dir = b.TempDir() // the top benchmark's, removed when it ends
		benchStore.path = filepath.Join(benchStore.dir, "big.db")
		s, err := Open(benchStore.path)
		if err != nil {
			benchStore.err = err
			return
		}
		defer s.Close()
		benchStore.mb, benchStore.err = recalltest.BenchArchive(func(a core.RecallArchive) error {
			return s.ArchiveOne(context.Background(), "bench", a)
		})
	})
	if benchStore.err != nil {
		b.Fatal(benchStore.err)
	}
	return benchStore.path
}

// BenchmarkSearch100MB: context_search on a store of ~100 MB of archived messages
// (the issue asks for under 50 ms). Not a test: it reports the time per search.
func BenchmarkSearch100MB(b *testing.B) {
	path := bigStore(b)
	fi, _ := os.Stat(path)
	for _, q := range recalltest.BenchQueries {
		for _, mode := range []Options{{}, {ForceLike: true}} {
			s, err := OpenWith(path, mode)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(q.Name+"/"+s.Mode(), func(b *testing.B) {
				b.ReportMetric(benchStore.mb, "MB-archived")
				b.ReportMetric(float64(fi.Size())/1e6, "MB-file")
				for b.Loop() {
					if _, err := s.SearchResult(context.Background(), "bench", q.Query, 10); err != nil {
						b.Fatal(err)
					}
				}
			})
			s.Close()
		}
	}
}
