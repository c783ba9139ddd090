package core

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core/internal/bpe"
)

// Exact counting with tiktoken's o200k_base and cl100k_base (docs/DESIGN.md §7), by our
// byte-pair encoder over embedded rank tables (package core/internal/bpe, whose tests
// compare it with tiktoken). This file holds what of a message is counted.
//
// The per-message rule is OpenAI's documented one for chat models (the cookbook's
// num_tokens_from_messages), extended to tool calls and content parts:
//
//	message      3 + tokens(role) + tokens(content) [+ tokens(name) + 1]
//	content      a string: its tokens; a list: the sum of its parts
//	part         text: tokens(text); image: by its provider's rule (image_tokens.go);
//	             Anthropic blocks: thinking tokens(thinking), tool_use 3 + tokens(name) + tokens(input JSON),
//	             tool_result its content; any other part: tokens(its JSON)
//	JSON         a non-string value (tool_use input, object arguments, unknown
//	             parts) is counted as compact JSON, see canonicalJSON
//	tool call    3 + tokens(function.name) + tokens(function.arguments)
//	request      + 3 once, for the reply priming <|start|>assistant<|message|>
//
// Other fields (tool_call_id, reasoning fields, provider extras) are not counted.
// The tool-call rule is ours: OpenAI does not document how it renders tool calls;
// 3 tokens per call mirrors the per-message envelope.
const (
	exactMessageTokens  = 3 // <|start|>{role}<|message|>...<|end|> minus the role itself
	exactNameTokens     = 1
	exactToolCallTokens = 3
	exactReplyTokens    = 3
)

// exactEncoding is one tiktoken encoding with the id that tells it apart in
// countCache keys. Its encoder builds the rank map on first use (see docs/TOKENS.md
// for the time it takes).
type exactEncoding struct {
	name string
	id   uint8 // distinguishes encodings in countCache keys
	bpe  *bpe.Encoding
}

var (
	o200k  = newExactEncoding(EncodingO200k, 1)
	cl100k = newExactEncoding(EncodingCl100k, 2)
)

// newExactEncoding returns the encoding of a name package bpe knows; it panics on
// any other (the names are constants of this package).
func newExactEncoding(name string, id uint8) *exactEncoding {
	enc, ok := bpe.Lookup(name)
	if !ok {
		panic("ctxcompact: no BPE encoding " + name)
	}
	return &exactEncoding{name: name, id: id, bpe: enc}
}

// counter returns the uncalibrated tokenCounter of the encoding.
func (e *exactEncoding) counter() tokenCounter {
	return tokenCounter{name: e.name, exact: e, scale: 1, text: e.value}
}

// count returns the number of tokens of s (no special tokens: "<|endoftext|>" in the
// text is ordinary text, as in tiktoken's encode_ordinary).
func (e *exactEncoding) count(s string) int { return e.bpe.Count(s) }

// value counts a string by its unescaped text and any other JSON value by its
// canonical JSON text (see canonicalJSON).
func (e *exactEncoding) value(v gjson.Result) int {
	switch v.Type {
	case gjson.String:
		return e.count(v.Str)
	case gjson.Null:
		return 0
	}
	return e.count(string(canonicalJSON(nil, v)))
}

// message counts one message with the rule above (without the reply priming).
func (e *exactEncoding) message(m gjson.Result) int {
	var role, name, content, calls gjson.Result // the last of duplicate keys
	m.ForEach(func(key, v gjson.Result) bool {
		switch key.Str {
		case "role":
			role = v
		case "name":
			name = v
		case "content":
			content = v
		case "tool_calls":
			calls = v
		}
		return true
	})
	n := exactMessageTokens
	if role.Exists() {
		n += e.value(role)
	}
	if name.Exists() {
		n += e.value(name) + exactNameTokens
	}
	if content.Exists() {
		n += e.counter().content(content)
	}
	calls.ForEach(func(_, call gjson.Result) bool {
		fn := fieldOf(call, "function")
		n += exactToolCallTokens + e.value(fieldOf(fn, "name")) + e.value(fieldOf(fn, "arguments"))
		return true
	})
	return n
}

// cachedMessage is message through the per-instance count cache.
func (e *exactEncoding) cachedMessage(m gjson.Result) (n int, hit bool) {
	k := newCountKey(e.id, m.Raw)
	if n, ok := counts.get(k); ok {
		return n, true
	}
	n = e.message(m)
	counts.put(k, n)
	return n, false
}

// EncodingForModel returns the tiktoken encoding of an OpenAI model name, or
// EncodingRough for any other model (their tokenizers are not public: calibrate
// instead, see tokens.calibrate). A provider prefix ("openai/gpt-4o") and a
// fine-tune prefix ("ft:gpt-4o-mini:...") are ignored; case does not matter.
//
//	o200k_base   gpt-4o*, chatgpt-4o*, gpt-4.1*, gpt-4.5*, gpt-5*, gpt-oss*, o1*, o3*, o4*, codex*
//	cl100k_base  gpt-4 (other), gpt-3.5*, gpt-35*, text-embedding-3*, text-embedding-ada-002
func EncodingForModel(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	m = strings.TrimPrefix(m, "ft:")
	for _, p := range []string{"gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss", "codex"} {
		if strings.HasPrefix(m, p) {
			return EncodingO200k
		}
	}
	for _, p := range []string{"o1", "o3", "o4"} {
		if m == p || strings.HasPrefix(m, p+"-") {
			return EncodingO200k
		}
	}
	for _, p := range []string{"gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada-002"} {
		if strings.HasPrefix(m, p) {
			return EncodingCl100k
		}
	}
	return EncodingRough
}

// Vocabulary returns the rank table of an exact encoding (o200k_base, cl100k_base)
// compiled into this build, for a host of the WebAssembly module: the module has
// none of its own and asks its host through the ctxcompact.vocab_size and
// ctxcompact.vocab_read imports (wasm/abi.json) when it first counts with one.
// False for any other name.
func Vocabulary(encoding string) (string, bool) { return bpe.Embedded(encoding) }
