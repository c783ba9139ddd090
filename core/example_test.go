package core_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ctxcompact/ctxcompact/core"
)

// Compact a conversation that outgrew a 4,000-token window, with the builtin
// extractive summary (pass CompactOptions.Summarize to use an LLM).
func ExampleCompact() {
	msgs := []map[string]string{{"role": "system", "content": "You are a coding agent."}}
	for i := range 10 {
		msgs = append(msgs,
			map[string]string{"role": "user", "content": fmt.Sprintf("Step %d: read the next file.", i)},
			map[string]string{"role": "assistant", "content": strings.Repeat("Reading it. ", 150)})
	}
	list, _ := json.Marshal(msgs)
	res, err := core.Compact(list, core.CompactOptions{Config: json.RawMessage(`{"model":{"context_length":4000}}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := res.Report
	fmt.Println(r.Reason, r.MessagesBefore, "->", r.MessagesAfter, "messages, fits:", r.Fits)
	// Output: compacted 21 -> 5 messages, fits: true
}

// Bad input is an *Error with a stable code and the JSON pointer of what is wrong.
func ExampleValidate() {
	_, err := core.Validate(json.RawMessage(`[{"role":"user","content":"hi"}]`), core.ValidateOptions{Format: "chat"})
	var e *core.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, e.Path)
	}
	// Output: invalid_request /format
}
