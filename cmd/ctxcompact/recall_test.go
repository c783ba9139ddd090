package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/internal/pgtest"
	"github.com/ctxcompact/ctxcompact/recall"
)

// recallStoreFile makes a store file with one range in session s1 and one in s2.
func recallStoreFile(t *testing.T) (path, toolJSON string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "recall.db")
	st, err := recall.Open(path)
	require.NoError(t, err)
	defer st.Close()
	toolJSON = `{"role":"tool","tool_call_id":"c1","content":"caf\u00e9 <ok> & src/app.py:3: ZeroDivisionError"}`
	call := `{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"src/app.py\"}"}}]}`
	for _, s := range []struct{ session, text string }{{"s1", "Please fix src/app.py"}, {"s2", "Something else in lib/x.go"}} {
		user, _ := json.Marshal(map[string]string{"role": "user", "content": s.text})
		req := fmt.Sprintf(`{"session":%q,"range_id":"r1","report":{"summarized":{"from":1,"to":4}},"archived":[`+
			`{"index":1,"reason":"summarized","message":%s},{"index":2,"reason":"summarized","message":%s},{"index":3,"reason":"summarized","message":%s}],`+
			`"summary_message":{"role":"user","content":"[CONTEXT COMPACTION] the user asked for a fix"}}`, s.session, user, call, toolJSON)
		out := gjson.ParseBytes(core.Dispatch("recall.archive", []byte(req)))
		require.False(t, out.Get("error").Exists(), out.Raw)
		var a core.RecallArchive
		require.NoError(t, json.Unmarshal([]byte(out.Get("result").Raw), &a))
		require.NoError(t, st.ArchiveOne(context.Background(), s.session, a))
	}
	return path, toolJSON
}

func TestRecallCommand(t *testing.T) {
	path, toolJSON := recallStoreFile(t)

	// A fresh process reads the file.
	code, out, errs := cliExec(t, nil, "recall", "search", "--store", path, "--session", "s1", "src/app.py", "--json")
	require.Equal(t, 0, code, errs)
	res := gjson.Parse(out)
	require.Equal(t, int64(3), res.Get("total").Int())
	require.Equal(t, "r1.3", res.Get("hits.0.id").Str, "newest first")
	code, out, errs = cliExec(t, nil, "recall", "expand", "--store", path, "--session", "s1", "r1.3", "--json")
	require.Equal(t, 0, code, errs)
	require.Equal(t, toolJSON, gjson.Get(out, "messages.0").Raw, "byte for byte")

	// For a person: a line per hit, the snippet below; messages under headers.
	code, out, errs = cliRun(t, "", "recall", "search", "--store", path, "--session", "s1", "--limit", "2", "ZeroDivisionError")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `1 of 1 hits for "ZeroDivisionError"`)
	require.Contains(t, out, "r1.3\ttool\tmessage 3 of range r1\n")
	require.Contains(t, out, "src/app.py:3: ZeroDivisionError")
	code, out, errs = cliRun(t, "", "recall", "expand", "--store", path, "--session", "s1", "r1")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "== r1.1 (user, summarized, message 1)\n")
	require.Contains(t, out, "== r1.3 (tool, summarized, message 3)\n"+toolJSON+"\n")
	require.NotContains(t, out, "CONTEXT COMPACTION", "a range expands to its originals, not its summary")
	code, out, _ = cliRun(t, "", "recall", "expand", "--store", path, "--session", "s1", "r1", "--max-tokens", "30", "--json")
	require.Equal(t, 0, code)
	require.True(t, gjson.Get(out, "truncated").Bool())

	// Sessions are separate.
	code, out, _ = cliRun(t, "", "recall", "search", "--store", path, "--session", "s2", "src/app.py", "--json")
	require.Equal(t, 0, code)
	require.Equal(t, int64(2), gjson.Get(out, "total").Int(), "s2's own call and output, not s1's request")
	code, out, _ = cliRun(t, "", "recall", "search", "--store", path, "--session", "s2", "Please fix", "--json")
	require.Equal(t, 0, code)
	require.Equal(t, int64(0), gjson.Get(out, "total").Int())
	code, out, _ = cliRun(t, "", "recall", "sessions", "--store", path, "--json")
	require.Equal(t, 0, code)
	require.Equal(t, "[\"s1\",\"s2\"]\n", out)

	for _, bad := range [][]string{
		{"recall"},
		{"recall", "grep", "--store", path},
		{"recall", "search", "--session", "s1", "x"},
		{"recall", "search", "--store", filepath.Join(t.TempDir(), "missing.db"), "--session", "s1", "x"},
		{"recall", "search", "--store", path, "x"},
		{"recall", "search", "--store", path, "--session", "s1"},
		{"recall", "search", "--store", path, "--session", "s1", "--limit", "0", "x"},
		{"recall", "expand", "--store", path, "--session", "s1", "r9"},
		{"recall", "expand", "--store", path, "--session", "s1", "r1", "r2"},
	} {
		code, _, errs := cliRun(t, "", bad...)
		require.Equal(t, 1, code, "%v", bad)
		require.True(t, strings.HasPrefix(strings.TrimSpace(errs[strings.LastIndex(strings.TrimSpace(errs), "\n")+1:]), "ctxcompact"), "%v: %s", bad, errs)
	}
	_, _, errs = cliRun(t, "", "recall", "expand", "--store", path, "--session", "s1", "r9")
	require.Contains(t, errs, "no archived message or range with id r9")
}

// `recall export` of a SQLite store, then `recall import` into PostgreSQL (twice:
// the second changes nothing): the PostgreSQL store answers as the file did, and its
// export is the file's.
func TestRecallExportImportToPostgres(t *testing.T) {
	path, toolJSON := recallStoreFile(t)
	url := pgtest.Database(t)
	code, exported, errs := cliRun(t, "", "recall", "export", "--store", "sqlite:"+path)
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "exported 2 ranges, 8 rows")
	code, _, errs = cliRun(t, exported, "recall", "import", "--store", url, "-")
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "imported 2 ranges, 8 rows; 0 ranges were there already")
	file := filepath.Join(t.TempDir(), "export.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(exported), 0o644))
	code, _, errs = cliRun(t, "", "recall", "import", "--store", url, file)
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "imported 0 ranges, 0 rows; 2 ranges were there already")

	t.Setenv(recall.EnvURL, url) // no --store: the environment's
	code, out, errs := cliRun(t, "", "recall", "search", "--session", "s1", "src/app.py", "--json")
	require.Equal(t, 0, code, errs)
	_, want, _ := cliRun(t, "", "recall", "search", "--store", path, "--session", "s1", "src/app.py", "--json")
	require.Equal(t, want, out)
	code, out, errs = cliRun(t, "", "recall", "expand", "--session", "s1", "r1.3", "--json")
	require.Equal(t, 0, code, errs)
	require.Equal(t, toolJSON, gjson.Get(out, "messages.0").Raw, "byte for byte")
	code, again, errs := cliRun(t, "", "recall", "export")
	require.Equal(t, 0, code, errs)
	require.Equal(t, exported, again)
	code, out, _ = cliRun(t, "", "recall", "sessions")
	require.Equal(t, 0, code)
	require.Equal(t, "s1\t1 ranges\ns2\t1 ranges\n", out)
}
