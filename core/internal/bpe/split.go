package bpe

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizers of the exact encodings, written out by hand for exactly the two
// patterns below (tiktoken's, see o200kPattern and cl100kPattern in bpe.go).
// They split as the backtracking regexp engines tiktoken's references use (and as
// github.com/dlclark/regexp2's interpreter does; the tests compare every piece with
// it): the alternatives are tried in order at the current position and the first that
// matches wins (leftmost-first), each quantifier is greedy and gives back one
// character at a time when what follows it fails. The next piece starts where the
// last one ended; every alternative consumes at least one character and every
// character starts some alternative, so the pieces tile the text.
//
// The character classes come from the standard library's range tables (unicode.Lu,
// unicode.IsSpace, ...), never the unicode.Categories or unicode.Scripts maps: a
// regexp engine links those maps, and building them cost every wasm instance about
// 17 ms of start-up; the engine's own package init cost another 20 ms.
//
// The text is read as runes the way a Go []rune conversion reads it: an invalid UTF-8
// byte is one U+FFFD (a symbol, So). Pieces are yielded as UTF-8 with each invalid
// byte replaced by U+FFFD, so a piece is the same bytes as the engine's match.
//
// o200k_base:
//
//	A1 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	A2 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	A3 \p{N}{1,3}
//	A4  ?[^\s\p{L}\p{N}]+[\r\n/]*
//	A5 \s*[\r\n]+
//	A6 \s+(?!\S)
//	A7 \s+
//
// cl100k_base:
//
//	B1 (?i:'s|'t|'re|'ve|'m|'ll|'d)
//	B2 [^\r\n\p{L}\p{N}]?\p{L}+
//	B3 \p{N}{1,3}
//	B4  ?[^\s\p{L}\p{N}]+[\r\n]*
//	B5-B7 as A5-A7

// Character class bits of a rune. The categories L, N, M and White_Space are
// disjoint, so a rune has at most one of cLetter, cNumber, cMark, cSpace.
const (
	cUpperish = 1 << iota // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLowerish             // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	cLetter               // \p{L}
	cNumber               // \p{N}
	cSpace                // \s: unicode.IsSpace, as regexp2 defines \s
	cNewline              // \r or \n
	cEnd                  // past the end of the text: in no class
)

// asciiClass holds the class bits of the ASCII runes.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		t[r] = classOf(r)
	}
	return t
}()

// classOf returns the class bits of r from the range tables.
func classOf(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		switch {
		case unicode.Is(unicode.Lo, r), unicode.Is(unicode.Lm, r):
			return cLetter | cUpperish | cLowerish
		case unicode.Is(unicode.Ll, r):
			return cLetter | cLowerish
		default: // Lu, Lt
			return cLetter | cUpperish
		}
	case unicode.IsMark(r):
		return cUpperish | cLowerish
	case unicode.IsNumber(r):
		return cNumber
	case unicode.IsSpace(r):
		if r == '\r' || r == '\n' {
			return cSpace | cNewline
		}
		return cSpace
	}
	return 0
}

