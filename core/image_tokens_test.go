package core

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"image"
	_ "image/gif" // the fuzz test's reference decoders
	_ "image/jpeg"
	_ "image/png"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Image headers crafted byte by byte (the same bytes as testdata/tokens.count.images.json).

func pngHeader(w, h uint32) []byte {
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte("IHDR"), w), h)
	ihdr = append(ihdr, 8, 2, 0, 0, 0)
	b := append([]byte("\x89PNG\r\n\x1a\n"), 0, 0, 0, 13)
	b = append(b, ihdr...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(ihdr))
}

// jpegHeader: SOI, APP0 (JFIF), an APP1 of app1 bytes, DQT, then the frame header
// (marker sof) of a 3-component w x h image.
func jpegHeader(w, h uint16, sof byte, app1 int) []byte {
	seg := func(b []byte, marker byte, data []byte) []byte {
		b = append(b, 0xFF, marker)
		b = binary.BigEndian.AppendUint16(b, uint16(len(data)+2))
		return append(b, data...)
	}
	b := []byte{0xFF, 0xD8}
	b = seg(b, 0xE0, []byte("JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"))
	b = seg(b, 0xE1, append([]byte("Exif\x00\x00"), make([]byte, app1-6)...))
	b = seg(b, 0xDB, append([]byte{0}, bytes.Repeat([]byte{1}, 64)...))
	frame := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16([]byte{8}, h), w)
	frame = append(frame, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1)
	return seg(b, sof, frame)
}

func gifHeader(w, h uint16) []byte {
	b := binary.LittleEndian.AppendUint16([]byte("GIF89a"), w)
	return append(binary.LittleEndian.AppendUint16(b, h), 0xF7, 0, 0)
}

func riff(chunk string, data []byte) []byte {
	body := binary.LittleEndian.AppendUint32([]byte("WEBP"+chunk), uint32(len(data)))
	body = append(body, data...)
	return append(binary.LittleEndian.AppendUint32([]byte("RIFF"), uint32(len(body))), body...)
}

func webpVP8(w, h uint16) []byte {
	d := []byte{0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a}
	d = binary.LittleEndian.AppendUint16(binary.LittleEndian.AppendUint16(d, w), h)
	return riff("VP8 ", append(d, 0, 0, 0, 0))
}

func webpVP8L(w, h uint32) []byte {
	d := binary.LittleEndian.AppendUint32([]byte{0x2f}, (w-1)|(h-1)<<14)
	return riff("VP8L", append(d, 0, 0, 0))
}

func webpVP8X(w, h uint32) []byte {
	d := []byte{0x10, 0, 0, 0}
	d = append(d, binary.LittleEndian.AppendUint32(nil, w-1)[:3]...)
	d = append(d, binary.LittleEndian.AppendUint32(nil, h-1)[:3]...)
	return riff("VP8X", d)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestImageSizeFromHeaders(t *testing.T) {
	// A real 1x1 PNG (Anthropic's vision guide's example), whole.
	const realPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
	cases := []struct {
		name string
		data []byte
		w, h int
	}{
		{"png 1x1", pngHeader(1, 1), 1, 1},
		{"png 2000x1500", pngHeader(2000, 1500), 2000, 1500},
		{"jpeg baseline 2000x1500 after APP0, APP1, DQT", jpegHeader(2000, 1500, 0xC0, 200), 2000, 1500},
		{"jpeg progressive 1x1", jpegHeader(1, 1, 0xC2, 30), 1, 1},
		{"jpeg SOF15", jpegHeader(640, 480, 0xCF, 30), 640, 480},
		{"gif 1x1", gifHeader(1, 1), 1, 1},
		{"gif 2000x1500", gifHeader(2000, 1500), 2000, 1500},
		{"webp VP8 2000x1500", webpVP8(2000, 1500), 2000, 1500},
		{"webp VP8L 1x1", webpVP8L(1, 1), 1, 1},
		{"webp VP8L 2000x1500", webpVP8L(2000, 1500), 2000, 1500},
		{"webp VP8X 2000x1500", webpVP8X(2000, 1500), 2000, 1500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, s := range []string{
				b64(c.data),
				base64.RawStdEncoding.EncodeToString(c.data),
				base64.URLEncoding.EncodeToString(c.data),
				"data:image/x;base64," + b64(c.data),
			} {
				w, h, ok := imageSize(s)
				require.True(t, ok, s)
				require.Equal(t, [2]int{c.w, c.h}, [2]int{w, h}, s)
			}
		})
	}
	w, h, ok := imageSize(realPNG)
	require.True(t, ok)
	require.Equal(t, [2]int{1, 1}, [2]int{w, h})

	for _, s := range []string{"", "AAAA", "https://example.com/cat.png", "data:image/png,raw",
		"data:image/png;base64," + b64([]byte("\x89PNG\r\n\x1a\nshort")),
		b64(jpegHeader(0, 10, 0xC0, 30)),          // zero width
		b64(jpegHeader(10, 10, 0xC4, 30)),         // DHT is not a frame
		b64(pngHeader(1<<31, 1)),                  // over PNG's 2^31-1
		b64(pngHeader(5, 5))[:30] + "!!!!" + "AA", // undecodable before the size
		// line breaks (MIME-style base64) before the JPEG frame header: not read (a
		// group of four would shift the groups after it by 3 bytes, undetected)
		b64(jpegHeader(2000, 1500, 0xC0, 200))[:100] + "\r\n\r\n" + b64(jpegHeader(2000, 1500, 0xC0, 200))[100:],
	} {
		_, _, ok := imageSize(s)
		require.False(t, ok, s)
	}
}

