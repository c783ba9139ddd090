package jsonraw

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEqual: Equal is string equality, whatever the length and wherever the
// first difference.
func TestEqual(t *testing.T) {
	for n := 0; n <= 40; n++ {
		a := strings.Repeat("abcdefghij", 4)[:n]
		require.True(t, Equal(a, strings.Clone(a)))
		require.False(t, Equal(a, a+"x"))
		for i := 0; i < n; i++ {
			b := []byte(a)
			b[i] ^= 0x80
			require.False(t, Equal(a, string(b)), "differs at %d of %d", i, n)
		}
	}
}
