package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// needOrSkip skips the test with msg, or fails it when the CI environment variable is
// set: what a test needs from the machine must be there in CI.
func needOrSkip(t *testing.T, msg string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(msg+" (CI is set, so this is a failure)", args...)
	}
	t.Skipf(msg, args...)
}

// sharedTraces are the shared recordings (../shared/traces beside the repository).
func sharedTraces(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "traces")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	native, _ := filepath.Glob(filepath.Join(dir, "anthropic-format", "*.json"))
	if len(files) == 0 {
		needOrSkip(t, "shared traces not found in %s: this test needs ../shared/traces beside the repository", dir)
	}
	return append(files, native...)
}

// TestReplayMatchesReplayPy: `ctxcompact replay --json` gives, trace by trace, every
// field ../shared/replay/replay.py gives when it runs the same core through a binary
// built from this tree, on all the shared traces: at 32K and 64K with the defaults,
// and at 16K with a config file (passed through as compact passes it).
func TestReplayMatchesReplayPy(t *testing.T) {
	traces := sharedTraces(t)
	script := filepath.Join("..", "..", "..", "shared", "replay", "replay.py")
	if _, err := os.Stat(script); err != nil {
		needOrSkip(t, "replay.py not found: %v", err)
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		needOrSkip(t, "python3 not found: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "ctxcompact")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	config := cliTempFile(t, "config.json", `{"compression": {"protect_last_n": 6}}`)

	for _, run := range []struct {
		window int
		config string
	}{{32000, ""}, {64000, ""}, {16000, config}} {
		t.Run(fmt.Sprintf("%d%s", run.window, map[bool]string{true: "-config"}[run.config != ""]), func(t *testing.T) {
			pyArgs := []string{script, "--bin", bin, "--window", strconv.Itoa(run.window)}
			ourArgs := []string{"replay", "--json", "--window", strconv.Itoa(run.window)}
			if run.config != "" {
				pyArgs = append(pyArgs, "--config", run.config)
				ourArgs = append(ourArgs, "--config", run.config)
			}
			py, err := exec.Command(python, append(pyArgs, traces...)...).Output()
			require.NoError(t, err, "replay.py: %v", err)
			code, ours, errOut := cliRun(t, "", append(ourArgs, traces...)...)
			require.Equal(t, 0, code, errOut)

			want, got := jsonLines(t, string(py)), jsonLines(t, ours)
			require.Len(t, want, len(traces))
			require.Len(t, got, len(traces))
			compactions := 0
			for i := range want {
				for k, v := range want[i] {
					require.Contains(t, got[i], k)
					require.Equal(t, v, got[i][k], "%s: field %s", want[i]["trace"], k)
				}
				require.Contains(t, got[i], "summary_request_tokens")
				compactions += int(want[i]["compactions"].(float64))
			}
			require.Positive(t, compactions, "the comparison must cover compactions")
		})
	}
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &row), sc.Text())
		rows = append(rows, row)
	}
	return rows
}

// fakeCompactor stands in for the core: compact.begin with the built-in summarizer
// keeps the first message, a summary and the last one; with summarizer "host" it
// asks for a summary with a 40-character system and a 400-character user message
// (14 + 104 = 118 tokens by the replay's estimate). It checks what it is sent: the
// params compact sends, the messages written as replay.py writes them.
func fakeCompactor(t *testing.T, calls *int) caller {
	return func(env []byte) ([]byte, error) {
		*calls++
		e := gjson.ParseBytes(env)
		require.Equal(t, "compact.begin", e.Get("op").Str)
		require.True(t, e.Get("force").Bool())
		require.Equal(t, `{"model":{"context_length":100}}`, e.Get("config").Raw)
		msgs := e.Get("messages")
		require.True(t, strings.HasPrefix(msgs.Raw, `[{"role": "system", "content": "`), msgs.Raw)
		if e.Get("summarizer").Str == "host" {
			return []byte(`{"result":{"done":false,"state":"ccs1.fake","summary_request":{"messages":[` +
				`{"role":"system","content":"` + strings.Repeat("s", 40) + `"},{"role":"user","content":"` + strings.Repeat("u", 400) + `"}]}}}`), nil
		}
		require.Equal(t, "builtin", e.Get("summarizer").Str)
		all := msgs.Array()
		return []byte(`{"result":{"done":true,"messages":[` + all[0].Raw + `,{"role":"user","content":"[CONTEXT COMPACTION] summary"},` +
			all[len(all)-1].Raw + `],"report":{},"archived":[]}}`), nil
	}
}

