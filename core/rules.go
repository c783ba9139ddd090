package core

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Provider rules: what a provider refuses in a request that the generic tool-pair
// checks of validate cannot see: reasoning state (Anthropic thinking blocks,
// OpenAI reasoning items, Gemini thought signatures) that must come back as it was
// sent, where it was. The rules are data: one set per provider, each rule with its
// code, the provider documentation it comes from, and a check over the request's
// messages as written (docs/RULES.md lists them).

// Problem codes of the provider rules.
const (
	ProblemThinkingNotFirst            = "thinking_not_first"
	ProblemTurnWithoutThinking         = "turn_starts_without_thinking"
	ProblemThinkingSignatureMissing    = "thinking_signature_missing"
	ProblemRedactedThinkingDataMissing = "redacted_thinking_data_missing"
	ProblemReasoningWithoutFollowing   = "reasoning_without_following_item"
	ProblemDuplicateItemID             = "duplicate_item_id"
	ProblemInvalidCompactionItem       = "invalid_compaction_item"
	ProblemThoughtSignatureInvalid     = "thought_signature_invalid"
	ProblemThoughtSignatureMissing     = "thought_signature_missing"
	ProblemImageOutsideUserMessage     = "image_outside_user_message"
)

// Providers whose rules validate knows.
const (
	ProviderAnthropic = "anthropic"
	ProviderOpenAI    = "openai"
	ProviderGemini    = "gemini"
)

// Documentation pages the rules come from.
const (
	docAnthropicThinking = "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks"
	docOpenAIReasoning   = "https://platform.openai.com/docs/guides/reasoning#keeping-reasoning-items-in-context"
	docOpenAIInput       = "https://platform.openai.com/docs/api-reference/responses/create#responses-create-input"
	docOpenAICompact     = "https://platform.openai.com/docs/api-reference/responses/compact"
	docGeminiSignatures  = "https://ai.google.dev/gemini-api/docs/thought-signatures"
	docOpenAIChatInput   = "https://platform.openai.com/docs/api-reference/chat/create#chat-create-messages"
)

// providerRule is one rule of a provider: its problem code, the provider, the
// formats it reads, the page it comes from, and its check, which reports through
// the ruleRun.
type providerRule struct {
	Code     string
	Provider string
	Formats  []Format
	Doc      string
	Rule     string
	check    func(r *ruleRun)
}

// ruleRun is one request under the rules: its items as written and their paths.
type ruleRun struct {
	v     *validation
	items []gjson.Result
	paths []string
	rule  *providerRule
}

func (r *ruleRun) add(path, msg string) {
	r.v.add(r.rule.Code, path, msg+" ("+r.rule.Doc+")")
}

