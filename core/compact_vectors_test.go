package core

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The compaction vectors are generated: the requests are scenarios written here,
// the wanted results are what the core answers, reviewed when they change and
// pinned by TestCompactVectorsUpToDate. Each scenario's meaning is asserted
// separately by the tests in compact_test.go, so a vector is never only
// "whatever the code did". Regenerate with:
//
//	go test ./core -run TestCompactVectorsUpToDate -update
var update = flag.Bool("update", false, "rewrite generated vector files in testdata/")

// Builders for readable scenarios.
func sys(text string) map[string]any  { return map[string]any{"role": "system", "content": text} }
func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }
func say(text string) map[string]any  { return map[string]any{"role": "assistant", "content": text} }
func result(id, text string) map[string]any {
	return map[string]any{"role": "tool", "tool_call_id": id, "content": text}
}

// calls is an assistant message making parallel calls: name, id, args (JSON) triples.
func calls(text any, triples ...string) map[string]any {
	var tc []any
	for i := 0; i+2 < len(triples); i += 3 {
		tc = append(tc, map[string]any{"id": triples[i+1], "type": "function",
			"function": map[string]any{"name": triples[i], "arguments": triples[i+2]}})
	}
	return map[string]any{"role": "assistant", "content": text, "tool_calls": tc}
}

func args(kv ...string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// code returns about n characters of plausible Python source.
func code(module string, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "def %s_handler_%d(request, db):\n    item = db.query(Item).filter(Item.id == request.id).first()\n    if item is None:\n        raise HTTPException(status_code=404, detail=\"%s %d not found\")\n    return item\n\n", module, i, module, i)
	}
	return b.String()[:n]
}

