package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

func init() {
	commands["replay"] = command{
		summary: "replay recorded sessions as the agent lived them, compacting at the default trigger: replay FILE... --window N [--config FILE] [--json] [--html OUT.html] [--wasm] [--needed-uses all|args] [--summarizer-latency N]",
		run:     runReplay,
	}
}

const replayUsage = `usage: ctxcompact replay FILE... --window N [--config FILE] [--json] [--html OUT.html] [--wasm] [--needed-uses all|args] [--summarizer-latency N]

Replays each recorded session (a FILE holding {"messages": [...]} or a bare array) as
the agent lived it: the live context starts with the first message; before each
assistant message the agent sends a request with the live context, and if its
estimate reaches the trigger (75% of N below 512K, else 50%) the live context is first
compacted as 'ctxcompact compact --context-length N [--config FILE]' compacts it
(forced, built-in summarizer); then the recorded message is appended. The numbers are
those of ../shared/replay/replay.py (needed and recalled: needed_later.py) run on the
same binary.

Per trace (--json: one JSON line each; else a table with a totals row, and a progress
line per trace on stderr):
  compactions   times the request reached the trigger and was compacted
  errors        compactions the core refused (the live context is kept as it was)
  overflows     requests whose estimate was above N
  peak          the largest request (estimate)
  billed        input cost in base-token units under ideal prefix caching: the messages
                shared with the previous request read at 0.1x, the rest written at 1.25x
  billed_pre    (--json) the part of billed before the first compaction: the same
                for every compactor, so the rest is what a compactor controls
  paths, asks   [kept, total]: file paths named in tool-call arguments (file_path, path,
                filename, notebook_path) and the user's requests (first 200 characters,
                whitespace collapsed, matched on their first 120), found in the final
                live context
  needed, recalled
                facts the agent reused after a compaction took them out, as
                ../shared/replay/needed_later.py counts them: a fact is a token its
                ID_RE finds (matched as Python's re does, \w \d \b Unicode's), stripped
                of . _ / - at the ends, 6+ characters, not a-f letters alone: an
                identifier with . _ / or - inside or an inner capital, a path, a hex id
                of 7-40 characters, a number of 4+ digits. It is removed when a
                compaction leaves out the recorded message it first appeared in (a
                message is kept when the compacted context holds one equal to it as
                JSON), and no longer so once a later message holds it. needed: the
                removed facts a later assistant message used (--needed-uses all: its
                text, tool-call names and argument values; args: only its tool-call
                argument values); recalled: those the live context sent for
                that message held, anywhere in its text. The table writes recalled with
                its share of needed
  summary_request_tokens
                the input a real LLM summarizer would have been sent: the sum, over the
                compactions, of the estimated size of the summary request's messages
                that compact.begin returns for the same messages and config with
                summarizer "host" (0 for a compaction that summarizes nothing)
--json adds uses (the --needed-uses), messages (in the file), requests (assistant
turns replayed) and, when a compaction failed, first_error.

--summarizer-latency N replays a context engine that prepares each compaction in the
background (docs/STEERING.md): when its should_compress says prepare_compaction (at
compression.prepare_ratio of the trigger), it sends the summarizer the live context,
whose answer lands N requests later; at the trigger its compress splices the landed
compaction into the grown context. When none has landed, a request within 95% of the
window goes out as it is while the summary is on its way (one is asked for then if
none is), and one past that waits (for the one in flight, or a blocking compaction).
The same trace is also replayed blocking.
The table adds, and --json's background object holds: ready (compactions a landed
preparation was spliced into, and their share), waited (the requests that waited),
blocking compactions, and billed vs blocking (the ratio of the two replays' billed).
The estimate is ceil(characters/4) + 4 per message, text content and tool-call names
and arguments counted; the trigger ignores the config's threshold, as replay.py does.
`

