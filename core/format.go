package core

import (
	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// Format names a message shape: how a conversation's items, its tool calls and their
// results are laid out. Each has one messageFormat behind the seam below.
type Format string

// The formats. Aliases name the same format: "openai-chat" is FormatOpenAI,
// "anthropic-messages" is FormatAnthropic.
const (
	// FormatOpenAI is OpenAI chat completions: {role, content, tool_calls}, tool
	// results as role "tool" rows with a tool_call_id, the system prompt a system or
	// developer message.
	FormatOpenAI Format = "openai"
	// FormatAnthropic is Anthropic Messages: user and assistant turns, tool calls as
	// tool_use blocks, their results as tool_result blocks of the next user turn, the
	// system prompt the request's top-level "system".
	FormatAnthropic Format = "anthropic"
	// FormatAISDK is the Vercel AI SDK's ModelMessage: {role, content: string or
	// parts, providerOptions?}, tool calls as tool-call parts, their results as
	// tool-result parts of the role "tool" messages after them (format_aisdk.go).
	FormatAISDK Format = "ai-sdk"
	// FormatGemini is the Gemini API's contents: user and model turns of parts, calls
	// as functionCall parts answered by functionResponse parts of the next user turn,
	// the system prompt the request's systemInstruction (format_gemini.go).
	FormatGemini Format = "gemini"
	// FormatResponses is OpenAI Responses input items: messages, call and call
	// output items paired by call_id, server-side items kept opaque, the system prompt
	// the request's instructions (format_responses.go).
	FormatResponses Format = "responses"
)

// formatAliases maps every accepted name to its format.
var formatAliases = map[string]Format{
	"openai": FormatOpenAI, "openai-chat": FormatOpenAI,
	"anthropic": FormatAnthropic, "anthropic-messages": FormatAnthropic,
	"ai-sdk":    FormatAISDK,
	"gemini":    FormatGemini,
	"responses": FormatResponses, "openai-responses": FormatResponses,
}

// Formats lists the formats by their canonical names.
func Formats() []Format {
	return []Format{FormatOpenAI, FormatAnthropic, FormatAISDK, FormatGemini, FormatResponses}
}

// ParseFormat returns the format a name or an alias names, and false for any other.
func ParseFormat(name string) (Format, bool) {
	f, ok := formatAliases[name]
	return f, ok
}

// messageFormat is the seam between the compaction phases and one message shape.
// The phases (boundaries, prune, sanitize, assembly, validate, token counting) work
// on the single view, message, and ask the format for everything that depends on the
// shape: which items answer which calls, and the bytes of what they write back. None
// of them branches on the shape; a new format is one implementation of this and its
// entry in formatOf.
//
// OpenAI chat and Anthropic Messages share one reader (parseMessages): both are a list
// of {role, content} objects, and the reader records what either shape's fields say
// (tool_calls and tool_call_id; tool_use and tool_result blocks). What a field means
// for pairing and writing is the format's.
type messageFormat interface {
	// name is the format's canonical name.
	name() Format
	// read reads the request's list v into views, estimating each one's tokens with
	// tc; known is what the validating scan recorded of the list (nil when nothing).
	// Structural problems are invalid_messages errors with the item's path.
	read(v gjson.Result, tc tokenCounter, known *jsonraw.ArrayParts) ([]message, error)
	// readOne reads one item (path is its pointer, for errors).
	readOne(raw, path string) (message, error)
	// countItem estimates the tokens of one item as written (a new or changed one),
	// by the same rule read estimates the input's with.
	countItem(tc tokenCounter, raw string) int
	// topLevelSystem reports whether the request's "system" field holds the format's
	// system prompt (it lives outside the list).
	topLevelSystem() bool
	// checkSystem checks a top-level system prompt's shape and estimates its tokens.
	checkSystem(sys gjson.Result, tc tokenCounter) (tokens int, err error)
	// checkMessages refuses views the format has no place for (a role it does not
	// have), with the offending message's path.
	checkMessages(msgs []message) error
	// joinsPrevious is the group rule: whether m belongs to the tool group of the item
	// before it, so that no boundary falls between them (a result after its call; in
	// formats whose calls are separate items, the calls after the first too).
	joinsPrevious(m *message) bool
	// resultsCloseGroup reports whether one result item answers its whole group, so
	// calls it leaves unanswered are missing there (Anthropic's one user turn of
	// tool_result blocks), rather than one result item per call (OpenAI's tool rows).
	resultsCloseGroup() bool

	// prunable reports whether m holds tool output long enough to prune, and its
	// length in characters.
	prunable(m *message) (chars int, ok bool)
	// pruned returns m with each long output replaced by a placeholder naming the
	// call it answers (calls) and its size; every other byte is kept.
	pruned(m *message, calls callIndex, chars int) string
	// fixResults returns the result item raw with results for the ids in missing
	// added and those answering the ids in orphans taken out; keep is false when
	// nothing of it is left (it is removed).
	fixResults(raw string, missing, orphans []string) (fixed string, keep bool)
	// stubResults writes results for the calls ids of a group that have none. They
	// go after the group (added) or, when the format can hold them there, into next,
	// the message after the group (nil at the end): then into is its new JSON.
	stubResults(ids []string, next *outMsg) (added []string, into string)

	// summaryMessage writes the summary as a message of role ("user" or "assistant").
	summaryMessage(role, text string) string
	// mergeSummary puts the summary text (with the delimiter for role) before the
	// content of the tail message raw.
	mergeSummary(raw, text, role string) string
	// withSystemNote returns the system message m with SystemNote appended, or false
	// when the note is already there.
	withSystemNote(m *message) (string, bool)
	// systemWithNote returns the top-level system prompt sys with SystemNote
	// appended, or false when the note is already there.
	systemWithNote(sys gjson.Result) (string, bool)

	// cacheMarks is how the format's messages carry prompt-cache breakpoints, nil
	// when the format has none (cache.apply then refuses it at /format).
	cacheMarks() cacheMarks

	// validateResults lints a result item m (at path) against the group's pending
	// calls, removing those it answers; it reports whether m was one.
	validateResults(v *validation, m *message, mv gjson.Result, path string) bool
	// callPath is the JSON pointer of m's k-th call, for problems.
	callPath(m *message, path string, k int) string
	// validateCall lints the name and arguments of call c at cp.
	validateCall(v *validation, c *toolCall, cp string)
}

// formatOf returns the messageFormat of f.
func formatOf(f Format) messageFormat {
	if f == FormatAnthropic {
		return messagesFormat{}
	}
	if f == FormatAISDK {
		return newAISDKFormat()
	}
	if f == FormatGemini {
		return newGeminiFormat()
	}
	if f == FormatResponses {
		return newResponsesFormat()
	}
	return chatFormat{}
}

// DetectFormat is the format the ops read messages (a JSON array) in when a request
// names none; hasSystem says that the request gives a top-level system prompt. The
// rule is the format parameter's (docs/OPS.md): Responses or Gemini by their items'
// keys, else Anthropic when hasSystem or a message holds tool_use or tool_result
// blocks, else the AI SDK by its parts, else OpenAI chat. Messages that format cannot
// read are the invalid_messages error the ops give.
func DetectFormat(messages []byte, hasSystem bool) (Format, error) {
	if !gjson.ValidBytes(messages) {
		return "", errorf(CodeInvalidJSON, "/messages", "messages is not valid JSON")
	}
	mf, _, err := readList(gjson.Result{}, gjson.ParseBytes(messages), hasSystem, roughCounter, nil)
	if err != nil {
		return "", err
	}
	return mf.name(), nil
}

// readFormatParam reads a request's "format" (a name or alias); "" when absent.
func readFormatParam(v gjson.Result) (Format, error) {
	if !v.Exists() {
		return "", nil
	}
	if f, ok := ParseFormat(v.Str); ok && v.Type == gjson.String {
		return f, nil
	}
	return "", errorf(CodeInvalidRequest, "/format", "format must be one of %s", formatNames())
}

// formatNames lists the accepted format names, aliases included, for errors.
func formatNames() string {
	return `"openai" (alias "openai-chat"), "anthropic" (alias "anthropic-messages"), "ai-sdk", "gemini" or "responses" (alias "openai-responses")`
}

// detectFormat is the format of msgs when the request names none: Anthropic when a
// top-level system prompt is given or a message holds tool_use or tool_result
// blocks, else the AI SDK when a message holds parts only it has (tool-call,
// tool-result, tool-approval-*: the chat reader notes them), OpenAI chat otherwise.
// An AI SDK list must then be read again by its reader (rereadAs).
func detectFormat(msgs []message, hasSystem bool) Format {
	if hasSystem {
		return FormatAnthropic
	}
	aiSDK := false
	for i := range msgs {
		if msgs[i].blocks {
			return FormatAnthropic
		}
		aiSDK = aiSDK || msgs[i].aiSDKParts
	}
	if aiSDK {
		return FormatAISDK
	}
	return FormatOpenAI
}

// rereadAs reports whether a list the chat reader read and detectFormat named f
// must be read again with f's reader: the AI SDK shares the chat envelope, not its
// reader.
func rereadAs(f Format) bool { return f == FormatAISDK }

// readList reads a request's list v as the format formatV names, or, when it names
// none, as the format sniffed from the items (sniffFormat) or detected from the chat
// views (detectFormat; hasSystem: the request gives a top-level system).
func readList(formatV, v gjson.Result, hasSystem bool, tc tokenCounter, known *jsonraw.ArrayParts) (messageFormat, []message, error) {
	f, err := readFormatParam(formatV)
	if err != nil {
		return nil, nil, err
	}
	if f == "" {
		f = sniffFormat(v, known)
	}
	if f != "" {
		mf := formatOf(f)
		msgs, err := mf.read(v, tc, known)
		return mf, msgs, err
	}
	msgs, err := parseMessages(v, tc, known)
	if err != nil {
		return nil, nil, err
	}
	mf := formatOf(detectFormat(msgs, hasSystem))
	if rereadAs(mf.name()) {
		msgs, err = mf.read(v, tc, known)
	}
	return mf, msgs, err
}

// sniffFormat names the format of a list whose items are not the chat formats'
// {role, content} envelope, from their top-level keys; "" for the chat formats (which
// detectFormat tells apart once read). Input that fits several formats reads as chat.
func sniffFormat(v gjson.Result, known *jsonraw.ArrayParts) Format {
	var keys func(yield func(key string) bool)
	if known.HasFields(v.Raw) {
		keys = func(yield func(string) bool) {
			for k := range known.ElementList() {
				fields, _ := known.FieldsOf(k)
				for i := range fields {
					if !yield(jsonraw.DecodeString(fields[i].Key(v.Raw))) {
						return
					}
				}
			}
		}
	} else {
		keys = func(yield func(string) bool) {
			jsonraw.ForEachElement(v.Raw, func(item string) bool {
				more := true
				if item[0] == '{' {
					jsonraw.ForEachField(item, func(k, _ string) bool { more = yield(k); return more })
				}
				return more
			})
		}
	}
	var f Format
	keys(func(k string) bool {
		f = sniffKey(k)
		return f == ""
	})
	return f
}

// sniffKey is the format a top-level item key belongs to only, "" when the chat
// formats have it too or nobody does.
func sniffKey(k string) Format {
	switch k {
	case "parts":
		return FormatGemini
	case "type":
		return FormatResponses
	}
	return ""
}

// joinNames joins the names of a typed string enum for an error message.
func joinNames[S ~string](names []S) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += string(n)
	}
	return out
}

// checkList refuses a request's list that is absent or not an array; what names the
// format's items ("Gemini contents"), for the message.
func checkList(v gjson.Result, what string) error {
	if !v.Exists() {
		return errorf(CodeInvalidMessages, "/messages", "messages is required: an array of %s", what)
	}
	if !v.IsArray() {
		return errorf(CodeInvalidMessages, "/messages", "messages must be an array of %s", what)
	}
	return nil
}
