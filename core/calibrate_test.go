package core

import (
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

// traceConversation is one recorded Claude Code file: the messages of its last
// request and the prompt tokens the API reported for its first and last request.
type traceConversation struct {
	messages    []gjson.Result
	raw         []byte // messages, as a JSON array
	first, last int
}

// loadTrace reads a trace file. The first request sent the first message only (the
// user's request, or Claude Code's summary after a compaction); the last request
// sent every message except a final assistant reply, which is its answer.
func loadTrace(t testing.TB, name string) traceConversation {
	t.Helper()
	b, err := os.ReadFile(testtraces.File(t, name))
	if err != nil {
		t.Fatal(err)
	}
	d := gjson.ParseBytes(b)
	msgs := d.Get("messages").Array()
	if n := len(msgs); n > 0 && msgs[n-1].Get("role").Str == "assistant" {
		msgs = msgs[:n-1]
	}
	raw := []byte{'['}
	for i, m := range msgs {
		if i > 0 {
			raw = append(raw, ',')
		}
		raw = append(raw, m.Raw...)
	}
	raw = append(raw, ']')
	tc := traceConversation{
		messages: msgs, raw: raw,
		first: int(d.Get("meta.reported_prompt_tokens_first_call").Int()),
		last:  int(d.Get("meta.reported_prompt_tokens_last_call").Int()),
	}
	if len(msgs) < 2 || tc.first <= 0 || tc.last <= tc.first {
		t.Fatalf("%s: unexpected trace shape: %d messages, reported %d -> %d", name, len(msgs), tc.first, tc.last)
	}
	return tc
}

// predictLast predicts the reported prompt tokens of a conversation's last request
// from its first reported count plus the calibrated estimate of what was added.
func predictLast(t testing.TB, tc traceConversation, encoding string, factor float64) int {
	t.Helper()
	r, err := CountTokens(tc.raw, CountTokensOptions{Encoding: encoding, Calibration: factor})
	if err != nil {
		t.Fatal(err)
	}
	added := 0
	for _, n := range r.PerMessage[1:] {
		added += n
	}
	return tc.first + added
}

// TestCalibrationOnClaudeCodeTraces is the acceptance test of docs/DESIGN.md §7 calibration
// on real data: calibrated on the precompact half of a session (delta method: the
// tokens added between its first and last request, so the ~26k-token system prompt
// and tool schemas the transcript lacks cancel out), the estimate predicts the last
// reported prompt tokens of the postcompact half within 15%.
func TestCalibrationOnClaudeCodeTraces(t *testing.T) {
	testtraces.Require(t)
	for _, id := range []string{"258c7280", "4d5611e5", "ae4a77f8"} {
		pre := loadTrace(t, "claude-code-spotter-"+id+"-precompact.json")
		post := loadTrace(t, "claude-code-spotter-"+id+"-postcompact.json")
		for _, enc := range []string{EncodingRough, EncodingO200k} {
			t.Run(id+"/"+enc, func(t *testing.T) {
				cal, err := Calibrate(pre.raw, CalibrateOptions{
					Encoding: enc, PromptTokens: pre.last,
					Baseline: &CalibrationBaseline{MessageCount: 1, PromptTokens: pre.first},
				})
				if err != nil {
					t.Fatal(err)
				}
				uncal := predictLast(t, post, enc, 0)
				got := predictLast(t, post, enc, cal.Factor)
				errUncal := relErr(uncal, post.last)
				errCal := relErr(got, post.last)
				t.Logf("factor %.4f (implied overhead %d); postcompact last reported %d: uncalibrated %d (%+.1f%%), calibrated %d (%+.1f%%)",
					cal.Factor, cal.FixedOverhead, post.last, uncal, 100*errUncal, got, 100*errCal)
				if math.Abs(errCal) > 0.15 {
					t.Errorf("calibrated prediction %d is %.1f%% off the reported %d (limit 15%%)", got, 100*errCal, post.last)
				}
				if math.Abs(errCal) >= math.Abs(errUncal) {
					t.Errorf("calibration did not help: %.1f%% calibrated vs %.1f%% uncalibrated", 100*errCal, 100*errUncal)
				}
			})
		}
	}
}

func relErr(got, want int) float64 { return float64(got-want) / float64(want) }

var _ = fmt.Sprint