// The header is read from its first base64 groups only: what follows it (here text
// that is not base64 at all, standing for the rest of a large image) is never decoded,
// and a JPEG's APPn segments are skipped by their lengths, not decoded.
func TestImageSizeDecodesOnlyTheHeader(t *testing.T) {
	s := b64(pngHeader(2000, 1500)) + strings.Repeat("#", 1<<20)
	w, h, ok := imageSize(s)
	require.True(t, ok)
	require.Equal(t, [2]int{2000, 1500}, [2]int{w, h})

	jpeg := jpegHeader(2000, 1500, 0xC0, 60_000) // a 60 KB EXIF block first
	src := &countingSource{src: b64Source{s: b64(jpeg)}}
	w, h, ok = imageHeaderSize(src)
	require.True(t, ok)
	require.Equal(t, [2]int{2000, 1500}, [2]int{w, h})
	require.Less(t, src.bytes, 64, "bytes decoded to find the frame header")
}

type countingSource struct {
	src   byteSource
	bytes int // bytes returned
	end   int // the furthest offset asked for
}

func (c *countingSource) read(off, n int) []byte {
	b := c.src.read(off, n)
	c.bytes += len(b)
	c.end = max(c.end, off+n)
	return b
}

// The documented examples of each provider's page (image_tokens.go cites them).
func TestImageRulesMatchDocumentedExamples(t *testing.T) {
	// Anthropic's table: 200x200 ~54, 1000x1000 ~1334, 1092x1092 ~1590 (not resized).
	require.Equal(t, 54, anthropicImageTokens(200, 200))
	require.Equal(t, 1334, anthropicImageTokens(1000, 1000))
	require.Equal(t, 1590, anthropicImageTokens(1092, 1092))
	// Over the limits: scaled to a 1568 long edge, then to ~1,600 tokens.
	require.Equal(t, 1598, anthropicImageTokens(2000, 1500))
	require.LessOrEqual(t, anthropicImageTokens(8000, 8000), anthropicMaxTokens)
	require.LessOrEqual(t, anthropicImageTokens(8000, 1), anthropicMaxTokens)
	require.Equal(t, 1, anthropicImageTokens(1, 1))

	// OpenAI's examples: 1024x1024 high 765, 2048x4096 high 1105, low always 85.
	require.Equal(t, 765, openAIImageTokens(1024, 1024))
	require.Equal(t, 1105, openAIImageTokens(2048, 4096))
	require.Equal(t, 765, openAIImageTokens(2000, 1500)) // 1024x768: 4 tiles
	require.Equal(t, 255, openAIImageTokens(1, 1))
	require.Equal(t, 85, imageCost(imageRuleOpenAI, b64(pngHeader(4096, 8192)), "low"))
	require.Equal(t, 85, imageCost(imageRuleOpenAI, "https://example.com/a.png", "low"))

	// Gemini: both sides <= 384: 258; else 768x768 tiles of 258.
	require.Equal(t, 258, geminiImageTokens(384, 384))
	require.Equal(t, 258, geminiImageTokens(600, 400))
	require.Equal(t, 1548, geminiImageTokens(2000, 1500)) // 3x2 tiles
	require.Equal(t, 258, geminiImageTokens(1, 1))

	// Size unknown: the stated default.
	for _, r := range []imageRule{imageRuleAnthropic, imageRuleOpenAI, imageRuleGemini} {
		require.Equal(t, imageTokens, imageCost(r, "https://example.com/a.png", "high"))
	}
	require.Equal(t, imageRuleOpenAI, imageRuleForProvider("openai.chat"))
	require.Equal(t, imageRuleGemini, imageRuleForProvider("google.generative-ai"))
	require.Equal(t, imageRuleAnthropic, imageRuleForProvider("anthropic"))
	require.Equal(t, imageRuleAnthropic, imageRuleForProvider(""))
}

