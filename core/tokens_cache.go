package core

import (
	"math/bits"
	"sync"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
)

// The count cache: exact token counts of messages, per instance (per process
// natively, per module instance in wasm), keyed by the encoding and a 128-bit hash
// plus the length of the message's JSON bytes. An agent recounts a conversation
// that grew by one message on every turn; with the cache that costs one hash per
// message and one tokenization for the new one.
//
// It never changes a result: a count depends only on the message bytes and the
// encoding, both in the key (the calibration factor is applied after the lookup).
// A wrong hit would need two different messages of equal length with equal 128-bit
// hashes. It is bounded: two generations of at most countCacheGeneration entries;
// when the current one fills up it becomes the old one and the previous old one is
// dropped, and a hit in the old generation moves the entry to the current one. So a
// conversation of up to countCacheGeneration messages stays cached whole, and the
// cache never holds more than 2*countCacheGeneration entries (about 5 MB).
//
// Rough estimates are not cached: computing one costs about what hashing costs.

const countCacheGeneration = 1 << 14

type countKey struct {
	h1, h2 uint64
	n      int
	enc    uint8
}

type countCache struct {
	mu        sync.Mutex
	cur, old  map[countKey]int32
	hits, all uint64
}

// counts is the per-instance cache. Safe for concurrent use: core.Call runs on many
// goroutines natively.
var counts = &countCache{}

func newCountKey(enc uint8, raw string) countKey {
	h1, h2 := hash128(raw)
	return countKey{h1: h1, h2: h2, n: len(raw), enc: enc}
}

func (c *countCache) get(k countKey) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all++
	if v, ok := c.cur[k]; ok {
		c.hits++
		return int(v), true
	}
	if v, ok := c.old[k]; ok {
		c.hits++
		delete(c.old, k)
		c.putLocked(k, v)
		return int(v), true
	}
	return 0, false
}

func (c *countCache) put(k countKey, n int) {
	c.mu.Lock()
	c.putLocked(k, int32(min(n, 1<<31-1)))
	c.mu.Unlock()
}

func (c *countCache) putLocked(k countKey, v int32) {
	if c.cur == nil || len(c.cur) >= countCacheGeneration {
		c.old, c.cur = c.cur, make(map[countKey]int32, 256)
	}
	c.cur[k] = v
}

// size returns the number of cached counts.
func (c *countCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}

// reset empties the cache (tests and benchmarks).
func (c *countCache) reset() {
	c.mu.Lock()
	c.cur, c.old, c.hits, c.all = nil, nil, 0, 0
	c.mu.Unlock()
}

// hash128 is a fast non-cryptographic 128-bit hash over 16-byte blocks: a
// wyhash-style lane (one 64x64->128 multiply per block) and a multiply-rotate lane
// (one 64-bit multiply: wasm has no 128-bit product, so Go emulates it there), each
// folding in both words and its own previous state. Fixed seeds: the same bytes
// hash the same in every runtime.
func hash128(s string) (uint64, uint64) {
	const (
		k0 = 0xa0761d6478bd642f
		k1 = 0xe7037ed1a0b428db
		k2 = 0x8ebc6af09c88c6e3
		k3 = 0x589965cc75374cc3
		k4 = 0x1d8e4e27c47d124f
	)
	n := uint64(len(s))
	h1, h2 := k0^n, k3^(n*k4)
	for len(s) >= 16 {
		a, b := le64(s), le64(s[8:])
		h1 = mum(a^k1, b^h1)
		h2 = bits.RotateLeft64(h2^b^k2, 29)*k4 + a
		s = s[16:]
	}
	var a, b uint64
	switch {
	case len(s) >= 8:
		a, b = le64(s), le64(s[len(s)-8:])
	case len(s) > 0:
		for i := 0; i < len(s); i++ {
			a |= uint64(s[i]) << (8 * i)
		}
		b = a >> 32
	}
	h1 = mum(a^k1^uint64(len(s)), b^h1)
	h2 = mum(b^k2, a^h2^k4)
	return mum(h1^k4, n^k1), mum(h2^k0, h1^k2)
}

func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func le64(s string) uint64 { return jsonraw.Word(s, 0) }