// runeAt decodes the rune at byte offset i of s: the rune, its class bits and its
// size in bytes. Past the end it returns class cEnd and size 0.
func runeAt(s string, i int) (rune, uint8, int) {
	if i >= len(s) {
		return 0, cEnd, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return r, classOf(r), n
}

// Classes of the patterns, as predicates on class bits.

// isPrefix: [^\r\n\p{L}\p{N}]
func isPrefix(c uint8) bool { return c&(cLetter|cNumber|cNewline|cEnd) == 0 }

// isSymbol: [^\s\p{L}\p{N}]
func isSymbol(c uint8) bool { return c&(cSpace|cLetter|cNumber|cEnd) == 0 }

// run returns the end of the run of runes from i whose class has a bit of mask.
func run(s string, i int, mask uint8) int {
	for {
		_, c, n := runeAt(s, i)
		if c&mask == 0 || c&cEnd != 0 {
			return i
		}
		i += n
	}
}

// contraction returns the length in bytes of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or
// 0. Case-insensitively means by Unicode simple case folding, as regexp2 does, so
// U+017F (long s) matches s; no other non-ASCII rune folds to one of these letters.
func contraction(s string, i int) int {
	if i >= len(s) || s[i] != '\'' {
		return 0
	}
	r1, _, n1 := runeAt(s, i+1)
	switch foldContraction(r1) {
	case 's', 't', 'm', 'd':
		return 1 + n1
	case 'r', 'v':
		if r2, _, n2 := runeAt(s, i+1+n1); foldContraction(r2) == 'e' {
			return 1 + n1 + n2
		}
	case 'l':
		if r2, _, n2 := runeAt(s, i+1+n1); foldContraction(r2) == 'l' {
			return 1 + n1 + n2
		}
	}
	return 0
}

// foldContraction maps the runes that match a contraction letter case-insensitively
// to that letter (ASCII lower case); any other rune to itself or to another letter.
func foldContraction(r rune) rune {
	switch {
	case 'A' <= r && r <= 'Z':
		return r + ('a' - 'A')
	case r == 0x17F: // ſ LATIN SMALL LETTER LONG S, which folds to s
		return 's'
	}
	return r
}

// numberPiece: \p{N}{1,3} at i (the rune at i is a number of size n).
func numberPiece(s string, i, n int) int {
	j := i + n
	for k := 1; k < 3; k++ {
		_, c, m := runeAt(s, j)
		if c&cNumber == 0 || c&cEnd != 0 {
			break
		}
		j += m
	}
	return j
}

// symbolPiece: ` ?[^\s\p{L}\p{N}]+[\r\n]*` (with '/' in the last class if slash) at
// i, where the rune there is r. It returns the end, or -1.
func symbolPiece(s string, i int, r rune, slash bool) int {
	j := i
	if r == ' ' {
		j++
	}
	if _, c1, _ := runeAt(s, j); !isSymbol(c1) {
		return -1
	}
	for {
		_, c1, n := runeAt(s, j)
		if !isSymbol(c1) {
			break
		}
		j += n
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || slash && s[j] == '/') {
		j++
	}
	return j
}

// spacePiece: \s*[\r\n]+ | \s+(?!\S) | \s+ at i, where a space starts. Whitespace
// first runs as far as it goes; the first alternative then backtracks to the last
// newline of the run; the second gives back the last space if a non-space follows
// (and fails on a single space); the third takes the run.
func spacePiece(s string, i int) int {
	end, last, afterNewline, runes := i, i, -1, 0
	for {
		r, c, n := runeAt(s, end)
		if c&cSpace == 0 || c&cEnd != 0 {
			break
		}
		last = end
		end += n
		runes++
		if r == '\r' || r == '\n' {
			afterNewline = end
		}
	}
	switch {
	case afterNewline >= 0:
		return afterNewline
	case end == len(s) || runes == 1:
		return end
	default:
		return last
	}
}

// wordO200k: alternatives A1 and A2 of o200k_base at i, where the rune has class c
// and size n. It returns the end, or -1.
func wordO200k(s string, i int, c uint8, n int) int {
	// A1: prefix? upperish* lowerish+ contraction?. The upperish run is greedy;
	// when no lowerish rune follows it, it gives back runes until the lowerish run
	// can start at one of them: the last lowerish rune inside the upperish run.
	a1 := func(j int) int {
		e, lastLower := j, -1
		for {
			_, c1, m := runeAt(s, e)
			if c1&cUpperish == 0 || c1&cEnd != 0 {
				break
			}
			if c1&cLowerish != 0 {
				lastLower = e
			}
			e += m
		}
		if _, c1, _ := runeAt(s, e); c1&cLowerish != 0 && c1&cEnd == 0 {
			lastLower = e
		}
		if lastLower < 0 {
			return -1
		}
		f := run(s, lastLower, cLowerish)
		return f + contraction(s, f)
	}
	// A2: prefix? upperish+ lowerish* contraction?: nothing after upperish+ can
	// fail, so no backtracking.
	a2 := func(j int) int {
		e := run(s, j, cUpperish)
		if e == j {
			return -1
		}
		f := run(s, e, cLowerish)
		return f + contraction(s, f)
	}
	// The optional prefix is tried taken first, then not taken.
	prefix := isPrefix(c)
	if prefix {
		if j := a1(i + n); j >= 0 {
			return j
		}
	}
	if j := a1(i); j >= 0 {
		return j
	}
	if prefix {
		if j := a2(i + n); j >= 0 {
			return j
		}
	}
	return a2(i)
}

// asciiStart returns where the letters of an ASCII word piece start: i when s[i]
// is an ASCII letter, i+1 when s[i] is an ASCII prefix ([^\r\n\p{L}\p{N}]) and
// s[i+1] an ASCII letter, else -1. Both patterns try the prefix taken first, and
// with an ASCII letter after it the word alternatives match, so it is taken.
func asciiStart(s string, i int) int {
	c := s[i]
	if c >= utf8.RuneSelf {
		return -1
	}
	if asciiClass[c]&cLetter != 0 {
		return i
	}
	if !isPrefix(asciiClass[c]) || i+1 >= len(s) {
		return -1
	}
	if c1 := s[i+1]; c1 < utf8.RuneSelf && asciiClass[c1]&cLetter != 0 {
		return i + 1
	}
	return -1
}

// asciiDigits returns the end of \p{N}{1,3} at i when s[i] is an ASCII digit and
// the piece is decided by ASCII bytes, else -1.
func asciiDigits(s string, i int) int {
	if c := s[i]; c < '0' || c > '9' {
		return -1
	}
	j := i + 1
	for j < len(s) && j < i+3 && '0' <= s[j] && s[j] <= '9' {
		j++
	}
	if j < i+3 && j < len(s) && s[j] >= utf8.RuneSelf {
		return -1 // a non-ASCII number may continue the run
	}
	return j
}

// asciiWordO200k is pieceO200k's fast path for the commonest piece, an ASCII
// word whose letters start at j (see asciiStart): its end, or -1 when the general
// code must decide (a non-ASCII rune where a run could go on). For ASCII letters
// the classes are simple: A-Z is upperish only, a-z lowerish only, so A1 is the
// upper-case run and the lower-case run after it, and when that is empty A2 takes
// the upper-case run alone; either way the contraction follows.
func asciiWordO200k(s string, j int) int {
	e := j
	for e < len(s) && 'A' <= s[e] && s[e] <= 'Z' {
		e++
	}
	for e < len(s) && 'a' <= s[e] && s[e] <= 'z' {
		e++
	}
	if e < len(s) && s[e] >= utf8.RuneSelf {
		return -1 // a non-ASCII letter or mark may continue a run
	}
	return e + contraction(s, e)
}

// asciiCl100k is pieceCl100k's fast path, as asciiO200k: B2 is a prefix and a
// letter run, tried after B1 (a contraction, which starts with ').
func asciiCl100k(s string, i int) int {
	if s[i] == '\'' {
		return -1
	}
	j := asciiStart(s, i)
	if j < 0 {
		return asciiDigits(s, i)
	}
	e := j
	for e < len(s) && s[e] < utf8.RuneSelf && asciiClass[s[e]]&cLetter != 0 {
		e++
	}
	if e < len(s) && s[e] >= utf8.RuneSelf {
		return -1
	}
	return e
}

// pieceO200k returns the end of the o200k_base piece that starts at i < len(s).
func pieceO200k(s string, i int) int {
	word := true
	if j := asciiStart(s, i); j >= 0 {
		if e := asciiWordO200k(s, j); e >= 0 {
			return e
		}
	} else if s[i] < utf8.RuneSelf && (i+1 >= len(s) || s[i+1] < utf8.RuneSelf) {
		// No letter or mark at i or i+1: A1 and A2 cannot match.
		word = false
		if j := asciiDigits(s, i); j >= 0 {
			return j
		}
	}
	r, c, n := runeAt(s, i)
	if word {
		if j := wordO200k(s, i, c, n); j >= 0 {
			return j
		}
	}
	if c&cNumber != 0 {
		return numberPiece(s, i, n)
	}
	if j := symbolPiece(s, i, r, true); j >= 0 {
		return j
	}
	// Every letter, mark, number and symbol started a piece above: here r is
	// whitespace that did not prefix one.
	return spacePiece(s, i)
}

// pieceCl100k returns the end of the cl100k_base piece that starts at i < len(s).
func pieceCl100k(s string, i int) int {
	if j := asciiCl100k(s, i); j >= 0 {
		return j
	}
	if k := contraction(s, i); k > 0 {
		return i + k
	}
	r, c, n := runeAt(s, i)
	if isPrefix(c) {
		if _, c1, _ := runeAt(s, i+n); c1&cLetter != 0 && c1&cEnd == 0 {
			return run(s, i+n, cLetter)
		}
	}
	if c&cLetter != 0 {
		return run(s, i, cLetter)
	}
	if c&cNumber != 0 {
		return numberPiece(s, i, n)
	}
	if j := symbolPiece(s, i, r, false); j >= 0 {
		return j
	}
	return spacePiece(s, i)
}

// splitter calls yield with each piece of s in order, as UTF-8 (an invalid byte as
// U+FFFD). The hand-written splitters cannot fail; the tests' splitter over a
// regexp engine fails the test instead of returning an error.
type splitter func(s string, yield func(piece string))

// splitWith returns the splitter that cuts pieces with piece (pieceO200k or
// pieceCl100k).
func splitWith(piece func(s string, i int) int) splitter {
	return func(s string, yield func(string)) {
		if !utf8.ValidString(s) {
			s = validUTF8(s)
		}
		for i := 0; i < len(s); {
			j := piece(s, i)
			if j <= i {
				// No alternative matched at i (the patterns leave no such
				// position, see above): a regexp engine moves on one rune.
				_, _, n := runeAt(s, i)
				i += n
				continue
			}
			yield(s[i:j])
			i = j
		}
	}
}

// validUTF8 returns s with each invalid byte replaced by U+FFFD (one per byte, as a
// []rune conversion reads it). Splitting the result gives the pieces of s: U+FFFD is
// in the same classes as an invalid byte read as a rune.
func validUTF8(s string) string {
	b := make([]byte, 0, len(s)+8)
	for _, r := range s {
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}

// splitterFor returns the splitter of a pattern: o200kPattern or cl100kPattern. It
// panics on any other pattern (there is no general regexp engine here).
func splitterFor(pattern string) splitter {
	switch pattern {
	case o200kPattern:
		return splitWith(pieceO200k)
	case cl100kPattern:
		return splitWith(pieceCl100k)
	}
	panic("ctxcompact: no splitter for the pattern " + pattern)
}
