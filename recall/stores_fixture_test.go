package recall

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/ctxcompact/internal/recalltest"
)

func repoRoot() string { return recalltest.Root() }

// writeStoresFixture writes the fixture's sessions into a new store at path, range
// by range in the fixture's order.
func writeStoresFixture(t *testing.T, f recalltest.Fixture, path string) {
	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	f.Write(t, s)
}

// TestWriteStoresFixture is the Go writer the JS and Python tests run: with
// CTXC_STORES_OUT set, it writes the fixture there (else it does nothing).
func TestWriteStoresFixture(t *testing.T) {
	out := os.Getenv("CTXC_STORES_OUT")
	if out == "" {
		t.Skip("the Go writer of the cross-runtime store test (CTXC_STORES_OUT=FILE)")
	}
	writeStoresFixture(t, recalltest.Load(t), out)
}

// A store written by each runtime (Go here; Node and Python by their stores, run as
// child processes) gives the fixture's hits, totals and originals when Go reads it.
func TestStoresOfEveryRuntimeReadTheSame(t *testing.T) {
	f := recalltest.Load(t)
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
	if py, env := recalltest.Python(); py != "" {
		files["python"] = filepath.Join(dir, "python.db")
		cmd := exec.Command(py, filepath.Join(root, "bindings", "python", "tests", "recall_stores.py"), "write", files["python"])
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	} else {
		missing("a python with ctxcompact's dependencies (CTXCOMPACT_PYTHON or bindings/python/build/venv)")
	}
	for who, path := range files {
		s, err := Open(path)
		require.NoError(t, err, who)
		f.Check(t, who, s)
		require.NoError(t, s.Close())
	}
}
