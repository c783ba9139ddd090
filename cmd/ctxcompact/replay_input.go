package main

import (
	"fmt"

	"github.com/ctxcompact/ctxcompact/core"
)

// replayFormatNames name the formats replay refuses, as the error says them.
var replayFormatNames = map[core.Format]string{
	core.FormatResponses: "OpenAI Responses items",
	core.FormatGemini:    "Gemini contents",
	core.FormatAISDK:     "AI SDK messages",
}

// replayableFormat refuses a session replay cannot replay: replay.py's estimate and
// its assistant turns read OpenAI chat (and Anthropic) messages only, so the numbers
// of another format would mean nothing. The format is the file's (its list key or
// "format"), else the one the core detects.
func replayableFormat(file string, conv conversation) error {
	f, ok := core.ParseFormat(conv.format)
	if !ok {
		var err error
		if f, err = core.DetectFormat([]byte(conv.messages), conv.system != ""); err != nil {
			return nil // compaction names what is wrong with the messages, as before
		}
	}
	name, refused := replayFormatNames[f]
	if !refused {
		return nil
	}
	return &core.Error{Code: core.CodeInvalidRequest, Message: fmt.Sprintf(
		"ctxcompact replay: %s holds %s (format %q): replay reads OpenAI chat or Anthropic messages only, {\"messages\": [...]} or a bare array", displayName(file), name, f)}
}