// runReplay is `ctxcompact replay`.
func runReplay(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("replay", stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, replayUsage+"\nflags:\n")
		fs.PrintDefaults()
	}
	window := fs.Int("window", 0, "the context window N in tokens (required)")
	configFile := fs.String("config", "", "a JSON file with the config object, passed to each compaction as compact passes it")
	asJSON := fs.Bool("json", false, "print one JSON line per trace instead of the table")
	htmlOut := fs.String("html", "", "also write a self-contained page with a chart per trace to this file")
	useWasm := fs.Bool("wasm", false, "run the embedded WebAssembly module on wazero instead of the native core (same numbers)")
	latency := fs.Int("summarizer-latency", 0, "replay a context engine that prepares each compaction in the background, its summary back N requests after it was asked for; 0: compact at the trigger, blocking")
	uses := fs.String("needed-uses", neededUsesAll, "what of an assistant message counts as a use of a fact for needed and recalled: all (its text, tool-call names and argument values) or args (its tool-call argument values)")
	files, err := fileArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the usage was asked for, and printed
	} else if err != nil {
		return err
	}
	switch {
	case len(files) == 0:
		fs.Usage()
		return errors.New("ctxcompact replay: want at least one FILE")
	case !isSet(fs, "window"):
		return errors.New("ctxcompact replay: --window N is required")
	case *window <= 0:
		return fmt.Errorf("ctxcompact replay: --window must be a positive number of tokens, got %d", *window)
	case *latency < 0:
		return fmt.Errorf("ctxcompact replay: --summarizer-latency must be a number of requests, 0 or more, got %d", *latency)
	case *uses != neededUsesAll && *uses != neededUsesArgs:
		return fmt.Errorf("ctxcompact replay: --needed-uses must be %s or %s, got %q", neededUsesAll, neededUsesArgs, *uses)
	}
	cfg, err := compactConfig("replay", "", *configFile, stdin, *window, "")
	if err != nil {
		return err
	}
	traces := make([][]string, len(files))
	for i, file := range files { // all are read first: a bad file fails before a long run
		if traces[i], err = readReplayTrace(file, stdin); err != nil {
			return err
		}
	}

	call := callerFor(*useWasm, true, stderr)
	results := make([]*replayResult, 0, len(files))
	for i, file := range files {
		var r *replayResult
		if *latency > 0 {
			r = replayTraceBackground(filepath.Base(file), traces[i], *window, cfg, call, *uses, *latency)
		} else {
			r = replayTrace(filepath.Base(file), traces[i], *window, cfg, call, *uses, nil)
		}
		results = append(results, r)
		if *asJSON {
			b, _ := marshalNoEscape(r)
			if _, err := stdout.Write(append(b, '\n')); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(stderr, "ctxcompact: replayed %d/%d %s: %d messages, %d requests, %d compactions\n",
				i+1, len(files), r.Trace, r.Messages, len(r.turns), r.Compactions)
		}
		if r.FirstError != "" {
			fmt.Fprintf(stderr, "ctxcompact: %s: %d compactions failed; the first: %s\n", r.Trace, r.Errors, r.FirstError)
		}
	}
	if !*asJSON {
		writeReplayTable(stdout, results, *window, *uses)
	}
	if *htmlOut != "" {
		page, err := replayPage(results, *window, *configFile, *uses)
		if err != nil {
			return err
		}
		if err := os.WriteFile(*htmlOut, page, 0o644); err != nil {
			return fmt.Errorf("ctxcompact replay: %w", err)
		}
		fmt.Fprintf(stderr, "ctxcompact: wrote %s\n", *htmlOut)
	}
	return nil
}

