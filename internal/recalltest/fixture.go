// Package recalltest is the cross-runtime store fixture, testdata/recall/stores.json
// (gen_stores.py), for the Go tests of every recall store: sessions to write, and the
// searches and expands whose answers every runtime's store, on SQLite or PostgreSQL,
// must give. It does not import package recall (whose own tests use it).
package recalltest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/ctxcompact/core"
)

// Fixture is stores.json.
type Fixture struct {
	WriteOrder [][]string                      `json:"write_order"`
	Sessions   map[string][]core.RecallArchive `json:"sessions"`
	Searches   []struct {
		Session, Query string
		Limit          int
		Hits           []string
		Total          int
	} `json:"searches"`
	Expands []struct {
		Session, ID string
		Messages    []string
	} `json:"expands"`
}

// Store is what the fixture writes and reads of a store.
type Store interface {
	ArchiveOne(ctx context.Context, session string, a core.RecallArchive) error
	Find(ctx context.Context, session, query string, limit int) ([]core.RecallHit, int, error)
	Messages(ctx context.Context, session, id string) ([]string, error)
}

// Root is the repository's root directory.
func Root() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(here)))
}

// Load reads the fixture.
func Load(t testing.TB) Fixture {
	b, err := os.ReadFile(filepath.Join(Root(), "testdata", "recall", "stores.json"))
	require.NoError(t, err)
	var f Fixture
	require.NoError(t, json.Unmarshal(b, &f))
	return f
}

// Names is the fixture's sessions, sorted.
func (f Fixture) Names() []string {
	var out []string
	for s := range f.Sessions {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Write writes the fixture's sessions (those named; all when none is) into s, range
// by range in the fixture's order.
func (f Fixture) Write(t testing.TB, s Store, only ...string) {
	for k, round := range f.WriteOrder {
		for _, session := range round {
			if len(only) > 0 && !slices.Contains(only, session) {
				continue
			}
			require.NoError(t, s.ArchiveOne(context.Background(), session, f.Sessions[session][k]))
		}
	}
}

// Check runs every search and expand of the fixture on s: its hits, totals and
// originals must be the fixture's.
func (f Fixture) Check(t testing.TB, who string, s Store) {
	ctx := context.Background()
	for _, c := range f.Searches {
		hits, total, err := s.Find(ctx, c.Session, c.Query, c.Limit)
		require.NoError(t, err)
		ids := make([]string, len(hits))
		for i, h := range hits {
			ids[i] = h.ID
		}
		require.Equal(t, c.Hits, ids, "%s store: %q in %s, limit %d", who, c.Query, c.Session, c.Limit)
		require.Equal(t, c.Total, total, "%s store: total of %q in %s", who, c.Query, c.Session)
	}
	for _, c := range f.Expands {
		got, err := s.Messages(ctx, c.Session, c.ID)
		require.NoError(t, err)
		if len(c.Messages) == 0 {
			require.Empty(t, got)
		} else {
			require.Equal(t, c.Messages, got, "%s store: expand %s in %s", who, c.ID, c.Session)
		}
	}
}

// Python is a python that imports ctxcompact.recall from the source tree ("" when
// none does), and the environment to run it with.
func Python() (string, []string) {
	root := Root()
	env := append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "bindings", "python", "src"))
	for _, p := range []string{os.Getenv("CTXCOMPACT_PYTHON"), filepath.Join(root, "bindings", "python", "build", "venv", "bin", "python"), "python3"} {
		if p == "" {
			continue
		}
		cmd := exec.Command(p, "-c", "import ctxcompact.recall")
		cmd.Env = env
		if cmd.Run() == nil {
			return p, env
		}
	}
	return "", env
}
