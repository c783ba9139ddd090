package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// detectedBecause is why the core reads a list as each format when no format is
// named (the rule of core.DetectFormat).
var detectedBecause = map[core.Format]string{
	core.FormatResponses: "its items have a top-level \"type\"",
	core.FormatGemini:    "its items have \"parts\"",
	core.FormatAnthropic: "a top-level \"system\" or tool_use/tool_result blocks",
	core.FormatAISDK:     "tool-call, tool-result or tool-approval parts",
	core.FormatOpenAI:    "chat messages with none of the other formats' marks",
}

// formatNote is the line that says how the conversation's messages are read:
// "format anthropic (detected: ...)" or "format responses (from the file's "input"
// key)"; "" when the format cannot be told (the op then said what is wrong).
func formatNote(conv conversation) string {
	if conv.format != "" {
		f, ok := core.ParseFormat(conv.format)
		if !ok {
			return ""
		}
		return fmt.Sprintf("format %s (from %s)", f, conv.formatFrom)
	}
	f, err := core.DetectFormat([]byte(conv.messages), conv.system != "")
	if err != nil {
		return ""
	}
	return fmt.Sprintf("format %s (detected: %s)", f, detectedBecause[f])
}

// resolvedFormat is the conversation's format: named, else detected ("" when the
// messages cannot be read).
func resolvedFormat(conv conversation) string {
	if conv.format != "" {
		return conv.format
	}
	f, _ := core.DetectFormat([]byte(conv.messages), conv.system != "")
	return string(f)
}

// notCompactedBecause explains a report's reason for compacting nothing.
var notCompactedBecause = map[string]string{
	"nothing_to_compact": "every message is in the protected head or tail (compression.protect_first_n, protect_last_n and the tail's token budget), so nothing lies between them to summarize, and no older tool output is long enough to prune",
	"below_threshold":    "the estimate is below the threshold",
	"disabled":           "compression is disabled in the config (compression.enabled false)",
}

// writeRepairs writes a line saying how the tool pairs were repaired (nothing when
// they needed no repair): the report's or sanitize's removed, stubbed and repaired.
func writeRepairs(w io.Writer, removed, stubbed, repaired gjson.Result) {
	var parts []string
	if n := len(removed.Array()); n > 0 {
		parts = append(parts, fmt.Sprintf("removed %d orphan tool result(s) (messages %s)", n, joinRaw(removed)))
	}
	if n := len(stubbed.Array()); n > 0 {
		parts = append(parts, fmt.Sprintf("stubbed %d call(s) without a result (%s)", n, joinRaw(stubbed)))
	}
	if n := len(repaired.Array()); n > 0 {
		parts = append(parts, fmt.Sprintf("repaired %d message(s) (messages %s)", n, joinRaw(repaired)))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "  tool pairs repaired: %s\n", strings.Join(parts, "; "))
	}
}

// joinRaw lists an array's values, comma-separated, strings without quotes.
func joinRaw(a gjson.Result) string {
	var s []string
	a.ForEach(func(_, v gjson.Result) bool {
		s = append(s, v.String())
		return true
	})
	return strings.Join(s, ", ")
}