// fileArgs parses flags placed before, between or after the FILE arguments.
func fileArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("ctxcompact %s: %w", fs.Name(), err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// readReplayTrace reads a recorded session and returns its messages' raw JSON.
func readReplayTrace(file string, stdin io.Reader) ([]string, error) {
	conv, err := readConversation(file, stdin, "")
	if err != nil {
		return nil, err
	}
	if err := replayableFormat(file, conv); err != nil {
		return nil, err
	}
	var msgs []string
	gjson.Parse(conv.messages).ForEach(func(_, m gjson.Result) bool {
		msgs = append(msgs, m.Raw)
		return true
	})
	if len(msgs) == 0 {
		return nil, fmt.Errorf("ctxcompact: %s has no messages to replay", file)
	}
	return msgs, nil
}

// replayResult is one trace's replay; its JSON fields are replay.py's, uses, needed
// and recalled as needed_later.py gives them, and summary_request_tokens, messages,
// requests and first_error.
type replayResult struct {
	Trace                string `json:"trace"`
	Window               int    `json:"window"`
	Compactions          int    `json:"compactions"`
	Errors               int    `json:"errors"`
	Overflows            int    `json:"overflows"`
	Peak                 int    `json:"peak"`
	Billed               int64  `json:"billed"`
	BilledPre            int64  `json:"billed_pre"`
	Paths                [2]int `json:"paths"`
	Asks                 [2]int `json:"asks"`
	Uses                 string `json:"uses"`
	Needed               int    `json:"needed"`
	Recalled             int    `json:"recalled"`
	SummaryRequestTokens int    `json:"summary_request_tokens"`
	Messages             int    `json:"messages"`
	Requests             int    `json:"requests"`
	FirstError           string `json:"first_error,omitempty"`
	// Background is --summarizer-latency's (replay_latency.go).
	Background *replayBackgroundResult `json:"background,omitempty"`

	trigger float64
	turns   []replayTurn
}

// replayTurn is one request of a replay: the assistant message at index At of the
// trace was answered to a live context of Tokens (Before it was compacted), Shared of
// them a prefix of the previous request; Billed is the cost so far.
type replayTurn struct {
	At, Before, Tokens, Shared int
	Compacted, Failed          bool
	Billed                     float64
}

// replayMsg is one message of the live context, with its estimate and its JSON as
// replay.py writes it (plain and with sorted keys), made when first needed.
type replayMsg struct {
	raw         string
	tokens      int
	py, pySort  string
	pyDone, srt bool
}

func newReplayMsg(raw string) *replayMsg {
	return &replayMsg{raw: raw, tokens: replayEstimate(gjson.Parse(raw))}
}

func (m *replayMsg) pyJSON() string {
	if !m.pyDone {
		m.py, m.pyDone = string(appendPyJSON(nil, gjson.Parse(m.raw), false)), true
	}
	return m.py
}

func (m *replayMsg) sortedJSON() string {
	if !m.srt {
		m.pySort, m.srt = string(appendPyJSON(nil, gjson.Parse(m.raw), true)), true
	}
	return m.pySort
}

// replayTrigger is the default threshold resolution the replay compacts at.
func replayTrigger(window int) float64 {
	if window < 512000 {
		return float64(window) * 0.75
	}
	return float64(window) * 0.5
}

// replayTrace replays one trace's messages through call with the compaction config
// cfg, counting as uses of a fact what uses names (neededUsesAll or neededUsesArgs).
//
// bg, when not nil, is a context engine that prepares each compaction in the
// background (replay_latency.go); nil compacts at the trigger, blocking.
func replayTrace(name string, msgs []string, window int, cfg []byte, call caller, uses string, bg *replayBackground) *replayResult {
	r := &replayResult{Trace: name, Window: window, Messages: len(msgs), Uses: uses, trigger: replayTrigger(window)}
	live := []*replayMsg{newReplayMsg(msgs[0])}
	needed := newNeededLater(msgs, uses, live[0])
	var prev []string
	billed, pre := 0.0, -1.0 // pre: billed before the first compaction, -1 until the trigger is reached
	sum := func(ms []*replayMsg) int {
		n := 0
		for _, m := range ms {
			n += m.tokens
		}
		return n
	}
	for at := 1; at < len(msgs); at++ {
		m := newReplayMsg(msgs[at])
		if role := gjson.Get(m.raw, "role"); role.Type != gjson.String || role.Str != "assistant" {
			needed.next(m, at, live)
			live = append(live, m)
			continue
		}
		turn := replayTurn{At: at, Before: sum(live)}
		t := turn.Before
		if bg != nil && float64(t) < r.trigger {
			if err := bg.prepare(live, t, len(r.turns), cfg); err != nil {
				r.Errors++
				if r.FirstError == "" {
					r.FirstError = err.Error()
				}
			}
		}
		held := false
		if bg != nil && float64(t) >= r.trigger {
			var err error
			if held, err = bg.hold(live, t, len(r.turns), window, cfg); err != nil {
				r.Errors++
				if r.FirstError == "" {
					r.FirstError = err.Error()
				}
			}
		}
		if float64(t) >= r.trigger && !held {
			if pre < 0 {
				pre = billed
			}
			var out []*replayMsg
			var srTokens int
			var err error
			if bg != nil {
				out, srTokens, err = bg.compact(live, len(r.turns), cfg)
			} else {
				out, srTokens, err = replayCompact(live, cfg, call)
			}
			if err != nil {
				r.Errors++
				turn.Failed = true
				if r.FirstError == "" {
					r.FirstError = err.Error()
				}
			} else {
				needed.compacted(live, out)
				live = out
				r.Compactions++
				r.SummaryRequestTokens += srTokens
				turn.Compacted = true
			}
			t = sum(live)
		}
		r.Peak = max(r.Peak, t)
		if t > window {
			r.Overflows++
		}
		k := 0
		for k < min(len(prev), len(live)) && prev[k] == live[k].sortedJSON() {
			k++
		}
		shared := sum(live[:k])
		// Explicit conversions keep each product rounded on its own (no fused
		// multiply-add), as Python computes it.
		billed += float64(0.1*float64(shared)) + float64(1.25*float64(t-shared))
		prev = prev[:0]
		for _, x := range live {
			prev = append(prev, x.sortedJSON())
		}
		turn.Tokens, turn.Shared, turn.Billed = t, shared, billed
		r.turns = append(r.turns, turn)
		needed.next(m, at, live)
		live = append(live, m)
	}
	r.Billed = int64(math.RoundToEven(billed))
	if pre < 0 {
		pre = billed
	}
	r.BilledPre = int64(math.RoundToEven(pre))
	r.Requests = len(r.turns)
	r.Needed, r.Recalled = needed.needed, needed.recalled

	all := make([]gjson.Result, len(msgs))
	for i, raw := range msgs {
		all[i] = gjson.Parse(raw)
	}
	final := make([]gjson.Result, len(live))
	for i, m := range live {
		final[i] = gjson.Parse(m.raw)
	}
	paths, asks := replayAnchors(all)
	text := replayBlob(final)
	for p := range paths {
		if strings.Contains(text, p) {
			r.Paths[0]++
		}
	}
	for _, q := range asks {
		if strings.Contains(text, runePrefix(q, 120)) {
			r.Asks[0]++
		}
	}
	r.Paths[1], r.Asks[1] = len(paths), len(asks)
	return r
}

// replayCompact compacts live as `ctxcompact compact` does and returns the new live
// context and the estimated size of the summary request a host summarizer would
// have been sent for the same compaction.
func replayCompact(live []*replayMsg, cfg []byte, call caller) ([]*replayMsg, int, error) {
	arr := replayArray(live)
	res, err := opResult(call, "compact.begin", compactParams(true, "builtin", cfg, "", "", arr))
	if err != nil {
		return nil, 0, err
	}
	if !res.Get("done").Bool() {
		return nil, 0, errors.New("ctxcompact: the built-in summarizer left the compaction unfinished")
	}
	var out []*replayMsg
	res.Get("messages").ForEach(func(_, m gjson.Result) bool {
		out = append(out, newReplayMsg(m.Raw))
		return true
	})
	return out, replaySummaryRequestTokens(arr, cfg, call), nil
}

// replayArray is the live context as replay.py sends it.
func replayArray(live []*replayMsg) string {
	var arr bytes.Buffer
	arr.WriteByte('[')
	for i, m := range live {
		if i > 0 {
			arr.WriteString(", ")
		}
		arr.WriteString(m.pyJSON())
	}
	arr.WriteByte(']')
	return arr.String()
}

// replaySummaryRequestTokens is the estimated size of the summary request a
// host summarizer would be sent to compact the messages arr (0 when the
// compaction summarizes nothing).
func replaySummaryRequestTokens(arr string, cfg []byte, call caller) int {
	n := 0
	if ask, err := opResult(call, "compact.begin", compactParams(true, "host", cfg, "", "", arr)); err == nil && !ask.Get("done").Bool() {
		ask.Get("summary_request.messages").ForEach(func(_, m gjson.Result) bool {
			n += replayEstimate(m)
			return true
		})
	}
	return n
}

// replayEstimate is replay.py's estimate of one message: ceil(characters/4) + 4,
// counting a string content, the "text" of content parts, and tool-call names and
// arguments. Characters are code points, as Python's len counts them. Arguments that
// are not a string (replay.py takes only strings) count the characters of their JSON.
func replayEstimate(m gjson.Result) int {
	n := utf8.RuneCountInString(replayText(m, ""))
	m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		f := tc.Get("function")
		n += utf8.RuneCountInString(f.Get("name").Str)
		n += utf8.RuneCountInString(argumentsText(f.Get("arguments")))
		return true
	})
	return (n+3)/4 + 4
}