// maxHeaderRead bounds what a header read may ask for: 30 bytes, then per JPEG
// segment 4 (and the frame's 4).
const maxHeaderRead = 30 + maxJPEGSegments*4 + maxJPEGJunk*4 + 4

// stdlibComparable reports whether image.DecodeConfig reads data's size by our
// rule: always for PNG and GIF; for JPEG, when data is too short to reach our bounds
// on segments and junk, and has no marker that Go reads a length after and libjpeg
// (and we) do not: TEM (0x01) and RST0-7/SOI (0xD0-0xD8; Go skips RSTn only).
func stdlibComparable(format string, data []byte) bool {
	if format != "jpeg" {
		return true
	}
	if len(data) > maxJPEGJunk {
		return false
	}
	for i := 2; i+1 < len(data); i++ {
		if data[i] == 0xFF && (data[i+1] == 0x01 || data[i+1] >= 0xD0 && data[i+1] <= 0xD8) {
			return false
		}
	}
	return true
}

// FuzzImageHeader: the header readers are total (no panic on any bytes), read at
// most maxHeaderRead bytes, give the same size from the bytes as from their base64,
// and agree with the standard library's decoders wherever those read a size.
func FuzzImageHeader(f *testing.F) {
	for _, b := range [][]byte{pngHeader(1, 1), pngHeader(2000, 1500), jpegHeader(2000, 1500, 0xC0, 200),
		jpegHeader(1, 1, 0xC2, 30), gifHeader(1, 1), gifHeader(2000, 1500), webpVP8(2000, 1500),
		webpVP8L(1, 1), webpVP8X(2000, 1500), {0xFF, 0xD8, 0xFF, 0xFF, 0xFF}, []byte("RIFF....WEBPVP8X")} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw := &countingSource{src: rawSource(data)}
		w, h, ok := imageHeaderSize(raw)
		require.LessOrEqual(t, raw.bytes, maxHeaderRead)
		for _, s := range []string{b64(data), base64.RawURLEncoding.EncodeToString(data)} {
			enc := &countingSource{src: b64Source{s: s}}
			w2, h2, ok2 := imageHeaderSize(enc)
			require.Equal(t, []any{w, h, ok}, []any{w2, h2, ok2}, "base64 and bytes agree")
			require.Equal(t, raw.bytes, enc.bytes)
		}
		if ok {
			require.Positive(t, w)
			require.Positive(t, h)
		}
		if cfg, format, err := image.DecodeConfig(bytes.NewReader(data)); err == nil && cfg.Width > 0 && cfg.Height > 0 && stdlibComparable(format, data) {
			require.True(t, ok, "the %s decoder read %dx%d", format, cfg.Width, cfg.Height)
			require.Equal(t, [2]int{cfg.Width, cfg.Height}, [2]int{w, h}, format)
		}
	})
}
