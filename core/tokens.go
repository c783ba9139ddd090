package core

import (
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// Rough estimation constants (docs/DESIGN.md §7). They are deliberately simple: budgets
// need a stable, fast estimate; exact counts come from a named encoding.
const (
	// roughCharsPerToken: one token per four characters of ordinary text.
	roughCharsPerToken = 4
	// messageOverheadTokens: role markers and separators a chat format adds per message.
	messageOverheadTokens = 4
	// toolCallOverheadTokens: the envelope around one tool call (id, type, braces).
	toolCallOverheadTokens = 4
	// imageTokens: the cost of an image whose size cannot be read (a URL, a file id):
	// between OpenAI's high-detail 1024x1024 (765) and Anthropic's ~1,600 ceiling for a
	// full-size image. A base64 image costs its provider's rule (image_tokens.go).
	imageTokens = 1000
)

// Encoding names. EncodingAuto is not an encoding of its own: it resolves to the
// encoding of the configured model (see EncodingForModel).
const (
	// EncodingRough names the chars/4 estimate.
	EncodingRough = "rough"
	// EncodingO200k is tiktoken's o200k_base (gpt-4o, gpt-4.1, gpt-5, o1/o3/o4).
	EncodingO200k = "o200k_base"
	// EncodingCl100k is tiktoken's cl100k_base (gpt-4, gpt-3.5-turbo).
	EncodingCl100k = "cl100k_base"
	// EncodingAuto picks the encoding from the model name.
	EncodingAuto = "auto"
)

// Encodings lists the token encodings the core can count with ("auto" is not one:
// it picks one of these).
func Encodings() []string { return []string{EncodingRough, EncodingO200k, EncodingCl100k} }

// tokenCounter counts the tokens of messages. The zero value is not usable; use
// roughCounter or newCounter. scale is the calibration factor.
type tokenCounter struct {
	name string
	// text counts one JSON string value (v.Type == gjson.String).
	text func(v gjson.Result) int
	// exact is the tiktoken encoding, nil for rough.
	exact *exactEncoding
	scale float64
	// source says where scale came from: CalibrationFromConfig, "prior:<family>"
	// (token_priors.go) or CalibrationNone.
	source string
	// images is the image rule of parts whose format does not name their provider
	// (the AI SDK's): from config.model.provider (imageRuleForProvider).
	images imageRule
}

// roughCounter is the default counter: ceil(chars/4), CJK-dense characters one each.
var roughCounter = tokenCounter{name: EncodingRough, text: roughJSONString, scale: 1, source: CalibrationNone}

// message estimates the tokens of one message, calibrated: for rough, its text,
// tool-call envelopes (name and arguments), images by their provider's rule
// (image_tokens.go), and the per-message overhead; for an exact encoding, see exactEncoding.message. Exact
// counts are cached per instance by message bytes (see countCache).
func (c tokenCounter) message(m gjson.Result) int {
	n, _ := c.messageRaw(m)
	return c.scaled(n)
}

// messageRaw is message before calibration; hit reports a count from the cache.
func (c tokenCounter) messageRaw(m gjson.Result) (n int, hit bool) {
	if c.exact != nil {
		return c.exact.cachedMessage(m)
	}
	return c.roughMessage(m), false
}

// scaled applies the calibration factor, rounding to the nearest token.
func (c tokenCounter) scaled(n int) int {
	if c.scale != 1 && c.scale > 0 {
		return int(float64(n)*c.scale + 0.5)
	}
	return n
}

// replyPriming is what a request adds once after its messages: 3 tokens
// (<|start|>assistant<|message|>) for the exact encodings, none for rough.
func (c tokenCounter) replyPriming() int {
	if c.exact != nil {
		return exactReplyTokens
	}
	return 0
}

// roughMessage is the rough estimate of one message before calibration.
func (c tokenCounter) roughMessage(m gjson.Result) int {
	var content string
	var calls []toolCall
	jsonraw.ForEachField(m.Raw, func(key, raw string) bool {
		switch key {
		case "content":
			content = raw
		case "tool_calls":
			calls = rawToolCalls(raw)
		}
		return true
	})
	return c.roughParts(content, calls)
}

// roughParts is the rough estimate of a message from its raw content and its tool
// calls. It reads strings' raw bytes, so nothing is decoded.
func (c tokenCounter) roughParts(content string, calls []toolCall) int {
	n := messageOverheadTokens
	switch {
	case content == "":
	case content[0] == '"':
		n += c.text(rawValue(content))
	case content[0] == '[':
		n += c.content(rawValue(content))
	}
	for _, call := range calls {
		n += toolCallOverheadTokens + c.value(rawValue(call.nameRaw)) + c.value(call.args)
	}
	return n
}

// roughView is roughParts for a parsed message: in the same pass it notes the
// characters of a string content and of string tool-call arguments, which pruning
// and the summary request need again.
func (c tokenCounter) roughView(m *message) int {
	n := messageOverheadTokens
	switch raw := m.contentRaw; {
	case raw == "":
	case raw[0] == '"' && m.contentTokens1 > 0: // counted while it was validated
		n += m.contentTokens1 - 1
	case raw[0] == '"':
		t, chars := roughString(raw)
		n, m.chars1 = n+t, chars+1
	case raw[0] == '[':
		n += c.content(rawValue(raw))
	}
	if m.blocks {
		return n // tool_use blocks are counted with the content
	}
	for k := range m.calls {
		call := &m.calls[k]
		n += toolCallOverheadTokens + c.value(rawValue(call.nameRaw))
		if call.args.Type == gjson.String && call.argsTokens1 > 0 { // counted while it was validated
			n += call.argsTokens1 - 1
		} else if call.args.Type == gjson.String {
			t, chars := roughString(call.args.Raw)
			n, call.argsChars1 = n+t, chars+1
		} else {
			n += c.value(call.args)
		}
	}
	return n
}

// content counts a content value: a string, null, or a list of parts/blocks in either
// OpenAI or Anthropic shape. Like text, part and value, it is not calibrated and
// works for every encoding.
func (c tokenCounter) content(v gjson.Result) int {
	switch {
	case v.Type == gjson.String:
		return c.text(v)
	case v.IsArray():
		n := 0
		jsonraw.ForEachElement(v.Raw, func(raw string) bool {
			n += c.part(c.wrap(raw))
			return true
		})
		return n
	}
	return 0
}

// wrap makes a gjson.Result of a raw value for this counter: rough counts read only
// raw bytes, so strings are left undecoded; exact counts need the text.
func (c tokenCounter) wrap(raw string) gjson.Result {
	if c.exact != nil {
		return gjson.Parse(raw)
	}
	return rawValue(raw)
}

func (c tokenCounter) part(p gjson.Result) int {
	if p.Type == gjson.String {
		return c.text(p)
	}
	if !p.IsObject() {
		return c.value(p)
	}
	var typ, text, thinking, data, name, input, content, source, imageURL, detail string
	jsonraw.ForEachField(p.Raw, func(k, raw string) bool {
		var dst *string
		switch k {
		case "source":
			dst = &source
		case "image_url":
			dst = &imageURL
		case "detail":
			dst = &detail
		case "type":
			dst = &typ
		case "text":
			dst = &text
		case "thinking":
			dst = &thinking
		case "data":
			dst = &data
		case "name":
			dst = &name
		case "input":
			dst = &input
		case "content":
			dst = &content
		}
		if dst != nil { // the last of duplicate keys, as everywhere
			*dst = raw
		}
		return true
	})
	typ = jsonraw.DecodeString(typ)
	switch typ {
	case "text", "input_text", "output_text":
		return c.text(c.wrap(text))
	case "image":
		return anthropicPartImageTokens(source)
	case "image_url", "input_image":
		return openAIPartImageTokens(imageURL, detail)
	case "thinking":
		return c.text(c.wrap(thinking))
	case "redacted_thinking":
		return c.value(c.wrap(data))
	case "tool_use":
		return c.callOverhead() + c.text(c.wrap(name)) + c.value(c.wrap(input))
	case "tool_result":
		return c.content(c.wrap(content))
	}
	return c.value(p)
}

// callOverhead is what the envelope of one tool call costs in this encoding.
func (c tokenCounter) callOverhead() int {
	if c.exact != nil {
		return exactToolCallTokens
	}
	return toolCallOverheadTokens
}

// value counts a string by its text and any other JSON value by its canonical JSON.
func (c tokenCounter) value(v gjson.Result) int {
	if c.exact != nil {
		return c.exact.value(v)
	}
	if v.Type == gjson.String {
		return c.text(v)
	}
	return rawTokens(v)
}

// rawTokens estimates a non-string JSON value by the bytes of its canonical JSON
// text (see canonicalJSON), so the estimate does not depend on how the caller's
// JSON encoder spaced or escaped it.
func rawTokens(v gjson.Result) int {
	n := 0
	if v.Raw != "" {
		n = canonicalLen(strings.TrimSpace(v.Raw))
	} else {
		n = len(canonicalJSON(nil, v))
	}
	return (n + roughCharsPerToken - 1) / roughCharsPerToken
}

// canonicalLen is len(canonicalJSON) of the raw JSON value raw (valid, trimmed),
// measured without writing the text: only strings with escapes are decoded.
func canonicalLen(raw string) int {
	switch raw[0] {
	case '"':
		if !jsonraw.HasByte(raw[1:len(raw)-1], '\\') {
			return len(raw)
		}
		return jsonStringLen(jsonraw.DecodeString(raw))
	case '{':
		n := 1 // the braces and the commas: one each per member, and one more
		jsonraw.ForEachField(raw, func(key, value string) bool {
			n += jsonStringLen(key) + 1 + canonicalLen(value) + 1 // the colon, and a comma or the brace
			return true
		})
		return max(n, 2)
	case '[':
		n := 1
		jsonraw.ForEachElement(raw, func(e string) bool {
			n += canonicalLen(e) + 1
			return true
		})
		return max(n, 2)
	}
	return len(raw)
}

// canonicalJSON appends v as compact JSON: no insignificant whitespace, object keys
// in their original order, strings escaped as JSON.stringify does (only '"', '\\' and
// control characters; everything else as UTF-8), numbers and literals as written.
// It is the text a non-string value (tool_use input, an unknown part) is counted by:
// the same in every runtime whatever encoder produced the request (Python's
// json.dumps adds spaces and escapes non-ASCII; JSON.stringify does neither).
func canonicalJSON(dst []byte, v gjson.Result) []byte {
	if v.Raw == "" { // a value made in Go, not read from a request
		if v.Type == gjson.String {
			return jsonraw.Stringify.Append(dst, v.Str)
		}
		return dst
	}
	return appendCanonical(dst, strings.TrimSpace(v.Raw))
}

// appendCanonical is canonicalJSON of the raw JSON value raw (valid, trimmed),
// walked in place: a string without escapes is copied as it is, and keys and
// values are not decoded into new strings unless they hold escapes.
func appendCanonical(dst []byte, raw string) []byte {
	switch raw[0] {
	case '"':
		if !jsonraw.HasByte(raw[1:len(raw)-1], '\\') { // valid JSON: no quote or control byte inside
			return append(dst, raw...)
		}
		return jsonraw.Stringify.Append(dst, jsonraw.DecodeString(raw))
	case '{':
		dst = append(dst, '{')
		first := true
		jsonraw.ForEachField(raw, func(key, value string) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = jsonraw.Stringify.Append(dst, key)
			dst = append(dst, ':')
			dst = appendCanonical(dst, value)
			return true
		})
		return append(dst, '}')
	case '[':
		dst = append(dst, '[')
		first := true
		jsonraw.ForEachElement(raw, func(e string) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendCanonical(dst, e)
			return true
		})
		return append(dst, ']')
	}
	return append(dst, raw...)
}

