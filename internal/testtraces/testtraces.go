// Package testtraces finds the shared real-session traces (../shared/traces beside
// the repository) for the tests of every package, with one rule for when they are
// missing: a test that needs them fails when the environment variable CI is set (a
// CI run without them would otherwise pass on skips alone), and skips otherwise with
// a message that names the missing path.
//
// Only tests import this package.
package testtraces

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// InCI reports whether the environment variable CI is set to anything but "", "0"
// or "false".
func InCI() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("CI"))) {
	case "", "0", "false":
		return false
	}
	return true
}

var root struct {
	once sync.Once
	dir  string
	err  error
}

// Dir is the absolute path of ../shared/traces beside the module root (the nearest
// directory holding go.mod, from the test's working directory up). It may not exist.
func Dir() (string, error) {
	root.once.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			root.err = err
			return
		}
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				root.dir = filepath.Join(filepath.Dir(d), "shared", "traces")
				return
			}
			if filepath.Dir(d) == d {
				root.err = fmt.Errorf("testtraces: no go.mod above %s", wd)
				return
			}
		}
	})
	return root.dir, root.err
}

// Require returns the traces directory, or ends the test: Fatal when CI is set and
// the directory is missing, Skip (naming the path) when CI is not set.
func Require(tb testing.TB) string {
	tb.Helper()
	dir, err := Dir()
	if err != nil {
		tb.Fatal(err)
	}
	requireAt(tb, dir)
	return dir
}

// requireAt is Require for a given directory.
func requireAt(tb testing.TB, dir string) {
	tb.Helper()
	fi, err := os.Stat(dir)
	if err == nil && fi.IsDir() {
		return
	}
	msg := fmt.Sprintf("shared traces not found at %s (the ../shared folder beside the repository)", dir)
	if InCI() {
		tb.Fatalf("%s; CI is set, so trace-based tests must not skip", msg)
	}
	tb.Skipf("SKIPPED, NOT TESTED: %s", msg)
}

// Available is for a test or benchmark with a fallback input: it returns the
// traces directory and true, or (CI not set, directory missing) logs loudly and
// returns false. When CI is set and the directory is missing it fails, as Require.
func Available(tb testing.TB) (string, bool) {
	tb.Helper()
	dir, err := Dir()
	if err != nil {
		tb.Fatal(err)
	}
	return dir, availableAt(tb, dir)
}

// availableAt is Available for a given directory.
func availableAt(tb testing.TB, dir string) bool {
	tb.Helper()
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return true
	}
	if InCI() {
		tb.Fatalf("shared traces not found at %s; CI is set, so trace-based tests must not fall back", dir)
	}
	tb.Logf("NOTE: shared traces not found at %s: using a generated input instead", dir)
	return false
}

// Glob returns the sorted files matching pattern (e.g. "*.json" or
// "anthropic-format/*.json") in the traces directory, after Require. No match fails
// the test: the directory is there but the traces are not.
func Glob(tb testing.TB, patterns ...string) []string {
	tb.Helper()
	dir := Require(tb)
	var files []string
	for _, p := range patterns {
		m, err := filepath.Glob(filepath.Join(dir, p))
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	if len(files) == 0 {
		tb.Fatalf("no traces matching %v in %s", patterns, dir)
	}
	return files
}

// File returns the path of one trace (relative to the traces directory) after
// Require; a missing file fails the test.
func File(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(Require(tb), filepath.FromSlash(name))
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("shared trace missing: %v", err)
	}
	return p
}
