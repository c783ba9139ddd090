package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

func init() {
	commands["status"] = command{
		summary: "the context meter of a conversation file: used, threshold, window, and what the next compaction would take",
		run:     runStatus,
	}
}

// statusOutput is the stable output of `ctxcompact status --json`.
type statusOutput struct {
	// Used is the conversation's size in tokens: PromptTokens when given, else the
	// core's estimate (Source says which).
	Used   int    `json:"used"`
	Source string `json:"source"`
	Window int    `json:"window"`
	// Threshold is the size that triggers a compaction, Fraction its share of the
	// window.
	Threshold     int     `json:"threshold"`
	Fraction      float64 `json:"fraction"`
	ShouldCompact bool    `json:"should_compact"`
	// Next is what a compaction now would do (the builtin summarizer's, forced):
	// nil when there is nothing to compact.
	Next *statusNext `json:"next"`
}

// statusNext is what the next compaction would take.
type statusNext struct {
	Summarized  *[2]int `json:"summarized"` // input indices [from, to), nil when nothing is summarized
	Pruned      int     `json:"pruned"`     // tool outputs replaced by a placeholder
	TokensAfter int     `json:"tokens_after"`
	Messages    [2]int  `json:"messages"` // before, after
	Fits        bool    `json:"fits"`
}

// runStatus prints the meter of FILE: what a compaction now would take
// (compact.begin with the builtin summarizer, forced: the conversation is read
// once) and the trigger's view of its size (should_compress). Nothing is written
// back.
func runStatus(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("status", stderr,
		"usage: ctxcompact status FILE [--format NAME] [--context-length N] [--model NAME] [--config FILE] [--prompt-tokens N] [--json] [--wasm [--no-cache]]",
		"FILE holds a conversation as compact reads it. Prints how full the window is, the threshold, and what",
		"a compaction now would summarize and prune (the built-in summarizer's compaction; nothing is changed).")
	format := formatFlag(fs)
	contextLength := fs.Int("context-length", 0, "the model's context window in tokens, > 0 (default: config, else 200000)")
	model := fs.String("model", "", "model name, for per-model thresholds and the auto encoding")
	configFile := fs.String("config", "", "a JSON file with the config object; - reads stdin")
	promptTokens := fs.Int("prompt-tokens", 0, "the API-reported prompt tokens of the last request, > 0 (default: the core's estimate)")
	asJSON := fs.Bool("json", false, "print the meter as JSON")
	useWasm := fs.Bool("wasm", false, "run the embedded WebAssembly module instead of the native core (same output)")
	noCache := fs.Bool("no-cache", false, "with --wasm, compile the module without the on-disk compilation cache")
	file, err := fileArg(fs, args)
	if err != nil {
		return err
	}
	if isSet(fs, "context-length") && *contextLength <= 0 {
		return fmt.Errorf("ctxcompact status: --context-length must be a positive number of tokens, got %d", *contextLength)
	}
	if isSet(fs, "prompt-tokens") && *promptTokens <= 0 {
		return fmt.Errorf("ctxcompact status: --prompt-tokens must be a positive number of tokens, got %d", *promptTokens)
	}
	conv, err := readConversation(file, stdin, *format)
	if err != nil {
		return err
	}
	cfg, err := compactConfig("status", conv.config, *configFile, stdin, *contextLength, *model)
	if err != nil {
		return err
	}
	call := callerFor(*useWasm, !*noCache, stderr)
	params := compactParams(true, "builtin", cfg, conv.format, conv.system, conv.messages)
	if *promptTokens > 0 {
		params = withParam(params, "prompt_tokens", []byte(strconv.Itoa(*promptTokens)))
	}
	forced, err := opResult(call, "compact.begin", params)
	if err != nil {
		return err
	}
	fr := forced.Get("report")
	out := statusOutput{Used: int(fr.Get("tokens_before").Int()), Source: "estimate"}
	if *promptTokens > 0 {
		out.Used, out.Source = *promptTokens, "reported"
	}
	withConfig := append(append([]byte(`{"config":`), cfg...), '}')
	thr, err := opResult(call, "threshold.resolve", withConfig)
	if err != nil {
		return err
	}
	trigger, err := opResult(call, "should_compress", withParam(withConfig, "prompt_tokens", []byte(strconv.Itoa(out.Used))))
	if err != nil {
		return err
	}
	out.Window, out.Threshold, out.Fraction = int(thr.Get("context_length").Int()), int(thr.Get("threshold_tokens").Int()), thr.Get("fraction").Float()
	out.ShouldCompact = trigger.Get("should_compress").Bool()
	if fr.Get("compacted").Bool() {
		next := &statusNext{Pruned: len(fr.Get("pruned").Array()), TokensAfter: int(fr.Get("tokens_after").Int()),
			Messages: [2]int{int(fr.Get("messages_before").Int()), int(fr.Get("messages_after").Int())}, Fits: fr.Get("fits").Bool()}
		if s := fr.Get("summarized"); s.IsObject() {
			next.Summarized = &[2]int{int(s.Get("from").Int()), int(s.Get("to").Int())}
		}
		out.Next = next
	}
	if *asJSON {
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	pct := func(n int) string {
		return strconv.FormatFloat(100*float64(n)/float64(max(out.Window, 1)), 'f', 1, 64) + "%"
	}
	fmt.Fprintf(stdout, "used       %s tokens (%s), %s of the %s-token window\n", thousands(out.Used), out.Source, pct(out.Used), thousands(out.Window))
	state := "below it: " + thousands(out.Threshold-out.Used) + " tokens to go"
	if out.ShouldCompact {
		state = "reached: the next request should compact first"
	}
	fmt.Fprintf(stdout, "threshold  %s tokens (%s of the window), %s\n", thousands(out.Threshold), pct(out.Threshold), state)
	switch n := out.Next; {
	case n == nil:
		fmt.Fprintf(stdout, "next       nothing to compact: the head and the tail hold every message\n")
	default:
		what := "prune " + strconv.Itoa(n.Pruned) + " tool outputs"
		if n.Summarized != nil {
			what = "summarize messages " + strconv.Itoa(n.Summarized[0]) + "–" + strconv.Itoa(n.Summarized[1]-1) + ", " + what
		}
		fit := ""
		if !n.Fits {
			fit = " (still over the threshold)"
		}
		fmt.Fprintf(stdout, "next       %s: %d → %d messages, about %s tokens%s\n", what, n.Messages[0], n.Messages[1], thousands(n.TokensAfter), fit)
	}
	return nil
}

// thousands writes n with comma separators (12,345).
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}