// jsonStringLen is len(jsonraw.Stringify.Append(nil, s)), counted without writing
// it: the quotes, and what each byte to escape adds.
func jsonStringLen(s string) int {
	n := len(s) + 2
	for i := jsonraw.IndexSpecial(s, 0); i < len(s); i = jsonraw.IndexSpecial(s, i+1) {
		switch b := s[i]; {
		case b == '"' || b == '\\' || b == '\n' || b == '\r' || b == '\t' || b == '\b' || b == '\f':
			n++
		case b < 0x20:
			n += 5
		}
	}
	return n
}

// roughJSONString estimates a JSON string value from its raw literal, without
// unescaping: escapes count as the one character they stand for.
func roughJSONString(v gjson.Result) int {
	n, _ := roughString(v.Raw)
	return n
}

// roughString is roughJSONString of a raw literal, with the number of characters
// it holds (as jsonraw.CountChars counts them): one pass gives both.
func roughString(raw string) (tokens, chars int) {
	if len(raw) < 2 {
		return 0, 0
	}
	other, dense := 0, 0
	for i, end := 1, len(raw)-1; i < end; {
		if i+8 <= end { // plain ASCII eight bytes at a time, inline (calls are dear in wasm)
			if m := jsonraw.NotPlain(jsonraw.Word(raw, i)); m == 0 {
				other += 8
				i += 8
				continue
			} else if k := jsonraw.FirstFlagged(m); k > 0 {
				other += k
				i += k
			}
		}
		b := raw[i]
		switch {
		case b == '\\':
			if i+1 < len(raw)-1 && raw[i+1] == 'u' && i+5 < len(raw) {
				r := rune(jsonraw.DecodeHex(raw[i+2 : i+6]))
				i += 6
				if r >= 0xD800 && r < 0xDC00 && i+5 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					lo := rune(jsonraw.DecodeHex(raw[i+2 : i+6]))
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
				dense, other = tally(r, dense, other)
				continue
			}
			other++
			i += 2
		case b < utf8.RuneSelf:
			other++
			i++
		default:
			r, size := jsonraw.DecodeRune(raw, i)
			dense, other = tally(r, dense, other)
			i += size
		}
	}
	return dense + (other+roughCharsPerToken-1)/roughCharsPerToken, dense + other
}

