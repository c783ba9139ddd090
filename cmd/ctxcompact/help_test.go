package main

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/ctxcompact/core"
)

// TestHelpAndVersion: help goes to stdout with exit 0; usage errors exit 2.
func TestHelpAndVersion(t *testing.T) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, args := range [][]string{{n, "--help"}, {n, "-h"}, {n, "somefile.json", "-help"}, {"help", n}} {
			code, out, errOut := cliRun(t, "", args...)
			require.Equal(t, 0, code, "%v: %s", args, errOut)
			require.Empty(t, errOut, "%v", args)
			require.Contains(t, out, "usage: ctxcompact "+n, "%v", args)
		}
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, _ := cliRun(t, "", args...)
		require.Equal(t, 0, code)
		require.Equal(t, "ctxcompact "+core.Version+"\n", out)
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, out, _ := cliRun(t, "", args...)
		require.Equal(t, 0, code)
		require.Contains(t, out, "commands:")
		require.Contains(t, out, "  sanitize   repair a conversation file's tool-call/result pairs: sanitize FILE [--format NAME]")
		require.Contains(t, out, "simulate FILE [--format NAME]")
	}
	code, out, _ := cliRun(t, "", "help", "compact")
	require.Equal(t, 0, code)
	require.Contains(t, out, "the base URL (http or https)")
	for _, args := range [][]string{{}, {"nope"}, {"help", "nope"}} {
		code, out, errOut := cliRun(t, "", args...)
		require.Equal(t, 2, code, "%v", args)
		require.Empty(t, out)
		require.Contains(t, errOut, "usage: ctxcompact <command>")
	}
}
