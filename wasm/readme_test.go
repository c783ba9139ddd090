package wasm

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeDescribesModule: the size and sha256 in README.md are those of the
// committed module, so the document cannot go stale when the module is rebuilt.
func TestReadmeDescribesModule(t *testing.T) {
	doc, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(Binary)
	if want := hex.EncodeToString(sum[:]); !strings.Contains(string(doc), "| sha256 | `"+want+"` |") {
		t.Errorf("wasm/README.md does not give the module's sha256 %s: update its size table (./build.sh wasm prints both)", want)
	}
	m := regexp.MustCompile(`\| raw \| ([0-9,]+) \|`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("wasm/README.md has no '| raw | N |' row")
	}
	raw, _ := strconv.Atoi(strings.ReplaceAll(string(m[1]), ",", ""))
	if raw != len(Binary) {
		t.Errorf("wasm/README.md says %d bytes raw; the module is %d", raw, len(Binary))
	}
}

// The phrasings that state the committed module's size in the repository's
// documents, raw or gzipped (gzip -9), in decimal megabytes. A past size, or
// another artefact's, is written otherwise ("a 6.7 MB build", "N MB compressed").
var (
	sizeRaw = []*regexp.Regexp{
		regexp.MustCompile(`\bthe\s+(\d+(?:\.\d+)?)\s+MB\s+module\b`),
		regexp.MustCompile(`\b[Mm]odule\s+is\s+(\d+(?:\.\d+)?)\s+MB\b`),
		regexp.MustCompile(`\b[Mm]odule\**\s+\((\d+(?:\.\d+)?)\s+MB\b`),
		regexp.MustCompile(`\bours\s+is\s+(\d+(?:\.\d+)?)\s+MB\b`),
		regexp.MustCompile(`\b(\d+(?:\.\d+)?)\s+MB\s+raw\b`),
		regexp.MustCompile(`\ban?\s+(\d+(?:\.\d+)?)\s+MB\s+binary\b`),
	}
	sizeGzip = regexp.MustCompile(`\b(\d+(?:\.\d+)?)\s+MB\s+gzip(?:ped)?\b`)
)

// chromiumSyncLimit is the largest module Chromium compiles synchronously on a
// page's main thread (2^23 bytes; its web tests' wasm/wasm_limits): the JS
// binding replaces a trapped instance synchronously only below it
// (bindings/js/README.md).
const chromiumSyncLimit = 1 << 23

// TestDocsGiveTheModuleSize: every statement of the module's size in the
// repository's Markdown (README.md, the bindings' READMEs, RATIONALE.md, docs/)
// rounds to the committed module's, so they cannot go stale when it is rebuilt;
// the gzip figures to wasm/README.md's table, which must be within 5% of what
// compress/gzip makes of the module at level 9 (GNU gzip -9 is about 2% smaller).
func TestDocsGiveTheModuleSize(t *testing.T) {
	doc, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\| gzip -9 \| ([0-9,]+) \|`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("wasm/README.md has no '| gzip -9 | N |' row")
	}
	gz, _ := strconv.Atoi(strings.ReplaceAll(string(m[1]), ",", ""))
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	w.Write(Binary)
	w.Close()
	if d := float64(gz)/float64(buf.Len()) - 1; d < -0.05 || d > 0.05 {
		t.Errorf("wasm/README.md gives %d bytes gzipped; compress/gzip makes %d of the module (%+.1f%%): update the row with gzip -9 -c wasm/ctxcompact.wasm | wc -c", gz, buf.Len(), 100*d)
	}
	if len(Binary) >= chromiumSyncLimit {
		t.Errorf("the module is %d bytes, at or past Chromium's %d-byte limit for synchronous compilation: bindings/js/README.md says it is below", len(Binary), chromiumSyncLimit)
	}

	var files []string
	err = filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "build" || d.Name() == "dist" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	check := func(file string, line int, text, figure string, size int, what string) {
		found++
		f, _ := strconv.ParseFloat(figure, 64)
		decimals := 0
		if k := strings.IndexByte(figure, '.'); k >= 0 {
			decimals = len(figure) - k - 1
		}
		if got := float64(size) / 1e6; math.Abs(f-got) > 0.5*math.Pow(10, -float64(decimals))+1e-9 {
			t.Errorf("%s:%d says the module is %s MB %s (%q); it is %.2f MB (%d bytes)", file, line, figure, what, text, got, size)
		}
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		scan := func(re *regexp.Regexp, size int, what string) {
			for _, at := range re.FindAllStringSubmatchIndex(text, -1) {
				line := 1 + strings.Count(text[:at[0]], "\n")
				check(file, line, text[at[0]:at[1]], text[at[2]:at[3]], size, what)
			}
		}
		for _, re := range sizeRaw {
			scan(re, len(Binary), "raw")
		}
		scan(sizeGzip, gz, "gzipped")
	}
	if found < 5 {
		t.Errorf("found %d statements of the module's size in %d files; the README's size row, caveat and the JS README's alone are more", found, len(files))
	}
}
