package recall_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/host"
	"github.com/ctxcompact/ctxcompact/internal/testtraces"
	"github.com/ctxcompact/ctxcompact/recall"
)

var engine struct {
	once sync.Once
	e    *host.Engine
	err  error
}

func sharedEngine(t testing.TB) *host.Engine {
	t.Helper()
	engine.once.Do(func() { engine.e, engine.err = host.New(context.Background()) })
	require.NoError(t, engine.err)
	return engine.e
}

const losslessConfig = `{"context":{"engine":"lossless"},"model":{"context_length":32000}}`

func lossless(t testing.TB, store host.RecallStore, session string) *host.ContextEngine {
	t.Helper()
	ce, err := host.NewContextEngine(context.Background(), sharedEngine(t), json.RawMessage(losslessConfig),
		host.ContextEngineOptions{Store: store, SessionID: session})
	require.NoError(t, err)
	return ce
}

// traceMessages is the messages of a shared trace, compact.
func traceMessages(t *testing.T, name string) []json.RawMessage {
	data, err := os.ReadFile(testtraces.File(t, name))
	require.NoError(t, err)
	var out []json.RawMessage
	for _, m := range gjson.GetBytes(data, "messages").Array() {
		var b bytes.Buffer // sent compact, as the bindings send them
		require.NoError(t, json.Compact(&b, []byte(m.Raw)))
		out = append(out, json.RawMessage(b.Bytes()))
	}
	require.NotEmpty(t, out)
	return out
}

// join is the JSON array of msgs, their bytes unchanged (json.Marshal would
// escape <, > and & in them).
func join(msgs []json.RawMessage) json.RawMessage {
	return json.RawMessage("[" + string(bytes.Join(asBytes(msgs), []byte(","))) + "]")
}

func asBytes(msgs []json.RawMessage) [][]byte {
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		out[i] = m
	}
	return out
}

// childEnv makes the test binary, re-executed, answer tool calls on a store: a
// fresh process that has only the file.
const childEnv = "CTXC_RECALL_CHILD"

// writerEnv makes the re-executed test binary archive writerRanges ranges into a
// store: "PATH SESSION".
const writerEnv = "CTXC_RECALL_WRITER"

const writerRanges = 15

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	if spec := os.Getenv(writerEnv); spec != "" {
		os.Exit(writer(spec))
	}
	if path := os.Getenv(holderEnv); path != "" {
		os.Exit(holder(path))
	}
	if spec := os.Getenv(loopEnv); spec != "" {
		os.Exit(looper(spec))
	}
	if spec := os.Getenv(racerEnv); spec != "" {
		os.Exit(racer(spec))
	}
	os.Exit(m.Run())
}

// childEngine opens the store at path and a lossless ContextEngine on it with opts
// (their Store set): the start of every re-executed child of these tests. done
// closes the store; a non-zero code means it failed, and said why on stderr.
func childEngine(ctx context.Context, path string, opts host.ContextEngineOptions) (ce *host.ContextEngine, done func(), code int) {
	st, err := recall.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, nil, 2
	}
	e, err := host.New(ctx)
	if err != nil {
		st.Close()
		fmt.Fprintln(os.Stderr, err)
		return nil, nil, 2
	}
	opts.Store = st
	if ce, err = host.NewContextEngine(ctx, e, json.RawMessage(losslessConfig), opts); err != nil {
		st.Close()
		fmt.Fprintln(os.Stderr, err)
		return nil, nil, 2
	}
	return ce, func() { st.Close() }, 0
}