// madeUpSession has known estimates (ceil(chars/4) + 4): system 14, user 8, a read
// call of src/lost.go 11, its output 44, "done" 5, user 8, an edit of src/keep.go
// 12, "ok" 5, "finished" 6.
var madeUpSession = []string{
	`{"role":"system","content":"` + strings.Repeat("S", 40) + `"}`,
	`{"role":"user","content":"first request"}`,
	`{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"read","arguments":"{\"path\":\"src/lost.go\"}"}}]}`,
	`{"role":"tool","tool_call_id":"a","content":"` + strings.Repeat("x", 160) + `"}`,
	`{"role":"assistant","content":"done"}`,
	`{"role":"user","content":"second request"}`,
	`{"role":"assistant","content":null,"tool_calls":[{"id":"b","type":"function","function":{"name":"edit","arguments":"{\"file_path\":\"src/keep.go\"}"}}]}`,
	`{"role":"tool","tool_call_id":"b","content":"ok"}`,
	`{"role":"assistant","content":"finished"}`,
}

// TestReplayRules works a made-up session through by hand, at window 100 (trigger 75):
//
//	request 1 (message 2): live 14+8 = 22, nothing shared: 1.25*22 = 27.5
//	request 2 (message 4): 22+11+44 = 77 >= 75, compacted to system, summary (11),
//	  the tool output: 14+11+44 = 69; the system is shared: 0.1*14 + 1.25*55 = 70.15
//	request 3 (message 6): 69+5+8 = 82, compacted to system, summary, the user's
//	  second request: 33; the system and the same summary are shared: 0.1*25 + 1.25*8
//	request 4 (message 8): 33+12+5 = 50, the 33 shared: 0.1*33 + 1.25*17
//
// billed 27.5 + 70.15 + 12.5 + 24.55 = 134.7 → 135; peak 69; the final context
// names src/keep.go but not src/lost.go, and holds the second request only.
func TestReplayRules(t *testing.T) {
	calls := 0
	r := replayTrace("made-up", madeUpSession, 100, []byte(`{"model":{"context_length":100}}`), fakeCompactor(t, &calls), neededUsesAll, nil)
	require.Equal(t, 4, calls, "two compactions, each with its summary request")
	require.Equal(t, 2, r.Compactions)
	require.Zero(t, r.Errors)
	require.Zero(t, r.Overflows)
	require.Equal(t, 69, r.Peak)
	require.Equal(t, int64(135), r.Billed)
	require.Equal(t, [2]int{1, 2}, r.Paths)
	require.Equal(t, [2]int{1, 2}, r.Asks)
	require.Equal(t, 2*118, r.SummaryRequestTokens)
	require.Equal(t, 4, r.Requests)
	var tokens, before, shared []int
	for _, turn := range r.turns {
		tokens, before, shared = append(tokens, turn.Tokens), append(before, turn.Before), append(shared, turn.Shared)
	}
	require.Equal(t, []int{22, 69, 33, 50}, tokens)
	require.Equal(t, []int{22, 77, 82, 50}, before)
	require.Equal(t, []int{0, 14, 25, 33}, shared)
	require.InDelta(t, 134.7, r.turns[3].Billed, 1e-9)
}