// workedSession is the worked example of docs/DESIGN.md §8: a coding session that sets up a
// FastAPI project, runs pytest (8 passed, 2 failed), then fixes the tests.
func workedSession() []any {
	pytest := "============================= test session starts ==============================\ncollected 10 items\n\ntests/test_main.py ........FF                                            [100%]\n\n=================================== FAILURES ===================================\n" +
		code("trace", 4200) + "\nFAILED tests/test_main.py::test_create_item_duplicate - AssertionError: assert 500 == 409\nFAILED tests/test_main.py::test_delete_missing_item - AssertionError: assert 500 == 404\n========================= 8 passed, 2 failed in 0.84s =========================="
	m := []any{
		sys("You are a coding agent. You work in the user's repository with the terminal, read_file, write_file and patch tools. Keep changes small and run the tests after each change."),
		user("Help me set up a FastAPI project with SQLite, CRUD endpoints for items, and tests."),
		calls("I'll look at the repository first.", "terminal", "call_01", args("command", "ls -la")),
		result("call_01", "total 8\ndrwxr-xr-x 2 dev dev 4096 .\ndrwxr-xr-x 9 dev dev 4096 ..\n-rw-r--r-- 1 dev dev 52 README.md"),
	}
	m = append(m, say("The repository is empty apart from a README. I'll create a virtualenv, install FastAPI, SQLAlchemy and pytest, then write the app package and its tests."))
	step := 2
	add := func(name, a, out string) {
		id := fmt.Sprintf("call_%02d", step)
		step++
		m = append(m, calls(nil, name, id, a), result(id, out))
	}
	add("terminal", args("command", "python -m venv .venv && . .venv/bin/activate && pip install fastapi uvicorn sqlalchemy pytest httpx"), "Collecting fastapi\n"+code("pip", 40000)+"\nSuccessfully installed fastapi-0.115.0 uvicorn-0.30.6 sqlalchemy-2.0.35 pytest-8.3.3 httpx-0.27.2")
	for _, f := range []string{"app/__init__.py", "app/database.py", "app/models.py", "app/schemas.py", "app/crud.py", "app/main.py"} {
		add("write_file", args("path", f, "content", code(strings.TrimSuffix(f[4:], ".py"), 28000)), "Wrote 28000 bytes to "+f)
	}
	add("read_file", args("path", "app/models.py"), code("models", 28000))
	add("write_file", args("path", "tests/test_main.py", "content", code("test", 36000)), "Wrote 36000 bytes to tests/test_main.py")
	add("terminal", args("command", "pytest -q"), pytest)
	// 25: the tail starts here. Its turns total just under the 30,000-token tail
	// budget of a 200K window (with the pytest output before them it would be over),
	// so the budget places it, and it matches the 20-message floor.
	m = append(m, user("Fix the failing tests"))
	add("read_file", args("path", "tests/test_main.py"), code("test", 50000))
	m = append(m, say("8 of 10 tests pass. The tests expect 409 on a duplicate name and 404 on deleting a missing item. I'll handle IntegrityError in crud.create_item and return 404 from the delete endpoint."))
	add("patch", args("path", "app/crud.py", "diff", "@@ create_item @@\n+    except IntegrityError:\n+        db.rollback()\n+        raise DuplicateItem(item.name)"), "Patched app/crud.py (1 hunk)")
	add("patch", args("path", "app/main.py", "diff", "@@ delete_item @@\n+    if not crud.delete_item(db, item_id):\n+        raise HTTPException(status_code=404)"), "Patched app/main.py (1 hunk)")
	add("terminal", args("command", "pytest -q"), "..........                                                               [100%]\n10 passed in 0.79s")
	m = append(m, say("All 10 tests pass now."))
	m = append(m, user("Great, also add error handling"))
	add("read_file", args("path", "app/main.py"), code("main", 65800))
	m = append(m, say("I'll add exception handlers for DuplicateItem and SQLAlchemyError and structured error bodies."))
	add("patch", args("path", "app/main.py", "diff", "@@ handlers @@\n+@app.exception_handler(DuplicateItem)\n+async def duplicate_handler(request, exc):\n+    return JSONResponse(status_code=409, content={\"error\": str(exc)})"), "Patched app/main.py (1 hunk)")
	add("terminal", args("command", "pytest -q"), "..........                                                               [100%]\n10 passed in 0.81s")
	m = append(m, say("Error handling is in place: 409 for duplicates, 404 for missing items, 500 with a logged id for database errors. Tests still pass."))
	return m
}

// toolTurn is an assistant call and its result.
func toolTurn(id, name, a, out string) []any {
	return []any{calls(nil, name, id, a), result(id, out)}
}

