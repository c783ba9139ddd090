package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cliRun runs the CLI in-process and returns its exit code, stdout and stderr.
func cliRun(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// cliTempFile writes content to a file in a fresh temp dir and returns its path.
func cliTempFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