// TestReplayFailuresAndRounding: a compaction the core refuses counts as an error
// and the request goes out uncompacted (here above the window: an overflow); billed
// rounds half to even as Python's round does (1.25*10 = 12.5 → 12).
func TestReplayFailuresAndRounding(t *testing.T) {
	refuse := func([]byte) ([]byte, error) {
		return []byte(`{"error":{"code":"invalid_messages","message":"ctxcompact: no","path":"/messages"}}`), nil
	}
	session := []string{`{"role":"user","content":"` + strings.Repeat("y", 240) + `"}`, `{"role":"assistant","content":"a"}`}
	r := replayTrace("refused", session, 50, []byte(`{}`), refuse, neededUsesAll, nil)
	require.Equal(t, 1, r.Errors)
	require.Zero(t, r.Compactions)
	require.Equal(t, 1, r.Overflows)
	require.Equal(t, 64, r.Peak)
	require.Equal(t, int64(80), r.Billed)
	require.Equal(t, "ctxcompact: no", r.FirstError)
	require.True(t, r.turns[0].Failed)
	r = replayTrace("refused", session, 64, []byte(`{}`), refuse, neededUsesAll, nil)
	require.Equal(t, 64, r.Peak)
	require.Zero(t, r.Overflows, "a request of exactly the window fits")

	never := func([]byte) ([]byte, error) { return nil, errors.New("must not be called") }
	r = replayTrace("small", []string{`{"role":"user","content":"` + strings.Repeat("y", 24) + `"}`, `{"role":"assistant","content":"a"}`}, 1000, []byte(`{}`), never, neededUsesAll, nil)
	require.Equal(t, 10, r.Peak)
	require.Equal(t, int64(12), r.Billed, "round half to even")
	require.Equal(t, [2]int{1, 1}, r.Asks)
}

// TestReplayAnchors: what counts as a path and as a request, and how they are found.
func TestReplayAnchors(t *testing.T) {
	msgs := []string{
		`{"role":"user","content":"  fix\n\tthe\u00a0bug\u001f now  "}`,
		`{"role":"user","content":"[CONTEXT COMPACTION] an earlier summary"}`,
		`{"role":"user","content":"   "}`,
		`{"role":"user","content":[{"type":"text","text":"part one"},{"type":"image_url"},{"type":"text","text":"part two"}]}`,
		`{"role":"user","content":"` + strings.Repeat("ab ", 100) + `"}`,
		`{"role":"assistant","content":null,"tool_calls":[` +
			`{"function":{"name":"a","arguments":"{\"path\":\"a/b.go\",\"filename\":\"README\",\"file\":\"x/y.go\"}"}},` +
			`{"function":{"name":"b","arguments":"{\"notebook_path\":\"n/b.ipynb\"} trailing"}},` +
			`{"function":{"name":"c","arguments":"{\"file_path\":\"c/d.go\",\"path\":7}"}}]}`,
	}
	all := make([]gjson.Result, len(msgs))
	for i, m := range msgs {
		all[i] = gjson.Parse(m)
	}
	paths, asks := replayAnchors(all)
	require.Equal(t, map[string]bool{"a/b.go": true, "c/d.go": true}, paths, "only string values with a slash under the path keys of arguments that parse")
	require.Equal(t, []string{"fix the bug now", "part one part two", strings.Repeat("ab ", 66) + "ab"}, asks,
		"whitespace collapsed (parts joined by a newline first), the first 200 characters; summaries and blank messages are not requests")

	// The estimate: text parts only, joined without a separator; tool-call names and
	// arguments; code points, not bytes.
	require.Equal(t, 4+(16+3)/4, replayEstimate(all[3]))
	require.Equal(t, 4+2, replayEstimate(gjson.Parse(`{"role":"user","content":"éééééé"}`)))
	require.Equal(t, 4, replayEstimate(gjson.Parse(`{"role":"assistant","content":null}`)))

	blob := replayBlob(all[:1])
	require.Equal(t, "fix the bug now", blob)
	for r := rune(0); r < 0x3001; r++ {
		want := strings.ContainsRune("\t\n\v\f\r\x1c\x1d\x1e\x1f \u0085\u00a0\u1680\u2028\u2029\u202f\u205f\u3000", r) || r >= 0x2000 && r <= 0x200a
		require.Equal(t, want, pySpace(r), "%U: Python's str.isspace", r)
	}
}

