package core

import (
	"math"
	"strings"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
)

// Image token counts (docs/TOKENS.md, "Images"). An image part costs what its
// provider's documented rule gives for the image's own size, read from the header
// of base64 data (a data: URL or a base64 source); an image whose size cannot be
// known (a URL, a file id, data that is not one of PNG, JPEG, GIF, WebP) costs
// imageTokens, the fixed figure used before sizes were read.

// imageRule names a provider's image-token rule.
type imageRule uint8

const (
	imageRuleAnthropic imageRule = iota
	imageRuleOpenAI
	imageRuleGemini
)

// imageRuleForProvider is the rule for the AI SDK's image parts, whose format does not
// say which provider receives them: the provider config.model.provider names, else
// Anthropic's (the stated default: docs/TOKENS.md).
func imageRuleForProvider(provider string) imageRule {
	switch rulesProvider(provider) {
	case ProviderOpenAI:
		return imageRuleOpenAI
	case ProviderGemini:
		return imageRuleGemini
	}
	return imageRuleAnthropic
}

// imageCost is the tokens of one image under rule: data is its base64 data or a data:
// URL ("" or a plain URL when unknown); detail is OpenAI's detail ("" for others).
func imageCost(rule imageRule, data, detail string) int {
	if rule == imageRuleOpenAI && detail == "low" {
		return openAILowDetailTokens // fixed whatever the size
	}
	w, h, ok := imageSize(data)
	if !ok {
		return imageTokens
	}
	switch rule {
	case imageRuleOpenAI:
		return openAIImageTokens(w, h)
	case imageRuleGemini:
		return geminiImageTokens(w, h)
	}
	return anthropicImageTokens(w, h)
}

// Anthropic, https://platform.claude.com/docs/en/build-with-claude/vision ("Evaluate
// image size", "Calculate image costs"): an image whose long edge is over 1568 px, or
// that is over ~1,600 tokens, is first scaled down keeping its aspect ratio until it is
// within both; then tokens = width * height / 750.
const (
	anthropicMaxEdge       = 1568
	anthropicMaxTokens     = 1600
	anthropicPixelsPerTok  = 750
	anthropicMaxImagePixel = anthropicMaxTokens * anthropicPixelsPerTok // 1,200,000
)

func anthropicImageTokens(w, h int) int {
	fw, fh := float64(w), float64(h)
	if long := math.Max(fw, fh); long > anthropicMaxEdge {
		s := anthropicMaxEdge / long
		fw, fh = math.Floor(fw*s), math.Floor(fh*s)
	}
	if fw*fh > anthropicMaxImagePixel {
		s := math.Sqrt(anthropicMaxImagePixel / (fw * fh))
		fw, fh = math.Floor(fw*s), math.Floor(fh*s)
	}
	fw, fh = math.Max(fw, 1), math.Max(fh, 1)
	return int(math.Ceil(fw * fh / anthropicPixelsPerTok))
}

// OpenAI, https://platform.openai.com/docs/guides/images-vision ("Calculating costs",
// the tile rule of GPT-4o, GPT-4.1, GPT-4.5, o1, o3): detail low costs 85; detail high
// (and auto, counted as high, its upper bound) scales the image to fit in 2048x2048,
// then so that its shortest side is 768 (never up), then costs 170 per 512 px tile
// plus 85.
const (
	openAILowDetailTokens = 85
	openAITileTokens      = 170
	openAIFitSide         = 2048
	openAIShortSide       = 768
	openAITile            = 512
)

func openAIImageTokens(w, h int) int {
	fw, fh := float64(w), float64(h)
	if long := math.Max(fw, fh); long > openAIFitSide {
		s := openAIFitSide / long
		fw, fh = fw*s, fh*s
	}
	if short := math.Min(fw, fh); short > openAIShortSide {
		s := openAIShortSide / short
		fw, fh = fw*s, fh*s
	}
	tiles := math.Ceil(fw/openAITile) * math.Ceil(fh/openAITile)
	return int(tiles)*openAITileTokens + openAILowDetailTokens
}

// Gemini, https://ai.google.dev/gemini-api/docs/tokens ("Image tokens", Gemini 2.0 and
// later): an image with both sides <= 384 px costs 258; a larger one is cropped and
// scaled into 768x768 tiles of 258 each.
const (
	geminiTileTokens = 258
	geminiSmallSide  = 384
	geminiTile       = 768
)

