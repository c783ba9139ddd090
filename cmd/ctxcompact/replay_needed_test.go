package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// pyFactsAnswers are needed_later.py's facts() of each string, computed from the
// repository root with
//
//	python3 -c 'import json, sys; exec(open("../shared/replay/needed_later.py").read().rsplit("\nmain()", 1)[0]); print(json.dumps(sorted(facts(sys.argv[1])), ensure_ascii=False))' STRING
//
// (Python 3.11.7). What each line tries: Unicode letters inside identifiers (\w is
// Unicode's), a combining accent (not a word character) that splits a word, hex
// (lower-case only, 7 to 40 characters, no word character either side, not a-f
// letters alone) against digits, the strip of . _ / - and the six-character floor,
// an inner capital (not after the first character), Unicode digits (\d) against
// superscripts (\w but not \d), a match that starts after a non-ASCII letter,
// separators, and the stop list.
var pyFactsAnswers = []struct {
	in   string
	want []string
}{
	{"café_au_lait crème.brûlée", []string{"café_au_lait", "crème.brûlée"}},
	{"cafe\u0301_noir", []string{}},
	{"abc1234 deadbeef 12345678 facade 0xdeadbeef1 ABCDEF12 abc1234é", []string{"12345678", "abc1234"}},
	{"a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c 0123456789abcdef0123456789abcdef01234567", []string{"0123456789abcdef0123456789abcdef01234567"}},
	{"__init__.py ./src/main.go -foo-bar- x__ my_var_ _private_thing_", []string{"foo-bar", "init__.py", "my_var", "private_thing", "src/main.go"}},
	{"getHTTPResponse iPhone eBay xmlHttp", []string{"getHTTPResponse", "xmlHttp"}},
	{"٠١٢٣٤٥ １２３４５６ ²³⁴⁵⁶⁷ 12345² 1234567 é1234567", []string{"1234567", "٠١٢٣٤٥", "１２３４５６"}},
	{"ñame_x ñandu_value Σίσυφος_λίθος snake_case_ключ data.значение", []string{"andu_value", "data.значение", "snake_case_ключ"}},
	{"a/b/c/d.e-f path//double foo.bar..baz v1.2.3456 x1234567 abcdef1G 3f2a1b9c a3f2a1b", []string{"3f2a1b9c", "a/b/c/d.e-f", "a3f2a1b", "foo.bar", "v1.2.3456"}},
	{"self.assertEqual(x) os.path.join os.path ID_RE MAX_SIZE e.g. i.e.", []string{"MAX_SIZE", "os.path.join"}},
}

func TestNeededFactsMatchPython(t *testing.T) {
	for _, c := range pyFactsAnswers {
		require.Equal(t, c.want, neededFacts(c.in), "%q", c.in)
	}
	// What Go's regexp (ASCII \w, \d and \b) would have found instead, to show the
	// scanner is not that: "abc1234" before é, "ame_x" after ñ, "snake_case_" alone.
	require.NotContains(t, neededFacts("abc1234é"), "abc1234")
	require.Equal(t, []string{"snake_case_ключ"}, neededFacts("snake_case_ключ"))
}