var providerRules = []providerRule{
	{
		Code: ProblemThinkingNotFirst, Provider: ProviderAnthropic, Formats: []Format{FormatAnthropic, FormatAISDK}, Doc: docAnthropicThinking,
		Rule:  "an assistant message of the current turn (after the last user message that is not only tool results) that holds thinking or redacted_thinking blocks starts with them",
		check: checkThinkingFirst,
	},
	{
		Code: ProblemTurnWithoutThinking, Provider: ProviderAnthropic, Formats: []Format{FormatAnthropic, FormatAISDK}, Doc: docAnthropicThinking,
		Rule:  "when the request holds thinking blocks (thinking is on), the first assistant message of a current turn that tool results continue starts with its thinking: a turn cut after its first message, or its thinking dropped, is refused",
		check: checkTurnStartsWithThinking,
	},
	{
		Code: ProblemThinkingSignatureMissing, Provider: ProviderAnthropic, Formats: []Format{FormatAnthropic, FormatAISDK}, Doc: docAnthropicThinking,
		Rule:  "a thinking block comes back unmodified, with its signature: a block without one was edited or made up; earlier turns' blocks may be dropped, never edited",
		check: checkThinkingSigned,
	},
	{
		Code: ProblemRedactedThinkingDataMissing, Provider: ProviderAnthropic, Formats: []Format{FormatAnthropic, FormatAISDK}, Doc: docAnthropicThinking,
		Rule:  "a redacted_thinking block comes back with its encrypted data",
		check: checkRedactedThinking,
	},
	{
		Code: ProblemReasoningWithoutFollowing, Provider: ProviderOpenAI, Formats: []Format{FormatResponses}, Doc: docOpenAIReasoning,
		Rule:  "a reasoning item (with encrypted_content or an id) stands directly before the item it preceded (a function call or an assistant message), never last, before another reasoning item, an input message or a call's output",
		check: checkReasoningFollowed,
	},
	{
		Code: ProblemDuplicateItemID, Provider: ProviderOpenAI, Formats: []Format{FormatResponses}, Doc: docOpenAIInput,
		Rule:  "an item id is sent once",
		check: checkItemIDs,
	},
	{
		Code: ProblemInvalidCompactionItem, Provider: ProviderOpenAI, Formats: []Format{FormatResponses}, Doc: docOpenAICompact,
		Rule:  "a compaction item is opaque and comes back with its encrypted_content",
		check: checkCompactionItems,
	},
	{
		Code: ProblemReasoningWithoutFollowing, Provider: ProviderOpenAI, Formats: []Format{FormatAISDK}, Doc: docOpenAIReasoning,
		Rule:  "a reasoning part that carries an OpenAI item (providerOptions.openai.itemId or reasoningEncryptedContent) is followed, in its assistant message, by the text or tool-call part it preceded (after the item's further summary parts)",
		check: checkAISDKReasoningFollowed,
	},
	{
		Code: ProblemDuplicateItemID, Provider: ProviderOpenAI, Formats: []Format{FormatAISDK}, Doc: docOpenAIInput,
		Rule:  "an OpenAI item id (providerOptions.openai.itemId) is sent once: the parts of one reasoning item, in a row, share it; any other repeat is a second item with the id",
		check: checkAISDKItemIDs,
	},
	{
		Code: ProblemImageOutsideUserMessage, Provider: ProviderOpenAI, Formats: []Format{FormatOpenAI}, Doc: docOpenAIChatInput,
		Rule:  "an image part (image_url) stands in a user message: chat completions refuse one in a system, assistant or tool message",
		check: checkChatImagesInUserMessages,
	},
	{
		Code: ProblemThoughtSignatureInvalid, Provider: ProviderGemini, Formats: []Format{FormatGemini}, Doc: docGeminiSignatures,
		Rule:  "a thoughtSignature is the non-empty string the model returned, on its part",
		check: checkThoughtSignatureValues,
	},
	{
		Code: ProblemThoughtSignatureMissing, Provider: ProviderGemini, Formats: []Format{FormatGemini}, Doc: docGeminiSignatures,
		Rule:  "when the request carries thought signatures, the first functionCall part of each model step of the current turn carries its own",
		check: checkCallSignatures,
	},
	{
		Code: ProblemThoughtSignatureInvalid, Provider: ProviderGemini, Formats: []Format{FormatAISDK}, Doc: docGeminiSignatures,
		Rule:  "a thought signature (providerOptions.google.thoughtSignature, or .vertex) is the non-empty string the model returned, on its part",
		check: checkAISDKSignatureValues,
	},
	{
		Code: ProblemThoughtSignatureMissing, Provider: ProviderGemini, Formats: []Format{FormatAISDK}, Doc: docGeminiSignatures,
		Rule:  "when the request carries thought signatures, the first tool-call part of each assistant message of the current turn carries its own",
		check: checkAISDKCallSignatures,
	},
}

// providerOf is the provider whose rules hold for a request in format f: the
// format's own (OpenAI chat and Responses: OpenAI; Anthropic messages: Anthropic;
// Gemini: Gemini), or for the AI SDK the provider the request names.
func providerOf(f Format, named string) string {
	switch f {
	case FormatAnthropic:
		return ProviderAnthropic
	case FormatGemini:
		return ProviderGemini
	case FormatResponses, FormatOpenAI:
		return ProviderOpenAI
	}
	return named
}