func geminiImageTokens(w, h int) int {
	if w <= geminiSmallSide && h <= geminiSmallSide {
		return geminiTileTokens
	}
	tw := (int64(w) + geminiTile - 1) / geminiTile
	th := (int64(h) + geminiTile - 1) / geminiTile
	n := tw * th * geminiTileTokens
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(n)
}

// imageSize reads the width and height of a base64 image (PNG, JPEG, GIF, WebP) from
// its header, decoding only the bytes the header needs; s is the base64 text or a
// data: URL of it. ok is false when s is not such an image.
func imageSize(s string) (w, h int, ok bool) {
	if strings.HasPrefix(s, "data:") {
		i := strings.IndexByte(s, ',')
		if i < 0 || !strings.HasSuffix(s[:i], ";base64") {
			return 0, 0, false
		}
		s = s[i+1:]
	}
	if s == "" {
		return 0, 0, false
	}
	src := &spanSource{src: b64Source{s: s}}
	if w, h, ok = imageHeaderSize(src); !ok {
		return 0, 0, false
	}
	// A group is found by its place (byte k in characters 4k/3...), so a character
	// outside the alphabet before the last group read (a line break of MIME-style
	// base64) would shift the groups after it: such data is not read.
	for i, end := 0, min(len(s), (src.end+2)/3*4); i < end; i++ {
		if b64Digit(s[i]) < 0 && s[i] != '=' {
			return 0, 0, false
		}
	}
	return w, h, true
}

// spanSource records the furthest byte asked of its source.
type spanSource struct {
	src byteSource
	end int
}

func (c *spanSource) read(off, n int) []byte {
	c.end = max(c.end, off+n)
	return c.src.read(off, n)
}

// byteSource reads n bytes at off, fewer at the end of the data or where it cannot
// be decoded.
type byteSource interface {
	read(off, n int) []byte
}

// rawSource is a byteSource over plain bytes (the fuzz test's reference).
type rawSource []byte

func (r rawSource) read(off, n int) []byte {
	if off < 0 || off >= len(r) {
		return nil
	}
	return r[off:min(len(r), off+n)]
}

// b64Source is a byteSource over base64 text (standard or URL alphabet, padded or
// not): it decodes only the 4-character groups holding the bytes asked for.
type b64Source struct{ s string }

func (b b64Source) read(off, n int) []byte {
	if off < 0 || n <= 0 {
		return nil
	}
	end := off + n
	var out []byte
	for g := off / 3; g*3 < end; g++ {
		if g*4 >= len(b.s) {
			break
		}
		quad := b.s[g*4 : min(len(b.s), g*4+4)]
		var v [3]byte
		got := decodeQuad(quad, &v)
		for k := 0; k < got; k++ {
			if p := g*3 + k; p >= off && p < end {
				out = append(out, v[k])
			}
		}
		if got < 3 {
			break // padding, or a character outside the alphabet
		}
	}
	return out
}

// decodeQuad decodes up to 4 base64 characters into v and returns how many bytes
// they hold (0-3); it stops at padding or at a character outside the alphabet.
func decodeQuad(q string, v *[3]byte) int {
	var bits uint32
	k := 0
	for ; k < len(q); k++ {
		d := b64Digit(q[k])
		if d < 0 {
			break
		}
		bits |= uint32(d) << (18 - 6*k)
	}
	v[0], v[1], v[2] = byte(bits>>16), byte(bits>>8), byte(bits)
	switch k {
	case 4:
		return 3
	case 3:
		return 2
	case 2:
		return 1
	}
	return 0
}

func b64Digit(c byte) int {
	switch {
	case c >= 'A' && c <= 'Z':
		return int(c - 'A')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 26
	case c >= '0' && c <= '9':
		return int(c-'0') + 52
	case c == '+' || c == '-':
		return 62
	case c == '/' || c == '_':
		return 63
	}
	return -1
}

// maxJPEGSegments bounds the segments skipped before a JPEG's frame header: each
// costs 4 decoded bytes, so a header read never decodes more than ~1.3 KiB.
const maxJPEGSegments = 256

// maxJPEGJunk bounds the non-marker bytes skipped between segments (4 decoded each).
const maxJPEGJunk = 64

