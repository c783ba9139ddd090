package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestAgentLoop replays the README's example trace in a 16K window, as
// `go run ./examples/agent-loop/go` does: it compacts at least once, every time
// with the model's summary, every request the model got fits the window, and the
// lines say so.
func TestAgentLoop(t *testing.T) {
	const window = 16000
	var out bytes.Buffer
	res, err := runLoop(context.Background(), "../../astropy-12907.json", window, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if res.Compactions < 1 {
		t.Fatalf("no compaction in a %d-token window", window)
	}
	for k, s := range res.Summarizers {
		if s != "host" || res.Fallbacks[k] != "" {
			t.Fatalf("compaction %d: summarizer %s, fallback %q", k+1, s, res.Fallbacks[k])
		}
	}
	summaries := 0
	for i, r := range res.Requests {
		if r.Status != 200 {
			t.Fatalf("request %d: HTTP %d", i, r.Status)
		}
		if r.PromptTokens > window {
			t.Fatalf("request %d (%s, summary %v) has %d prompt tokens, over the %d-token window", i, r.Path, r.Summary, r.PromptTokens, window)
		}
		if r.Summary {
			summaries++
		}
	}
	if summaries != res.Compactions || res.Turns != 64 || len(res.Requests) != res.Turns+summaries {
		t.Fatalf("%d turns, %d compactions, %d summary requests, %d requests", res.Turns, res.Compactions, summaries, len(res.Requests))
	}

	line := regexp.MustCompile(`^compaction (\d+) at turn (\d+): (\d+) -> (\d+) messages, (\d+) -> (\d+) tokens \(summarizer host\)$`)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != res.Compactions+1 {
		t.Fatalf("want %d lines, got:\n%s", res.Compactions+1, out.String())
	}
	for _, l := range lines[:res.Compactions] {
		if !line.MatchString(l) {
			t.Fatalf("not a compaction line: %q", l)
		}
	}
	if want := fmt.Sprintf("done: 64 turns, %d compactions, %d model requests", res.Compactions, len(res.Requests)); lines[len(lines)-1] != want {
		t.Fatalf("last line %q, want %q", lines[len(lines)-1], want)
	}
}

func TestParseArgs(t *testing.T) {
	for _, c := range []struct {
		args   []string
		trace  string
		window int
		err    string
	}{
		{nil, defaultTrace, defaultWindow, ""},
		{[]string{"t.json"}, "t.json", defaultWindow, ""},
		{[]string{"--window", "8000", "t.json"}, "t.json", 8000, ""},
		{[]string{"t.json", "--window=9000"}, "t.json", 9000, ""},
		{[]string{"--window", "0"}, "", 0, "--window must be a positive number"},
		{[]string{"--window"}, "", 0, "--window needs"},
		{[]string{"a.json", "b.json"}, "", 0, "one trace at a time"},
		{[]string{"--verbose"}, "", 0, "unknown flag --verbose"},
	} {
		trace, window, err := parseArgs(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%v: want an error with %q, got %v", c.args, c.err, err)
			}
			continue
		}
		if err != nil || trace != c.trace || window != c.window {
			t.Fatalf("%v: %q %d %v", c.args, trace, window, err)
		}
	}
}