// argumentsText is a tool call's arguments as text: the string, or the JSON of
// another value ("" for null or none).
func argumentsText(a gjson.Result) string {
	switch a.Type {
	case gjson.String:
		return a.Str
	case gjson.Null:
		return ""
	}
	return a.Raw
}

// replayText is a message's text: a string content, or the "text" of the parts of an
// array content joined by sep. With sep "" (replay.py's estimate) parts that are not
// objects count nothing; with "\n" (retention.py's anchors) a string part is its text
// and another value its JSON.
func replayText(m gjson.Result, sep string) string {
	c := m.Get("content")
	if c.Type == gjson.String {
		return c.Str
	}
	if !c.IsArray() {
		return ""
	}
	var parts []string
	c.ForEach(func(_, p gjson.Result) bool {
		switch {
		case p.IsObject():
			parts = append(parts, p.Get("text").Str)
		case sep == "":
		case p.Type == gjson.String:
			parts = append(parts, p.Str)
		default:
			parts = append(parts, p.Raw)
		}
		return true
	})
	return strings.Join(parts, sep)
}

// replayPathKeys are the tool-call argument keys whose values name files.
var replayPathKeys = []string{"file_path", "path", "filename", "notebook_path"}

// replayAnchors are the session's anchors as retention.py finds them: the file paths
// (string values containing "/") under replayPathKeys in tool-call arguments, and the
// user's requests (non-empty user messages, whitespace collapsed, first 200
// characters; earlier summaries excepted).
func replayAnchors(msgs []gjson.Result) (map[string]bool, []string) {
	paths := map[string]bool{}
	var asks []string
	for _, m := range msgs {
		m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
			a := tc.Get("function.arguments")
			var args map[string]any
			switch {
			case a.Type == gjson.String:
				if json.Valid([]byte(a.Str)) { // one value, as json.loads takes
					d := json.NewDecoder(strings.NewReader(a.Str))
					d.UseNumber()
					if d.Decode(&args) != nil {
						args = nil
					}
				}
			case a.IsObject():
				_ = json.Unmarshal([]byte(a.Raw), &args)
			}
			for _, k := range replayPathKeys {
				if v, ok := args[k].(string); ok && strings.Contains(v, "/") {
					paths[v] = true
				}
			}
			return true
		})
		if m.Get("role").Type == gjson.String && m.Get("role").Str == "user" {
			t := pyNorm(replayText(m, "\n"))
			if t != "" && !strings.HasPrefix(t, "[CONTEXT COMPACTION]") {
				asks = append(asks, runePrefix(t, 200))
			}
		}
	}
	return paths, asks
}