// readProviderParam reads validate's optional "provider": the rule set for AI SDK
// messages, which can go to any provider; for another format it must be the
// format's own provider.
func readProviderParam(v gjson.Result) (string, error) {
	if !v.Exists() {
		return "", nil
	}
	if v.Type == gjson.String {
		switch v.Str {
		case ProviderAnthropic, ProviderOpenAI, ProviderGemini:
			return v.Str, nil
		}
	}
	return "", errorf(CodeInvalidRequest, "/provider", `provider must be "anthropic", "openai" or "gemini"`)
}

// rulesProvider is the provider a config.model.provider names, for what depends on
// it when the format does not say (AI SDK messages' rule set here, their images'
// token rule in image_tokens.go): the AI SDK's provider ids and the other names of
// each provider (anthropic, openai, azure, google, google-vertex, gemini, vertex);
// "" for one it does not know (a gateway such as openrouter, or bedrock).
func rulesProvider(configured string) string {
	p := strings.ToLower(configured)
	switch {
	case strings.HasPrefix(p, "anthropic"):
		return ProviderAnthropic
	case strings.HasPrefix(p, "openai"), strings.HasPrefix(p, "azure"):
		return ProviderOpenAI
	case strings.HasPrefix(p, "google"), strings.HasPrefix(p, "gemini"), strings.HasPrefix(p, "vertex"):
		return ProviderGemini
	}
	return ""
}

// checkProviderRules runs the rules of provider over items, read in format f.
func checkProviderRules(v *validation, f Format, provider string, items []gjson.Result, paths []string) {
	for k := range providerRules {
		rule := &providerRules[k]
		if rule.Provider != provider || !hasFormat(rule.Formats, f) {
			continue
		}
		rule.check(&ruleRun{v: v, items: items, paths: paths, rule: rule})
	}
}

func hasFormat(fs []Format, f Format) bool {
	for _, g := range fs {
		if g == f {
			return true
		}
	}
	return false
}

// Anthropic (and AI SDK messages sent to Anthropic).

// thinkingKind tells a block or part that holds thinking: "thinking" (signed
// thinking), "redacted" or "".
func thinkingKind(b gjson.Result) string {
	switch b.Get("type").Str {
	case "thinking":
		return "thinking"
	case "reasoning": // AI SDK: signed, or Anthropic's redacted data in provider options
		if aisdkRedacted(b) {
			return "redacted"
		}
		return "thinking"
	case "redacted_thinking", "redacted-reasoning":
		return "redacted"
	}
	return ""
}

// aisdkRedacted: an AI SDK reasoning part that carries Anthropic's redacted data.
func aisdkRedacted(b gjson.Result) bool {
	return b.Get("providerOptions.anthropic.redactedData").Exists()
}

// isToolResultOnly: a user message (Anthropic) or tool message (AI SDK) that only
// carries tool results continues the assistant turn before it.
func isToolResultOnly(m gjson.Result) bool {
	role := m.Get("role").Str
	if role == "tool" {
		return true
	}
	if role != "user" {
		return false
	}
	c := m.Get("content")
	if !c.IsArray() || len(c.Array()) == 0 {
		return false
	}
	for _, b := range c.Array() {
		if t := b.Get("type").Str; t != "tool_result" && t != "tool-result" {
			return false
		}
	}
	return true
}

// currentTurn is the index of the first item of the current turn: the one after
// the last user message that is not only tool results.
func currentTurn(items []gjson.Result) int {
	start := 0
	for k, m := range items {
		if m.Get("role").Str == "user" && !isToolResultOnly(m) {
			start = k + 1
		}
	}
	return start
}

