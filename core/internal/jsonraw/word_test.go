package jsonraw

import (
	"encoding/binary"
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

// TestWordAtAndViewBytes: WordAt is the little-endian word of the eight bytes, read
// up to the slice's capacity; ViewBytes is the string's bytes.
func TestWordAtAndViewBytes(t *testing.T) {
	buf := []byte("abcdefghijklmnop")
	b := buf[:3] // a short slice over a longer array
	for i := 0; i+8 <= cap(b); i++ {
		if got, want := WordAt(b, i), binary.LittleEndian.Uint64(buf[i:i+8]); got != want {
			t.Fatalf("WordAt(b, %d) = %#x, want %#x", i, got, want)
		}
	}
	if got := string(ViewBytes("héllo")); got != "héllo" {
		t.Fatalf("ViewBytes: %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("WordAt past the capacity did not panic")
		}
	}()
	WordAt(b, cap(b)-7)
}
