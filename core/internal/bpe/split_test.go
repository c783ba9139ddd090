package bpe

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// The package splits text with hand-written splitters (split.go). The reference
// here is the engine the core used before, and whose pieces equal tiktoken's on
// every text the tests of encode_test.go cover: github.com/dlclark/regexp2's
// interpreter, regexp2.Compile(pattern, regexp2.None). Not MustCompile: that returns
// the matcher tiktoken-go generated and registered for the same patterns, which
// splits "\n  \n" wrongly and drops U+007F (see encode_test.go). regexp2 is a
// test dependency only; nothing in core or this package imports it.

// regexpSplitter splits with a regexp2 matcher: its matches, as UTF-8. The matcher
// can fail (on a timeout, which the tests do not set); then it fails the test.
func regexpSplitter(t testing.TB, re *regexp2.Regexp) splitter {
	return func(s string, yield func(string)) {
		m, err := re.FindStringMatch(s)
		for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
			yield(m.String())
		}
		if err != nil {
			t.Fatalf("regexp2: %v", err)
		}
	}
}

var interpreters = map[string]*regexp2.Regexp{}

// interpreter returns regexp2's interpreter for the pattern of enc.
func interpreter(t testing.TB, enc string) *regexp2.Regexp {
	t.Helper()
	if re, ok := interpreters[enc]; ok {
		return re
	}
	re, err := regexp2.Compile(encodings[enc].pattern, regexp2.None)
	if err != nil {
		t.Fatal(err)
	}
	// The interpreter splits "\n  \n" as one piece (tiktoken does); the
	// generated matcher MustCompile would return splits it in two.
	if got := collectPieces(t, regexpSplitter(t, re), "\n  \n"); len(got) != 1 {
		t.Fatalf("%s: regexp2.Compile did not return the interpreter: pieces %q", enc, got)
	}
	interpreters[enc] = re
	return re
}

func collectPieces(t testing.TB, split splitter, s string) []string {
	t.Helper()
	var out []string
	split(s, func(p string) { out = append(out, p) })
	return out
}

// samePieces fails the test unless our splitter of enc and regexp2's interpreter
// split s into the same pieces, and reports whether they did.
func samePieces(t testing.TB, enc, where, s string) bool {
	t.Helper()
	ours := collectPieces(t, splitterFor(encodings[enc].pattern), s)
	want := collectPieces(t, regexpSplitter(t, interpreter(t, enc)), s)
	for i := 0; i < len(ours) || i < len(want); i++ {
		if i >= len(ours) || i >= len(want) || ours[i] != want[i] {
			var o, w string
			if i < len(ours) {
				o = ours[i]
			}
			if i < len(want) {
				w = want[i]
			}
			t.Errorf("%s %s: piece %d is %q, regexp2's is %q (%d and %d pieces): %.300q", enc, where, i, o, w, len(ours), len(want), s)
			return false
		}
	}
	return true
}

var bothEncodings = []string{O200kBase, Cl100kBase}

func TestSplitterMatchesRegexp2OnTrickyTexts(t *testing.T) {
	texts := append([]string(nil), trickyTexts...)
	for _, c := range splitBugTexts {
		texts = append(texts, c.text)
	}
	texts = append(texts,
		// backtracking of the upperish run of o200k_base's first alternative
		"ABCǅx", "ABʰCD", "ABʰ", "Aʰ'S", "\u0301", "!\u0301", " \u0301A", "\u0301\u0301a", "x\u0301'Ll",
		// prefixes and the optional space of the symbol alternative
		" !", "  !", " \t!", "\t!", "\ta", "\ra", "\r!", " a", "  a", "\u00a0a", "\u3000!", "\x7fa", "\ufffdb",
		// contractions
		"'s", "'S", "'ſ", "'re", "'RE", "'rE", "'Ll", "'lL", "'l", "'r", "'ve", "'Ve", "''s", "a''s", "'sx", "x'sx", "A'T", "é'D",
		"'ſſ", "'K", "'\u212a", "'İ", "\u0130's", "don't'll",
		// numbers and slashes
		"1234567", "12a34", "a/b//c\n/", "!/\n/\r\n", "½¾⅓1", "x²³⁴⁵",
		// whitespace runs before and after others
		" \n", "\n ", " \n x", "  x", "   \tx", "\t\n\t", "\r\n\r\n", " \r", "x \u2028 y", "\u0085\u0085x", "\u00a0\u00a0",
		"\xff", "\xff\xfe ", " \xff", "a\xffb", "\xed\xa0\x80", "\xf4\x90\x80\x80")
	for _, enc := range bothEncodings {
		for i, s := range texts {
			samePieces(t, enc, "tricky #"+strconv.Itoa(i), s)
		}
	}
}

