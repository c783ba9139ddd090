package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/host"
)

// Compact calls the summarizer only when the core asks for a summary: here a
// forced compaction summarizes the turns between the head and the protected tail.
func ExampleEngine_Compact() {
	ctx := context.Background()
	// One Engine per process: compiling the module is the slow part.
	eng, err := host.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)

	var msgs []map[string]string
	msgs = append(msgs, map[string]string{"role": "system", "content": "You are a coding agent."})
	for i := range 30 {
		msgs = append(msgs,
			map[string]string{"role": "user", "content": fmt.Sprintf("Step %d: change the parser.", i)},
			map[string]string{"role": "assistant", "content": strings.Repeat(fmt.Sprintf("Changed line %d. ", i), 150)})
	}
	raw, _ := json.Marshal(msgs)

	res, err := eng.Compact(ctx, raw, json.RawMessage(`{"model":{"context_length":32000}}`),
		func(ctx context.Context, req core.SummaryRequest) (string, error) {
			// Send req.Messages to an LLM with req.MaxTokens; return its text.
			return "## Goal\nChange the parser, step by step.", nil
		}, host.CompactOptions{Force: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Done, res.Report.Summarizer, res.Report.MessagesBefore > res.Report.MessagesAfter)
	// Prints: true host true (TestCompact checks this flow; the example is not run
	// because compiling the module again would double the package's test time).
}
