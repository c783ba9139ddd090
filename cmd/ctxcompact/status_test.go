package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStatusCommand: the meter agrees with what compact does and reports, natively
// and with --wasm, and a reported prompt size replaces the estimate.
func TestStatusCommand(t *testing.T) {
	var trace string
	for _, f := range sharedTraces(t) {
		if filepath.Base(f) == "tau-bench-gpt4o-airline.json" {
			trace = f
		}
	}
	require.NotEmpty(t, trace, "the shared traces hold tau-bench-gpt4o-airline.json")
	code, out, errOut := cliRun(t, "", "status", trace, "--context-length", "16000", "--json")
	require.Equal(t, 0, code, errOut)
	var st statusOutput
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, 16000, st.Window)
	require.Equal(t, "estimate", st.Source)
	require.Greater(t, st.Used, 0)
	require.Equal(t, st.Used >= st.Threshold, st.ShouldCompact)
	require.NotNil(t, st.Next)

	code, compacted, errOut := cliRun(t, "", "compact", trace, "--context-length", "16000")
	require.Equal(t, 0, code, errOut)
	var res struct {
		Messages []json.RawMessage
		Report   struct {
			TokensBefore int `json:"tokens_before"`
			TokensAfter  int `json:"tokens_after"`
			Summarized   *struct{ From, To int }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(compacted), &res))
	require.Equal(t, res.Report.TokensBefore, st.Used, "the meter's estimate is compact's")
	require.Equal(t, res.Report.TokensAfter, st.Next.TokensAfter, "and the next compaction is the one compact makes")
	require.Equal(t, len(res.Messages), st.Next.Messages[1])
	require.Equal(t, [2]int{res.Report.Summarized.From, res.Report.Summarized.To}, *st.Next.Summarized)

	code, wasm, errOut := cliRun(t, "", "status", trace, "--context-length", "16000", "--json", "--wasm")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, out, wasm)

	code, text, errOut := cliRun(t, "", "status", trace, "--context-length", "16000", "--prompt-tokens", "15000")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, text, "used       15,000 tokens (reported), 93.8% of the 16,000-token window")
	require.Contains(t, text, "reached: the next request should compact first")
	require.True(t, strings.HasPrefix(strings.Split(text, "\n")[2], "next       summarize messages "), text)

	code, _, errOut = cliRun(t, "", "status", trace, "--prompt-tokens", "-5")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--prompt-tokens must be a positive number")
}
