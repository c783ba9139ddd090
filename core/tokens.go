package core

import (
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Rough estimation constants (DESIGN §7). They are deliberately simple: budgets
// need a stable, fast estimate; exact counts come from a named encoding.
const (
	// roughCharsPerToken: one token per four characters of ordinary text.
	roughCharsPerToken = 4
	// messageOverheadTokens: role markers and separators a chat format adds per message.
	messageOverheadTokens = 4
	// toolCallOverheadTokens: the envelope around one tool call (id, type, braces).
	toolCallOverheadTokens = 4
	// imageTokens: a fixed cost per image part, between OpenAI's high-detail 1024x1024
	// (765) and Anthropic's ~1,600 ceiling for a full-size image.
	imageTokens = 1000
)

// EncodingRough names the chars/4 estimate.
const EncodingRough = "rough"

// Encodings lists the token encodings the core can count with.
func Encodings() []string { return []string{EncodingRough} }

// tokenCounter counts the tokens of messages. The zero value is not usable; use
// roughCounter or another encoding's counter. scale is the calibration factor.
type tokenCounter struct {
	name string
	// text counts one JSON string value (v.Type == gjson.String).
	text  func(v gjson.Result) int
	scale float64
}

// roughCounter is the default counter: ceil(chars/4), CJK-dense characters one each.
var roughCounter = tokenCounter{name: EncodingRough, text: roughJSONString, scale: 1}

// message estimates the tokens of one message: its text, tool-call envelopes (name
// and arguments), images at a fixed cost, and the per-message overhead.
func (c tokenCounter) message(m gjson.Result) int {
	n := messageOverheadTokens
	m.ForEach(func(key, v gjson.Result) bool {
		switch key.Str {
		case "content":
			n += c.content(v)
		case "tool_calls":
			v.ForEach(func(_, call gjson.Result) bool {
				n += toolCallOverheadTokens
				fn := call.Get("function")
				n += c.value(fn.Get("name")) + c.value(fn.Get("arguments"))
				return true
			})
		}
		return true
	})
	if c.scale != 1 && c.scale > 0 {
		return int(float64(n)*c.scale + 0.5)
	}
	return n
}

// content counts a content value: a string, null, or a list of parts/blocks in either
// OpenAI or Anthropic shape.
func (c tokenCounter) content(v gjson.Result) int {
	switch {
	case v.Type == gjson.String:
		return c.text(v)
	case v.IsArray():
		n := 0
		v.ForEach(func(_, part gjson.Result) bool {
			n += c.part(part)
			return true
		})
		return n
	}
	return 0
}

func (c tokenCounter) part(p gjson.Result) int {
	if p.Type == gjson.String {
		return c.text(p)
	}
	switch p.Get("type").Str {
	case "text", "input_text", "output_text":
		return c.text(p.Get("text"))
	case "image_url", "image", "input_image":
		return imageTokens
	case "thinking":
		return c.text(p.Get("thinking"))
	case "redacted_thinking":
		return rawTokens(p.Get("data").Raw)
	case "tool_use":
		return toolCallOverheadTokens + c.text(p.Get("name")) + c.value(p.Get("input"))
	case "tool_result":
		return c.content(p.Get("content"))
	}
	return rawTokens(p.Raw)
}

// value counts a string by its text and any other JSON value by its raw bytes.
func (c tokenCounter) value(v gjson.Result) int {
	if v.Type == gjson.String {
		return c.text(v)
	}
	return rawTokens(v.Raw)
}

func rawTokens(raw string) int { return (len(raw) + roughCharsPerToken - 1) / roughCharsPerToken }

// roughJSONString estimates a JSON string value from its raw literal, without
// unescaping: escapes count as the one character they stand for.
func roughJSONString(v gjson.Result) int {
	raw := v.Raw
	if len(raw) < 2 {
		return 0
	}
	other, dense := 0, 0
	for i := 1; i < len(raw)-1; {
		b := raw[i]
		switch {
		case b == '\\':
			if i+1 < len(raw)-1 && raw[i+1] == 'u' && i+5 < len(raw) {
				r := rune(hexValue(raw[i+2 : i+6]))
				i += 6
				if r >= 0xD800 && r < 0xDC00 && i+5 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					lo := rune(hexValue(raw[i+2 : i+6]))
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
				if isCJKDense(r) {
					dense++
				} else {
					other++
				}
				continue
			}
			other++
			i += 2
		case b < utf8.RuneSelf:
			other++
			i++
		default:
			r, size := utf8.DecodeRuneInString(raw[i:])
			if isCJKDense(r) {
				dense++
			} else {
				other++
			}
			i += size
		}
	}
	return dense + (other+roughCharsPerToken-1)/roughCharsPerToken
}

func hexValue(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | int(c-'A'+10)
		}
	}
	return n
}

// isCJKDense reports whether r is a character that tokenizers typically spend about
// one token on: Han, kana, Hangul, CJK punctuation and full-width forms.
func isCJKDense(r rune) bool {
	switch {
	case r < 0x1100:
		return false
	case r <= 0x11FF, // Hangul Jamo
		r >= 0x2E80 && r <= 0x2FDF, // CJK radicals
		r >= 0x3000 && r <= 0x9FFF, // CJK symbols, kana, Bopomofo, Hangul compat, Ext A, unified
		r >= 0xA960 && r <= 0xA97F, // Hangul Jamo Ext A
		r >= 0xAC00 && r <= 0xD7AF, // Hangul syllables
		r >= 0xF900 && r <= 0xFAFF, // compatibility ideographs
		r >= 0xFF00 && r <= 0xFFEF, // half- and full-width forms
		r >= 0x20000 && r <= 0x3134F: // Ext B and later
		return true
	}
	return false
}

// EstimateMessage returns the rough token estimate of one message given as raw JSON.
func EstimateMessage(raw []byte) int { return roughCounter.message(gjson.ParseBytes(raw)) }

// newCounter returns the counter for an encoding name ("" means rough) scaled by a
// calibration factor (0 means 1). path locates the encoding in the request for errors.
func newCounter(encoding string, calibration float64, path string) (tokenCounter, error) {
	c := roughCounter
	switch encoding {
	case "", EncodingRough:
	default:
		return c, errorf(CodeInvalidConfig, path, "unknown encoding %q; allowed: %v", encoding, Encodings())
	}
	if calibration > 0 {
		c.scale = calibration
	}
	return c, nil
}