// child runs the tool calls of spec ({"store", "session", "calls": [{name, args}]})
// and prints their answers, a JSON array.
func child(spec string) int {
	ctx := context.Background()
	var s struct {
		Store, Session string
		Calls          []struct {
			Name string
			Args json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ce, done, code := childEngine(ctx, s.Store, host.ContextEngineOptions{SessionID: s.Session})
	if code != 0 {
		return code
	}
	defer done()
	var answers []string
	for _, c := range s.Calls {
		a, err := ce.HandleToolCall(ctx, c.Name, c.Args)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		answers = append(answers, a)
	}
	out, _ := json.Marshal(answers)
	fmt.Println(string(out))
	return 0
}

// inFreshProcess runs the tool calls in a new process of this test binary.
func inFreshProcess(t *testing.T, store, session string, calls ...[2]string) []string {
	t.Helper()
	var cs []map[string]any
	for _, c := range calls {
		cs = append(cs, map[string]any{"name": c[0], "args": json.RawMessage(c[1])})
	}
	spec, _ := json.Marshal(map[string]any{"store": store, "session": session, "calls": cs})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("child: %v: %s", err, ee.Stderr)
	}
	require.NoError(t, err)
	var answers []string
	require.NoError(t, json.Unmarshal(out, &answers), string(out))
	return answers
}

// pathCall is a tool call of the first range with a path argument, and the input
// index of the tool message that answers it.
type pathCall struct {
	path           string
	callAt, result int
}

func hitIDs(hits []core.RecallHit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.ID)
	}
	return out
}

func findPathCall(t *testing.T, input []json.RawMessage, from, to int) pathCall {
	for i := from; i < to; i++ {
		for _, c := range gjson.GetBytes(input[i], "tool_calls").Array() {
			args := gjson.Parse(c.Get("function.arguments").Str)
			path := ""
			for _, k := range []string{"file_path", "path", "notebook_path"} {
				if v := args.Get(k).Str; v != "" {
					path = v
				}
			}
			if path == "" {
				continue
			}
			for j := i + 1; j < to; j++ {
				if gjson.GetBytes(input[j], "tool_call_id").Str == c.Get("id").Str {
					return pathCall{path: path, callAt: i, result: j}
				}
			}
		}
	}
	t.Fatalf("no tool call with a path and its result in messages %d-%d", from, to-1)
	return pathCall{}
}

// The acceptance test of issue 17 in Go: compact a shared trace twice in lossless
// mode, then, from a fresh process on the same store file, find a path of the
// first summarized range with context_search and get its original tool output
// back byte for byte with context_expand.
func TestLosslessTraceTwiceThenRecallFromAFreshProcess(t *testing.T) {
	ctx := context.Background()
	input := traceMessages(t, "claude-code-spotter-4d5611e5-precompact.json")
	path := filepath.Join(t.TempDir(), "recall.db")
	store, err := recall.Open(path)
	require.NoError(t, err)
	defer store.Close()
	ce := lossless(t, store, "session-1")
	require.True(t, ce.Lossless())

	half := len(input) / 2
	first := input[:half]
	r1, err := ce.Compress(ctx, join(first), host.CompressOptions{Force: true})
	require.NoError(t, err)
	require.True(t, r1.Report.Compacted)
	sum1 := r1.Report.Summarized
	summary1 := gjson.GetBytes(r1.Messages[r1.Report.HeadEnd], "content").Str
	require.Contains(t, summary1, fmt.Sprintf("Archived as r1 (messages %d-%d of the conversation before this compaction)", sum1.From, sum1.To-1))
	require.Contains(t, summary1, core.RecallDetailsPrefix)

	// The second compaction sees the first's output and the rest of the trace.
	second := append(append([]json.RawMessage{}, r1.Messages...), input[half:]...)
	r2, err := ce.Compress(ctx, join(second), host.CompressOptions{Force: true})
	require.NoError(t, err)
	require.True(t, r2.Report.Compacted)
	require.Contains(t, gjson.GetBytes(r2.Messages[r2.Report.HeadEnd], "content").Str, "Archived as r2 (")
	ranges, err := store.Ranges(ctx, "session-1")
	require.NoError(t, err)
	require.Len(t, ranges, 2)
	require.Equal(t, []string{"r1", "r2"}, []string{ranges[0].ID, ranges[1].ID})

	// Every archived file path and user request of both ranges is found, and its
	// message comes back as it was.
	checked := 0
	for _, rg := range ranges {
		rows, err := store.Expand(ctx, "session-1", rg.ID)
		require.NoError(t, err)
		for _, row := range rows {
			m := gjson.Parse(row.JSON)
			var queries []string
			for _, c := range m.Get("tool_calls").Array() {
				args := gjson.Parse(c.Get("function.arguments").Str)
				for _, k := range []string{"file_path", "path", "notebook_path"} {
					if v := args.Get(k).Str; v != "" && !strings.ContainsAny(v, "\" \t\n") {
						queries = append(queries, v)
					}
				}
			}
			if row.Role == "user" && m.Get("content").Type == gjson.String {
				words := strings.Fields(strings.ReplaceAll(m.Get("content").Str, `"`, " "))
				queries = append(queries, strings.Join(words[:min(6, len(words))], " "))
			}
			for _, q := range queries {
				if strings.TrimSpace(q) == "" {
					continue
				}
				hits, _, err := store.Find(ctx, "session-1", q, 0)
				require.NoError(t, err)
				require.Contains(t, hitIDs(hits), row.ID, "query %q", q)
				checked++
			}
		}
	}
	require.Greater(t, checked, 5, "paths and requests were checked")
	t.Logf("%d archived paths and requests found by search", checked)

	pc := findPathCall(t, first, sum1.From, sum1.To)
	require.NoError(t, store.Close()) // the parent lets go of the file
	search, _ := json.Marshal(map[string]any{"query": pc.path, "limit": 50})
	expand, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("r1.%d", pc.result)})
	answers := inFreshProcess(t, path, "session-1",
		[2]string{"context_search", string(search)}, [2]string{"context_expand", string(expand)},
		[2]string{"context_expand", `{"id":"r1"}`})

	var hitIDs []string
	for _, h := range gjson.Get(answers[0], "hits").Array() {
		hitIDs = append(hitIDs, h.Get("id").Str)
	}
	require.Contains(t, hitIDs, fmt.Sprintf("r1.%d", pc.callAt), "the call that named %s is found: %s", pc.path, answers[0])
	got := gjson.Get(answers[1], "messages.0")
	require.Equal(t, string(first[pc.result]), got.Raw, "the original tool output, byte for byte")
	require.Equal(t, gjson.GetBytes(first[pc.result], "content").Raw, got.Get("content").Raw)
	require.False(t, gjson.Get(answers[1], "truncated").Bool())
	whole := gjson.Get(answers[2], "messages").Array()
	require.Len(t, whole, len(r1.Archived), "r1 holds every message the first compaction archived")

	// Another session in the same file sees none of it.
	other := inFreshProcess(t, path, "session-2", [2]string{"context_search", string(search)}, [2]string{"context_expand", `{"id":"r1"}`})
	require.Equal(t, int64(0), gjson.Get(other[0], "total").Int())
	require.Contains(t, gjson.Get(other[1], "error").Str, "no archived message or range with id r1")
}

