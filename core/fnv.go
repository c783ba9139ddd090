package core

import "github.com/ctxcompact/ctxcompact/core/internal/jsonraw"

// fnv64a is a running FNV-1a 64-bit hash (hash/fnv's New64a, whose sums it gives),
// written out so hashing a message's few short strings makes no call through an
// interface and no []byte copy of each string.
type fnv64a uint64

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

func (h fnv64a) byte(b byte) fnv64a { return (h ^ fnv64a(b)) * fnvPrime64 }

func (h fnv64a) string(s string) fnv64a {
	for i := 0; i < len(s); i++ {
		h = (h ^ fnv64a(s[i])) * fnvPrime64
	}
	return h
}

func (h fnv64a) bytes(b []byte) fnv64a { return h.string(jsonraw.ViewString(b)) }
