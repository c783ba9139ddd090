package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWasmCompilationCache: --wasm fills the on-disk cache in CTXCOMPACT_CACHE_DIR,
// a second process gives the same bytes from it, --no-cache leaves it alone, and a
// directory that cannot be used is skipped with a note.
func TestWasmCompilationCache(t *testing.T) {
	file := cliTempFile(t, "conv.json", cliConversation)
	dir := filepath.Join(t.TempDir(), "cache")
	env := []string{"CTXCOMPACT_CACHE_DIR=" + dir}
	args := []string{"compact", file, "--wasm"}

	code, first, errOut := cliExec(t, env, args...)
	require.Equal(t, 0, code, errOut)
	size := dirSize(t, dir)
	require.Positive(t, size, "the first run writes the compiled module")
	code, second, errOut := cliExec(t, env, args...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, first, second)
	require.Equal(t, size, dirSize(t, dir), "the second run reads the cache, it writes nothing new")
	_, native, _ := cliRun(t, "", "compact", file)
	require.Equal(t, native, second)

	unused := filepath.Join(t.TempDir(), "unused")
	code, out, errOut := cliExec(t, []string{"CTXCOMPACT_CACHE_DIR=" + unused}, append(args, "--no-cache")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, first, out)
	_, err := os.Stat(unused)
	require.True(t, os.IsNotExist(err), "--no-cache must not create the cache")

	notDir := cliTempFile(t, "file", "x")
	code, out, errOut = cliExec(t, []string{"CTXCOMPACT_CACHE_DIR=" + notDir}, "call", "--wasm")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "compiling without it")
	require.Contains(t, out, `"error"`) // an empty envelope: the core answered
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return err
	})
	require.NoError(t, err)
	return n
}
