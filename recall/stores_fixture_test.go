package recall

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/ctxcompact/core"
)

// storesFixture is testdata/recall/stores.json (gen_stores.py): sessions to write,
// and searches and expands with the answers every runtime's store must give.
type storesFixture struct {
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

func repoRoot() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(here))
}

func loadStoresFixture(t *testing.T) storesFixture {
	b, err := os.ReadFile(filepath.Join(repoRoot(), "testdata", "recall", "stores.json"))
	require.NoError(t, err)
	var f storesFixture
	require.NoError(t, json.Unmarshal(b, &f))
	return f
}

// writeStoresFixture writes the fixture's sessions into a new store at path, range
// by range in the fixture's order.
func writeStoresFixture(t *testing.T, f storesFixture, path string) {
	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	for k, round := range f.WriteOrder {
		for _, session := range round {
			require.NoError(t, s.ArchiveOne(bg, session, f.Sessions[session][k]))
		}
	}
}

// TestWriteStoresFixture is the Go writer the JS and Python tests run: with
// CTXC_STORES_OUT set, it writes the fixture there (else it does nothing).
func TestWriteStoresFixture(t *testing.T) {
	out := os.Getenv("CTXC_STORES_OUT")
	if out == "" {
		t.Skip("the Go writer of the cross-runtime store test (CTXC_STORES_OUT=FILE)")
	}
	writeStoresFixture(t, loadStoresFixture(t), out)
}

// A store written by each runtime (Go here; Node and Python by their stores, run as
// child processes) gives the fixture's hits, totals and originals when Go reads it.
func TestStoresOfEveryRuntimeReadTheSame(t *testing.T) {
	f := loadStoresFixture(t)
	dir := t.TempDir()
	root := repoRoot()
	files := map[string]string{"go": filepath.Join(dir, "go.db")}
	writeStoresFixture(t, f, files["go"])
	ci := os.Getenv("CI") != ""
	missing := func(what string) {
		if ci {
			t.Fatalf("cross-runtime store test: %s", what)
		}
		t.Logf("SKIPPED, NOT TESTED: %s", what)
	}
	if node, err := exec.LookPath("node"); err == nil && dirExists(filepath.Join(root, "node_modules", "node-sqlite3-wasm")) {
		files["node"] = filepath.Join(dir, "node.db")
		out, err := exec.Command(node, filepath.Join(root, "bindings", "js", "test", "recall-stores.mjs"), "write", files["node"]).CombinedOutput()
		require.NoError(t, err, string(out))
	} else {
		missing("node or node_modules/node-sqlite3-wasm (npm ci)")
	}
	if py := pythonForStores(root); py != "" {
		files["python"] = filepath.Join(dir, "python.db")
		cmd := exec.Command(py, filepath.Join(root, "bindings", "python", "tests", "recall_stores.py"), "write", files["python"])
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "bindings", "python", "src"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	} else {
		missing("a python with ctxcompact's dependencies (CTXCOMPACT_PYTHON or bindings/python/build/venv)")
	}
	for who, path := range files {
		s, err := Open(path)
		require.NoError(t, err, who)
		for _, c := range f.Searches {
			hits, total, err := s.Find(bg, c.Session, c.Query, c.Limit)
			require.NoError(t, err)
			require.Equal(t, c.Hits, ids(hits), "%s store: %q in %s, limit %d", who, c.Query, c.Session, c.Limit)
			require.Equal(t, c.Total, total, "%s store: total of %q in %s", who, c.Query, c.Session)
		}
		for _, c := range f.Expands {
			got, err := s.Messages(bg, c.Session, c.ID)
			require.NoError(t, err)
			if len(c.Messages) == 0 {
				require.Empty(t, got)
			} else {
				require.Equal(t, c.Messages, got, "%s store: expand %s in %s", who, c.ID, c.Session)
			}
		}
		require.NoError(t, s.Close())
	}
}

// pythonForStores is a python that imports ctxcompact.recall from the source tree.
func pythonForStores(root string) string {
	for _, p := range []string{os.Getenv("CTXCOMPACT_PYTHON"), filepath.Join(root, "bindings", "python", "build", "venv", "bin", "python"), "python3"} {
		if p == "" {
			continue
		}
		cmd := exec.Command(p, "-c", "import ctxcompact.recall")
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "bindings", "python", "src"))
		if cmd.Run() == nil {
			return p
		}
	}
	return ""
}