func checkThinkingFirst(r *ruleRun) {
	for k := currentTurn(r.items); k < len(r.items); k++ {
		m := r.items[k]
		if m.Get("role").Str != "assistant" || !m.Get("content").IsArray() {
			continue
		}
		blocks := m.Get("content").Array()
		has := false
		for _, b := range blocks {
			if thinkingKind(b) != "" {
				has = true
				break
			}
		}
		if has && thinkingKind(blocks[0]) == "" {
			r.add(pointer(r.paths[k]+"/content", 0), "an assistant message of the current turn with thinking blocks must start with them; a "+strconv.Quote(blocks[0].Get("type").Str)+" block stands first")
		}
	}
}

func checkTurnStartsWithThinking(r *ruleRun) {
	thinking := false
	forEachAssistantBlock(r, func(_ string, b gjson.Result) {
		if thinkingKind(b) != "" {
			thinking = true
		}
	})
	if !thinking {
		return // thinking is off, or every block was dropped (a model switch)
	}
	start := currentTurn(r.items)
	for k := start; k < len(r.items); k++ {
		m := r.items[k]
		if m.Get("role").Str != "assistant" {
			continue
		}
		// the turn's first assistant message, when tool results continue it
		if k+1 < len(r.items) && isToolResultOnly(r.items[k+1]) {
			has := false // one with thinking not first is thinking_not_first's
			for _, b := range m.Get("content").Array() {
				has = has || thinkingKind(b) != ""
			}
			if !has {
				r.add(pointer(r.paths[k]+"/content", 0), "the request holds thinking blocks, so thinking is on: the first assistant message of the current turn, which tool results continue, must start with its thinking block")
			}
		}
		return
	}
}

func forEachAssistantBlock(r *ruleRun, fn func(path string, b gjson.Result)) {
	forEachAssistantParts(r, 0, func(_ int, path string, parts []gjson.Result) {
		for j, b := range parts {
			fn(pointer(path, j), b)
		}
	})
}

func checkThinkingSigned(r *ruleRun) {
	forEachAssistantBlock(r, func(path string, b gjson.Result) {
		if thinkingKind(b) != "thinking" {
			return
		}
		sig := b.Get("signature")
		if b.Get("type").Str == "reasoning" { // AI SDK: the signature rides in provider options
			sig = b.Get("providerOptions.anthropic.signature")
			if !sig.Exists() {
				sig = b.Get("signature")
			}
		}
		if !nonEmptyString(sig) {
			r.add(path, "a thinking block needs the signature the model returned with it; without it the block was edited or is not the model's")
		}
	})
}

func checkRedactedThinking(r *ruleRun) {
	forEachAssistantBlock(r, func(path string, b gjson.Result) {
		if thinkingKind(b) != "redacted" {
			return
		}
		data := b.Get("data")
		if b.Get("type").Str == "reasoning" {
			data = b.Get("providerOptions.anthropic.redactedData")
		}
		if !nonEmptyString(data) {
			r.add(path, "a redacted_thinking block needs its encrypted data, unmodified")
		}
	})
}

// OpenAI Responses.

func checkReasoningFollowed(r *ruleRun) {
	for k, it := range r.items {
		if it.Get("type").Str != "reasoning" || !(nonEmptyString(it.Get("encrypted_content")) || nonEmptyString(it.Get("id"))) {
			continue
		}
		what := ""
		if k+1 == len(r.items) {
			what = "nothing"
		} else {
			next := r.items[k+1]
			t, role := next.Get("type").Str, next.Get("role").Str
			switch {
			case t == "reasoning":
				what = "another reasoning item"
			case role != "" && role != "assistant":
				what = "a " + strconv.Quote(role) + " message"
			case strings.HasSuffix(t, "_output"):
				what = "a " + strconv.Quote(t) + " item"
			case t == "compaction":
				what = "a compaction item"
			}
		}
		if what != "" {
			r.add(r.paths[k], "reasoning item "+strconv.Quote(it.Get("id").Str)+" must stand directly before the call or message it preceded; "+what+" follows it")
		}
	}
}

