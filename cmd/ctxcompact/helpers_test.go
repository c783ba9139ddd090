package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxcompact/ctxcompact/internal/pgtest"
)

// TestMain runs the CLI itself when CTXCOMPACT_TEST_AS_CLI is set (cliExec starts
// this test binary so), and otherwise the tests with --wasm's compilation cache in
// a fresh directory, not the user's.
func TestMain(m *testing.M) {
	if os.Getenv("CTXCOMPACT_TEST_AS_CLI") == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	dir, err := os.MkdirTemp("", "ctxcompact-cli-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("CTXCOMPACT_CACHE_DIR", dir)
	code := pgtest.Main(m) // stops a PostgreSQL server a recall test started
	os.RemoveAll(dir)
	os.Exit(code)
}

// cliRun runs the CLI in-process and returns its exit code, stdout and stderr.
func cliRun(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// cliExec runs the CLI in a new process (this test binary, as TestMain says) with
// the extra environment env, for what a process does once (the wasm engine).
func cliExec(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "CTXCOMPACT_TEST_AS_CLI=1"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
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
