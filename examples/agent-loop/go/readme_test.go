package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplesReadmeNamesEveryExample: examples/README.md names every example
// directory (one with a program in it) and every file at the top of examples/,
// each by its path under examples/.
func TestExamplesReadmeNamesEveryExample(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && p != root && (d.Name() == "node_modules" || d.Name() == "__pycache__" || strings.HasPrefix(d.Name(), ".")):
			return filepath.SkipDir
		case !d.IsDir() && !strings.Contains(rel, "/") && rel != "README.md":
			want = append(want, rel) // a file at the top: an example input
		case !d.IsDir() && strings.Contains(rel, "/"):
			switch filepath.Ext(rel) {
			case ".go", ".mjs", ".js", ".py":
				if dir := filepath.ToSlash(filepath.Dir(rel)); len(want) == 0 || want[len(want)-1] != dir {
					want = append(want, dir) // a directory with a program
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 4 {
		t.Fatalf("found %d examples under examples/ (%v); the three agent loops and the trace at least", len(want), want)
	}
	for _, w := range want {
		if !strings.Contains(string(doc), "`"+w+"`") && !strings.Contains(string(doc), "`"+w+" ") {
			t.Errorf("examples/README.md does not name %s (as `%s`)", w, w)
		}
	}
}
