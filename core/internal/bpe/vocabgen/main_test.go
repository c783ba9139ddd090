package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed tables are what the generator writes today, byte for byte, so they
// cannot drift from the library version in go.mod.
func TestCommittedTablesAreUpToDate(t *testing.T) {
	tables, err := Tables()
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != len(encodings) {
		t.Fatalf("%d tables for %d encodings", len(tables), len(encodings))
	}
	for name, want := range tables {
		path := filepath.Join("..", "vocab", name)
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run: go run ./core/internal/bpe/vocabgen)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: %d bytes committed, the generator writes %d; run: go run ./core/internal/bpe/vocabgen", path, len(got), len(want))
		}
	}
	files, _ := filepath.Glob(filepath.Join("..", "vocab", "*"))
	if len(files) != len(tables) {
		t.Errorf("core/internal/bpe/vocab holds %v; the generator writes only %d tables", files, len(tables))
	}
}

// The table of an encoding starts with the magic, then the token count, then the
// tokens of ranks 0, 1, ... (199,998 and 100,256 tokens; "!" is rank 0 and "\"" rank 1
// in both encodings).
func TestTableLayout(t *testing.T) {
	tables, err := Tables()
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]string{"o200k_base.bin": "\xbe\x9a\x0c", "cl100k_base.bin": "\xa0\x8f\x06"} {
		b := tables[name]
		head := Magic + n + "\x01!\x01\""
		if !bytes.HasPrefix(b, []byte(head)) {
			t.Errorf("%s starts %q, want %q", name, b[:len(head)], head)
		}
	}
}
