package host_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeGoSnippets: every ```go block of README.md is, in order, a part of
// example_readme_test.go marked "// README: NAME" ... "// README: end" (one tab
// less indented), so each snippet the README shows compiles with the package's
// tests and cannot drift from the API.
func TestReadmeGoSnippets(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		blocks = append(blocks, m[1])
	}
	var parts, names []string
	for _, m := range regexp.MustCompile(`(?ms)^\t// README: (\S[^\n]*)\n(.*?)^\t// README: end\n`).FindAllStringSubmatch(string(src), -1) {
		lines := strings.SplitAfter(m[2], "\n")
		for k, l := range lines {
			lines[k] = strings.TrimPrefix(l, "\t")
		}
		names, parts = append(names, m[1]), append(parts, strings.Join(lines, ""))
	}
	if len(parts) == 0 {
		t.Fatal("example_readme_test.go has no // README: parts")
	}
	if len(blocks) != len(parts) {
		t.Fatalf("README.md has %d Go blocks, example_readme_test.go %d README parts (%v): give each block its compiled part", len(blocks), len(parts), names)
	}
	for k := range blocks {
		if blocks[k] != parts[k] {
			t.Errorf("README.md's Go block %d is not example_readme_test.go's part %q; the part (copy it into the README):\n%s\nthe README's:\n%s", k+1, names[k], parts[k], blocks[k])
		}
	}
}
