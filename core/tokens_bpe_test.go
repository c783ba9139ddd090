package core

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer/codec"
)

// The encoder over the embedded rank tables must count exactly as
// github.com/tiktoken-go/tokenizer, which generated the tables (the library is a
// test dependency only; it is not linked into core or the wasm module).

var libCodecs = map[string]*codec.Codec{}

func libCodec(t testing.TB, enc string) *codec.Codec {
	t.Helper()
	if c, ok := libCodecs[enc]; ok {
		return c
	}
	var c *codec.Codec
	switch enc {
	case EncodingO200k:
		c = codec.NewO200kBase()
	case EncodingCl100k:
		c = codec.NewCl100kBase()
	default:
		t.Fatalf("no library codec for %s", enc)
	}
	libCodecs[enc] = c
	return c
}

var exactEncodings = map[string]*exactEncoding{EncodingO200k: o200k, EncodingCl100k: cl100k}

// diffCount fails the test if the two counts of s differ and reports whether they agreed.
func diffCount(t *testing.T, enc, where, s string) bool {
	t.Helper()
	want, err := libCodec(t, enc).Count(s)
	if err != nil {
		t.Fatalf("library: %v", err)
	}
	got, err := exactEncodings[enc].encoder().count(s)
	if err != nil {
		t.Fatalf("%s %s: %v", enc, where, err)
	}
	if got != want {
		t.Errorf("%s %s: %d tokens, the library counts %d: %.200q", enc, where, got, want, s)
		return false
	}
	return true
}

// trickyTexts exercise the split patterns and both merge paths.
var trickyTexts = []string{
	"", " ", "a", "Hello, world!", "hello world", "  leading and trailing  ",
	"I'm, you're, he's, they've, we'll, she'd, it't", "I'M YOU'RE HE'S THEY'VE WE'LL SHE'D",
	"don'T Can'S dON'tS", "x'sy 's 'S ' s''s", "ſ 'ſ Xſ", // the long s is case-folded s in (?i:'s)
	"你好，世界！这是一个测试。", "日本語のテキストとカタカナ、ひらがな。", "한국어 텍스트입니다.", "中文English混合mixed文本",
	"👋🏽 👨‍👩‍👧‍👦 🇯🇵🇫🇷 1️⃣ ❤️‍🔥 🏳️‍🌈", "emoji🙂inside🙃words",
	"      ", "\t\t\t", "\n\n\n\n", "a\r\n\r\nb", "a \n b", "trailing   \n", "   x", "x   ", " \u00a0 \u3000 ",
	strings.Repeat(" ", 300), strings.Repeat("\n", 200), strings.Repeat(" \n", 150), strings.Repeat("\t ", 97),
	"1", "12", "123", "1234", "1234567890123", "3.14159265358979", "-42 +7 1e10 0x1F 1,000,000", "٣٤٥ ١٢ 12٣", "²³ ½ ⅓ Ⅻ",
	"func main() {\n\tfmt.Println(\"hi\")\n}\n", "def f(x):\n    return x ** 2  # square\n",
	`{"key": "value", "n": [1, 2, 3], "nested": {"a": null}}`, "<|endoftext|> <|endofprompt|> <|fim_prefix|>",
	"https://example.com/path/to/file.go?q=1&r=2#frag", "/usr/local/bin/go//", "C:\\Windows\\System32",
	"café naïve résumé coöperate", "e\u0301 a\u0300 n\u0303", "Ελληνικά Русский עברית العربية हिन्दी ไทย",
	"CamelCaseWordsAndHTTPServerURLs", "ALLCAPS lowercase MiXeD", "Ǆǅǆ ǈǋ", // title case letters
	strings.Repeat("=", 200), strings.Repeat("-*", 150), strings.Repeat("!?", 64) + "\n\n",
	strings.Repeat("a", 500), strings.Repeat("ab", 333), strings.Repeat("supercalifragilistic", 20),
	strings.Repeat("的", 300), strings.Repeat("🙂", 100), strings.Repeat("0123456789", 30),
	"bad \xff\xfe utf8 \xc3 here", "\xe4\xbd", "\x80abc", "ok\xf0\x9f\x98", // invalid UTF-8 counts as U+FFFD
	"\x00\x01\x02 control \x1b[31mred\x1b[0m",
}

func TestBPEMatchesLibraryOnTrickyTexts(t *testing.T) {
	for _, enc := range []string{EncodingO200k, EncodingCl100k} {
		for i, s := range trickyTexts {
			diffCount(t, enc, "tricky #"+strconv.Itoa(i), s)
		}
	}
}

