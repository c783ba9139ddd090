package core

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// vectorSuite is one file of testdata/ (see testdata/README.md).
type vectorSuite struct {
	Op    string `json:"op"`
	Cases []struct {
		Name    string                     `json:"name"`
		Request map[string]json.RawMessage `json:"request"`
		Want    struct {
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code string `json:"code"`
				Path string `json:"path"`
			} `json:"error"`
		} `json:"want"`
	} `json:"cases"`
}

func loadVectorSuites(t *testing.T) map[string]vectorSuite {
	t.Helper()
	paths, err := filepath.Glob("../testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, paths, "no vector files in testdata/")
	files := map[string]vectorSuite{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		var f vectorSuite
		require.NoError(t, json.Unmarshal(data, &f), p)
		files[strings.TrimSuffix(filepath.Base(p), ".json")] = f
	}
	return files
}

// TestVectors runs every shared vector against Call, as testdata/README.md says.
func TestVectors(t *testing.T) {
	for name, f := range loadVectorSuites(t) {
		for _, c := range f.Cases {
			t.Run(f.Op+"/"+name+"/"+c.Name, func(t *testing.T) {
				req := map[string]json.RawMessage{}
				for k, v := range c.Request {
					req[k] = v
				}
				req["op"], _ = json.Marshal(f.Op)
				env, err := json.Marshal(req)
				require.NoError(t, err)
				var resp struct {
					Result json.RawMessage `json:"result"`
					Error  *Error          `json:"error"`
				}
				out := Call(env)
				require.NoError(t, json.Unmarshal(out, &resp), string(out))
				if c.Want.Error != nil {
					require.NotNil(t, resp.Error, "want error %s, got %s", c.Want.Error.Code, out)
					require.Equal(t, c.Want.Error.Code, string(resp.Error.Code), resp.Error.Message)
					require.Equal(t, c.Want.Error.Path, resp.Error.Path, resp.Error.Message)
					return
				}
				require.Nil(t, resp.Error, "unexpected error: %s", out)
				require.JSONEq(t, string(c.Want.Result), string(resp.Result))
			})
		}
	}
}

// TestVectorFilesAreWellFormed checks the vector files themselves.
func TestVectorFilesAreWellFormed(t *testing.T) {
	covered := map[string]bool{}
	for name, f := range loadVectorSuites(t) {
		_, known := ops[f.Op]
		require.True(t, known, "%s: unknown op %q", name, f.Op)
		require.True(t, name == f.Op || strings.HasPrefix(name, f.Op+"."), "%s.json must be named after its op %q", name, f.Op)
		require.NotEmpty(t, f.Cases, name)
		covered[f.Op] = true
		seen := map[string]bool{}
		for _, c := range f.Cases {
			require.NotEmpty(t, c.Name, name)
			require.False(t, seen[c.Name], "%s: duplicate case name %q", name, c.Name)
			seen[c.Name] = true
			hasResult, hasError := len(c.Want.Result) > 0, c.Want.Error != nil
			require.True(t, hasResult != hasError, "%s/%s: want needs exactly one of result or error", name, c.Name)
			_, hasOp := c.Request["op"]
			require.False(t, hasOp, "%s/%s: request must not carry op", name, c.Name)
		}
	}
	for _, op := range Ops() {
		require.True(t, covered[op], "op %q has no vector file in testdata/", op)
	}
}
