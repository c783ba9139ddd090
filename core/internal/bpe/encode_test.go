package bpe

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dlclark/regexp2/v2"
	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer/codec"

	"github.com/ctxcompact/ctxcompact/internal/testtraces"
)

// The encoder over the embedded rank tables must count exactly as tiktoken. Two
// references:
//
//   - github.com/tiktoken-go/tokenizer, which generated the tables (a test and
//     generator dependency only; it is not linked into core or the wasm module).
//     It splits text with a matcher that regexp2cg generated for each pattern and
//     registered with regexp2, and that matcher has a bug: in \s*[\r\n]+ it does
//     not backtrack across a newline, so "\n  \n" becomes two pieces ("\n",
//     "  \n") where tiktoken has one. The splitters here split as regexp2's
//     interpreter (regexp2.Compile) does, which is tiktoken's split. The matcher
//     also drops U+007F (DEL) from the text: "a\x7fb" is "a", "b" there.
//   - js-tiktoken 1.0.21, the reference of testdata/tokens.count.json, for texts the
//     library splits wrongly (splitBugTexts).
//
// So the tests check (1) our tables and merge loop against the library with the
// library's own splitter: equal counts everywhere; (2) our splitter against the
// library's: equal pieces everywhere except where the library's bug applies.

var libCodecs = map[string]*codec.Codec{}

func libCodec(t testing.TB, enc string) *codec.Codec {
	t.Helper()
	if c, ok := libCodecs[enc]; ok {
		return c
	}
	var c *codec.Codec
	switch enc {
	case O200kBase:
		c = codec.NewO200kBase()
	case Cl100kBase:
		c = codec.NewCl100kBase()
	default:
		t.Fatalf("no library codec for %s", enc)
	}
	libCodecs[enc] = c
	return c
}

var encodings = map[string]*Encoding{O200kBase: o200k, Cl100kBase: cl100k}

// libSplit returns our encoder with the library's splitter: regexp2.MustCompile
// returns the matcher the library registered for the same pattern (it is linked
// into this test binary). Our tables and merge loop, the library's split.
func libSplit(t testing.TB, enc string) *tokenizer {
	t.Helper()
	e := encodings[enc]
	b := &tokenizer{ranks: e.tokenizer().ranks, split: regexpSplitter(t, regexp2.MustCompile(e.pattern, regexp2.None))}
	if got := splitPieces(t, b, " \n \n"); len(got) != 2 {
		t.Fatalf("%s: MustCompile did not return the library's generated matcher (pieces %q); "+
			"if tiktoken-go fixed its split, compare our encoder with it directly", enc, got)
	}
	return b
}

func splitPieces(t testing.TB, b *tokenizer, s string) []string {
	t.Helper()
	var out []string
	b.split(s, func(piece string) { out = append(out, piece) })
	return out
}

// diffCount fails the test if the library's count of s and our count with the
// library's splitter differ, and reports whether they agreed.
func diffCount(t *testing.T, enc, where, s string) bool {
	t.Helper()
	want, err := libCodec(t, enc).Count(s)
	if err != nil {
		t.Fatalf("library: %v", err)
	}
	if got := libSplit(t, enc).count(s); got != want {
		t.Errorf("%s %s: %d tokens, the library counts %d: %.200q", enc, where, got, want, s)
		return false
	}
	return true
}

// splitBugPiece matches a piece our splitter makes where the library's makes
// several: whitespace (regexp2's \s is Unicode's) with a newline before its final
// run of newlines.
var splitBugPiece = regexp.MustCompile(`^[\s\v\x{85}\p{Z}]*[\r\n][\s\v\x{85}\p{Z}]*[\r\n]$`)

