package main

import (
	"strings"
	"testing"
)

// replay refuses, by name and with exit 1, the formats whose numbers it cannot
// compute (its estimate and turns read chat messages): Responses items, Gemini
// contents and AI SDK messages, whether their key, the file's "format" or the items
// say so; chat and Anthropic files still replay.
func TestReplayRefusesOtherFormatsByName(t *testing.T) {
	resp := `[{"type":"message","role":"user","content":"hi"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}]`
	for _, c := range []struct{ name, content, want string }{
		{"input", `{"input":` + resp + `}`, `OpenAI Responses items (format "responses")`},
		{"responses-in-messages", `{"messages":` + resp + `}`, `OpenAI Responses items (format "responses")`},
		{"contents", `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"hello"}]}]}`, `Gemini contents (format "gemini")`},
		{"ai-sdk-format", `{"format":"ai-sdk","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`, `AI SDK messages (format "ai-sdk")`},
		{"ai-sdk-detected", `[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool-call","toolCallId":"c1","toolName":"ls","input":{}}]},{"role":"tool","content":[{"type":"tool-result","toolCallId":"c1","toolName":"ls","output":{"type":"text","value":"a"}}]}]`, `AI SDK messages (format "ai-sdk")`},
	} {
		file := cliTempFile(t, c.name+".json", c.content)
		code, out, stderr := cliRun(t, "", "replay", "--window", "1000", file)
		if code != 1 || out != "" || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "replay reads OpenAI chat or Anthropic messages only") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 naming %s", c.name, code, out, stderr, c.want)
		}
	}
	for _, c := range []struct{ name, content string }{
		{"chat", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`},
		{"anthropic", `{"system":"s","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"hello"}]}]}`},
	} {
		file := cliTempFile(t, c.name+".json", c.content)
		if code, _, stderr := cliRun(t, "", "replay", "--window", "1000", "--json", file); code != 0 {
			t.Errorf("%s: exit %d: %s", c.name, code, stderr)
		}
	}
}
