package recalltest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/ctxcompact/ctxcompact/core"
)

// BenchNeedle is in one message of the benchmark archive only.
const BenchNeedle = "internal/needle/haystack_test.go"

// BenchQueries are the searches the stores' 100 MB benchmarks time: a path in one
// message, a common path, two common words.
var BenchQueries = []struct{ Name, Query string }{
	{"rare-path", BenchNeedle},
	{"common-path-limit10", "src/mod_7/"},
	{"two-words-limit10", "error config"},
}

// BenchArchive is the benchmarks' archive of about 100 MB of tool outputs, the same
// on every run: 250 ranges (r1..r250) of 100 messages of ~4 KB, each given to put in
// order. It returns the archived megabytes (JSON and text).
func BenchArchive(put func(core.RecallArchive) error) (mb float64, err error) {
	rng := rand.New(rand.NewPCG(17, 42))
	words := strings.Fields("the a of to in is for on with that def return import class self value error file path test data result config user request function module package build run output line")
	total := 0
	for k := 1; k <= 250; k++ {
		a := core.RecallArchive{Range: core.RecallRange{ID: fmt.Sprintf("r%d", k), FromIndex: 0, ToIndex: 100, Summary: "summary"}}
		for i := 0; i < 100; i++ {
			var sb strings.Builder
			for sb.Len() < 4000 {
				if rng.IntN(40) == 0 {
					fmt.Fprintf(&sb, "src/mod_%d/file_%d.py ", rng.IntN(500), rng.IntN(50))
				} else {
					sb.WriteString(words[rng.IntN(len(words))])
					sb.WriteByte(' ')
				}
			}
			if k == 3 && i == 50 {
				sb.WriteString(" the needle: " + BenchNeedle + " failed")
			}
			content := sb.String()
			js, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": "c", "content": content})
			a.Rows = append(a.Rows, core.RecallRow{ID: fmt.Sprintf("r%d.%d", k, i), RangeID: a.Range.ID, Position: i,
				Role: "tool", Reason: "summarized", JSON: string(js), Text: "tool\n" + content})
			total += len(js) + len(content)
		}
		if err := put(a); err != nil {
			return 0, err
		}
	}
	return float64(total) / 1e6, nil
}
