package core

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVersionsAgree: Go, npm and Python ship one version, the one in version.go.
func TestVersionsAgree(t *testing.T) {
	data, err := os.ReadFile("../package.json")
	require.NoError(t, err)
	var pkg struct {
		Version string `json:"version"`
	}
	require.NoError(t, json.Unmarshal(data, &pkg))
	require.Equal(t, Version, pkg.Version, "package.json")

	data, err = os.ReadFile("../bindings/python/pyproject.toml")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^version\s*=\s*"([^"]+)"`).FindSubmatch(data)
	require.NotNil(t, m, "pyproject.toml has no version line")
	require.Equal(t, Version, string(m[1]), "bindings/python/pyproject.toml")
}
