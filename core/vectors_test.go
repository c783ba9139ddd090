package core

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/ctxcompact/internal/vectors"
)

func loadVectorFiles(t *testing.T) []vectors.File {
	t.Helper()
	files, err := vectors.ReadDir("../testdata")
	require.NoError(t, err)
	return files
}

// TestVectors runs every shared vector against Call, as testdata/README.md says.
func TestVectors(t *testing.T) {
	for _, f := range loadVectorFiles(t) {
		vs, err := f.Vectors()
		require.NoError(t, err)
		for _, v := range vs {
			t.Run(v.ID, func(t *testing.T) {
				require.NoError(t, vectors.Check(Call(v.Envelope), v.Case))
			})
		}
	}
}

// TestVectorFilesAreWellFormed checks the vector files themselves.
func TestVectorFilesAreWellFormed(t *testing.T) {
	covered := map[string]bool{}
	for _, f := range loadVectorFiles(t) {
		_, known := ops[f.Op]
		require.True(t, known, "%s: unknown op %q", f.Name, f.Op)
		require.True(t, f.Name == f.Op || strings.HasPrefix(f.Name, f.Op+"."), "%s.json must be named after its op %q", f.Name, f.Op)
		require.NotEmpty(t, f.Cases, f.Name)
		covered[f.Op] = true
		seen := map[string]bool{}
		for _, c := range f.Cases {
			require.NotEmpty(t, c.Name, f.Name)
			require.False(t, seen[c.Name], "%s: duplicate case name %q", f.Name, c.Name)
			seen[c.Name] = true
			hasResult, hasError := len(c.Want.Result) > 0, c.Want.Error != nil
			require.True(t, hasResult != hasError, "%s/%s: want needs exactly one of result or error", f.Name, c.Name)
			require.NotContains(t, string(c.Request)+c.RequestJSON, `"op":`, "%s/%s: request must not carry op", f.Name, c.Name)
			require.True(t, (len(c.Request) > 0) != (c.RequestJSON != ""), "%s/%s: a case has exactly one of request or request_json", f.Name, c.Name)
		}
	}
	for _, op := range Ops() {
		require.True(t, covered[op], "op %q has no vector file in testdata/", op)
	}
}