func checkItemIDs(r *ruleRun) {
	seen := map[string]bool{}
	for k, it := range r.items {
		id := it.Get("id")
		if !nonEmptyString(id) {
			continue
		}
		if seen[id.Str] {
			r.add(r.paths[k]+"/id", "item id "+strconv.Quote(id.Str)+" is sent more than once")
		}
		seen[id.Str] = true
	}
}

func checkCompactionItems(r *ruleRun) {
	for k, it := range r.items {
		if it.Get("type").Str == "compaction" && !nonEmptyString(it.Get("encrypted_content")) {
			r.add(r.paths[k], "a compaction item is opaque: it needs the encrypted_content the compact endpoint returned")
		}
	}
}

// Gemini.

func forEachModelPart(r *ruleRun, from int, fn func(k int, path string, parts []gjson.Result)) {
	for k := from; k < len(r.items); k++ {
		m := r.items[k]
		if m.Get("role").Str != "model" || !m.Get("parts").IsArray() {
			continue
		}
		fn(k, r.paths[k]+"/parts", m.Get("parts").Array())
	}
}

func checkThoughtSignatureValues(r *ruleRun) {
	forEachModelPart(r, 0, func(_ int, path string, parts []gjson.Result) {
		for j, p := range parts {
			if s := p.Get("thoughtSignature"); s.Exists() && !nonEmptyString(s) {
				r.add(pointer(path, j)+"/thoughtSignature", "a thoughtSignature must be the non-empty string the model returned")
			}
		}
	})
}

// geminiCurrentTurn: the first content after the last user content that is not
// only function responses.
func geminiCurrentTurn(items []gjson.Result) int {
	start := 0
	for k, m := range items {
		if m.Get("role").Str != "user" {
			continue
		}
		only := m.Get("parts").IsArray() && len(m.Get("parts").Array()) > 0
		for _, p := range m.Get("parts").Array() {
			if !p.Get("functionResponse").Exists() {
				only = false
			}
		}
		if !only {
			start = k + 1
		}
	}
	return start
}

func checkCallSignatures(r *ruleRun) {
	signed := false
	for _, m := range r.items {
		for _, p := range m.Get("parts").Array() {
			if p.Get("thoughtSignature").Exists() {
				signed = true
			}
		}
	}
	if !signed {
		return // no signatures at all: a model that returns none, or all dropped with a model switch
	}
	forEachModelPart(r, geminiCurrentTurn(r.items), func(_ int, path string, parts []gjson.Result) {
		for j, p := range parts {
			if !p.Get("functionCall").Exists() {
				continue
			}
			if !p.Get("thoughtSignature").Exists() {
				r.add(pointer(path, j), "the first function call of a model step in the current turn must carry its thought signature")
			}
			return // only the first call of a step carries one
		}
	})
}

// OpenAI chat completions.

func checkChatImagesInUserMessages(r *ruleRun) {
	for k, m := range r.items {
		role := m.Get("role").Str
		if role == "user" || !m.Get("content").IsArray() {
			continue
		}
		for j, p := range m.Get("content").Array() {
			if p.Get("type").Str == "image_url" {
				r.add(pointer(r.paths[k]+"/content", j), "image URLs are only allowed in user messages; this "+strconv.Quote(role)+" message holds one (put the image in a user message after it)")
			}
		}
	}
}

// AI SDK messages sent to OpenAI (the Responses provider): a reasoning part stands
// for a reasoning item, its id and encrypted content in providerOptions.openai.

// aisdkOpenAIItem returns the OpenAI item id a part carries ("" for none) and whether
// it is a reasoning part that stands for a reasoning item (an id or encrypted content).
func aisdkOpenAIItem(p gjson.Result) (id string, reasoning bool) {
	o := p.Get("providerOptions.openai")
	id = o.Get("itemId").Str
	if p.Get("type").Str == "reasoning" {
		reasoning = id != "" || nonEmptyString(o.Get("reasoningEncryptedContent"))
	}
	return id, reasoning
}

