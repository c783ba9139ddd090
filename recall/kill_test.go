package recall_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/recall"
)

// holderEnv makes the re-executed test binary a writer that archives r1 of session
// "k", then stops in the transaction of r2, holding the lock: "PATH".
const holderEnv = "CTXC_RECALL_HOLDER"

// killRange is range r<k> of session "k" written by who: two rows.
func killRange(k int, who string) core.RecallArchive {
	id := fmt.Sprintf("r%d", k)
	a := core.RecallArchive{Range: core.RecallRange{ID: id, FromIndex: 0, ToIndex: 2, Summary: who + " " + id}}
	for i := range 2 {
		a.Rows = append(a.Rows, core.RecallRow{ID: fmt.Sprintf("%s.%d", id, i), RangeID: id, Position: i, Role: "tool", Reason: "summarized",
			JSON: fmt.Sprintf(`{"role":"tool","content":"%s row %d of %s"}`, who, i, id), Text: fmt.Sprintf("%s row %d of %s", who, i, id)})
	}
	return a
}

func holder(path string) int {
	st, err := recall.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := st.ArchiveOne(context.Background(), "k", killRange(1, "go")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	recall.SetArchiveHook(func() {
		fmt.Println("holding")
		select {} // until killed
	})
	err = st.ArchiveOne(context.Background(), "k", killRange(2, "go"))
	fmt.Fprintln(os.Stderr, "not killed:", err)
	return 2
}

// The JS and Python writers and recoverers: "hold" archives r1 then stops in the
// transaction of r2 ("holding"); "recover" archives r<k>, searches, prints "ok".
const nodeKill = `
import { writeSync } from "node:fs";
import { RecallStore } from %q;
import { testHooks } from %q;
const [mode, file, who, k] = process.argv.slice(1);
const range = (k) => {
  const rid = "r" + k;
  return { range: { id: rid, from_index: 0, to_index: 2, summary: who + " " + rid },
    rows: [0, 1].map((i) => ({ id: rid + "." + i, range_id: rid, position: i, role: "tool", reason: "summarized",
      json: JSON.stringify({ role: "tool", content: who + " row " + i + " of " + rid }), text: who + " row " + i + " of " + rid })) };
};
const s = await RecallStore.open(file, { driver: "wasm" });
if (mode === "hold") {
  s.archive("k", range(1));
  testHooks.beforeCommit = () => { writeSync(1, "holding\n"); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); };
  s.archive("k", range(2));
} else {
  s.archive("k", range(Number(k)));
  if (s.search("k", who + " row 1").total !== 1) throw new Error("not found");
  console.log("ok");
}
s.close();
`

const pythonKill = `
import json, sys, time
import ctxcompact._recall as R
from ctxcompact.recall import RecallStore
mode, path, who, k = sys.argv[1:5]
def rng(k):
    rid = "r%d" % k
    return {"range": {"id": rid, "from_index": 0, "to_index": 2, "summary": who + " " + rid},
            "rows": [{"id": "%s.%d" % (rid, i), "range_id": rid, "position": i, "role": "tool", "reason": "summarized",
                      "json": json.dumps({"role": "tool", "content": "%s row %d of %s" % (who, i, rid)}),
                      "text": "%s row %d of %s" % (who, i, rid)} for i in range(2)]}
s = RecallStore(path)
if mode == "hold":
    s.archive("k", rng(1))
    def hold():
        print("holding", flush=True)
        time.sleep(3600)
    R._before_commit = hold
    s.archive("k", rng(2))
else:
    s.archive("k", rng(int(k)))
    assert s.count_rows("k", who + " row 1") == 1
    print("ok")
s.close()
`

type killRuntimes struct {
	root, node, python string
}

func (r killRuntimes) cmd(t *testing.T, rt, mode, path, who string, k int) *exec.Cmd {
	switch rt {
	case "go":
		require.Equal(t, "hold", mode)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), holderEnv+"="+path)
		return cmd
	case "node":
		script := fmt.Sprintf(nodeKill, "file://"+filepath.Join(r.root, "bindings", "js", "recall.js"), "file://"+filepath.Join(r.root, "bindings", "js", "recall-lock.js"))
		return exec.Command(r.node, "--input-type=module", "-e", script, mode, path, who, fmt.Sprint(k))
	default:
		cmd := exec.Command(r.python, "-c", pythonKill, mode, path, who, fmt.Sprint(k))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(r.root, "bindings", "python", "src"))
		return cmd
	}
}

// A writer of each runtime killed (SIGKILL) in a write transaction, holding the
// store's lock, leaves the lock directory with its owner file behind; a store of
// each runtime then takes the lock over at once (its holder's pid is gone), and
// finds the file as it was before the killed transaction.
func TestAKilledWritersLockIsTakenOver(t *testing.T) {
	root := filepath.Dir(filepath.Dir(must(filepath.Abs("kill_test.go"))))
	r := killRuntimes{root: root}
	runtimes := []string{"go"}
	ci := os.Getenv("CI") != ""
	if node, err := exec.LookPath("node"); err == nil && dirExists(filepath.Join(root, "node_modules", "node-sqlite3-wasm")) {
		r.node = node
		runtimes = append(runtimes, "node")
	} else if ci {
		t.Fatal("node or node_modules/node-sqlite3-wasm missing (npm ci)")
	}
	if r.python = pythonFor(root); r.python != "" {
		runtimes = append(runtimes, "python")
	} else if ci {
		t.Fatal("no python with ctxcompact's dependencies")
	}
	for _, writer := range runtimes {
		for _, rec := range runtimes {
			t.Run(writer+"-killed-"+rec+"-recovers", func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "recall.db")
				cmd := r.cmd(t, writer, "hold", path, writer, 0)
				out, err := cmd.StdoutPipe()
				require.NoError(t, err)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				require.NoError(t, cmd.Start())
				line, err := bufio.NewReader(out).ReadString('\n')
				require.NoError(t, err, stderr.String())
				require.Equal(t, "holding\n", line)
				owner, err := os.ReadFile(path + ".lock/owner")
				require.NoError(t, err, "the lock records its holder")
				require.Equal(t, int64(cmd.Process.Pid), gjson.GetBytes(owner, "pid").Int(), string(owner))
				host, _ := os.Hostname()
				require.Equal(t, host, gjson.GetBytes(owner, "host").Str)
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				_ = cmd.Wait() // reaped: the pid no longer runs
				_, err = os.Stat(path + ".lock")
				require.NoError(t, err, "the killed writer left its lock behind")

				if rec == "go" {
					st, err := recall.OpenWith(path, recall.Options{LockTimeout: 2 * time.Second})
					require.NoError(t, err)
					require.NoError(t, st.ArchiveOne(context.Background(), "k", killRange(2, "go-recovers")))
					require.NoError(t, st.Close())
				} else {
					c := r.cmd(t, rec, "recover", path, rec+"-recovers", 2)
					got, err := c.CombinedOutput()
					require.NoError(t, err, string(got))
					require.Equal(t, "ok\n", string(got))
				}
				st, err := recall.Open(path)
				require.NoError(t, err)
				defer st.Close()
				rs, err := st.Ranges(context.Background(), "k")
				require.NoError(t, err)
				require.Len(t, rs, 2)
				require.Equal(t, []string{writer + " r1", rec + "-recovers r2"}, []string{rs[0].Summary, rs[1].Summary})
				hits, _, err := st.Find(context.Background(), "k", `"`+writer+` row 0 of r2"`, 0)
				require.NoError(t, err)
				require.Empty(t, hits, "the killed transaction is not in the file")
			})
		}
	}
}