// diffSplit compares our splitter with the library's on s. Where the pieces
// differ, each of our pieces in the differing stretch must be of the bug's shape
// and the library's pieces must concatenate to the same text. It returns whether
// the splits were equal, failing the test on any other difference.
//
// A text with U+007F is not compared (false): the library's pieces leave it out.
func diffSplit(t *testing.T, enc, where, s string) bool {
	t.Helper()
	if strings.ContainsRune(s, 0x7f) {
		return false
	}
	ours, lib := splitPieces(t, encodings[enc].tokenizer(), s), splitPieces(t, libSplit(t, enc), s)
	equal := true
	i, j := 0, 0
	for i < len(ours) && j < len(lib) {
		if ours[i] == lib[j] {
			i, j = i+1, j+1
			continue
		}
		equal = false
		if !splitBugPiece.MatchString(ours[i]) {
			t.Errorf("%s %s: piece %d is %q, the library's is %q (not the known split bug): %.200q", enc, where, i, ours[i], lib[j], s)
			return false
		}
		joined := ""
		for j < len(lib) && len(joined) < len(ours[i]) {
			joined += lib[j]
			j++
		}
		if joined != ours[i] {
			t.Errorf("%s %s: piece %d is %q, the library's pieces there join to %q: %.200q", enc, where, i, ours[i], joined, s)
			return false
		}
		i++
	}
	if i != len(ours) || j != len(lib) {
		t.Errorf("%s %s: %d pieces, the library has %d: %.200q", enc, where, len(ours), len(lib), s)
		return false
	}
	return equal
}

// splitBugTexts are texts the library splits wrongly (either bug), with the counts js-tiktoken
// 1.0.21 gives (o200k_base, cl100k_base); we must give these.
var splitBugTexts = []struct {
	text          string
	o200k, cl100k int
}{
	{" \n \n \n", 2, 2},
	{"a\n \nb", 3, 3},
	{"\n   \n  Still", 3, 3},
	{"def f():\n    x = 1\n    \n    return x\n", 13, 13},
	{"}\n\t\n\t\n}\n", 3, 3},
	{"x\r\n \r\n y", 4, 4},
	{"\n\n  \n", 1, 2},
	{"\x7f", 1, 1},
	{"a\x7fb", 3, 3},
	{"x \x7f!", 4, 4},
}

func TestSplitBugTextsCountAsTiktoken(t *testing.T) {
	libWrong := 0
	for _, c := range splitBugTexts {
		for enc, want := range map[string]int{O200kBase: c.o200k, Cl100kBase: c.cl100k} {
			if got := encodings[enc].Count(c.text); got != want {
				t.Errorf("%s %q: %d tokens, js-tiktoken counts %d", enc, c.text, got, want)
			}
			if lib, _ := libCodec(t, enc).Count(c.text); lib != want {
				libWrong++
			}
			if diffSplit(t, enc, "split-bug text", c.text) {
				t.Errorf("%s %q: splits equal the library's; not an example of its bug", enc, c.text)
			}
		}
	}
	// A wrong split need not change the count ("x\r\n \r\n y"), but it does here.
	if libWrong < 12 {
		t.Errorf("the library miscounts only %d of these texts: is its split bug fixed?", libWrong)
	}
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
	for _, enc := range []string{O200kBase, Cl100kBase} {
		for i, s := range trickyTexts {
			diffCount(t, enc, "tricky #"+strconv.Itoa(i), s)
			diffSplit(t, enc, "tricky #"+strconv.Itoa(i), s)
		}
	}
}

// Encode gives the library's token ids when both split alike (the tricky texts
// the library splits correctly), and as many ids as Count everywhere.
func TestEncodeMatchesLibraryIDs(t *testing.T) {
	compared := 0
	for _, enc := range []string{O200kBase, Cl100kBase} {
		e := encodings[enc]
		for i, s := range trickyTexts {
			ids := e.Encode(s)
			if len(ids) != e.Count(s) {
				t.Errorf("%s tricky #%d: %d ids, Count %d", enc, i, len(ids), e.Count(s))
			}
			if !diffSplit(t, enc, "tricky #"+strconv.Itoa(i), s) {
				continue // the library's split differs here, so may its ids
			}
			want, _, err := libCodec(t, enc).Encode(s)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) != len(ids) || !slices.Equal(ids, toInts(want)) {
				t.Errorf("%s tricky #%d: ids %v, the library's %v: %q", enc, i, ids, want, s)
			}
			compared++
		}
	}
	if compared < len(trickyTexts) {
		t.Errorf("compared ids on only %d texts", compared)
	}
	if e, ok := Lookup(O200kBase); !ok || e.Encode("") != nil || e.Count("") != 0 {
		t.Error("the empty text has tokens")
	}
	if _, ok := Lookup("p50k_base"); ok {
		t.Error("Lookup found an encoding the package does not have")
	}
}

