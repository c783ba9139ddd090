package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/tidwall/gjson"
)

func init() {
	commands["simulate"] = command{
		summary: "price a recorded session's input under prompt-cache strategies: simulate FILE [--format NAME] [--json] [--ttl 1h]",
		run:     runSimulate,
	}
}

// runSimulate replays FILE through cache.simulate and prints a table per strategy,
// or with --json the op's result: {"strategies": {"<name>": {"cost", "savings",
// ...}}, "requests", "total_input_tokens", ...}.
func runSimulate(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("simulate", stderr,
		"usage: ctxcompact simulate FILE [--format NAME] [--json] [--ttl 1h] [--native] [--model NAME] [--strategies a,b] [--min-cacheable N] [--per-request]\n\nFILE holds {\"messages\": [...], \"system\"?}, {\"input\": [...], \"instructions\"?} (Responses) or a bare array (\"-\" reads stdin).\nOne request is priced before each assistant turn, its prompt the items before it as tokens counts them.")
	asJSON := fs.Bool("json", false, "print the cache.simulate result as JSON")
	ttl := fs.String("ttl", "5m", "cache TTL: 5m or 1h")
	native := fs.Bool("native", false, "native Anthropic layout (detected from the messages when not given)")
	model := fs.String("model", "", "model name, for its minimum cacheable length (default 1024 tokens)")
	strategies := fs.String("strategies", "", "comma-separated strategies (default all: "+strategyNames()+")")
	minTokens := fs.Int("min-cacheable", -1, "override the minimum cacheable prompt length in tokens, >= 0 (default: the model's)")
	perRequest := fs.Bool("per-request", false, "with --json, include each request's numbers")
	format := formatFlag(fs)
	file, err := fileArg(fs, args)
	if err != nil {
		return err
	}
	if isSet(fs, "min-cacheable") && *minTokens < 0 {
		return fmt.Errorf("ctxcompact simulate: --min-cacheable must be 0 or more tokens, got %d", *minTokens)
	}
	conv, err := readConversation(file, stdin, *format)
	if err != nil {
		return err
	}
	req := cacheRequest(conv, *native || conv.native(), *ttl)
	req = req[:len(req)-1] // reopen the object
	if *model != "" {
		req = append(req, `,"model":`...)
		req = appendJSONString(req, *model)
	}
	if *strategies != "" {
		req = append(req, `,"strategies":[`...)
		for i, s := range strings.Split(*strategies, ",") {
			if i > 0 {
				req = append(req, ',')
			}
			req = appendJSONString(req, strings.TrimSpace(s))
		}
		req = append(req, ']')
	}
	if *minTokens >= 0 {
		req = append(req, `,"min_cacheable_tokens":`...)
		req = strconv.AppendInt(req, int64(*minTokens), 10)
	}
	if *perRequest && *asJSON {
		req = append(req, `,"per_request":true`...)
	}
	req = append(req, '}')
	res, err := opResult(nativeCaller, "cache.simulate", req)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err = io.WriteString(stdout, res.Raw+"\n")
		return err
	}
	name := file
	if file != "-" {
		name = filepath.Base(file)
	}
	_, err = io.WriteString(stdout, simulateTable(name, res))
	return err
}

// simulateTable renders a cache.simulate result for a terminal.
func simulateTable(name string, res gjson.Result) string {
	var b strings.Builder
	timing := "no timestamps: every turn assumed within the TTL"
	if res.Get("timed").Bool() {
		timing = "TTL expiry from message timestamps"
	}
	fmt.Fprintf(&b, "%s: %d requests, %s input tokens (estimated), layout %s, TTL %s, min cacheable %d tokens, %s\n",
		name, res.Get("requests").Int(), groupDigits(res.Get("total_input_tokens").Int()), res.Get("layout").Str,
		res.Get("ttl").Str, res.Get("min_cacheable_tokens").Int(), timing)
	fmt.Fprintf(&b, "%-14s %14s %8s %12s %12s %12s %6s %6s\n", "strategy", "cost", "savings", "read", "written", "uncached", "hits", "misses")
	res.Get("strategies").ForEach(func(k, s gjson.Result) bool {
		fmt.Fprintf(&b, "%-14s %14s %7.1f%% %12s %12s %12s %6d %6d\n", k.Str,
			strconv.FormatFloat(s.Get("cost").Float(), 'f', 1, 64), 100*s.Get("savings").Float(),
			groupDigits(s.Get("cache_read_tokens").Int()), groupDigits(s.Get("cache_write_tokens").Int()),
			groupDigits(s.Get("uncached_tokens").Int()), s.Get("hits").Int(), s.Get("misses").Int())
		return true
	})
	b.WriteString("cost in base input-token units: uncached 1.0, cache write 1.25 (1h: 2.0), cache read 0.1\n")
	return b.String()
}

// groupDigits writes n with thousands separators: 6324617 -> 6,324,617.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// strategyNames lists the simulator's strategies, comma-separated, for the help.
func strategyNames() string {
	names := make([]string, 0, 3)
	for _, s := range core.Strategies() {
		names = append(names, string(s))
	}
	return strings.Join(names, ",")
}