func TestEngineModesAndToolErrors(t *testing.T) {
	ctx := context.Background()
	e := sharedEngine(t)
	store, err := recall.Open("")
	require.NoError(t, err)
	defer store.Close()

	// Compressor mode: the context tools only, the store is not used.
	plain, err := host.NewContextEngine(ctx, e, nil, host.ContextEngineOptions{Store: store, SessionID: "s"})
	require.NoError(t, err)
	require.False(t, plain.Lossless())
	tools, err := plain.ToolSchemas(ctx, "openai")
	require.NoError(t, err)
	require.Equal(t, `["context_status","compact_now"]`, gjson.GetBytes(tools, "#.function.name").Raw)
	ans, err := plain.HandleToolCall(ctx, "context_search", json.RawMessage(`{"query":"x"}`))
	require.NoError(t, err)
	require.Contains(t, gjson.Get(ans, "error").Str, "unknown tool")

	// Lossless mode needs a store and a session id.
	_, err = host.NewContextEngine(ctx, e, json.RawMessage(losslessConfig), host.ContextEngineOptions{SessionID: "s"})
	var ce *core.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "/store", ce.Path)
	_, err = host.NewContextEngine(ctx, e, json.RawMessage(losslessConfig), host.ContextEngineOptions{Store: store})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "/session_id", ce.Path)

	l := lossless(t, store, "s")
	for format, name := range map[string]string{"openai": "0.function.name", "responses": "0.name", "anthropic": "0.name"} {
		tools, err := l.ToolSchemas(ctx, format)
		require.NoError(t, err)
		require.Equal(t, "context_search", gjson.GetBytes(tools, name).Str, format)
		require.Equal(t, int64(4), gjson.GetBytes(tools, "#").Int(), "and the context tools after the recall tools")
	}
	for _, c := range []struct{ name, args, want string }{
		{"context_search", `{}`, "query is required"},
		{"context_search", `"{\"query\": 5}"`, "query is required"},
		{"context_expand", ``, "id is required"},
		{"context_expand", `{"id":"r1"}`, "no archived message or range with id r1"},
		{"context_expand", `"{not json"`, "not valid JSON"},
		{"lcm_grep", `{}`, "unknown tool"},
	} {
		ans, err := l.HandleToolCall(ctx, c.name, json.RawMessage(c.args))
		require.NoError(t, err, c)
		require.Contains(t, gjson.Get(ans, "error").Str, c.want, c)
	}
	// Below the threshold nothing is compacted and nothing archived.
	res, err := l.Compress(ctx, json.RawMessage(`[{"role":"user","content":"hi"}]`), host.CompressOptions{})
	require.NoError(t, err)
	require.False(t, res.Report.Compacted)
	id, _ := store.NextRangeID(ctx, "s")
	require.Equal(t, "r1", id)
}

