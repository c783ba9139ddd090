// Command vocabgen writes the rank tables that package bpe embeds for exact token
// counting (core/internal/bpe/vocab/<encoding>.bin), read from
// github.com/tiktoken-go/tokenizer's codec package. The library is linked into this
// generator and the tests only, never into core or the wasm module: its
// vocabularies are Go map literals that cost ~8.7 MB of static data in the module
// (docs/TOKENS.md).
//
//	go run ./core/internal/bpe/vocabgen     # rewrite core/internal/bpe/vocab/*.bin
//	go test ./core/internal/bpe/vocabgen    # the committed files are up to date
//
// Format (all integers unsigned LEB128 varints, as encoding/binary.AppendUvarint):
//
//	"ctxcvocab1\n"  magic and version
//	n               number of tokens; their ranks are exactly 0..n-1
//	n times         len, then len bytes: the token of rank 0, 1, 2, ...
//
// Tokens are raw bytes (a token may be part of a UTF-8 sequence). The generator
// fails unless the library's ranks are dense, so a rank is a token's position.
// The file is stored uncompressed: see docs/TOKENS.md for why.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tiktoken-go/tokenizer/codec"
)

// Magic starts every table; the digit is the format version.
const Magic = "ctxcvocab1\n"

// encodings lists the tables package bpe embeds, by tiktoken name.
var encodings = []struct {
	name  string
	codec func() *codec.Codec
}{
	{"o200k_base", codec.NewO200kBase},
	{"cl100k_base", codec.NewCl100kBase},
}

// maxRank bounds the search for tokens: ranks past the last token must all be
// missing (the special tokens are not in the library's vocabulary map).
const maxRank = 1 << 20

// table returns the rank table of one encoding in the format above.
func table(c *codec.Codec) ([]byte, error) {
	var tokens []string
	for r := 0; r < maxRank; r++ {
		s, err := c.Decode([]uint{uint(r)})
		if err != nil {
			continue
		}
		if r != len(tokens) {
			return nil, fmt.Errorf("%s: rank %d follows a gap at %d: ranks are not dense", c.GetName(), r, len(tokens))
		}
		if s == "" {
			return nil, fmt.Errorf("%s: rank %d is the empty token", c.GetName(), r)
		}
		tokens = append(tokens, s)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%s: no tokens", c.GetName())
	}
	seen := make(map[string]int, len(tokens))
	for r, s := range tokens {
		if prev, ok := seen[s]; ok {
			return nil, fmt.Errorf("%s: ranks %d and %d have the same token %q", c.GetName(), prev, r, s)
		}
		seen[s] = r
	}
	var b bytes.Buffer
	b.WriteString(Magic)
	b.Write(binary.AppendUvarint(nil, uint64(len(tokens))))
	for _, s := range tokens {
		b.Write(binary.AppendUvarint(nil, uint64(len(s))))
		b.WriteString(s)
	}
	return b.Bytes(), nil
}

// Tables returns every table by file name (<encoding>.bin).
func Tables() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, e := range encodings {
		b, err := table(e.codec())
		if err != nil {
			return nil, err
		}
		out[e.name+".bin"] = b
	}
	return out, nil
}

func main() {
	dir := flag.String("dir", "core/internal/bpe/vocab", "output directory (run from the module root)")
	flag.Parse()
	tables, err := Tables()
	if err != nil {
		fmt.Fprintln(os.Stderr, "vocabgen:", err)
		os.Exit(1)
	}
	for _, e := range encodings {
		name := e.name + ".bin"
		path := filepath.Join(*dir, name)
		if err := os.WriteFile(path, tables[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "vocabgen:", err)
			os.Exit(1)
		}
		fmt.Printf("wrote %s: %d bytes\n", path, len(tables[name]))
	}
}
