package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/host"
	"github.com/ctxcompact/ctxcompact/internal/pgtest"
	"github.com/ctxcompact/ctxcompact/internal/recalltest"
	"github.com/ctxcompact/ctxcompact/internal/testtraces"
	"github.com/ctxcompact/ctxcompact/recall"
)

// runtimes are the commands that run a Node and a Python script against the
// PostgreSQL store, or the test fails (under CI) or is skipped (naming why).
type runtimes struct {
	node       string
	python     string
	pythonEnv  []string
	root       string
	nodeScript string
}

func needRuntimes(t *testing.T) runtimes {
	t.Helper()
	root := recalltest.Root()
	r := runtimes{root: root}
	missing := func(what string) {
		if os.Getenv("CI") != "" {
			t.Fatalf("cross-runtime PostgreSQL test: %s", what)
		}
		t.Skipf("SKIPPED, NOT TESTED: %s", what)
	}
	node, err := osexec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(root, "node_modules", "pg")); err != nil || serr != nil {
		missing("node with node_modules/pg (npm ci)")
	}
	r.node = node
	py, env := recalltest.Python()
	if py != "" {
		cmd := osexec.Command(py, "-c", "import psycopg")
		cmd.Env = env
		if cmd.Run() != nil {
			py = ""
		}
	}
	if py == "" {
		missing("a python with ctxcompact's dependencies and psycopg (bash bindings/python/test.sh --venv-only)")
	}
	r.python, r.pythonEnv = py, env
	return r
}

// run runs a command in the repository and returns its stdout; a failure fails t.
func (r runtimes) run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := osexec.Command(name, args...)
	cmd.Dir = r.root
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "%s %s:\n%s%s", name, strings.Join(args, " "), out.String(), errb.String())
	return out.String()
}

func (r runtimes) nodeRun(t *testing.T, args ...string) string {
	return r.run(t, os.Environ(), r.node, args...)
}

func (r runtimes) pythonRun(t *testing.T, args ...string) string {
	return r.run(t, r.pythonEnv, r.python, args...)
}

// Go, Node and Python write one PostgreSQL database (a third of the fixture's
// sessions each); then each runtime reads all of it and gives the fixture's answers.
func TestEveryRuntimeWritesOneDatabaseAndReadsTheOthers(t *testing.T) {
	rt := needRuntimes(t)
	f := recalltest.Load(t)
	url := pgtest.Database(t)
	names := f.Names()
	var byGo, byNode, byPython []string
	for i, s := range names {
		switch i % 3 {
		case 0:
			byGo = append(byGo, s)
		case 1:
			byNode = append(byNode, s)
		default:
			byPython = append(byPython, s)
		}
	}
	require.NotEmpty(t, byPython)
	s, err := Open(bg, url)
	require.NoError(t, err)
	defer s.Close()
	f.Write(t, s, byGo...)
	rt.nodeRun(t, append([]string{"bindings/js/test/recall-stores.mjs", "write", url}, byNode...)...)
	rt.pythonRun(t, append([]string{"bindings/python/tests/recall_stores.py", "write", url}, byPython...)...)

	f.Check(t, "go reading all three", s)
	require.Contains(t, rt.nodeRun(t, "bindings/js/test/recall-stores.mjs", "check", url), "ok")
	require.Contains(t, rt.pythonRun(t, "bindings/python/tests/recall_stores.py", "check", url), "ok")
	sessions, err := s.Sessions(bg)
	require.NoError(t, err)
	require.Equal(t, names, sessions)
}

