// Package bpe counts and encodes text with tiktoken's byte-pair encodings o200k_base
// and cl100k_base, exactly as tiktoken does, without linking a regexp engine or the
// reference library: the rank tables are embedded as data (vocab/<encoding>.bin,
// written by ./vocabgen from github.com/tiktoken-go/tokenizer), and the pre-tokenizer
// patterns are split by code written by hand for exactly these two patterns
// (split.go). docs/TOKENS.md has the sizes, times and the tests' references.
//
// The package knows text only. What of a chat message is counted, and the tokens a
// chat format adds per message, are the core's rule (core/tokens_exact.go).
//
// An Encoding is safe for concurrent use. Its rank map is built from its table on
// the first Load, Count or Encode with it (about 16 ms natively for o200k_base), so
// a program that never counts exactly pays nothing at start-up. The tables are
// compiled in (vocab_embed.go), except in the WebAssembly module, which asks its
// host for the one it needs when it first needs it (vocab_host.go): 2.3 MB less
// module to download and compile, and only the encoding in use is ever loaded.
package bpe

import (
	"errors"
	"fmt"
	"sync"
)

// Names of the encodings, as tiktoken names them.
const (
	// O200kBase is the encoding of gpt-4o, gpt-4.1, gpt-5 and o1/o3/o4.
	O200kBase = "o200k_base"
	// Cl100kBase is the encoding of gpt-4 and gpt-3.5-turbo.
	Cl100kBase = "cl100k_base"
)

// tableSums are the length and FNV-1a 64 of each encoding's table, which a table a
// host hands in must have: a wrong or damaged file is refused, never counted with.
// TestTableSums holds them to vocab/*.bin.
var tableSums = map[string]struct {
	size int
	fnv  uint64
}{
	O200kBase:  {1597683, 0x9e25845044d264f4},
	Cl100kBase: {744101, 0xf0c7333546cbf302},
}

// checkTable returns an error unless table is the named encoding's.
func checkTable(name, table string) error {
	want := tableSums[name]
	if len(table) != want.size {
		return fmt.Errorf("ctxcompact: the %s vocabulary is %d bytes, want %d: not the file this build was made with", name, len(table), want.size)
	}
	if h := fnv1a64(table); h != want.fnv {
		return fmt.Errorf("ctxcompact: the %s vocabulary has FNV-1a %#x, want %#x: a damaged or different file", name, h, want.fnv)
	}
	return nil
}

func fnv1a64(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return h
}

// The pre-tokenizer patterns of tiktoken's encodings, as tiktoken (openai_public.py)
// and github.com/tiktoken-go/tokenizer write them. The text is split into pieces
// with the pattern (by the hand-written splitters of split.go, which the tests
// compare with regexp2's interpreter); each piece is encoded on its own.
const (
	o200kPattern  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// Encoding is one of tiktoken's encodings. Get one with Lookup; the zero value is
// not usable.
type Encoding struct {
	name    string
	pattern string
	once    sync.Once
	tok     *tokenizer
	err     error
}

var (
	o200k  = &Encoding{name: O200kBase, pattern: o200kPattern}
	cl100k = &Encoding{name: Cl100kBase, pattern: cl100kPattern}
)

// Lookup returns the encoding of a tiktoken name (O200kBase or Cl100kBase), and
// false for any other name. Every call with a name returns the same *Encoding, so
// its rank map is built once per process.
func Lookup(name string) (*Encoding, bool) {
	switch name {
	case O200kBase:
		return o200k, true
	case Cl100kBase:
		return cl100k, true
	}
	return nil, false
}

// Name returns the tiktoken name of the encoding.
func (e *Encoding) Name() string { return e.name }

// Load builds the rank map and splitter, once: from the table compiled in, or in
// the module from the table its host gives (see the package doc). It returns why it
// cannot, every time it is called after a failure (a module's host that gave no or
// a wrong table); Count and Encode panic with that error.
func (e *Encoding) Load() error {
	e.once.Do(func() {
		table, err := tableOf(e.name)
		if err == nil {
			err = checkTable(e.name, table)
		}
		if err != nil {
			e.err = err
			return
		}
		e.tok = newTokenizer(table, e.pattern)
	})
	return e.err
}

// errNotLoaded is Count's panic when Load failed and the caller did not check.
var errNotLoaded = errors.New("ctxcompact: the encoding's vocabulary is not loaded")

// tokenizer returns the rank map and splitter, building them on the first call.
func (e *Encoding) tokenizer() *tokenizer {
	if err := e.Load(); err != nil {
		panic(fmt.Errorf("%w: %w", errNotLoaded, err))
	}
	return e.tok
}

// Count returns the number of tokens of s. Special-token text such as
// "<|endoftext|>" is ordinary text (tiktoken's encode_ordinary), and an invalid
// UTF-8 byte reads as U+FFFD, as in tiktoken.
func (e *Encoding) Count(s string) int {
	if s == "" {
		return 0
	}
	return e.tokenizer().count(s)
}

// Encode returns the token ids (ranks) of s, by the rules of Count: len(Encode(s))
// is Count(s). Count is faster when only the number is needed: it allocates no ids.
func (e *Encoding) Encode(s string) []int {
	if s == "" {
		return nil
	}
	return e.tokenizer().encode(s)
}
