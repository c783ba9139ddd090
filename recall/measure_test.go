package recall_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/host"
	"github.com/ctxcompact/ctxcompact/recall"
)

// The measurement of docs/RECALL.md "Concurrency": three processes (Go, Node 20's
// wasm driver, Python) each compact one session 20 times at once, with a summarizer
// that takes 20 ms, after a fourth writer was killed (SIGKILL) holding the lock in
// a write transaction. Run it with
//
//	CTXC_RECALL_MEASURE=1 go test ./recall -run TestMeasureThreeProcessesAndAKill -v
//
// Every compaction either archives its range (with its originals) or fails with
// invalid_state at /range/id before returning a result; none fails otherwise.
const loopEnv = "CTXC_RECALL_LOOP"

const measureRounds = 20

func looper(spec string) int {
	ctx := context.Background()
	var s struct{ Store, Who string }
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	slow := func(ctx context.Context, req core.SummaryRequest) (string, error) {
		time.Sleep(20 * time.Millisecond)
		return "Summary by " + s.Who + ".", nil
	}
	ce, done, code := childEngine(ctx, s.Store, host.ContextEngineOptions{SessionID: "shared", Summarize: slow})
	if code != 0 {
		return code
	}
	defer done()
	for i := range measureRounds {
		_, err := ce.Compress(ctx, raceConversation(fmt.Sprintf("%s-%d", s.Who, i), 12), host.CompressOptions{Force: true})
		var cerr *core.Error
		switch {
		case err == nil:
			fmt.Println("ok")
		case errors.As(err, &cerr) && cerr.Code == core.CodeInvalidState && cerr.Path == "/range/id":
			fmt.Println("conflict")
		default:
			fmt.Println("error", strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	return 0
}

const nodeLooper = `
import { ContextEngine } from %q;
import { RecallStore } from %q;
const spec = JSON.parse(process.argv[1]);
const conv = (who) => {
  const msgs = [{ role: "system", content: "You are a coding agent." }, { role: "user", content: "Set up the project." }];
  for (let i = 0; i < 12; i++) {
    const id = "call_" + i;
    msgs.push({ role: "assistant", content: "Step " + i + " of " + who + ".", tool_calls: [{ id, type: "function", function: { name: "terminal", arguments: JSON.stringify({ command: "pytest -k t" + i }) } }] },
      { role: "tool", tool_call_id: id, content: ("line " + i + " of " + who + "'s output\n").repeat(40) });
  }
  msgs.push({ role: "user", content: "Fix the failing tests of " + who + "." });
  return msgs;
};
const store = await RecallStore.open(spec.store, { driver: "wasm" });
const summarize = async () => { await new Promise((r) => setTimeout(r, 20)); return "Summary by " + spec.who + "."; };
const engine = await ContextEngine.create({ config: { context: { engine: "lossless" }, model: { context_length: 32000 } }, store, sessionId: "shared", summarize });
for (let i = 0; i < %d; i++) {
  try {
    await engine.compress(conv(spec.who + "-" + i), { force: true });
    console.log("ok");
  } catch (err) {
    console.log(err.code === "invalid_state" && err.path === "/range/id" ? "conflict" : "error " + String(err.message).replace(/\n/g, " "));
  }
}
store.close();
`

const pythonLooper = `
import json, sys, time
from ctxcompact import ContextEngine, CompactError
from ctxcompact.recall import RecallStore
spec = json.loads(sys.argv[1])
def conv(who):
    msgs = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Set up the project."}]
    for i in range(12):
        cid = "call_%%d" %% i
        msgs.append({"role": "assistant", "content": "Step %%d of %%s." %% (i, who), "tool_calls": [{"id": cid, "type": "function", "function": {"name": "terminal", "arguments": json.dumps({"command": "pytest -k t%%d" %% i})}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": ("line %%d of %%s's output\n" %% (i, who)) * 40})
    msgs.append({"role": "user", "content": "Fix the failing tests of %%s." %% who})
    return msgs
def summarize(req):
    time.sleep(0.02)
    return "Summary by " + spec["who"] + "."
with RecallStore(spec["store"]) as store:
    e = ContextEngine({"context": {"engine": "lossless"}, "model": {"context_length": 32000}}, summarize=summarize, store=store, session_id="shared")
    for i in range(%d):
        try:
            e.compress(conv("%%s-%%d" %% (spec["who"], i)), force=True)
            print("ok", flush=True)
        except CompactError as err:
            print("conflict" if (err.code, err.path) == ("invalid_state", "/range/id") else "error " + str(err).replace("\n", " "), flush=True)
`

func TestMeasureThreeProcessesAndAKill(t *testing.T) {
	if os.Getenv("CTXC_RECALL_MEASURE") == "" {
		t.Skip("a measurement (docs/RECALL.md): CTXC_RECALL_MEASURE=1")
	}
	root := filepath.Dir(filepath.Dir(must(filepath.Abs("measure_test.go"))))
	node, err := exec.LookPath("node")
	require.NoError(t, err)
	py := pythonFor(root)
	require.NotEmpty(t, py)
	path := filepath.Join(t.TempDir(), "recall.db")
	start := time.Now()

	// The killed writer: it holds the lock in a write transaction when the three start.
	h := exec.Command(os.Args[0], "-test.run=^$")
	h.Env = append(os.Environ(), holderEnv+"="+path)
	out, err := h.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, h.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "holding\n", line)

	spec := func(who string) string {
		b, _ := json.Marshal(map[string]string{"store": path, "who": who})
		return string(b)
	}
	g := exec.Command(os.Args[0], "-test.run=^$")
	g.Env = append(os.Environ(), loopEnv+"="+spec("go"))
	n := exec.Command(node, "--input-type=module", "-e", fmt.Sprintf(nodeLooper, "file://"+filepath.Join(root, "bindings", "js", "index.js"),
		"file://"+filepath.Join(root, "bindings", "js", "recall.js"), measureRounds), spec("node"))
	p := exec.Command(py, "-c", fmt.Sprintf(pythonLooper, measureRounds), spec("python"))
	p.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "bindings", "python", "src"))
	cmds := map[string]*exec.Cmd{"go": g, "node": n, "python": p}
	outs := map[string]*strings.Builder{}
	for who, c := range cmds {
		outs[who] = &strings.Builder{}
		c.Stdout, c.Stderr = outs[who], os.Stderr
		require.NoError(t, c.Start())
	}
	require.NoError(t, h.Process.Signal(syscall.SIGKILL))
	_ = h.Wait()
	var wg sync.WaitGroup
	for who, c := range cmds {
		wg.Add(1)
		go func() { defer wg.Done(); require.NoError(t, c.Wait(), who) }()
	}
	wg.Wait()
	counts := map[string]int{}
	for who, o := range outs {
		for _, l := range strings.Split(strings.TrimSpace(o.String()), "\n") {
			kind, _, _ := strings.Cut(l, " ")
			counts[kind]++
			if kind == "error" {
				t.Logf("%s: %s", who, l)
			}
		}
	}
	st, err := recall.Open(path)
	require.NoError(t, err)
	defer st.Close()
	rs, err := st.Ranges(context.Background(), "shared")
	require.NoError(t, err)
	empty := 0
	for _, r := range rs {
		ms, err := st.Messages(context.Background(), "shared", r.ID)
		require.NoError(t, err)
		if len(ms) == 0 {
			empty++
		}
	}
	t.Logf("3 processes x %d compactions of one session, after a writer killed holding the lock: %d archived, %d failed cleanly (invalid_state /range/id), %d other errors; %d ranges in the store, %d without originals; %s",
		measureRounds, counts["ok"], counts["conflict"], counts["error"], len(rs), empty, time.Since(start).Round(100*time.Millisecond))
	require.Zero(t, counts["error"])
	require.Equal(t, 3*measureRounds, counts["ok"]+counts["conflict"])
	require.Equal(t, counts["ok"], len(rs), "every compaction that succeeded is archived, no other")
	require.Zero(t, empty)
}
