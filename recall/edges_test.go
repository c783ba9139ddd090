package recall_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/recall"
)

// probe is what one runtime's store does with a file: open it, search, expand r1,
// archive r2; a step that fails reports its code, path and message.
const nodeProbe = `
import { RecallStore } from %q;
const [file] = process.argv.slice(1);
const err = (e) => ({ code: e.code, path: e.path, message: String(e.message) });
const out = {};
let s;
try { s = await RecallStore.open(file, { driver: "wasm" }); } catch (e) { out.open = err(e); }
if (s) {
  out.readOnly = s.readOnly;
  out.total = s.search("a", "wrote").total;
  out.expand = s.expand("a", "r1").messages.length;
  try {
    s.archive("a", { range: { id: "r2", from_index: 0, to_index: 1, summary: "" }, rows: [] });
  } catch (e) { out.archive = err(e); }
  s.close();
}
console.log(JSON.stringify(out));
`

const pythonProbe = `
import json, sys
from ctxcompact import CompactError
from ctxcompact.recall import RecallStore
err = lambda e: {"code": e.code, "path": e.path, "message": str(e)}
out = {}
try:
    s = RecallStore(sys.argv[1])
except CompactError as e:
    out["open"] = err(e)
    s = None
if s is not None:
    out["readOnly"] = s.read_only
    out["total"] = s.count_rows("a", "wrote")
    out["expand"] = len(s.expand_rows("a", "r1"))
    try:
        s.archive("a", {"range": {"id": "r2", "from_index": 0, "to_index": 1, "summary": ""}, "rows": []})
    except CompactError as e:
        out["archive"] = err(e)
    s.close()
print(json.dumps(out))
`

func goProbe(file string) string {
	ctx := context.Background()
	errOf := func(err error) map[string]string {
		var ce *core.Error
		if !errors.As(err, &ce) {
			return map[string]string{"message": err.Error()}
		}
		return map[string]string{"code": string(ce.Code), "path": ce.Path, "message": err.Error()}
	}
	out := map[string]any{}
	s, err := recall.Open(file)
	if err != nil {
		out["open"] = errOf(err)
	} else {
		_, total, err := s.Find(ctx, "a", "wrote", 0)
		if err != nil {
			panic(err)
		}
		out["total"] = total
		ms, err := s.Messages(ctx, "a", "r1")
		if err != nil {
			panic(err)
		}
		out["expand"] = len(ms)
		if err := s.ArchiveOne(ctx, "a", core.RecallArchive{Range: core.RecallRange{ID: "r2"}}); err != nil {
			out["archive"] = errOf(err)
		}
		s.Close()
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// makeReadOnly makes path a file this process cannot write: no write permission,
// and, for root (whom permissions do not stop), the immutable attribute.
func makeReadOnly(t *testing.T, path string) {
	require.NoError(t, os.Chmod(path, 0o444))
	if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
		f.Close()
		if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
			t.Skipf("SKIPPED, NOT TESTED: cannot make %s read-only for this user (root, and chattr +i: %v %s)", path, err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", path).Run() })
	}
}

// A store of a future schema version (whose tables this version's schema does not
// fit: "no such column") and a read-only store, in every runtime: the first is
// invalid_state at /path naming both versions; the second opens for reading
// (search and expand), and a write is invalid_state at /path.
func TestFutureAndReadOnlyStoresInEveryRuntime(t *testing.T) {
	root := filepath.Dir(filepath.Dir(must(filepath.Abs("edges_test.go"))))
	dir := t.TempDir()
	future := filepath.Join(dir, "future.db")
	c, err := sqlite3.Open(future)
	require.NoError(t, err)
	require.NoError(t, c.Exec(`CREATE TABLE ctxc_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
		INSERT INTO ctxc_meta VALUES ('schema_version', '2'), ('fts', 'like');
		CREATE TABLE ctxc_messages (rowid INTEGER PRIMARY KEY, sess TEXT NOT NULL, body TEXT NOT NULL);`))
	require.NoError(t, c.Close())

	ro := filepath.Join(dir, "ro.db")
	s, err := recall.Open(ro)
	require.NoError(t, err)
	require.NoError(t, s.ArchiveOne(context.Background(), "a", killRange(1, "wrote")))
	require.NoError(t, s.Close())
	makeReadOnly(t, ro)

	probes := map[string]func(file string) string{"go": goProbe}
	if node, err := exec.LookPath("node"); err == nil && dirExists(filepath.Join(root, "node_modules", "node-sqlite3-wasm")) {
		script := fmt.Sprintf(nodeProbe, "file://"+filepath.Join(root, "bindings", "js", "recall.js"))
		probes["node"] = func(file string) string {
			out, err := exec.Command(node, "--input-type=module", "-e", script, file).CombinedOutput()
			require.NoError(t, err, string(out))
			return string(out)
		}
	} else if os.Getenv("CI") != "" {
		t.Fatal("node or node_modules/node-sqlite3-wasm missing (npm ci)")
	}
	if py := pythonFor(root); py != "" {
		probes["python"] = func(file string) string {
			cmd := exec.Command(py, "-c", pythonProbe, file)
			cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "bindings", "python", "src"))
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, string(out))
			return string(out)
		}
	} else if os.Getenv("CI") != "" {
		t.Fatal("no python with ctxcompact's dependencies")
	}
	for who, probe := range probes {
		f := gjson.Parse(probe(future))
		require.Equal(t, "invalid_state", f.Get("open.code").Str, "%s: %s", who, f.Raw)
		require.Equal(t, "/path", f.Get("open.path").Str, "%s: %s", who, f.Raw)
		require.Contains(t, f.Get("open.message").Str, "has schema version 2; this ctxcompact reads and writes version 1", who)

		r := gjson.Parse(probe(ro))
		require.False(t, r.Get("open").Exists(), "%s opens a read-only store: %s", who, r.Raw)
		require.Equal(t, int64(2), r.Get("total").Int(), "%s: %s", who, r.Raw)
		require.Equal(t, int64(2), r.Get("expand").Int(), "%s: %s", who, r.Raw)
		require.Equal(t, "invalid_state", r.Get("archive.code").Str, "%s: %s", who, r.Raw)
		require.Equal(t, "/path", r.Get("archive.path").Str, "%s: %s", who, r.Raw)
		require.Contains(t, r.Get("archive.message").Str, "is read-only", who)
	}
	if len(probes) < 3 {
		t.Logf("SKIPPED, NOT TESTED: only %d runtimes", len(probes))
	}
}