// pyValuesAnswers are needed_later.py's values() of tool-call argument strings
// (python3 as above, printing values(sys.argv[1])): Python's json.loads, with its
// NaN and Infinity, repr of floats, str of booleans, an object's last value for a
// repeated key at the key's first place, and the string itself when it does not load
// (a raw control character, a trailing comma or data, a BOM, a bad escape).
var pyValuesAnswers = []struct {
	in   string
	want []string
}{
	{`{"b": 1, "a": "x", "b": 2.50}`, []string{"2.5", "x"}},
	{`[true, false, null, NaN, -Infinity, 1e400, -0, -0.0, 1E2, 12345678901234567890]`, []string{"True", "False", "nan", "-inf", "inf", "0", "-0.0", "100.0", "12345678901234567890"}},
	{`{"a": "line\nnext"}`, []string{"line\nnext"}},
	{"{\"a\": \"raw\nnewline\"}", []string{"{\"a\": \"raw\nnewline\"}"}},
	{`{"a": 1,}`, []string{`{"a": 1,}`}},
	{` "solo" `, []string{"solo"}},
	{``, []string{""}},
	{`{"a": 1} x`, []string{`{"a": 1} x`}},
	{"\ufeff{\"a\": 1}", []string{"\ufeff{\"a\": 1}"}},
	{`{"k": {"n": [1, {"m": "deep"}]}, "e": {}, "z": []}`, []string{"1", "deep"}},
	{`1.`, []string{`1.`}},
	{`01`, []string{`01`}},
	{`1e5`, []string{"100000.0"}},
	{`1.5e`, []string{`1.5e`}},
	{`-`, []string{`-`}},
	{`[1,]`, []string{`[1,]`}},
	{`"\ud83d\ude00 \u00e9 \u00E9"`, []string{"😀 é é"}},
	{`{"a":1e-400, "b": -1e-400}`, []string{"0.0", "-0.0"}},
	{`[1.0, 0.1, 1e16, 1e-5, 123456789.123, 1e15, 0.0001]`, []string{"1.0", "0.1", "1e+16", "1e-05", "123456789.123", "1000000000000000.0", "0.0001"}},
	{`"\x"`, []string{`"\x"`}},
	{`"\u12G4"`, []string{`"\u12G4"`}},
	{`"\/\b\f\r\t"`, []string{"/\b\f\r\t"}},
	{"\t{ \"a\" : [ \"x\" , 2 ] }\r\n", []string{"x", "2"}},
	// Python's int takes at most 4,300 digits (sign apart): " " + 4,300 ones loads,
	// " " + 4,301 and " -" + 4,301 do not (the value is the string, space and all).
	{" " + strings.Repeat("1", 4300), []string{strings.Repeat("1", 4300)}},
	{" " + strings.Repeat("1", 4301), []string{" " + strings.Repeat("1", 4301)}},
	{" -" + strings.Repeat("1", 4301), []string{" -" + strings.Repeat("1", 4301)}},
}

func TestArgValuesMatchPython(t *testing.T) {
	for _, c := range pyValuesAnswers {
		in, _ := marshalNoEscape(c.in)
		require.Equal(t, c.want, argValues(gjson.Parse(string(in))), "%q", c.in)
	}
	// Not a string: null, false and 0 are Python's `or ""`; an object is read as the
	// arguments it is (the script stops on it).
	for raw, want := range map[string][]string{`null`: {""}, `false`: {""}, `0`: {""}, `{"path": "a/b.go", "n": 7}`: {"a/b.go", "7"}} {
		require.Equal(t, want, argValues(gjson.Parse(raw)), raw)
	}
	require.Equal(t, []string{""}, argValues(gjson.Get(`{}`, "arguments")), "absent")
}

// TestNeededText: text_of and args_text of a message with parts and tool calls.
func TestNeededText(t *testing.T) {
	m := gjson.Parse(`{"role":"assistant","content":[{"type":"text","text":"one"},"skipped",{"type":"image"},{"text":"two"}],` +
		`"tool_calls":[{"function":{"name":"read","arguments":"{\"path\":\"a/b.go\",\"limit\":20}"}},{"function":{"arguments":"plain"}}]}`)
	require.Equal(t, "one\n\n\ntwo\nread a/b.go 20\n plain", neededText(m))
	require.Equal(t, "a/b.go 20\nplain", neededArgsText(m))
	require.Equal(t, "", neededArgsText(gjson.Parse(`{"role":"assistant","content":"no calls"}`)))
}

// neededSession is worked by hand at window 100 (trigger 75) with fakeCompactor,
// which keeps the first message, writes the same summary (11 tokens) each time and
// keeps the last message. Estimates: 0 system 14; 1 user (names mode_alpha) 8;
// 2 a read of src/lost_file.go 12; 3 its output 59 (names err_beta and ZETA_NAME);
// 4 "done" 5; 5 user (names mode_alpha and ZETA_NAME) 12; 6 "fixing err_beta" and
// an edit of src/lost_file.go 17; 7 "ok" 5; 8 names ZETA_NAME and mode_alpha, and
// calls a tool with ZETA_NAME.
//
//	message 4: live 14+8+12+59 = 93, compacted to 0, summary, 3: messages 1 and 2
//	  are gone, so mode_alpha and src/lost_file.go (first seen there) are removed;
//	message 5 names mode_alpha: brought back, no longer removed (so message 8's use
//	  of it is not needed later);
//	message 6: live 14+11+59+5+12 = 101, compacted to 0, summary, 5: message 3 is
//	  gone, so err_beta and ZETA_NAME are removed; then message 6 uses err_beta (in
//	  its text) and src/lost_file.go (in its arguments): needed, and not recalled
//	  (the live context names neither);
//	message 8: live 37+17+5 = 59, no compaction; it uses ZETA_NAME: needed, and
//	  recalled (message 5, kept, names it).
//
// needed 3, recalled 1; with uses in arguments only, err_beta is not used (but
// message 6 brings it back): needed 2, recalled 1.
var neededSession = []string{
	`{"role":"system","content":"` + strings.Repeat("S", 40) + `"}`,
	`{"role":"user","content":"use mode_alpha"}`,
	`{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"read","arguments":"{\"path\":\"src/lost_file.go\"}"}}]}`,
	`{"role":"tool","tool_call_id":"a","content":"` + strings.Repeat("x", 200) + ` err_beta ZETA_NAME"}`,
	`{"role":"assistant","content":"done"}`,
	`{"role":"user","content":"again mode_alpha, see ZETA_NAME"}`,
	`{"role":"assistant","content":"fixing err_beta","tool_calls":[{"id":"b","type":"function","function":{"name":"edit","arguments":"{\"file_path\":\"src/lost_file.go\"}"}}]}`,
	`{"role":"tool","tool_call_id":"b","content":"ok"}`,
	`{"role":"assistant","content":"ZETA_NAME is set in mode_alpha","tool_calls":[{"id":"c","type":"function","function":{"name":"check","arguments":"{\"name\":\"ZETA_NAME\"}"}}]}`,
}

