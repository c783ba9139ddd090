package jsonraw

import (
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// Word-at-a-time byte scanning. The hot loops (validating, sizing and decoding
// strings) look at eight bytes per step instead of one. In the wasm module this is
// the difference that matters most: a byte loop there runs about six times slower
// than natively, an aligned-or-not 64-bit load about two and a half.

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// Word returns the eight bytes s[i:i+8] as a little-endian uint64. The caller
// guarantees i >= 0 and i+8 <= len(s); it is one load (the Go wasm backend does not
// merge byte loads on its own).
func Word(s string, i int) uint64 {
	_ = s[i : i+8] // the bounds check stays: unsafe below must never read outside s
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), i))
}

// WordAt is Word for a byte slice, reading up to its capacity: the caller
// guarantees i >= 0 and i+8 <= cap(b) (the bytes past len(b) are the caller's to
// mask). The tokenizer's rank table hashes its keys with it.
func WordAt(b []byte, i int) uint64 {
	_ = b[i : i+8 : cap(b)] // the bounds check stays: never read outside b's array
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), i))
}

// ViewBytes views s as a byte slice without copying; the slice must never be
// written to.
func ViewBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// ViewString views b as a string without copying; b must not change while the
// string is in use.
func ViewString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// OffsetOf returns where part starts in s: part must be a non-empty substring of s
// (the same memory, as the raw JSON walkers return), and the caller says why it is.
func OffsetOf(s, part string) int {
	return int(uintptr(unsafe.Pointer(unsafe.StringData(part))) - uintptr(unsafe.Pointer(unsafe.StringData(s))))
}

// LocatePart returns where part starts in s when part lies in s's memory (as the raw
// JSON walkers cut values out of their input), and false for any other string.
func LocatePart(s, part string) (int, bool) {
	off := OffsetOf(s, part)
	return off, len(part) > 0 && off >= 0 && off <= len(s)-len(part)
}

// zeroBytes has the high bit set in (at least) the lowest byte of w that is zero,
// and no bit at all when w has no zero byte.
func zeroBytes(w uint64) uint64 { return (w - lo8) &^ w & hi8 }

// FirstFlagged returns the index of the lowest byte flagged in mask, which has the
// high bit set in each flagged byte (as NotPlain returns).
func FirstFlagged(mask uint64) int { return bits.TrailingZeros64(mask) >> 3 }

// stringSpecials flags the bytes of w that end a plain run inside a JSON string: a
// quote, a backslash, or a control character (invalid unescaped).
func stringSpecials(w uint64) uint64 {
	return zeroBytes(w^(lo8*'"')) | zeroBytes(w^(lo8*'\\')) | (w-lo8*0x20)&^w&hi8
}

// NotPlain flags the bytes of w that end a run of plain characters in a raw JSON
// string: a backslash (an escape) or a byte that is not ASCII. Plain bytes are one
// character each.
func NotPlain(w uint64) uint64 { return zeroBytes(w^(lo8*'\\')) | w&hi8 }

// plainRun returns the index of the first byte in s[i:end] that is a backslash or
// not ASCII (end if none): most text is plain ASCII, and those bytes are one
// character each.
func plainRun(s string, i, end int) int {
	for i+8 <= end {
		if m := NotPlain(Word(s, i)); m != 0 {
			return i + FirstFlagged(m)
		}
		i += 8
	}
	for i < end && s[i] < 0x80 && s[i] != '\\' {
		i++
	}
	return i
}

// IndexSpecial returns the index of the first quote, backslash or control character in
// s[i:] (len(s) if none).
func IndexSpecial(s string, i int) int {
	for i+8 <= len(s) {
		if m := stringSpecials(Word(s, i)); m != 0 {
			return i + FirstFlagged(m)
		}
		i += 8
	}
	for i < len(s) && s[i] != '"' && s[i] != '\\' && s[i] >= 0x20 {
		i++
	}
	return i
}

// DecodeRune is utf8.DecodeRuneInString(s[i:]) with the two- and three-byte
// sequences (accented letters, CJK) decoded inline; the rest go to utf8.
func DecodeRune(s string, i int) (rune, int) {
	b := s[i]
	switch {
	case b >= 0xC2 && b < 0xE0 && i+1 < len(s) && s[i+1]&0xC0 == 0x80:
		return rune(b&0x1F)<<6 | rune(s[i+1]&0x3F), 2
	case b >= 0xE0 && b < 0xF0 && i+2 < len(s):
		b1, b2 := s[i+1], s[i+2]
		if b1&0xC0 == 0x80 && b2&0xC0 == 0x80 && (b != 0xE0 || b1 >= 0xA0) && (b != 0xED || b1 < 0xA0) {
			return rune(b&0x0F)<<12 | rune(b1&0x3F)<<6 | rune(b2&0x3F), 3
		}
	}
	return utf8.DecodeRuneInString(s[i:])
}

// Equal reports whether a and b hold the same bytes, comparing eight at a time:
// in wasm, the runtime's string comparison goes a byte at a time.
func Equal(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b) {
		return true
	}
	i := 0
	for ; i+8 <= len(a); i += 8 {
		if Word(a, i) != Word(b, i) {
			return false
		}
	}
	return a[i:] == b[i:]
}