// TestPyJSON: messages are written as Python's json.dumps writes them (expected
// strings from python3 on the same input).
func TestPyJSON(t *testing.T) {
	in := `{"b": 1, "n": [1.5, 1e16, 1e15, 0.0001, 1e-05, -0, -0.0, 2E3, 12345678901234567890, 1.0, 0.1, 1e400, -1.25e-7, 123456789012345678.0], "a": 1, "a": "dup", "s": "café 😀 \ud83d\ude00 \ud83d x\u0007\u007f\t\n\\ \"/\/ \u2028 é", "z": {"y": null, "x": true, "w": false}, "e": [], "o": {}}`
	want := `{"b": 1, "n": [1.5, 1e+16, 1000000000000000.0, 0.0001, 1e-05, 0, -0.0, 2000.0, 12345678901234567890, 1.0, 0.1, Infinity, -1.25e-07, 1.2345678901234568e+17], "a": "dup", "s": "caf\u00e9 \ud83d\ude00 \ud83d\ude00 \ud83d x\u0007\u007f\t\n\\ \"// \u2028 \u00e9", "z": {"y": null, "x": true, "w": false}, "e": [], "o": {}}`
	wantSorted := `{"a": "dup", "b": 1, "e": [], "n": [1.5, 1e+16, 1000000000000000.0, 0.0001, 1e-05, 0, -0.0, 2000.0, 12345678901234567890, 1.0, 0.1, Infinity, -1.25e-07, 1.2345678901234568e+17], "o": {}, "s": "caf\u00e9 \ud83d\ude00 \ud83d\ude00 \ud83d x\u0007\u007f\t\n\\ \"// \u2028 \u00e9", "z": {"w": false, "x": true, "y": null}}`
	require.Equal(t, want, string(appendPyJSON(nil, gjson.Parse(in), false)))
	require.Equal(t, wantSorted, string(appendPyJSON(nil, gjson.Parse(in), true)))
}

// TestReplayFlagErrors: usage errors exit non-zero with a ctxcompact: message.
func TestReplayFlagErrors(t *testing.T) {
	good := cliTempFile(t, "s.json", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", good}, "--window N is required"},
		{[]string{"replay", good, "--window", "0"}, "--window must be a positive"},
		{[]string{"replay", good, "--window", "-5"}, "--window must be a positive"},
		{[]string{"replay", good, "--window", "lots"}, "invalid value"},
		{[]string{"replay", "--window", "1000"}, "want at least one FILE"},
		{[]string{"replay", "--window", "1000", good, filepath.Join(t.TempDir(), "missing.json")}, "missing.json"},
		{[]string{"replay", "--window", "1000", cliTempFile(t, "bad.json", `{"messages": [`)}, "not valid JSON at line"},
		{[]string{"replay", "--window", "1000", cliTempFile(t, "empty.json", `{"messages": []}`)}, "has no messages"},
		{[]string{"replay", "--window", "1000", cliTempFile(t, "obj.json", `{"msgs": []}`)}, `must hold {"messages": [...]}`},
		{[]string{"replay", "--window", "1000", "--config", cliTempFile(t, "c.json", `{`), good}, "not valid JSON at line"},
		{[]string{"replay", "--window", "1000", "--config", filepath.Join(t.TempDir(), "none.json"), good}, "none.json"},
		{[]string{"replay", "--window", "1000", "--summarizer-latency", "-1", good}, "--summarizer-latency must be a number of requests"},
	} {
		code, out, errOut := cliRun(t, "", c.args...)
		require.NotEqual(t, 0, code, "%v", c.args)
		require.Empty(t, out, "%v", c.args)
		last := strings.TrimSpace(errOut)
		last = last[strings.LastIndex(last, "\n")+1:]
		require.True(t, strings.HasPrefix(last, "ctxcompact"), "%v: %q", c.args, errOut)
		require.Contains(t, last, c.want, "%v", c.args)
		require.Regexp(t, `^ctxcompact( replay)?: `, last)
	}
}