func toInts(ids []uint) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// Every string value of every message of every shared trace, plus each message's
// raw JSON: equal counts with the library's splitter, equal pieces with ours except
// where the library's split bugs apply.
func TestBPEMatchesLibraryOnSharedTraces(t *testing.T) {
	files, texts, bytes := sharedTraceTexts(t, "the differential test")
	bugged := 0
	for _, f := range files {
		for _, enc := range []string{O200kBase, Cl100kBase} {
			failed := 0
			for i, s := range f.texts {
				where := f.name + " text #" + strconv.Itoa(i)
				if !diffCount(t, enc, where, s) {
					failed++
				}
				if !diffSplit(t, enc, where, s) {
					bugged++
				}
				if failed > 5 || t.Failed() && failed > 0 {
					t.Fatalf("%s: stopping after differences", f.name)
				}
			}
		}
	}
	t.Logf("%d traces, %d texts, %d bytes: equal counts with the library's split in both encodings; "+
		"%d text splits (of both encodings) differ from the library's only by its split bugs", len(files), texts, bytes, bugged)
}

// Pseudo-random strings over an alphabet of the characters the patterns treat
// differently (letters of each case, marks, digits, apostrophes, whitespace kinds,
// symbols, CJK, emoji), of lengths across the scan/heap threshold.
func TestBPEMatchesLibraryOnRandomTexts(t *testing.T) {
	alphabet := []string{"a", "Z", "e", "s", "S", "t", "'", "'s", "'LL", "ſ", "é", "\u0301", "Ǆ", "ǅ", "ʰ",
		"0", "7", "٣", "½", " ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", ".", ",", "/", "//", "-",
		"=", "\"", "{", "}", "(", "的", "あ", "カ", "한", "🙂", "👨‍👩‍👧", "🇯🇵", "\xff", "th", "ing", " the", "\x00"}
	rnd := xorshift(0x9E3779B97F4A7C15)
	var sb strings.Builder
	for i := 0; i < 3000; i++ {
		sb.Reset()
		for n := rnd(8) * (1 + rnd(40)); n > 0; n-- {
			sb.WriteString(alphabet[rnd(len(alphabet))])
		}
		s := sb.String()
		for _, enc := range []string{O200kBase, Cl100kBase} {
			diffSplit(t, enc, "random #"+strconv.Itoa(i), s)
			if !diffCount(t, enc, "random #"+strconv.Itoa(i), s) || t.Failed() {
				return
			}
		}
	}
}