// tally counts r as a dense (CJK) character or another one, for the rough estimate.
func tally(r rune, dense, other int) (int, int) {
	if isCJKDense(r) {
		return dense + 1, other
	}
	return dense, other + 1
}

// cjkDense is isCJKDense as ranges, for the validating pass, which counts content
// as it checks it (TestCJKDenseRanges holds the two to each other).
var cjkDense = []jsonraw.RuneRange{
	{Lo: 0x1100, Hi: 0x11FF},   // Hangul Jamo
	{Lo: 0x2E80, Hi: 0x2FDF},   // CJK radicals
	{Lo: 0x3000, Hi: 0x9FFF},   // CJK symbols, kana, Bopomofo, Hangul compat, Ext A, unified
	{Lo: 0xA960, Hi: 0xA97F},   // Hangul Jamo Ext A
	{Lo: 0xAC00, Hi: 0xD7AF},   // Hangul syllables
	{Lo: 0xF900, Hi: 0xFAFF},   // compatibility ideographs
	{Lo: 0xFF00, Hi: 0xFFEF},   // half- and full-width forms
	{Lo: 0x20000, Hi: 0x3134F}, // Ext B and later
}

// isCJKDense reports whether r is a character that tokenizers typically spend about
// one token on: Han, kana, Hangul, CJK punctuation and full-width forms.
func isCJKDense(r rune) bool {
	switch {
	case r < 0x1100:
		return false
	case r <= 0x11FF, // Hangul Jamo
		r >= 0x2E80 && r <= 0x2FDF,   // CJK radicals
		r >= 0x3000 && r <= 0x9FFF,   // CJK symbols, kana, Bopomofo, Hangul compat, Ext A, unified
		r >= 0xA960 && r <= 0xA97F,   // Hangul Jamo Ext A
		r >= 0xAC00 && r <= 0xD7AF,   // Hangul syllables
		r >= 0xF900 && r <= 0xFAFF,   // compatibility ideographs
		r >= 0xFF00 && r <= 0xFFEF,   // half- and full-width forms
		r >= 0x20000 && r <= 0x3134F: // Ext B and later
		return true
	}
	return false
}

