package recall_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/host"
	"github.com/ctxcompact/ctxcompact/recall"
)

// raceConversation is a coding session of n tool turns whose last request names who.
func raceConversation(who string, n int) json.RawMessage {
	msgs := []map[string]any{{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Set up the project."}}
	for i := range n {
		id := fmt.Sprintf("call_%d", i)
		args, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("pytest -k t%d", i)})
		msgs = append(msgs, map[string]any{"role": "assistant", "content": fmt.Sprintf("Step %d of %s.", i, who),
			"tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "terminal", "arguments": string(args)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": strings.Repeat(fmt.Sprintf("line %d of %s's output\n", i, who), 40)})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "Fix the failing tests of " + who + "."})
	b, _ := json.Marshal(msgs)
	return b
}

// barrier is a summarizer that answers once n summarizers (of any process) have
// been called: it marks dir/ready-<who> and waits for n marks. So every racer has
// reserved its range id before any archives.
func barrier(dir, who string, n int) host.Summarize {
	return func(ctx context.Context, req core.SummaryRequest) (string, error) {
		if err := os.WriteFile(filepath.Join(dir, "ready-"+who), nil, 0o644); err != nil {
			return "", err
		}
		for {
			m, _ := filepath.Glob(filepath.Join(dir, "ready-*"))
			if len(m) >= n {
				return "Summary by " + who + ".", nil
			}
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

// Compactions of one session at once all reserve r1: one archives it, every other
// fails cleanly (invalid_state at /range/id, no result, nothing recorded), and the
// winner's r1 holds the winner's originals.
func TestConcurrentCompactionsOfOneSession(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := recall.Open(filepath.Join(dir, "recall.db"))
	require.NoError(t, err)
	defer store.Close()
	const n = 3
	type outcome struct {
		res core.CompactResult
		err error
		ce  *host.ContextEngine
	}
	outs := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		ce, err := host.NewContextEngine(ctx, sharedEngine(t), json.RawMessage(losslessConfig),
			host.ContextEngineOptions{Store: store, SessionID: "shared", Summarize: barrier(dir, fmt.Sprint(i), n)})
		require.NoError(t, err)
		outs[i].ce = ce
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i].res, outs[i].err = ce.Compress(ctx, raceConversation(fmt.Sprintf("g%d", i), 30), host.CompressOptions{Force: true})
		}()
	}
	wg.Wait()
	winner := -1
	for i, o := range outs {
		if o.err == nil {
			require.Equal(t, -1, winner, "one compaction wins r1")
			winner = i
			require.True(t, o.res.Report.Compacted)
			require.Contains(t, gjson.GetBytes(o.res.Messages[o.res.Report.HeadEnd], "content").Str, "Archived as r1 (")
			require.Equal(t, 1, o.ce.Status().CompressionCount)
			continue
		}
		var cerr *core.Error
		require.ErrorAs(t, o.err, &cerr, o.err.Error())
		require.Equal(t, core.CodeInvalidState, cerr.Code, o.err.Error())
		require.Equal(t, "/range/id", cerr.Path)
		require.Empty(t, o.res.Messages, "no result with the error")
		require.Nil(t, o.res.Report)
		require.Equal(t, 0, o.ce.Status().CompressionCount, "nothing recorded")
	}
	require.GreaterOrEqual(t, winner, 0)
	rs, err := store.Ranges(ctx, "shared")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	hits, _, err := store.Find(ctx, "shared", fmt.Sprintf("of g%d's output", winner), 0)
	require.NoError(t, err)
	require.NotEmpty(t, hits)
	for i := range n {
		if i != winner {
			hits, _, err := store.Find(ctx, "shared", fmt.Sprintf("of g%d's output", i), 0)
			require.NoError(t, err)
			require.Empty(t, hits, "a loser's originals are nowhere")
		}
	}
}

// racerEnv makes the re-executed test binary one racer of the cross-runtime test:
// a JSON {store, dir, who, n, messages}; it prints {"ok"} or {"code", "path"}.
const racerEnv = "CTXC_RECALL_RACER"