// writer archives writerRanges ranges of one message into the store, as a
// process of its own.
func writer(spec string) int {
	path, session, _ := strings.Cut(spec, " ")
	st, err := recall.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	if err := archiveMany(st, session, writerRanges); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

func archiveMany(st *recall.Store, session string, n int) error {
	ctx := context.Background()
	for k := 0; k < n; k++ {
		id, err := st.NextRangeID(ctx, session)
		if err != nil {
			return err
		}
		req := fmt.Sprintf(`{"session":%q,"range_id":%q,"report":{"summarized":{"from":0,"to":1}},"archived":[{"index":0,"reason":"summarized","message":{"role":"user","content":"write %d of %s"}}]}`, session, id, k, session)
		out := gjson.ParseBytes(core.Dispatch("recall.archive", []byte(req)))
		var a core.RecallArchive
		if err := json.Unmarshal([]byte(out.Get("result").Raw), &a); err != nil {
			return err
		}
		if err := st.ArchiveOne(ctx, session, a); err != nil {
			return err
		}
	}
	return nil
}

// Writes from several processes to one file are serialized by SQLite's lock (with
// the busy timeout): none is lost, none fails.
func TestProcessesWriteOneStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	st, err := recall.Open(path)
	require.NoError(t, err)
	defer st.Close()
	var cmds []*exec.Cmd
	for _, session := range []string{"p1", "p2"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+path+" "+session)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
		t.Cleanup(func() {
			if errb.Len() > 0 {
				t.Log(errb.String())
			}
		})
	}
	require.NoError(t, archiveMany(st, "parent", writerRanges))
	for _, cmd := range cmds {
		require.NoError(t, cmd.Wait())
	}
	for _, session := range []string{"p1", "p2", "parent"} {
		rs, err := st.Ranges(context.Background(), session)
		require.NoError(t, err)
		require.Len(t, rs, writerRanges, session)
		hits, total, err := st.Find(context.Background(), session, "write", 0)
		require.NoError(t, err)
		require.Equal(t, writerRanges, total, session)
		require.Equal(t, "r15.0", hits[0].ID)
	}
}

