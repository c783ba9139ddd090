package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// cookbook is OpenAI's token-counting example: the API reported 124 prompt tokens
// on gpt-4o (o200k_base) and 129 on gpt-4 (cl100k_base).
const cookbook = `[
 {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
 {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
 {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
 {"role": "system", "name": "example_user", "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
 {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less busy about how to do better."},
 {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for the client deliverable."}
]`

// parseTokensOutput checks the stable shape: exactly "encoding", "calibration",
// "total" and "per_message", total = sum of per_message plus the reply priming.
func parseTokensOutput(t *testing.T, stdout string, priming int) (int, []int) {
	t.Helper()
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &keys); err != nil {
		t.Fatalf("output is not a JSON object: %q", stdout)
	}
	if len(keys) != 4 || keys["encoding"] == nil || keys["calibration"] == nil || keys["total"] == nil || keys["per_message"] == nil {
		t.Fatalf("output must hold exactly encoding, calibration, total and per_message: %s", stdout)
	}
	var out struct {
		Total      int   `json:"total"`
		PerMessage []int `json:"per_message"`
	}
	_ = json.Unmarshal([]byte(stdout), &out)
	sum := priming
	for _, n := range out.PerMessage {
		sum += n
	}
	if sum != out.Total {
		t.Errorf("total %d is not the per-message sum plus %d (%d)", out.Total, priming, sum)
	}
	return out.Total, out.PerMessage
}

func TestTokensCommandExactCounts(t *testing.T) {
	bare := cliTempFile(t, "conv.json", cookbook)
	wrapped := cliTempFile(t, "req.json", `{"messages": `+cookbook+`, "other": 1}`)
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{bare, "--encoding", "o200k_base"}, 124},
		{[]string{"--encoding", "cl100k_base", bare}, 129},
		{[]string{wrapped, "--encoding=cl100k_base"}, 129},
		{[]string{wrapped, "--encoding", "auto", "--model", "gpt-4o-mini"}, 124},
		{[]string{wrapped, "--encoding", "auto", "--model", "gpt-4"}, 129},
	} {
		code, stdout, stderr := cliRun(t, "", append([]string{"tokens"}, c.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		total, per := parseTokensOutput(t, stdout, 3)
		if total != c.want || len(per) != 6 {
			t.Errorf("%v: total %d over %d messages, want %d over 6", c.args, total, len(per), c.want)
		}
	}
}

func TestTokensCommandRoughConfigAndStdin(t *testing.T) {
	code, stdout, stderr := cliRun(t, cookbook, "tokens", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	total, per := parseTokensOutput(t, stdout, 0)
	if !reflect.DeepEqual(per, []int{29, 16, 17, 29, 20, 26}) || total != 137 {
		t.Errorf("rough: %d %v", total, per)
	}
	// The file's config applies (encoding and calibration); flags override it.
	cfg := cliTempFile(t, "cfg.json", `{"messages": `+cookbook+`, "config": {"tokens": {"encoding": "o200k_base", "calibration": 2}}}`)
	_, stdout, _ = cliRun(t, "", "tokens", cfg)
	if total, _ := parseTokensOutput(t, stdout, 3); total != 2*(124-3)+3 {
		t.Errorf("config o200k x2: total %d, want %d", total, 2*(124-3)+3)
	}
	_, stdout, _ = cliRun(t, "", "tokens", cfg, "--calibration", "1")
	if total, _ := parseTokensOutput(t, stdout, 3); total != 124 {
		t.Errorf("--calibration 1 over config: total %d, want 124", total)
	}
}

func TestTokensCommandErrors(t *testing.T) {
	conv := cliTempFile(t, "conv.json", cookbook)
	for _, c := range []struct {
		args    []string
		stdin   string
		wantErr string
	}{
		{nil, "", "want exactly one FILE, got 0"},
		{[]string{filepath.Join(t.TempDir(), "missing.json")}, "", "no such file"},
		{[]string{"-"}, "{not json", "stdin: not valid JSON at line 1, column 2 (byte 2): invalid character 'n'"},
		{[]string{"-"}, `{"msgs": []}`, "must hold"},
		{[]string{conv, "--encoding", "p50k_base"}, "", "unknown encoding"},
		{[]string{"-"}, `[{"role":"user","content":"hi"}, 5]`, "/messages/1"},
		{[]string{conv, conv}, "", "want exactly one FILE, got 2"},
		{[]string{conv, "--calibration", "0"}, "", "--calibration must be a positive factor"},
		{[]string{conv, "--calibration", "-1.5"}, "", "--calibration must be a positive factor"},
	} {
		code, stdout, stderr := cliRun(t, c.stdin, append([]string{"tokens"}, c.args...)...)
		if code == 0 || stdout != "" || !strings.Contains(stderr, c.wantErr) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a failure mentioning %q", c.args, code, stdout, stderr, c.wantErr)
		}
	}
}