// TestReplayCommandOutputs: the table (a row per trace and a totals row) with
// progress on stderr, --json lines, and --wasm giving the same numbers as the native
// core, on a made-up session the real core compacts.
func TestReplayCommandOutputs(t *testing.T) {
	var msgs []string
	for i := range 12 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"request %d: please look at src/f%d.go %s"}`, i, i, strings.Repeat("word ", 150)),
			fmt.Sprintf(`{"role":"assistant","content":"answer %d %s"}`, i, strings.Repeat("text ", 100)))
	}
	file := cliTempFile(t, "session.json", `{"messages":[`+strings.Join(msgs, ",")+`]}`)
	code, out, errOut := cliRun(t, "", "replay", file, file, "--window", "4000")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 2, strings.Count(errOut, "ctxcompact: replayed "), errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Contains(t, lines[0], "window 4,000 tokens, compacting at 3,000")
	require.Regexp(t, `^trace\s+requests\s+compactions\s+errors\s+overflows\s+peak\s+billed\s+paths\s+asks\s+needed\s+recalled\s+summary requests$`, lines[2])
	require.Regexp(t, `^session.json\s+12\s+[1-9]\d*\s+0\s+`, lines[3])
	require.Regexp(t, `^total \(2 traces\)\s+`, lines[len(lines)-1])

	code, native, errOut := cliRun(t, "", "replay", "--json", "--window", "4000", file)
	require.Equal(t, 0, code, errOut)
	rows := jsonLines(t, native)
	require.Len(t, rows, 1)
	require.Positive(t, rows[0]["compactions"])
	require.Positive(t, rows[0]["summary_request_tokens"], "compactions that summarize ask for a summary")
	code, stdin, errOut := cliRun(t, "["+strings.Join(msgs, ",")+"]", "replay", "--json", "--window", "4000", "-")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, native, strings.Replace(stdin, `"trace":"-"`, `"trace":"session.json"`, 1), "a bare array on stdin")
	code, wasm, errOut := cliRun(t, "", "replay", "--json", "--wasm", "--window", "4000", file)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, native, wasm, "--wasm: the same numbers")
}

// TestReplayPageInChromium loads the --html page in headless Chromium (Debian's
// /usr/bin/chromium, as the JS browser test uses): the DOM Chromium built holds one
// chart per trace with a marker per compaction, a point per request and the trigger
// and window lines, the page fetches nothing, and the screenshot shows the markers.
func TestReplayPageInChromium(t *testing.T) {
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		if chromium, err = exec.LookPath("chromium"); err != nil {
			needOrSkip(t, "chromium not found: install the Debian package (apt-get install chromium), as bindings/js/test.sh does")
		}
	}
	calls := 0
	cfg := []byte(`{"model":{"context_length":100}}`)
	compacted := replayTrace("compacted.json", madeUpSession, 100, cfg, fakeCompactor(t, &calls), neededUsesAll, nil)
	refuse := func([]byte) ([]byte, error) {
		return []byte(`{"error":{"code":"internal","message":"ctxcompact: no","path":""}}`), nil
	}
	refused := replayTrace("refused <&>.json", []string{`{"role":"user","content":"` + strings.Repeat("y", 420) + `"}`, `{"role":"assistant","content":"a"}`}, 100, []byte(`{}`), refuse, neededUsesAll, nil)
	quiet := replayTrace("quiet.json", madeUpSession[:3], 100, []byte(`{}`), refuse, neededUsesAll, nil)
	page, err := replayPage([]*replayResult{compacted, refused, quiet}, 100, "", neededUsesAll)
	require.NoError(t, err)
	src := string(page)
	require.NotRegexp(t, `<script|<link|<img|src=|href=|url\(|@import`, src, "self-contained")
	require.NotContains(t, src, "http")
	file := filepath.Join(t.TempDir(), "replay.html")
	require.NoError(t, os.WriteFile(file, page, 0o644))

	profile := t.TempDir()
	chrome := func(args ...string) []byte {
		args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
			"--disable-component-update", "--disable-sync", "--disable-breakpad", "--disable-crash-reporter", "--hide-scrollbars",
			"--user-data-dir=" + profile}, args...)
		out, err := exec.Command(chromium, append(args, "file://"+file)...).Output()
		require.NoError(t, err, "chromium %v", args)
		return out
	}
	dom := string(chrome("--dump-dom"))
	sections := regexp.MustCompile(`(?s)<section class="trace" data-trace="([^"]*)" data-requests="(\d+)" data-compactions="(\d+)">(.*?)</section>`).FindAllStringSubmatch(dom, -1)
	require.Len(t, sections, 3, dom)
	for i, want := range []struct {
		trace                               string
		requests, compactions, failed, over int
	}{{"compacted.json", 4, 2, 0, 0}, {"refused &lt;&amp;&gt;.json", 1, 0, 1, 1}, {"quiet.json", 1, 0, 0, 0}} {
		s := sections[i]
		require.Equal(t, want.trace, s[1])
		body := s[4]
		require.Equal(t, 1, strings.Count(body, `<svg class="chart"`), want.trace)
		require.Equal(t, want.compactions, strings.Count(body, `<circle class="compaction"`), want.trace)
		require.Equal(t, want.failed, strings.Count(body, `<circle class="compaction-failed"`), want.trace)
		require.Equal(t, want.over, strings.Count(body, `<circle class="overflow"`), want.trace)
		require.Equal(t, 1, strings.Count(body, `class="threshold"`), want.trace)
		require.Equal(t, 1, strings.Count(body, `class="window"`), want.trace)
		for _, line := range []string{"size", "cost"} {
			m := regexp.MustCompile(`<polyline class="` + line + `" points="([^"]*)"`).FindStringSubmatch(body)
			require.NotNil(t, m, "%s: the %s line", want.trace, line)
			require.Len(t, strings.Fields(m[1]), want.requests, "%s: a %s point per request", want.trace, line)
		}
	}
	// The compaction markers are drawn: the screenshot has their colour (#7c3aed).
	shot := filepath.Join(t.TempDir(), "shot.png")
	chrome("--window-size=1100,1400", "--screenshot="+shot)
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	purple, blue := 0, 0
	near := func(r, g, b uint32, R, G, B float64) bool {
		return math.Abs(float64(r>>8)-R) < 12 && math.Abs(float64(g>>8)-G) < 12 && math.Abs(float64(b>>8)-B) < 12
	}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if near(r, g, b, 0x7c, 0x3a, 0xed) {
				purple++
			}
			if near(r, g, b, 0x25, 0x63, 0xeb) {
				blue++
			}
		}
	}
	require.Greater(t, purple, 2*20, "two compaction dots of radius 4 rendered")
	require.Greater(t, blue, 100, "the request-size line rendered")
}