// A query the core's bounds refuse (a NUL, 998 words, one 50,000-character word,
// 33 terms, a term of 1,001 characters) is an {"error": ...} answer, never a
// failed tool call, also once the session has more rows than the newest-rows
// window (300), where a search reads the FTS index.
func TestUnboundedQueriesAreErrorAnswers(t *testing.T) {
	ctx := context.Background()
	store, err := recall.Open(filepath.Join(t.TempDir(), "recall.db"))
	require.NoError(t, err)
	defer store.Close()
	require.NoError(t, archiveMany(store, "s", 301))
	l := lossless(t, store, "s")
	words := func(n int) string {
		var ws []string
		for i := range n {
			ws = append(ws, fmt.Sprintf("w%d", i))
		}
		return strings.Join(ws, " ")
	}
	long := func(q string) string { b, _ := json.Marshal(map[string]string{"query": q}); return string(b) }
	for _, c := range []struct{ args, want string }{
		{long("write\x00"), "must not contain a NUL character"},
		{long("wri\x00te of"), "must not contain a NUL character"},
		{long(words(998)), "query is too long"},
		{long(strings.Repeat("w", 50000)), "query is too long"},
		{long(words(33)), "query has 33 terms, at most 32"},
		{long(strings.Repeat("w", 1001)), "a term of the query is too long: 1001 characters, at most 1000"},
	} {
		ans, err := l.HandleToolCall(ctx, "context_search", json.RawMessage(c.args))
		require.NoError(t, err, c.want)
		require.Contains(t, gjson.Get(ans, "error").Str, c.want)
		_, _, err = store.Find(ctx, "s", gjson.Get(c.args, "query").Str, 10)
		var cerr *core.Error
		require.ErrorAs(t, err, &cerr, "the store alone refuses it too")
		require.Equal(t, core.CodeInvalidRequest, cerr.Code)
	}
	ans, err := l.HandleToolCall(ctx, "context_search", json.RawMessage(long(words(31)+" write")))
	require.NoError(t, err)
	require.Equal(t, int64(0), gjson.Get(ans, "total").Int(), ans)
	ans, err = l.HandleToolCall(ctx, "context_search", json.RawMessage(long("write of")))
	require.NoError(t, err)
	require.Equal(t, int64(100), gjson.Get(ans, "total").Int(), ans)
}

// partedStore counts the parts of each archive it passes on to a store, and
// fails the archive at part failAt (from 0) when it is set.
type partedStore struct {
	*recall.Store
	parts  int
	failAt int
}

var errPartFailed = errors.New("the connection dropped")

func (p *partedStore) Archive(ctx context.Context, session string, parts iter.Seq2[core.RecallArchive, error]) error {
	return p.Store.Archive(ctx, session, func(yield func(core.RecallArchive, error) bool) {
		for a, err := range parts {
			if p.failAt > 0 && p.parts == p.failAt {
				yield(a, errPartFailed)
				return
			}
			p.parts++
			if !yield(a, err) {
				return
			}
		}
	})
}

// TestArchiveInPartsIsOneTransaction: a trace's lossless compaction archived in
// parts of 7 input messages writes the rows one part would, in order; a part
// that fails rolls every part back, and the compaction is not recorded.
func TestArchiveInPartsIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	input := join(traceMessages(t, "claude-code-spotter-4d5611e5-precompact.json"))
	compress := func(part, failAt int) (*partedStore, *host.ContextEngine, error) {
		st, err := recall.Open(":memory:")
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		ps := &partedStore{Store: st, failAt: failAt}
		cfg := fmt.Sprintf(`{"context":{"engine":"lossless","archive_part":%d},"model":{"context_length":32000}}`, part)
		ce, err := host.NewContextEngine(ctx, sharedEngine(t), json.RawMessage(cfg), host.ContextEngineOptions{Store: ps, SessionID: "s"})
		require.NoError(t, err)
		_, err = ce.Compress(ctx, input, host.CompressOptions{Force: true})
		return ps, ce, err
	}
	rows := func(st *recall.Store) []recall.Message {
		ms, err := st.Expand(ctx, "s", "r1")
		require.NoError(t, err)
		return ms
	}
	whole, _, err := compress(core.DefaultArchivePart, 0)
	require.NoError(t, err)
	require.Equal(t, 1, whole.parts)
	want := rows(whole.Store)
	require.Greater(t, len(want), 40)

	parted, ce, err := compress(7, 0)
	require.NoError(t, err)
	require.Greater(t, parted.parts, 5, "archived in parts")
	require.Equal(t, want, rows(parted.Store))
	wantRanges, err := whole.Ranges(ctx, "s")
	require.NoError(t, err)
	gotRanges, err := parted.Ranges(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, wantRanges, gotRanges)
	require.Equal(t, 1, ce.Status().CompressionCount)

	failed, ce, err := compress(7, 3)
	require.ErrorIs(t, err, errPartFailed)
	require.Contains(t, err.Error(), "the compaction is not recorded")
	ranges, err := failed.Ranges(ctx, "s")
	require.NoError(t, err)
	require.Empty(t, ranges, "the parts written before the failure are rolled back")
	require.Empty(t, rows(failed.Store))
	require.Equal(t, 0, ce.Status().CompressionCount)
}