// A session a Go lossless engine archives to PostgreSQL (a real compaction of a
// shared trace) is searched from Node and expanded from Python: the same hits as
// Go's, and the originals byte for byte.
func TestArchivedFromGoSearchedFromNodeExpandedFromPython(t *testing.T) {
	rt := needRuntimes(t)
	ctx := context.Background()
	url := pgtest.Database(t)
	store, err := Open(ctx, url)
	require.NoError(t, err)
	defer store.Close()
	e, err := host.New(ctx)
	require.NoError(t, err)
	defer e.Close(ctx)
	ce, err := host.NewContextEngine(ctx, e, json.RawMessage(`{"context":{"engine":"lossless"},"model":{"context_length":32000}}`),
		host.ContextEngineOptions{Store: store, SessionID: "fleet-7"})
	require.NoError(t, err)
	data, err := os.ReadFile(testtraces.File(t, "claude-code-spotter-4d5611e5-precompact.json"))
	require.NoError(t, err)
	var input []json.RawMessage
	for _, m := range gjson.GetBytes(data, "messages").Array() {
		var b bytes.Buffer
		require.NoError(t, json.Compact(&b, []byte(m.Raw)))
		input = append(input, b.Bytes())
	}
	input = input[:len(input)/2]
	res, err := ce.Compress(ctx, json.RawMessage("["+string(bytes.Join(func() [][]byte {
		out := make([][]byte, len(input))
		for i, m := range input {
			out[i] = m
		}
		return out
	}(), []byte(",")))+"]"), host.CompressOptions{Force: true})
	require.NoError(t, err)
	require.True(t, res.Report.Compacted)
	require.Contains(t, gjson.GetBytes(res.Messages[res.Report.HeadEnd], "content").Str, "Archived as r1 (")

	// What Go finds for a path the archived range names.
	rows, err := store.Expand(ctx, "fleet-7", "r1")
	require.NoError(t, err)
	require.Len(t, rows, len(res.Archived))
	query := ""
	for _, row := range rows {
		for _, c := range gjson.Get(row.JSON, "tool_calls").Array() {
			if p := gjson.Parse(c.Get("function.arguments").Str).Get("file_path").Str; p != "" && !strings.ContainsAny(p, " \"") {
				query = p
			}
		}
	}
	require.NotEmpty(t, query, "the range has a tool call with a file_path")
	hits, total, err := store.Find(ctx, "fleet-7", query, 10)
	require.NoError(t, err)
	require.NotEmpty(t, hits)
	var goIDs []string
	for _, h := range hits {
		goIDs = append(goIDs, h.ID)
	}

	node := rt.nodeRun(t, "--input-type=module", "-e", fmt.Sprintf(`
import { openRecallStore } from "./bindings/js/recall.js";
const s = await openRecallStore(%q);
const r = await s.search("fleet-7", %q, { limit: 10 });
await s.close();
console.log(JSON.stringify({ ids: r.hits.map((h) => h.id), total: r.total }));`, url, query))
	require.Equal(t, goIDs, stringsOf(gjson.Get(node, "ids")), "Node finds what Go finds: %s", node)
	require.Equal(t, int64(total), gjson.Get(node, "total").Int())

	py := rt.pythonRun(t, "-c", fmt.Sprintf(`
import json
from ctxcompact.recall import open_store
s = open_store(%q)
print(json.dumps(s.expand_rows("fleet-7", "r1")))
s.close()`, url))
	var expanded []string
	require.NoError(t, json.Unmarshal([]byte(py), &expanded))
	require.Len(t, expanded, len(res.Archived))
	for i, a := range res.Archived {
		require.Equal(t, string(a.Message), expanded[i], "Python expands message %d of r1 byte for byte", a.Index)
	}
	require.Equal(t, string(input[res.Archived[0].Index]), expanded[0], "the original input message")

	// The agent's own tool answers come from PostgreSQL too.
	answer, err := ce.HandleToolCall(ctx, "context_search", json.RawMessage(fmt.Sprintf(`{"query":%q}`, query)))
	require.NoError(t, err)
	want, err := recall.SearchResult(ctx, store, "fleet-7", query, 10)
	require.NoError(t, err)
	require.JSONEq(t, want, answer)
}

func stringsOf(r gjson.Result) []string {
	var out []string
	for _, v := range r.Array() {
		out = append(out, v.Str)
	}
	return out
}