func TestNeededLaterRules(t *testing.T) {
	cfg := []byte(`{"model":{"context_length":100}}`)
	calls := 0
	all := replayTrace("needed", neededSession, 100, cfg, fakeCompactor(t, &calls), neededUsesAll, nil)
	require.Equal(t, 2, all.Compactions)
	require.Equal(t, "all", all.Uses)
	require.Equal(t, 3, all.Needed, "src/lost_file.go and err_beta at message 6, ZETA_NAME at 8")
	require.Equal(t, 1, all.Recalled, "ZETA_NAME only")

	args := replayTrace("needed", neededSession, 100, cfg, fakeCompactor(t, &calls), neededUsesArgs, nil)
	require.Equal(t, "args", args.Uses)
	require.Equal(t, 2, args.Needed, "err_beta is in message 6's text, not its arguments")
	require.Equal(t, 1, args.Recalled)

	// A compaction that keeps every message removes nothing; but of equal messages
	// the script takes the last for the one kept (it maps each message's JSON to its
	// place), so what the first introduced counts as removed, and here as recalled.
	keepAll := func(env []byte) ([]byte, error) {
		e := gjson.ParseBytes(env)
		if e.Get("summarizer").Str == "host" {
			return []byte(`{"result":{"done":false,"summary_request":{"messages":[]}}}`), nil
		}
		return []byte(`{"result":{"done":true,"messages":` + e.Get("messages").Raw + `,"report":{},"archived":[]}}`), nil
	}
	kept := replayTrace("kept", neededSession, 100, cfg, keepAll, neededUsesAll, nil)
	require.Positive(t, kept.Compactions)
	require.Zero(t, kept.Needed)
	twice := []string{neededSession[0], neededSession[1], `{"role":"assistant","content":"reading"}`,
		`{"role":"user","content":"` + strings.Repeat("y", 200) + `"}`, neededSession[1], `{"role":"assistant","content":"mode_alpha is on"}`}
	kept = replayTrace("twice", twice, 100, cfg, keepAll, neededUsesAll, nil)
	require.Equal(t, 1, kept.Compactions)
	require.Equal(t, 1, kept.Needed)
	require.Equal(t, 1, kept.Recalled)
}