// imageHeaderSize reads an image's dimensions from the header bytes of src.
func imageHeaderSize(src byteSource) (w, h int, ok bool) {
	head := src.read(0, 30)
	switch {
	case len(head) >= 24 && string(head[:8]) == "\x89PNG\r\n\x1a\n" && string(head[12:16]) == "IHDR":
		w, h = int(be32(head[16:])), int(be32(head[20:]))
		if w > math.MaxInt32 || h > math.MaxInt32 {
			return 0, 0, false
		}
	case len(head) >= 10 && (string(head[:6]) == "GIF87a" || string(head[:6]) == "GIF89a"):
		w, h = int(head[6])|int(head[7])<<8, int(head[8])|int(head[9])<<8
	case len(head) >= 16 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WEBP":
		w, h = webpSize(head)
	case len(head) >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF:
		w, h = jpegSize(src)
	}
	if w <= 0 || h <= 0 {
		return 0, 0, false
	}
	return w, h, true
}

// webpSize reads the canvas of a lossy (VP8), lossless (VP8L) or extended (VP8X)
// WebP from its first 30 bytes.
func webpSize(b []byte) (w, h int) {
	switch string(b[12:16]) {
	case "VP8 ": // frame tag (3 bytes), start code 9d 01 2a, 14-bit width and height
		if len(b) >= 30 && b[23] == 0x9d && b[24] == 0x01 && b[25] == 0x2a {
			return int(le16(b[26:]) & 0x3fff), int(le16(b[28:]) & 0x3fff)
		}
	case "VP8L": // signature 0x2f, then width-1 and height-1 in 14 bits each
		if len(b) >= 25 && b[20] == 0x2f {
			v := le32(b[21:])
			return int(v&0x3fff) + 1, int(v>>14&0x3fff) + 1
		}
	case "VP8X": // flags (4 bytes), canvas width-1 and height-1 in 24 bits each
		if len(b) >= 30 {
			return int(le24(b[24:])) + 1, int(le24(b[27:])) + 1
		}
	}
	return 0, 0
}

// jpegSize walks a JPEG's marker segments (APPn, DQT, DHT...) by their lengths, not
// reading them, to the first start-of-frame marker (SOF0-SOF15 but DHT, JPG, DAC),
// and reads its height and width.
//
// Bytes that are not a marker between segments are skipped, as libjpeg and Go's
// image/jpeg do ("extraneous bytes before marker"), up to maxJPEGJunk of them.
func jpegSize(src byteSource) (w, h int) {
	off, junk := 2, 0
	for seg := 0; seg < maxJPEGSegments; seg++ {
		m := src.read(off, 4)
		if len(m) < 2 {
			return 0, 0
		}
		if m[0] != 0xFF {
			if junk++; junk > maxJPEGJunk {
				return 0, 0
			}
			off++
			seg-- // not a segment
			continue
		}
		switch marker := m[1]; {
		case marker == 0xFF: // fill byte
			off++
			continue
		case marker == 0x01 || marker >= 0xD0 && marker <= 0xD8: // no length
			off += 2
			continue
		case marker == 0xD9 || marker == 0xDA: // end of image, start of scan: no frame
			return 0, 0
		case marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC:
			f := src.read(off+5, 4) // after marker, length and precision
			if len(f) < 4 {
				return 0, 0
			}
			return int(be16(f[2:])), int(be16(f))
		}
		if len(m) < 4 {
			return 0, 0
		}
		n := int(be16(m[2:]))
		if n < 2 {
			return 0, 0
		}
		off += 2 + n
	}
	return 0, 0
}

func be16(b []byte) uint32 { return uint32(b[0])<<8 | uint32(b[1]) }
func be32(b []byte) uint64 {
	return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
}
func le16(b []byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 }
func le24(b []byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 }
func le32(b []byte) uint32 { return le24(b) | uint32(b[3])<<24 }

// anthropicPartImageTokens counts an Anthropic image block by its source (raw JSON):
// {type: "base64", data} is read, a url or file source is not.
func anthropicPartImageTokens(source string) int {
	data := ""
	if source != "" && source[0] == '{' && jsonraw.DecodeString(jsonraw.FindField(source, "type")) == "base64" {
		data = jsonraw.DecodeString(jsonraw.FindField(source, "data"))
	}
	return imageCost(imageRuleAnthropic, data, "")
}

// openAIPartImageTokens counts an OpenAI chat image_url part ({url, detail} object)
// or a Responses input_image (image_url string, detail beside it): raw JSON values.
func openAIPartImageTokens(imageURL, detail string) int {
	url := imageURL
	if url != "" && url[0] == '{' {
		if d := jsonraw.FindField(url, "detail"); d != "" {
			detail = d
		}
		url = jsonraw.FindField(url, "url")
	}
	return imageCost(imageRuleOpenAI, jsonraw.DecodeString(url), jsonraw.DecodeString(detail))
}