// The two merge loops give the same count and the same token ids on every piece
// the scan handles, and a long piece goes through the heap.
func TestBPEMergeScanAndHeapAgree(t *testing.T) {
	b := o200k.tokenizer()
	pieces := []string{"ab", "xyz", "supercalifragilistic", "indivisibility", "!!!???...", "的的的的的", "🙂🙃🙂",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", " antidisestablishmentarianism", "\xe4\xbd\xa0\xe5\xa5\xbd\xe4"}
	for _, enc := range []*Encoding{o200k, cl100k} {
		b = enc.tokenizer()
		for _, p := range pieces {
			for n := 2; n <= len(p); n++ {
				piece := []byte(p[:n])
				var sIDs, hIDs []int
				if s, h := b.mergeScan(piece, &sIDs), b.mergeHeap(piece, &hIDs); s != h || len(sIDs) != s {
					t.Errorf("%s %q: scan %d parts (%d ids), heap %d", enc.name, piece, s, len(sIDs), h)
				}
				if !slices.Equal(sIDs, hIDs) {
					t.Errorf("%s %q: scan ids %v, heap ids %v", enc.name, piece, sIDs, hIDs)
				}
				if n := b.mergeScan(piece, nil); n != len(sIDs) {
					t.Errorf("%s %q: %d parts counted, %d when encoding", enc.name, piece, n, len(sIDs))
				}
			}
		}
	}
	long := strings.Repeat("xq", bpeHeapThreshold) // one piece, not a token
	if n := b.count(long); n < 2 {
		t.Errorf("long piece: %d tokens", n)
	}
}

// The embedded tables hold the vocabularies the library holds.
func TestRankTables(t *testing.T) {
	for enc, want := range map[*Encoding]int{o200k: 199998, cl100k: 100256} {
		b := enc.tokenizer()
		if b.ranks.len() != want {
			t.Errorf("%s: %d tokens, want %d", enc.name, b.ranks.len(), want)
		}
		ids, toks, err := libCodec(t, enc.name).Encode("Hello, world! 你好 🙂 indivisibility")
		if err != nil {
			t.Fatal(err)
		}
		for i, tok := range toks {
			if r, ok := b.ranks.lookup(tok); !ok || uint(r) != ids[i] {
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
			newTokenizer(bad, cl100kPattern)
		}()
	}
	if !func() (dup bool) {
		defer func() { dup = recover() != nil }()
		newTokenizer(vocabMagic+"\x02\x01a\x01a", cl100kPattern)
		return false
	}() {
		t.Error("newTokenizer accepted a table with a duplicate token")
	}
}

// garbageAfter returns s as bytes with n bytes of capacity after it holding
// non-zero bytes, which the rank table's word loads must mask off.
func garbageAfter(s string, n int) []byte {
	b := make([]byte, len(s)+n)
	for i := range b {
		b[i] = 0xa5
	}
	return b[:copy(b, s)]
}

// Every token of each table is found with its rank, by the table and through a
// hot cache, from a buffer with and without spare capacity; a token with a byte
// more or less is found only if it is a token too.
func TestRankTableFindsEveryToken(t *testing.T) {
	for _, enc := range []*Encoding{o200k, cl100k} {
		b := enc.tokenizer()
		w := b.borrow()
		table, _ := Embedded(enc.name)
		tokens := map[string]bool{}
		pos := len(vocabMagic)
		next := func() int {
			x, shift := 0, 0
			for {
				c := table[pos]
				pos++
				x |= int(c&0x7f) << shift
				if c < 0x80 {
					return x
				}
				shift += 7
			}
		}
		n := next()
		for r := 0; r < n; r++ {
			l := next()
			tok := table[pos : pos+l]
			pos += l
			tokens[tok] = true
			padded := garbageAfter(tok, 9)
			for _, via := range []struct {
				name string
				get  func() (uint32, bool)
			}{
				{"table, exact capacity", func() (uint32, bool) { return b.ranks.get([]byte(tok), 0, l) }},
				{"table, padded", func() (uint32, bool) { return b.ranks.get(padded, 0, l) }},
				{"hot cache", func() (uint32, bool) { return w.get(padded, 0, l) }},
				{"hot cache again", func() (uint32, bool) { return w.get(padded, 0, l) }},
			} {
				if got, ok := via.get(); !ok || got != uint32(r) {
					t.Fatalf("%s: token %q (rank %d) via %s: %d, %v", enc.name, tok, r, via.name, got, ok)
				}
			}
		}
		for tok := range tokens {
			for _, other := range []string{tok + "\x00", tok[:len(tok)-1], "\xff" + tok} {
				padded := garbageAfter(other, 8)
				_, want := tokens[other]
				if _, ok := w.get(padded, 0, len(other)); ok != want {
					t.Fatalf("%s: %q found %v, is a token %v", enc.name, other, ok, want)
				}
				if _, ok := b.ranks.get(padded, 0, len(other)); ok != want {
					t.Fatalf("%s: %q found %v in the table, is a token %v", enc.name, other, ok, want)
				}
			}
		}
		w.giveBack()
	}
}

func FuzzBPEMatchesLibrary(f *testing.F) {
	for _, s := range trickyTexts {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, enc := range []string{O200kBase, Cl100kBase} {
			diffCount(t, enc, "fuzz", s)
			diffSplit(t, enc, "fuzz", s)
		}
	})
}

// traceTexts returns every string of a trace file's messages, and each message's raw
// JSON: the texts the encoders are compared on. nil when the file has no messages.
func traceTexts(data []byte) []string {
	msgs := gjson.GetBytes(data, "messages")
	if !msgs.IsArray() {
		return nil
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
	return strs
}

// traceFileTexts is traceTexts of one shared trace file.
type traceFileTexts struct {
	name  string // the file's base name
	texts []string
}

// sharedTraceTexts returns traceTexts of every shared trace file (in all the
// subfolders), with the number of texts and their bytes. When the traces are
// absent it skips the test or fails it (CI set: internal/testtraces); it fails it
// when the walk finds too little. what names the test in that message.
func sharedTraceTexts(t testing.TB, what string) (files []traceFileTexts, texts, bytes int) {
	t.Helper()
	t.Logf("%s on the shared traces", what)
	tracesDir := testtraces.Require(t)
	err := filepath.WalkDir(tracesDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strs := traceTexts(data); strs != nil {
			files = append(files, traceFileTexts{name: filepath.Base(p), texts: strs})
			texts += len(strs)
			for _, s := range strs {
				bytes += len(s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no traces with messages in %s", tracesDir)
	}
	if texts < 1000 {
		t.Fatalf("only %d texts in %d traces: the walk found too little", texts, len(files))
	}
	return files, texts, bytes
}

// xorshift returns a deterministic pseudo-random source: rnd(n) is in [0, n).
func xorshift(seed uint64) func(n int) int {
	x := seed
	return func(n int) int {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(n))
	}
}

// Counts running at once share the table and its spare hot cache safely (run
// with -race) and count as one alone does.
func TestConcurrentCounts(t *testing.T) {
	texts := append([]string{strings.Repeat("concurrent counting, 同时 ", 200)}, trickyTexts...)
	for _, e := range []*Encoding{o200k, cl100k} {
		want := make([]int, len(texts))
		for i, s := range texts {
			want[i] = e.Count(s)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for r := 0; r < 20; r++ {
					i := (g + r) % len(texts)
					if n := e.Count(texts[i]); n != want[i] {
						errs <- fmt.Sprintf("%s: text %d counted %d, alone %d", e.name, i, n, want[i])
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

// TestTableSums: the sizes and sums a host-given table is checked against are the
// committed tables', and a table that differs by one byte is refused.
func TestTableSums(t *testing.T) {
	for _, name := range []string{O200kBase, Cl100kBase} {
		table, ok := Embedded(name)
		if !ok {
			t.Fatalf("%s: not embedded", name)
		}
		if err := checkTable(name, table); err != nil {
			t.Fatal(err)
		}
		bad := []byte(table)
		bad[len(bad)/2] ^= 1
		if err := checkTable(name, string(bad)); err == nil {
			t.Errorf("%s: a table with one byte changed passed the check", name)
		}
		if err := checkTable(name, table[:len(table)-1]); err == nil {
			t.Errorf("%s: a truncated table passed the check", name)
		}
	}
}

// uncachedCount is Count without the hot and merge caches: every piece looked up in
// the rank table and merged, the reference the caches are held to.
func uncachedCount(e *Encoding, s string) int {
	b := e.tokenizer() // the shared tokenizer: no hot cache
	n := 0
	var buf []byte
	b.split(s, func(piece string) {
		buf = pieceBuf(buf, piece)
		n += b.pieceTokens(buf)
	})
	return n
}

// TestMergeCacheCountsAsWithout: the merge cache (a piece's count kept by its hash,
// the piece compared on a hit) never changes a count: every text of the shared
// traces and the tricky ones counted cold, then again warm, equals the count with
// no cache at all; a slot that holds another piece (a hash collision) is only a
// miss.
func TestMergeCacheCountsAsWithout(t *testing.T) {
	files, _, _ := sharedTraceTexts(t, "TestMergeCacheCountsAsWithout")
	texts := append([]string{}, trickyTexts...)
	for _, f := range files {
		texts = append(texts, f.texts...)
	}
	for _, name := range []string{O200kBase, Cl100kBase} {
		e, _ := Lookup(name)
		for pass := 0; pass < 2; pass++ { // cold, then warm
			for _, s := range texts {
				if got, want := e.Count(s), uncachedCount(e, s); got != want {
					t.Fatalf("%s pass %d: Count %d, without caches %d, for %.80q", name, pass, got, want, s)
				}
			}
		}
		// Every slot holds another piece, with a count no text has: only misses.
		w := e.tokenizer().borrow()
		for i := range w.hot.pieces {
			w.hot.pieces[i], w.hot.counts[i] = "\x00not a piece", 999
		}
		w.giveBack()
		for _, s := range trickyTexts {
			if got, want := e.Count(s), uncachedCount(e, s); got != want {
				t.Fatalf("%s: a slot holding another piece answered: %d, want %d for %q", name, got, want, s)
			}
		}
	}
}