func cat(parts ...any) []any {
	var out []any
	for _, p := range parts {
		if list, ok := p.([]any); ok {
			out = append(out, list...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// A 2,000-token window: threshold 1,500 (small-context floor), tail budget 300, and
// a floor of 4 tail messages, so short sessions have a middle to summarize.
var tinyWindow = map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 4}}

// smallSession is a short coding session for boundary scenarios: system, a first
// exchange, tool turns with 800-character outputs, then a final exchange.
func smallSession(turns int) []any {
	m := []any{sys("You are a coding agent."), user("Refactor the parser module."), say("I'll start by reading the files.")}
	for i := 0; i < turns; i++ {
		id := fmt.Sprintf("t%d", i)
		m = append(m, toolTurn(id, "read_file", args("path", fmt.Sprintf("src/parser_%d.py", i)), code(fmt.Sprintf("parser%d", i), 800))...)
	}
	return append(m, say("The parser is split into a lexer and a grammar now."), user("Now add tests for the lexer."))
}

// Anthropic Messages builders: content blocks, tool_use / tool_result.
func text(t string) map[string]any { return map[string]any{"type": "text", "text": t} }
func toolUse(id, name, path string) map[string]any {
	return map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{"file_path": path}}
}
func toolResult(id, out string) map[string]any {
	return map[string]any{"type": "tool_result", "tool_use_id": id, "content": out}
}
func turn(role string, blocks ...any) map[string]any {
	return map[string]any{"role": role, "content": blocks}
}

// anthropicSession is a short Claude-style session: a request, parallel Read
// calls answered in one user turn, more reads, then a final exchange.
func anthropicSession(turns, size int) []any {
	m := []any{turn("user", text("Refactor the parser module.")),
		turn("assistant", text("Reading both halves."), toolUse("r0", "Read", "src/lexer.py"), toolUse("r1", "Read", "src/grammar.py")),
		turn("user", toolResult("r0", code("lexer", 900)), toolResult("r1", code("grammar", 900)))}
	for i := 2; i < turns+2; i++ {
		id := fmt.Sprintf("r%d", i)
		m = append(m, turn("assistant", toolUse(id, "Read", fmt.Sprintf("src/part_%d.py", i))), turn("user", toolResult(id, code(fmt.Sprintf("part%d", i), size))))
	}
	return append(m, turn("assistant", text("The parser is split into a lexer and a grammar now.")), user("Now add tests for the lexer."))
}

type genCase struct {
	name    string
	request map[string]any
}

func compactBeginCases() []genCase {
	worked := workedSession()
	parallelHead := cat(sys("You are a coding agent."), user("Check the three configs."),
		calls("Reading all three at once.", "read_file", "p1", args("path", "a.toml"), "read_file", "p2", args("path", "b.toml"), "read_file", "p3", args("path", "c.toml")),
		result("p1", code("a", 300)), result("p2", code("b", 300)), result("p3", code("c", 300)),
		smallSession(6)[3:])
	s := smallSession(6)
	parallelTail := cat(s[:len(s)-2],
		calls("Running the linters in parallel.", "terminal", "q1", args("command", "ruff check src"), "terminal", "q2", args("command", "mypy src")),
		result("q1", code("ruff", 500)), result("q2", code("mypy", 500)),
		say("Both linters pass."), user("Ship it."))
	orphans := cat(smallSession(6), result("ghost", "a result whose call was never recorded"),
		calls(nil, "terminal", "lost", args("command", "pytest")), user("Did the tests pass?"))
	tailStartsWithAssistant := cat(smallSession(6)[:len(smallSession(6))-2], toolTurn("z1", "terminal", args("command", "make"), "ok"), say("Built."))
	previous := cat(sys("You are a coding agent."), user("Refactor the parser module."), say("I'll start by reading the files."),
		user(SummaryPrefix+" Earlier turns of this conversation (messages 3–20 of the original) were compacted to save context space. The summary below replaces them; the turns after it are verbatim.\n\n<summary>\n## Goal\nRefactor the parser.\n## Progress (Done / In Progress / Blocked)\n- In Progress: splitting the lexer out of src/parser.py\n</summary>"),
		smallSession(6)[3:])
	hugeRequest := cat(smallSession(4)[:len(smallSession(4))-1], user("Please apply this spec:\n"+code("spec", 8000)))
	fittingRequest := cat(smallSession(4)[:len(smallSession(4))-1], user("Please apply this spec:\n"+code("spec", 2400)))
	manyOutputs := []any{sys("You are a coding agent."), user("Audit every module.")}
	for i := 0; i < 20; i++ {
		manyOutputs = append(manyOutputs, toolTurn(fmt.Sprintf("m%d", i), "read_file", args("path", fmt.Sprintf("pkg/mod%02d.go", i)), code(fmt.Sprintf("mod%d", i), 10000))...)
	}
	manyOutputs = append(manyOutputs, say("All 20 modules read."), user("Summarize the audit."))
	manyNotes := []any{sys("You are a coding agent."), user("Draft the design notes."), say("Starting.")}
	for i := 0; i < 20; i++ {
		manyNotes = append(manyNotes, user(fmt.Sprintf("Section %d, please.", i)), say(code(fmt.Sprintf("note%d", i), 10000)))
	}
	lastUserOnly := map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 1}}
	k32 := map[string]any{"model": map[string]any{"context_length": 32000}}
	k32floor := map[string]any{"model": map[string]any{"context_length": 32000}, "compression": map[string]any{"protect_last_n": 20}}
	return []genCase{
		{"worked-example-45-messages-builtin", map[string]any{"messages": worked, "force": true, "summarizer": "builtin"}},
		{"worked-example-45-messages-summary-request", map[string]any{"messages": worked, "force": true}},
		{"below-threshold-is-unchanged", map[string]any{"messages": smallSession(2)}},
		{"below-threshold-as-refs", map[string]any{"messages": smallSession(2), "output": "refs"}},
		{"disabled-is-unchanged", map[string]any{"messages": smallSession(6), "config": map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"enabled": false, "protect_last_n": 4}}}},
		{"reported-prompt-tokens-trigger", map[string]any{"messages": smallSession(6), "prompt_tokens": 1500, "config": tinyWindow, "summarizer": "builtin"}},
		{"estimate-triggers-without-force", map[string]any{"messages": smallSession(8), "config": tinyWindow, "summarizer": "builtin"}},
		{"refs-output", map[string]any{"messages": smallSession(6), "config": tinyWindow, "force": true, "summarizer": "builtin", "output": "refs"}},
		{"archive-id-names-the-range", map[string]any{"messages": smallSession(6), "config": tinyWindow, "force": true, "summarizer": "builtin", "archive_id": "r2"}},
		{"parallel-calls-at-head-boundary", map[string]any{"messages": parallelHead, "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"parallel-calls-at-tail-boundary", map[string]any{"messages": parallelTail, "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"pre-existing-orphans-repaired", map[string]any{"messages": orphans, "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"summary-merged-when-no-role-fits", map[string]any{"messages": cat(smallSession(6)[:15], say(code("final", 1600)), user("Now add tests for the lexer.")), "config": lastUserOnly, "force": true, "summarizer": "builtin"}},
		{"summary-as-user-before-assistant-tail", map[string]any{"messages": tailStartsWithAssistant, "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"iterative-update-of-previous-summary", map[string]any{"messages": previous, "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"iterative-summary-request", map[string]any{"messages": previous, "config": tinyWindow, "force": true}},
		{"newest-request-too-big-goes-into-summary", map[string]any{"messages": hugeRequest, "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"newest-request-that-fits-stays-in-the-tail", map[string]any{"messages": fittingRequest, "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"count-floor-kept-with-outputs-pruned-32k", map[string]any{"messages": manyOutputs, "config": k32floor, "summarizer": "builtin"}},
		{"count-floor-yields-to-fit-32k", map[string]any{"messages": manyNotes, "config": k32floor, "summarizer": "builtin"}},
		{"small-window-tail-rule-32k", map[string]any{"messages": manyOutputs, "config": k32, "summarizer": "builtin"}},
		{"anthropic-layout-with-system", map[string]any{"messages": anthropicSession(6, 800), "system": "You are Claude Code.", "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"anthropic-layout-system-blocks-as-refs", map[string]any{"messages": anthropicSession(6, 800), "system": []any{text("You are Claude Code.")}, "config": tinyWindow, "force": true, "summarizer": "builtin", "output": "refs"}},
		{"anthropic-layout-detected-from-blocks", map[string]any{"messages": anthropicSession(6, 800), "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"anthropic-long-results-pruned-in-place", map[string]any{"messages": anthropicSession(6, 2400), "format": "anthropic", "config": map[string]any{"model": map[string]any{"context_length": 8000}, "compression": map[string]any{"protect_last_n": 8}}, "force": true, "summarizer": "builtin"}},
		{"anthropic-orphan-and-missing-results-repaired", map[string]any{"messages": cat(anthropicSession(6, 800)[:len(anthropicSession(6, 800))-2],
			turn("assistant", toolUse("x1", "Read", "a.py"), toolUse("x2", "Read", "b.py")), turn("user", toolResult("x1", "ok"), toolResult("ghost", "stray")),
			turn("assistant", toolUse("y1", "Bash", "make")), user("Did it build?")), "config": tinyWindow, "force": true, "summarizer": "builtin"}},
		{"anthropic-summary-request", map[string]any{"messages": anthropicSession(6, 800), "system": "You are Claude Code.", "config": tinyWindow, "force": true}},
		{"smaller-summarizer-window-bounds-the-request", map[string]any{"messages": worked, "force": true, "config": map[string]any{"compression": map[string]any{"summary_context_length": 8000}}}},
		{"instructions-and-focus-reach-the-summary-request", map[string]any{"messages": smallSession(6), "force": true, "focus": "parser_3",
			"config": map[string]any{"model": map[string]any{"context_length": 2000}, "compression": map[string]any{"protect_last_n": 4, "instructions": "Keep every file path and the exact error text."}}}},
		{"builtin-summary-keeps-the-focus", map[string]any{"messages": smallSession(6), "config": tinyWindow, "force": true, "summarizer": "builtin", "focus": "parser_3"}},
	}
}

func compactErrorCases() []genCase {
	return []genCase{
		{"rejects-non-array-messages", map[string]any{"messages": map[string]any{}}},
		{"rejects-missing-messages", map[string]any{}},
		{"rejects-unknown-role", map[string]any{"messages": []any{user("hi"), map[string]any{"role": "robot", "content": "x"}}}},
		{"rejects-bad-content-type", map[string]any{"messages": []any{map[string]any{"role": "user", "content": 42}}}},
		{"rejects-bad-tool-calls", map[string]any{"messages": []any{map[string]any{"role": "assistant", "tool_calls": "f()"}}}},
		{"rejects-bad-config", map[string]any{"messages": []any{}, "config": map[string]any{"compression": map[string]any{"protect_first_n": "3"}}}},
		{"rejects-bad-summarizer", map[string]any{"messages": []any{}, "summarizer": "gpt"}},
		{"rejects-bad-force", map[string]any{"messages": []any{}, "force": "yes"}},
		{"rejects-non-string-focus", map[string]any{"messages": []any{}, "focus": 7}},
		{"rejects-overlong-instructions", map[string]any{"messages": []any{}, "config": map[string]any{"compression": map[string]any{"instructions": strings.Repeat("Keep paths. ", 700)}}}},
		{"rejects-bad-output", map[string]any{"messages": []any{}, "output": "ids"}},
		{"rejects-unknown-format", map[string]any{"messages": []any{}, "format": "gemini-x"}},
		{"rejects-top-level-system-in-openai-layout", map[string]any{"messages": []any{user("hi")}, "format": "openai", "system": "s"}},
		{"rejects-non-string-system", map[string]any{"messages": []any{user("hi")}, "system": 42}},
		{"rejects-system-role-in-anthropic-layout", map[string]any{"messages": []any{sys("s"), user("hi")}, "format": "anthropic"}},
	}
}

// call runs an op on a request map and returns the parsed response.
func callOp(t *testing.T, op string, req map[string]any) (result json.RawMessage, e *Error) {
	t.Helper()
	body := map[string]any{"op": op}
	for k, v := range req {
		body[k] = v
	}
	env, err := marshal(body) // no HTML escaping: raw messages must reach Call as they are
	require.NoError(t, err)
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	require.NoError(t, json.Unmarshal(Call(env), &resp))
	return resp.Result, resp.Error
}

type genSuite struct {
	Comment string       `json:"_comment"`
	Op      string       `json:"op"`
	Cases   []genCaseOut `json:"cases"`
}

type genCaseOut struct {
	Name    string         `json:"name"`
	Request map[string]any `json:"request"`
	Want    map[string]any `json:"want"`
}

func want(t *testing.T, op string, req map[string]any) map[string]any {
	res, e := callOp(t, op, req)
	if e != nil {
		return map[string]any{"error": map[string]any{"code": e.Code, "path": e.Path}}
	}
	return map[string]any{"result": res}
}

func generateCompactSuites(t *testing.T) map[string]genSuite {
	begin := genSuite{Op: "compact.begin", Comment: "Generated by core/compact_vectors_test.go (go test ./core -run TestCompactVectorsUpToDate -update): compaction scenarios (docs/DESIGN.md §8) — the 45-message worked example, triggers, parallel tool calls at the head and tail boundaries, pre-existing orphans, the summary's role or merge, iterative summaries, the active request carried in the summary, the protect_last_n floor yielding to fit a 32K window, refs output, and bad input. The meaning of each case is asserted in core/compact_test.go."}
	for _, c := range compactBeginCases() {
		begin.Cases = append(begin.Cases, genCaseOut{c.name, c.request, want(t, "compact.begin", c.request)})
	}
	for _, c := range compactErrorCases() {
		begin.Cases = append(begin.Cases, genCaseOut{c.name, c.request, want(t, "compact.begin", c.request)})
	}
	for _, c := range geminiBeginCases() {
		begin.Cases = append(begin.Cases, genCaseOut{c.name, c.request, want(t, "compact.begin", c.request)})
	}
	for _, c := range responsesBeginCases() { // format_responses_test.go
		begin.Cases = append(begin.Cases, genCaseOut{c.name, c.request, want(t, "compact.begin", c.request)})
	}

	finish := genSuite{Op: "compact.finish", Comment: "Generated like compact.begin.json: compact.begin is run on each request to get its state; these cases finish it with a summary, an error, an empty summary, or a state that does not belong to the request."}
	stateOf := func(req map[string]any) string {
		res, e := callOp(t, "compact.begin", req)
		require.Nil(t, e)
		var r CompactResult
		require.NoError(t, json.Unmarshal(res, &r))
		require.False(t, r.Done)
		return r.State
	}
	with := func(req map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range req {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	small := map[string]any{"messages": smallSession(6), "config": tinyWindow, "force": true}
	st := stateOf(small)
	workedReq := map[string]any{"messages": workedSession(), "force": true}
	for _, c := range []genCase{
		{"worked-example-with-host-summary", with(workedReq, "state", stateOf(workedReq), "summary", "## Goal\nSet up a FastAPI project with SQLite, CRUD endpoints and tests.\n## Progress (Done / In Progress / Blocked)\n- Done: app/ package (database, models, schemas, crud, main) and tests/test_main.py\n- In Progress: 8 of 10 tests pass; test_create_item_duplicate and test_delete_missing_item fail with 500\n## Next Steps\n- Fix the two failing tests")},
		{"host-summary", with(small, "state", st, "summary", "## Goal\nRefactor the parser module into a lexer and a grammar.")},
		{"host-summary-as-refs", with(small, "state", st, "summary", "## Goal\nRefactor the parser.", "output", "refs")},
		{"summarizer-error-string-uses-fallback", with(small, "state", st, "error", "context_length_exceeded: the summary model's window is 8192 tokens")},
		{"summarizer-error-object-uses-fallback", with(small, "state", st, "error", map[string]any{"code": "timeout", "message": "no answer in 60s"})},
		{"summarizer-too-long-code-uses-fallback", with(small, "state", st, "error", map[string]any{"code": "too_long", "message": "context_length_exceeded"})},
		{"summarizer-cancelled-code-without-message", with(small, "state", st, "error", map[string]any{"code": "cancelled"})},
		{"rejects-unknown-error-code", with(small, "state", st, "error", map[string]any{"code": "oops", "message": "x"})},
		{"rejects-non-string-error-message", with(small, "state", st, "error", map[string]any{"code": "error", "message": 7})},
		{"empty-summary-uses-fallback", with(small, "state", st, "summary", "  \n ")},
		{"missing-summary-uses-fallback", with(small, "state", st)},
		{"rejects-state-of-other-messages", with(small, "state", st, "messages", smallSession(7), "summary", "x")},
		{"rejects-state-with-other-config", with(small, "state", st, "config", map[string]any{"model": map[string]any{"context_length": 2100}, "compression": map[string]any{"protect_last_n": 4}}, "summary", "x")},
		{"rejects-malformed-state", with(small, "state", "not-a-state", "summary", "x")},
		{"rejects-missing-state", with(small, "summary", "x")},
		{"rejects-non-string-summary", with(small, "state", st, "summary", 42)},
		{"rejects-non-string-error", with(small, "state", st, "error", 42)},
	} {
		finish.Cases = append(finish.Cases, genCaseOut{c.name, c.request, want(t, "compact.finish", c.request)})
	}

	prune := genSuite{Op: "prune", Comment: "Generated like compact.begin.json: prune replaces tool outputs over 200 characters between the head and the token-budgeted tail with a placeholder naming the tool, its key argument and the original size; originals are archived."}
	for _, c := range []genCase{
		{"prunes-outside-the-budgeted-tail", map[string]any{"messages": smallSession(6), "config": tinyWindow}},
		{"prunes-as-refs", map[string]any{"messages": smallSession(6), "config": tinyWindow, "output": "refs"}},
		{"short-outputs-are-kept", map[string]any{"messages": cat(sys("s"), user("u"), say("a"), toolTurn("c1", "terminal", args("command", "ls"), "a.py b.py"), say("done"), user("next")), "config": tinyWindow}},
		{"already-pruned-is-not-pruned-again", map[string]any{"messages": cat(sys("s"), user("u"), say("a"), toolTurn("c1", "terminal", args("command", "ls"), PrunedPrefix+" terminal(command=\"ls\") returned 9,000 characters here; call the tool again if you need the output."+code("pad", 300)), say("done"), user("next"), say(code("tail", 1400)), user("more")), "config": tinyWindow}},
		{"rejects-non-array-messages", map[string]any{"messages": "hi"}},
		{"responses-prunes-function-call-outputs", map[string]any{"messages": responsesSession(6), "config": tinyWindow}},
		{"responses-prunes-output-parts-to-a-string", map[string]any{"messages": responsesPartsSession(), "format": "responses", "config": tinyWindow}},
	} {
		prune.Cases = append(prune.Cases, genCaseOut{c.name, c.request, want(t, "prune", c.request)})
	}
	for _, c := range geminiPruneCases() {
		prune.Cases = append(prune.Cases, genCaseOut{c.name, c.request, want(t, "prune", c.request)})
	}
	return map[string]genSuite{"compact.begin": begin, "compact.finish": finish, "prune": prune}
}

// TestCompactVectorsUpToDate regenerates the compaction vectors and fails when the
// committed files differ (or rewrites them with -update).
func TestCompactVectorsUpToDate(t *testing.T) {
	checkGenerated(t, generateCompactSuites(t), "TestCompactVectorsUpToDate")
}

// checkGenerated fails when a generated vector file in testdata/ differs from
// suites, or with -update rewrites it; test names the test that regenerates them.
func checkGenerated(t *testing.T, suites map[string]genSuite, test string) {
	for name, suite := range suites {
		checkGeneratedFile(t, name, suite, test)
	}
}

// checkGeneratedFile fails when testdata/<name>.json differs from suite written
// as the generators write it, or with -update rewrites it.
func checkGeneratedFile(t *testing.T, name string, suite any, test string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	require.NoError(t, enc.Encode(suite))
	path := "../testdata/" + name + ".json"
	if *update {
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		return
	}
	have, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(have, buf.Bytes()), "%s is out of date: run go test ./core -run %s -update and review the diff", path, test)
}