// Every assigned rune, alone and in the contexts the patterns tell apart, splits as
// regexp2 splits it: the classes of the splitters equal regexp2's. The runes are all
// of planes 0-3 and of the tags and variation selectors of plane 14, and a sample of
// the rest of the code space (unassigned or private use: no letters, numbers, marks
// or spaces).
func TestSplitterMatchesRegexp2OnEveryRune(t *testing.T) {
	if testing.Short() {
		t.Skip("every rune: about 30 s")
	}
	contexts := []string{"%c", "a%c", "A%c", " %c", "%cA", "1%c", "'%ce", "'l%c", "!%c!"}
	var sb strings.Builder
	for _, enc := range bothEncodings {
		split := splitterFor(encodings[enc].pattern)
		re := regexpSplitter(t, interpreter(t, enc))
		failed := 0
		for r := rune(0); r <= unicode.MaxRune && failed < 10; r++ {
			if 0xd800 <= r && r < 0xe000 {
				continue // not a rune of any Go string
			}
			if (0x40000 <= r && r < 0xe0000 || r >= 0xe0200) && r%251 != 0 {
				continue
			}
			// The contexts of a rune in one text, separated by a character that
			// always ends a piece before it and starts its own: cheaper than a
			// text per context.
			sb.Reset()
			for _, c := range contexts {
				fmt.Fprintf(&sb, c, r)
				sb.WriteString("\n\n")
			}
			s := sb.String()
			ours, want := collectPieces(t, split, s), collectPieces(t, re, s)
			if strings.Join(ours, "|") != strings.Join(want, "|") {
				failed++
				t.Errorf("%s U+%04X: pieces %q, regexp2's %q", enc, r, ours, want)
			}
		}
	}
}

// Every string value of every message of every shared trace, and each message's raw
// JSON.
func TestSplitterMatchesRegexp2OnSharedTraces(t *testing.T) {
	files, texts, bytes := sharedTraceTexts(t, "the differential splitter test")
	pieces := 0
	for _, f := range files {
		for _, enc := range bothEncodings {
			split := splitterFor(encodings[enc].pattern)
			for i, s := range f.texts {
				if !samePieces(t, enc, f.name+" text #"+strconv.Itoa(i), s) {
					t.Fatalf("%s: stopping at the first difference", f.name)
				}
				split(s, func(string) { pieces++ })
			}
		}
	}
	t.Logf("%d traces, %d texts, %d bytes, %d pieces (both encodings): equal to regexp2's", len(files), texts, bytes, pieces)
}

// Pseudo-random strings over an alphabet of the characters the patterns treat
// differently, longer and denser in the hard cases than the BPE test's.
func TestSplitterMatchesRegexp2OnRandomTexts(t *testing.T) {
	alphabet := []string{"a", "Z", "e", "l", "L", "r", "v", "s", "S", "t", "d", "M", "'", "'", "'s", "'LL", "ſ", "é", "\u0301",
		"Ǆ", "ǅ", "ʰ", "中", "0", "7", "٣", "½", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085",
		".", ",", "/", "//", "-", "=", "\"", "{", "🙂", "\xff", "\x7f", "\x00", "_", "#"}
	rnd := xorshift(0x2545F4914F6CDD1D)
	var sb strings.Builder
	for i := 0; i < 20000; i++ {
		sb.Reset()
		for n := 1 + rnd(30); n > 0; n-- {
			sb.WriteString(alphabet[rnd(len(alphabet))])
		}
		for _, enc := range bothEncodings {
			if !samePieces(t, enc, "random #"+strconv.Itoa(i), sb.String()) {
				return
			}
		}
	}
}

// The pieces tile the text: joined, they are the text (invalid bytes as U+FFFD).
func TestSplitterPiecesTileTheText(t *testing.T) {
	for _, enc := range bothEncodings {
		split := splitterFor(encodings[enc].pattern)
		for _, s := range append(trickyTexts, "a\xffb\x80", "\x7f\x7f") {
			want := s
			if !utf8.ValidString(s) {
				want = string([]rune(s)) // one U+FFFD per invalid byte
			}
			if got := strings.Join(collectPieces(t, split, s), ""); got != want {
				t.Errorf("%s: pieces join to %q, not %q", enc, got, want)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("splitterFor accepted a pattern it has no splitter for")
		}
	}()
	splitterFor(`\w+`)
}

func FuzzSplitterMatchesRegexp2(f *testing.F) {
	for _, s := range trickyTexts {
		f.Add(s)
	}
	for _, c := range splitBugTexts {
		f.Add(c.text)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, enc := range bothEncodings {
			samePieces(t, enc, "fuzz", s)
		}
	})
}
