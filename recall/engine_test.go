package recall_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	os.Exit(m.Run())
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
	st, err := recall.Open(s.Store)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	e, err := host.New(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ce, err := host.NewContextEngine(ctx, e, json.RawMessage(losslessConfig), host.ContextEngineOptions{Store: st, SessionID: s.Session})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
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

	// Compressor mode: no tools, the store is not used.
	plain, err := host.NewContextEngine(ctx, e, nil, host.ContextEngineOptions{Store: store, SessionID: "s"})
	require.NoError(t, err)
	require.False(t, plain.Lossless())
	tools, err := plain.ToolSchemas(ctx, "openai")
	require.NoError(t, err)
	require.JSONEq(t, `[]`, string(tools))
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