// TestReplayBackground: --summarizer-latency N on the shared traces (through the
// wasm module too): every compaction is ready or waited, none of the requests is
// above the window, the blocking replay is the plain replay's, and the shares
// are what docs/STEERING.md reports (at the default prepare_ratio, latency 2).
func TestReplayBackground(t *testing.T) {
	traces := sharedTraces(t)
	for _, c := range []struct {
		window      int
		ready, comp int
	}{{32000, 25, 26}, {64000, 7, 7}} {
		args := append([]string{"replay", "--json", "--summarizer-latency", "2", "--window", fmt.Sprint(c.window)}, traces...)
		code, out, errOut := cliRun(t, "", args...)
		require.Equal(t, 0, code, errOut)
		code, plain, errOut := cliRun(t, "", append([]string{"replay", "--json", "--window", fmt.Sprint(c.window)}, traces...)...)
		require.Equal(t, 0, code, errOut)
		rows, plainRows := jsonLines(t, out), jsonLines(t, plain)
		require.Len(t, rows, len(plainRows))
		ready, comp := 0, 0
		for i, r := range rows {
			b := r["background"].(map[string]any)
			require.EqualValues(t, r["compactions"], b["ready"].(float64)+b["waited"].(float64), "%s", r["trace"])
			require.EqualValues(t, 0, r["overflows"], "%s", r["trace"])
			require.LessOrEqual(t, r["peak"], float64(c.window))
			require.Equal(t, plainRows[i]["compactions"], b["blocking_compactions"])
			require.Equal(t, plainRows[i]["billed"], b["blocking_billed"])
			ready += int(b["ready"].(float64))
			comp += int(r["compactions"].(float64))
		}
		require.Equal(t, [2]int{c.ready, c.comp}, [2]int{ready, comp}, "window %d: ready of compactions", c.window)
	}
	code, native, _ := cliRun(t, "", "replay", "--json", "--summarizer-latency", "2", "--window", "32000", traces[0])
	require.Equal(t, 0, code)
	code, wasm, errOut := cliRun(t, "", "replay", "--json", "--wasm", "--summarizer-latency", "2", "--window", "32000", traces[0])
	require.Equal(t, 0, code, errOut)
	require.Equal(t, native, wasm, "--wasm: the same numbers")
}