// Every string value of every message of every shared trace: message content, text
// parts, tool arguments, thinking, plus each message's raw JSON.
func TestBPEMatchesLibraryOnSharedTraces(t *testing.T) {
	const dir = "../../shared/traces"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared traces not found at %s (%v): differential test on real data skipped", dir, err)
	}
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no traces in %s", dir)
	}
	texts, bytes := 0, 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		msgs := gjson.GetBytes(data, "messages")
		if !msgs.IsArray() {
			continue
		}
		var strs []string
		var walk func(v gjson.Result)
		walk = func(v gjson.Result) {
			switch {
			case v.Type == gjson.String:
				strs = append(strs, v.Str)
			case v.IsObject() || v.IsArray():
				v.ForEach(func(_, e gjson.Result) bool { walk(e); return true })
			}
		}
		msgs.ForEach(func(_, m gjson.Result) bool {
			walk(m)
			strs = append(strs, m.Raw)
			return true
		})
		for _, enc := range []string{EncodingO200k, EncodingCl100k} {
			failed := 0
			for i, s := range strs {
				if !diffCount(t, enc, filepath.Base(p)+" text #"+strconv.Itoa(i), s) {
					if failed++; failed > 5 {
						t.Fatalf("%s: too many differences", p)
					}
				}
			}
		}
		texts += len(strs)
		for _, s := range strs {
			bytes += len(s)
		}
	}
	if texts < 1000 {
		t.Errorf("only %d texts in %d traces: the walk found too little", texts, len(paths))
	}
	t.Logf("%d traces, %d texts, %d bytes: equal counts in both encodings", len(paths), texts, bytes)
}

// Pseudo-random strings over an alphabet of the characters the patterns treat
// differently (letters of each case, marks, digits, apostrophes, whitespace kinds,
// symbols, CJK, emoji), of lengths across the scan/heap threshold.
func TestBPEMatchesLibraryOnRandomTexts(t *testing.T) {
	alphabet := []string{"a", "Z", "e", "s", "S", "t", "'", "'s", "'LL", "ſ", "é", "\u0301", "Ǆ", "ǅ", "ʰ",
		"0", "7", "٣", "½", " ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", ".", ",", "/", "//", "-",
		"=", "\"", "{", "}", "(", "的", "あ", "カ", "한", "🙂", "👨‍👩‍👧", "🇯🇵", "\xff", "th", "ing", " the", "\x00"}
	x := uint64(0x9E3779B97F4A7C15)
	rnd := func(n int) int {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(n))
	}
	var sb strings.Builder
	for i := 0; i < 3000; i++ {
		sb.Reset()
		for n := rnd(8) * (1 + rnd(40)); n > 0; n-- {
			sb.WriteString(alphabet[rnd(len(alphabet))])
		}
		s := sb.String()
		for _, enc := range []string{EncodingO200k, EncodingCl100k} {
			if !diffCount(t, enc, "random #"+strconv.Itoa(i), s) {
				return
			}
		}
	}
}

// The two merge loops give the same count on every piece the scan handles, and a
// long piece goes through the heap.
func TestBPEMergeScanAndHeapAgree(t *testing.T) {
	b := o200k.encoder()
	pieces := []string{"ab", "xyz", "supercalifragilistic", "indivisibility", "!!!???...", "的的的的的", "🙂🙃🙂",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", " antidisestablishmentarianism", "\xe4\xbd\xa0\xe5\xa5\xbd\xe4"}
	for _, enc := range []*exactEncoding{o200k, cl100k} {
		b = enc.encoder()
		for _, p := range pieces {
			for n := 2; n <= len(p); n++ {
				piece := []byte(p[:n])
				if s, h := b.mergeScan(piece), b.mergeHeap(piece); s != h {
					t.Errorf("%s %q: scan %d parts, heap %d", enc.name, piece, s, h)
				}
			}
		}
	}
	long := strings.Repeat("xq", bpeHeapThreshold) // one piece, not a token
	if n, _ := b.count(long); n < 2 {
		t.Errorf("long piece: %d tokens", n)
	}
}

// The embedded tables hold the vocabularies the library holds.
func TestRankTables(t *testing.T) {
	for enc, want := range map[*exactEncoding]int{o200k: 199998, cl100k: 100256} {
		b := enc.encoder()
		if len(b.ranks) != want {
			t.Errorf("%s: %d tokens, want %d", enc.name, len(b.ranks), want)
		}
		ids, toks, err := libCodec(t, enc.name).Encode("Hello, world! 你好 🙂 indivisibility")
		if err != nil {
			t.Fatal(err)
		}
		for i, tok := range toks {
			if r, ok := b.ranks[tok]; !ok || uint(r) != ids[i] {
				t.Errorf("%s: token %q has rank %d (%v), the library's is %d", enc.name, tok, r, ok, ids[i])
			}
		}
	}
	for _, bad := range []string{"", "ctxcvocab0\n\x01\x01a", vocabMagic + "\x02\x01a", vocabMagic + "\x01\x05a", vocabMagic + "\x01\x01a!"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("newBPE accepted the malformed table %q", bad)
				}
			}()
			newBPE(bad, cl100kPattern)
		}()
	}
}

func FuzzBPEMatchesLibrary(f *testing.F) {
	for _, s := range trickyTexts {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		diffCount(t, EncodingO200k, "fuzz", s)
		diffCount(t, EncodingCl100k, "fuzz", s)
	})
}