// TestReplayNeededMatchesNeededLaterPy: `ctxcompact replay --json` gives, trace by
// trace, the needed and recalled ../shared/replay/needed_later.py gives when it runs
// the same core (this test binary, acting as the CLI: see TestMain), at 32K on the
// shared OpenAI-format traces, and with uses in tool-call arguments only (the
// script's uses_mode "args", set in a copy of it) on three of them. The
// Anthropic-format recordings are left out: the script reads every file's messages
// as OpenAI chat messages, which the replay need not do.
func TestReplayNeededMatchesNeededLaterPy(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared")
	script := filepath.Join(dir, "replay", "needed_later.py")
	if _, err := os.Stat(script); err != nil {
		needOrSkip(t, "needed_later.py not found: %v", err)
	}
	traces, _ := filepath.Glob(filepath.Join(dir, "traces", "*.json"))
	if len(traces) == 0 {
		needOrSkip(t, "shared traces not found in %s", filepath.Join(dir, "traces"))
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		needOrSkip(t, "python3 not found: %v", err)
	}
	bin, err := os.Executable()
	require.NoError(t, err)
	src, err := os.ReadFile(script)
	require.NoError(t, err)
	const all = "\n    uses_mode = \"all\"\n"
	require.Equal(t, 1, strings.Count(string(src), all), "needed_later.py sets uses_mode once: the args run rewrites that line")
	argsScript := cliTempFile(t, "needed_later_args.py", strings.Replace(string(src), all, "\n    uses_mode = \"args\"\n", 1))

	for _, run := range []struct {
		uses, script string
		traces       []string
	}{
		{neededUsesAll, script, traces},
		{neededUsesArgs, argsScript, []string{
			filepath.Join(dir, "traces", "claude-code-spotter-258c7280-postcompact.json"),
			filepath.Join(dir, "traces", "mini-swe-agent-deepseek-astropy-12907.json"),
			filepath.Join(dir, "traces", "mini-swe-agent-deepseek-pydicom-1413.json"),
		}},
	} {
		t.Run(run.uses, func(t *testing.T) {
			cmd := exec.Command(python, append([]string{run.script, "--engine", "ctxcompact", "--bin", bin, "--window", "32000"}, run.traces...)...)
			cmd.Env = append(os.Environ(), "CTXCOMPACT_TEST_AS_CLI=1")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			py, err := cmd.Output()
			require.NoError(t, err, "needed_later.py: %s", stderr.String())
			code, ours, errOut := cliRun(t, "", append([]string{"replay", "--json", "--window", "32000", "--needed-uses", run.uses}, run.traces...)...)
			require.Equal(t, 0, code, errOut)

			want, got := jsonLines(t, string(py)), jsonLines(t, ours)
			require.Len(t, want, len(run.traces)+1, "a line per trace and the totals")
			require.Len(t, got, len(run.traces))
			needed := 0
			for i, w := range want[:len(run.traces)] {
				g := got[i]
				require.Equal(t, w["trace"], g["trace"])
				for _, k := range []string{"uses", "compactions", "needed", "recalled"} {
					require.Equal(t, w[k], g[k], "%s: %s", w["trace"], k)
				}
				needed += int(w["needed"].(float64))
			}
			require.Positive(t, needed, "the comparison must cover facts needed later")
		})
	}
}

// TestReplayNeededOutputs: the table's columns and header, the page's, and the flag.
func TestReplayNeededOutputs(t *testing.T) {
	calls := 0
	r := replayTrace("needed.json", neededSession, 100, []byte(`{"model":{"context_length":100}}`), fakeCompactor(t, &calls), neededUsesArgs, nil)
	var b strings.Builder
	writeReplayTable(&b, []*replayResult{r, r}, 100, neededUsesArgs)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Contains(t, lines[0], "needed later: uses in tool-call arguments (--needed-uses args)")
	require.Regexp(t, `\s+asks\s+needed\s+recalled\s+summary requests$`, lines[2])
	require.Regexp(t, `\s+2\s+1 \(0\.500\)\s+\S+$`, lines[3])
	require.Regexp(t, `^total \(2 traces\)\s.*\s+4\s+2 \(0\.500\)\s+\S+$`, lines[len(lines)-1])

	page, err := replayPage([]*replayResult{r}, 100, "", neededUsesArgs)
	require.NoError(t, err)
	require.Contains(t, string(page), "<th>asks</th><th>needed</th><th>recalled</th>")
	require.Contains(t, string(page), "<td>2</td><td>1 (0.500)</td>")
	require.Contains(t, string(page), "needed later 2, recalled 1 (0.500)")
	require.Contains(t, string(page), "Needed later: uses in tool-call arguments")

	file := cliTempFile(t, "s.json", `{"messages":[`+strings.Join(neededSession, ",")+`]}`)
	for uses, want := range map[string]string{"": "all", "all": "all", "args": "args"} {
		args := []string{"replay", "--json", "--window", "100", file}
		if uses != "" {
			args = append(args, "--needed-uses", uses)
		}
		code, out, errOut := cliRun(t, "", args...)
		require.Equal(t, 0, code, errOut)
		rows := jsonLines(t, out)
		require.Equal(t, want, rows[0]["uses"])
		require.Contains(t, rows[0], "needed")
		require.Contains(t, rows[0], "recalled")
	}
	code, out, errOut := cliRun(t, "", "replay", "--window", "100", "--needed-uses", "text", file)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, `ctxcompact replay: --needed-uses must be all or args, got "text"`)
}