// newCounter returns the counter for an encoding name ("" means rough; "auto" without
// a model means rough) scaled by a calibration factor (0 means 1). path locates the
// encoding in the request for errors. See newModelCounter for "auto" and priors.
func newCounter(encoding string, calibration float64, path string) (tokenCounter, error) {
	return newModelCounter(encoding, "", calibration, path)
}

// newModelCounter is newCounter for a model: "auto" resolves from the model name with
// EncodingForModel, and a calibration of 0 (none given) takes the model family's
// prior (token_priors.go) when it has one.
func newModelCounter(encoding, model string, calibration float64, path string) (tokenCounter, error) {
	c := roughCounter
	if encoding == EncodingAuto {
		encoding = EncodingForModel(model)
	}
	switch encoding {
	case "", EncodingRough:
	case EncodingO200k, EncodingCl100k:
		e := o200k
		if encoding == EncodingCl100k {
			e = cl100k
		}
		if err := e.bpe.Load(); err != nil { // the module's host gave no or a wrong vocabulary
			return c, errorf(CodeInvalidConfig, path, "encoding %s cannot be used: %s", encoding, strings.TrimPrefix(err.Error(), "ctxcompact: "))
		}
		c = e.counter()
	default:
		return c, errorf(CodeInvalidConfig, path, "unknown encoding %q; allowed: %v and %q", encoding, Encodings(), EncodingAuto)
	}
	c.scale, c.source = 1, CalibrationNone
	if calibration > 0 {
		c.scale, c.source = calibration, CalibrationFromConfig
	} else if p, ok := priorFor(model, c.name); ok {
		c.scale, c.source = p.factor, CalibrationFromPrior+":"+p.family
	}
	return c, nil
}