func checkAISDKReasoningFollowed(r *ruleRun) {
	forEachAssistantParts(r, 0, func(_ int, path string, parts []gjson.Result) {
		for j, p := range parts {
			id, reasoning := aisdkOpenAIItem(p)
			if !reasoning {
				continue
			}
			// the item's further summary parts share its id; then its following part
			next := j + 1
			for next < len(parts) && parts[next].Get("type").Str == "reasoning" && id != "" {
				if nid, _ := aisdkOpenAIItem(parts[next]); nid != id {
					break
				}
				next++
			}
			what := ""
			switch {
			case next == len(parts):
				what = "nothing follows it in its message"
			case parts[next].Get("type").Str == "reasoning":
				what = "another reasoning item follows it"
			case parts[next].Get("type").Str != "text" && parts[next].Get("type").Str != "tool-call":
				what = "a " + strconv.Quote(parts[next].Get("type").Str) + " part follows it"
			}
			if what != "" {
				r.add(pointer(path, j), "reasoning item "+strconv.Quote(id)+" must stand directly before the text or tool call it preceded; "+what)
			}
		}
	})
}

func checkAISDKItemIDs(r *ruleRun) {
	seen := map[string]bool{}
	forEachAssistantParts(r, 0, func(_ int, path string, parts []gjson.Result) {
		prev := ""
		for j, p := range parts {
			id, reasoning := aisdkOpenAIItem(p)
			if id == "" {
				prev = ""
				continue
			}
			if reasoning && id == prev {
				continue // a further summary part of the same reasoning item
			}
			if seen[id] {
				r.add(pointer(path, j)+"/providerOptions/openai/itemId", "item id "+strconv.Quote(id)+" is sent more than once")
			}
			seen[id] = true
			prev = ""
			if reasoning {
				prev = id
			}
		}
	})
}

// forEachAssistantParts calls fn with the content parts of each assistant message
// from item from on whose content is a list, its index and the path of that list.
func forEachAssistantParts(r *ruleRun, from int, fn func(k int, path string, parts []gjson.Result)) {
	for k := from; k < len(r.items); k++ {
		if m := r.items[k]; m.Get("role").Str == "assistant" && m.Get("content").IsArray() {
			fn(k, r.paths[k]+"/content", m.Get("content").Array())
		}
	}
}

// AI SDK messages sent to Gemini (the Google or Vertex provider): a part's thought
// signature rides in providerOptions.google (or .vertex).

// aisdkThoughtSignature returns a part's signature and the path under the part.
func aisdkThoughtSignature(p gjson.Result) (gjson.Result, string) {
	for _, key := range []string{"google", "vertex"} {
		if s := p.Get("providerOptions." + key + ".thoughtSignature"); s.Exists() {
			return s, "/providerOptions/" + key + "/thoughtSignature"
		}
	}
	return gjson.Result{}, ""
}

func checkAISDKSignatureValues(r *ruleRun) {
	forEachAssistantParts(r, 0, func(_ int, path string, parts []gjson.Result) {
		for j, p := range parts {
			if s, at := aisdkThoughtSignature(p); s.Exists() && !nonEmptyString(s) {
				r.add(pointer(path, j)+at, "a thoughtSignature must be the non-empty string the model returned")
			}
		}
	})
}

func checkAISDKCallSignatures(r *ruleRun) {
	signed := false
	forEachAssistantParts(r, 0, func(_ int, _ string, parts []gjson.Result) {
		for _, p := range parts {
			if s, _ := aisdkThoughtSignature(p); s.Exists() {
				signed = true
			}
		}
	})
	if !signed {
		return
	}
	forEachAssistantParts(r, currentTurn(r.items), func(_ int, path string, parts []gjson.Result) {
		for j, p := range parts {
			if p.Get("type").Str != "tool-call" {
				continue
			}
			if s, _ := aisdkThoughtSignature(p); !s.Exists() {
				r.add(pointer(path, j), "the first tool call of a model step in the current turn must carry its thought signature")
			}
			return // only the first call of a step carries one
		}
	})
}