func racer(spec string) int {
	ctx := context.Background()
	var s struct {
		Store, Dir, Who, Messages string
		N                         int
	}
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ce, done, code := childEngine(ctx, s.Store, host.ContextEngineOptions{SessionID: "shared", Summarize: barrier(s.Dir, s.Who, s.N)})
	if code != 0 {
		return code
	}
	defer done()
	msgs, err := os.ReadFile(s.Messages)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, err = ce.Compress(ctx, msgs, host.CompressOptions{Force: true})
	var cerr *core.Error
	switch {
	case err == nil:
		fmt.Println(`{"ok":true}`)
	case errors.As(err, &cerr):
		out, _ := json.Marshal(map[string]string{"code": string(cerr.Code), "path": cerr.Path, "message": err.Error()})
		fmt.Println(string(out))
	default:
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

const nodeRacer = `
import { readFileSync } from "node:fs";
import { writeFileSync, readdirSync } from "node:fs";
import { ContextEngine } from %q;
import { RecallStore } from %q;
const spec = JSON.parse(process.argv[1]);
const store = await RecallStore.open(spec.store, { driver: "wasm" });
const summarize = async () => {
  writeFileSync(spec.dir + "/ready-" + spec.who, "");
  const until = Date.now() + 120000; // a racer that died never arrives: give up, do not hang
  while (readdirSync(spec.dir).filter((f) => f.startsWith("ready-")).length < spec.n && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
  return "Summary by " + spec.who + ".";
};
const engine = await ContextEngine.create({ config: { context: { engine: "lossless" }, model: { context_length: 32000 } }, store, sessionId: "shared", summarize });
try {
  await engine.compress(JSON.parse(readFileSync(spec.messages, "utf8")), { force: true });
  console.log(JSON.stringify({ ok: true }));
} catch (err) {
  console.log(JSON.stringify({ code: err.code, path: err.path, message: String(err.message) }));
}
store.close();
`

const pythonRacer = `
import json, os, sys, time
from ctxcompact import ContextEngine, CompactError
from ctxcompact.recall import RecallStore
spec = json.loads(sys.argv[1])
def summarize(req):
    open(os.path.join(spec["dir"], "ready-" + spec["who"]), "w").close()
    until = time.monotonic() + 120  # a racer that died never arrives: give up, do not hang
    while len([f for f in os.listdir(spec["dir"]) if f.startswith("ready-")]) < spec["n"] and time.monotonic() < until:
        time.sleep(0.005)
    return "Summary by " + spec["who"] + "."
with RecallStore(spec["store"]) as store:
    e = ContextEngine({"context": {"engine": "lossless"}, "model": {"context_length": 32000}}, summarize=summarize, store=store, session_id="shared")
    try:
        e.compress(json.load(open(spec["messages"])), force=True)
        print(json.dumps({"ok": True}))
    except CompactError as err:
        print(json.dumps({"code": err.code, "path": err.path, "message": str(err)}))
`

// The same race across processes of the three runtimes (Go, Node 20's wasm
// driver, Python): one compaction archives r1, every other fails with the one
// code, invalid_state at /range/id, before returning a result.
func TestConcurrentCompactionsAcrossRuntimes(t *testing.T) {
	root := filepath.Dir(filepath.Dir(must(filepath.Abs("engine_test.go"))))
	dir := t.TempDir()
	barrierDir := filepath.Join(dir, "barrier")
	require.NoError(t, os.Mkdir(barrierDir, 0o755))
	path := filepath.Join(dir, "recall.db")
	ci := os.Getenv("CI") != ""
	var cmds []*exec.Cmd
	var whos []string
	add := func(who string, cmd *exec.Cmd) {
		whos = append(whos, who)
		cmds = append(cmds, cmd)
	}
	spec := func(who string) (string, string) {
		f := filepath.Join(dir, who+".json")
		require.NoError(t, os.WriteFile(f, raceConversation(who, 30), 0o644))
		return f, who
	}
	runtimes := []string{"go"}
	node, nerr := exec.LookPath("node")
	haveNode := nerr == nil && dirExists(filepath.Join(root, "node_modules", "node-sqlite3-wasm"))
	if haveNode {
		runtimes = append(runtimes, "node")
	} else if ci {
		t.Fatal("node or node_modules/node-sqlite3-wasm missing (npm ci)")
	}
	py := pythonFor(root)
	if py != "" {
		runtimes = append(runtimes, "python")
	} else if ci {
		t.Fatal("no python with ctxcompact's dependencies")
	}
	if len(runtimes) < 2 {
		t.Skip("SKIPPED, NOT TESTED: needs node or python beside go")
	}
	n := len(runtimes)
	for _, rt := range runtimes {
		msgs, who := spec(rt)
		js, _ := json.Marshal(map[string]any{"store": path, "dir": barrierDir, "who": who, "n": n, "messages": msgs})
		switch rt {
		case "go":
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), racerEnv+"="+string(js))
			add(rt, cmd)
		case "node":
			script := fmt.Sprintf(nodeRacer, "file://"+filepath.Join(root, "bindings", "js", "index.js"), "file://"+filepath.Join(root, "bindings", "js", "recall.js"))
			add(rt, exec.Command(node, "--input-type=module", "-e", script, string(js)))
		case "python":
			cmd := exec.Command(py, "-c", pythonRacer, string(js))
			cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "bindings", "python", "src"))
			add(rt, cmd)
		}
	}
	outs := make([]strings.Builder, n)
	errs := make([]strings.Builder, n)
	for i, cmd := range cmds {
		cmd.Stdout, cmd.Stderr = &outs[i], &errs[i]
		require.NoError(t, cmd.Start())
	}
	winner := ""
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), "%s: %s", whos[i], errs[i].String())
		got := gjson.Parse(outs[i].String())
		if got.Get("ok").Bool() {
			require.Empty(t, winner, "one wins")
			winner = whos[i]
			continue
		}
		require.Equal(t, "invalid_state", got.Get("code").Str, "%s: %s", whos[i], outs[i].String())
		require.Equal(t, "/range/id", got.Get("path").Str, "%s: %s", whos[i], outs[i].String())
	}
	require.NotEmpty(t, winner)
	st, err := recall.Open(path)
	require.NoError(t, err)
	defer st.Close()
	rs, err := st.Ranges(context.Background(), "shared")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Contains(t, rs[0].Summary, "Summary by "+winner)
	for _, who := range whos {
		hits, _, err := st.Find(context.Background(), "shared", "of "+who+"'s output", 0)
		require.NoError(t, err)
		require.Equal(t, who == winner, len(hits) > 0, "%s's originals are archived iff it won", who)
	}
	t.Logf("%d runtimes raced for r1; %s won, the others failed with invalid_state at /range/id", n, winner)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// pythonFor is a python that imports ctxcompact from the source tree.
func pythonFor(root string) string {
	for _, p := range []string{os.Getenv("CTXCOMPACT_PYTHON"), filepath.Join(root, "bindings", "python", "build", "venv", "bin", "python"), "python3"} {
		if p == "" {
			continue
		}
		cmd := exec.Command(p, "-c", "import ctxcompact.recall, ctxcompact")
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "bindings", "python", "src"))
		if cmd.Run() == nil {
			return p
		}
	}
	return ""
}
