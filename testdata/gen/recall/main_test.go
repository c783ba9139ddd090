package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFilesUpToDate fails when the committed testdata/recall.*.json differ from
// what the generator writes now: run `go run ./testdata/gen/recall` and review.
func TestFilesUpToDate(t *testing.T) {
	dir := t.TempDir()
	os.Args = []string{"recall", dir}
	main()
	for _, f := range files {
		want, err := os.ReadFile(filepath.Join(dir, f.Op+".json"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("..", "..", f.Op+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("testdata/%s.json is out of date: run go run ./testdata/gen/recall", f.Op)
		}
	}
}