// replayBlob is the text the anchors are looked for in: every message's text and
// tool-call arguments, one per line, whitespace collapsed.
func replayBlob(msgs []gjson.Result) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, replayText(m, "\n"))
		m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
			parts = append(parts, argumentsText(tc.Get("function.arguments")))
			return true
		})
	}
	return pyNorm(strings.Join(parts, "\n"))
}

// pySpace is Python's str.isspace (and the regular expression \s): Go's unicode.IsSpace
// and the separators U+001C..U+001F.
func pySpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }

// pyNorm collapses each run of whitespace to one space and trims the ends.
func pyNorm(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if pySpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// runePrefix is the first n characters (code points) of s.
func runePrefix(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// marshalNoEscape is json.Marshal without escaping <, > and &.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// writeReplayTable prints the results as a table with a totals row.
func writeReplayTable(w io.Writer, results []*replayResult, window int, uses string) {
	fmt.Fprintf(w, "window %s tokens, compacting at %s (estimate: ceil(chars/4) + 4 per message); needed later: %s\n\n",
		groupDigits(int64(window)), groupDigits(int64(replayTrigger(window))), neededUsesText(uses))
	head := []string{"trace", "requests", "compactions", "errors", "overflows", "peak", "billed", "paths", "asks", "needed", "recalled", "summary requests"}
	background := len(results) > 0 && results[0].Background != nil
	if background {
		fmt.Fprintf(w, "prepared in the background, the summary back %d requests after it was asked for; blocking: the same replay compacting at the trigger\n\n", results[0].Background.Latency)
		head = append(head, "ready", "waited", "blocking compactions", "billed vs blocking")
	}
	rows := [][]string{head}
	tot := replayTotals(results)
	for _, r := range append(append([]*replayResult{}, results...), tot) {
		name := r.Trace
		if r == tot {
			name = replayTotalName(len(results))
		}
		row := replayRow(name, r)
		if b := r.Background; background && b != nil {
			row = append(row, fmt.Sprintf("%d (%.3f)", b.Ready, b.ReadyShare), fmt.Sprint(b.Waited), fmt.Sprint(b.BlockingCompactions), fmt.Sprintf("%.3f", b.BilledRatio))
		}
		rows = append(rows, row)
	}
	widths := make([]int, len(head))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for n, row := range rows {
		if n == len(rows)-1 {
			fmt.Fprintln(w, strings.Repeat("-", sumInts(widths)+2*(len(widths)-1)))
		}
		var line strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				line.WriteString(c + pad)
			} else {
				line.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, line.String())
	}
}

func replayTotalName(n int) string {
	if n == 1 {
		return "total (1 trace)"
	}
	return fmt.Sprintf("total (%d traces)", n)
}

// replayTotals sums the results (the largest peak).
func replayTotals(results []*replayResult) *replayResult {
	var tot replayResult
	for _, r := range results {
		tot.Messages += r.Messages
		tot.Requests += r.Requests
		tot.Compactions += r.Compactions
		tot.Errors += r.Errors
		tot.Overflows += r.Overflows
		tot.Peak = max(tot.Peak, r.Peak)
		tot.Billed += r.Billed
		tot.Paths[0], tot.Paths[1] = tot.Paths[0]+r.Paths[0], tot.Paths[1]+r.Paths[1]
		tot.Asks[0], tot.Asks[1] = tot.Asks[0]+r.Asks[0], tot.Asks[1]+r.Asks[1]
		tot.Needed += r.Needed
		tot.Recalled += r.Recalled
		tot.SummaryRequestTokens += r.SummaryRequestTokens
		if b := r.Background; b != nil {
			if tot.Background == nil {
				tot.Background = &replayBackgroundResult{Latency: b.Latency}
			}
			t := tot.Background
			t.Ready += b.Ready
			t.Waited += b.Waited
			t.Held += b.Held
			t.BlockingCompactions += b.BlockingCompactions
			t.BlockingOverflows += b.BlockingOverflows
			t.BlockingBilled += b.BlockingBilled
			t.BlockingSummaryRequestTokens += b.BlockingSummaryRequestTokens
		}
	}
	if tot.Background != nil {
		tot.Background.fill(tot.Compactions, tot.Billed)
	}
	return &tot
}

func replayRow(name string, r *replayResult) []string {
	return []string{name, groupDigits(int64(r.Requests)), fmt.Sprint(r.Compactions), fmt.Sprint(r.Errors), fmt.Sprint(r.Overflows),
		groupDigits(int64(r.Peak)), groupDigits(r.Billed),
		fmt.Sprintf("%d/%d", r.Paths[0], r.Paths[1]), fmt.Sprintf("%d/%d", r.Asks[0], r.Asks[1]),
		groupDigits(int64(r.Needed)), recalledText(r), groupDigits(int64(r.SummaryRequestTokens))}
}

// recalledText is the recalled count with its share of the needed: "172 (0.291)".
func recalledText(r *replayResult) string {
	if r.Needed == 0 {
		return groupDigits(int64(r.Recalled))
	}
	return fmt.Sprintf("%s (%.3f)", groupDigits(int64(r.Recalled)), float64(r.Recalled)/float64(r.Needed))
}

// neededUsesText says what counted as a use.
func neededUsesText(uses string) string {
	if uses == neededUsesArgs {
		return "uses in tool-call arguments (--needed-uses args)"
	}
	return "uses in assistant messages (--needed-uses all)"
}

func sumInts(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
