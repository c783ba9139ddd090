package bpe

import (
	"sync/atomic"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
)

// rankTable maps token bytes to ranks: open addressing with linear probing over
// slots that hold a 64-bit hash, where the key lies in the embedded table and the
// rank. It replaces a Go map[string]uint32, whose lookups (the runtime's generic
// string hash and compare, both calls) were a third of an exact count in wasm;
// building it is also a fraction of building the map.
//
// A key shorter than 8 bytes is hashed by a bijection of its bytes and its length
// packed in one word, so equal hashes and lengths mean equal keys and such a
// lookup never compares bytes. Longer keys compare their bytes after the hash.
type rankTable struct {
	slots []rankSlot
	mask  uint64
	keys  string // the rank table the slots point into
	n     int
	spare atomic.Pointer[hotCache] // see tokenizer.borrow
}

type rankSlot struct {
	h    uint64 // 0: empty (no key hashes to 0, see hashKey)
	ref  uint32 // offset << refLenBits | length of the key in keys
	rank uint32
}

const (
	refLenBits = 10
	maxKeyLen  = 1<<refLenBits - 1
	maxKeysLen = 1 << (32 - refLenBits)
)

// mix is a bijection of uint64 (each step is invertible), with mix(0) == 0.
func mix(x uint64) uint64 {
	x ^= x >> 32
	x *= 0xd6e8feb86659fd93
	x ^= x >> 32
	x *= 0xd6e8feb86659fd93
	x ^= x >> 32
	return x
}

// load8 returns the 8 bytes at b[i:i+8] as a little-endian word, in one load. The
// caller guarantees i+8 <= cap(b); the bytes past len(b) are the caller's to mask.
func load8(b []byte, i int) uint64 { return jsonraw.WordAt(b, i) }

// hashShort hashes a key of n < 8 bytes given as a word whose low n bytes are it.
func hashShort(w uint64, n int) uint64 {
	return mix(w&(1<<(8*uint(n))-1) | uint64(n)<<56)
}

// hashLong hashes a key of n >= 8 bytes at b[i:i+n].
func hashLong(b []byte, i, n int) uint64 {
	h := uint64(n) * 0x9e3779b97f4a7c15
	end := i + n
	for ; i+8 < end; i += 8 {
		h = (h ^ load8(b, i)) * 0xbf58476d1ce4e5b9
		h ^= h >> 29
	}
	h = mix(h ^ load8(b, end-8))
	if h == 0 {
		h = 1
	}
	return h
}

// hashKey hashes b[i:j]. A short key is read in one load when b has 8 bytes of
// capacity from i (pieceBuf sees to it), else byte by byte.
func hashKey(b []byte, i, j int) uint64 {
	n := j - i
	if n >= 8 {
		return hashLong(b, i, n)
	}
	if i+8 <= cap(b) {
		return hashShort(load8(b, i), n)
	}
	var w uint64
	for k := j - 1; k >= i; k-- {
		w = w<<8 | uint64(b[k])
	}
	return hashShort(w, n)
}

func newRankTable(keys string, n int) *rankTable {
	size := 1
	for size < 2*n {
		size <<= 1
	}
	return &rankTable{slots: make([]rankSlot, size), mask: uint64(size - 1), keys: keys}
}

// add puts the key keys[off:off+l] with its rank; it reports false when the key is
// there already.
func (t *rankTable) add(off, l int, rank uint32) bool {
	if l <= 0 || l > maxKeyLen || off+l > maxKeysLen {
		panic("ctxcompact: rank table: a token too long or the table too large")
	}
	// The keys are read in place: a read-only view of the table as bytes.
	b := jsonraw.ViewBytes(t.keys)
	h := hashKey(b, off, off+l)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.h == 0 {
			*s = rankSlot{h: h, ref: uint32(off)<<refLenBits | uint32(l), rank: rank}
			t.n++
			return true
		}
		if s.h == h && t.equal(s, b, off, off+l) {
			return false
		}
	}
}

// equal reports whether slot s holds the key b[i:j] of the same hash.
func (t *rankTable) equal(s *rankSlot, b []byte, i, j int) bool {
	n := j - i
	if int(s.ref&maxKeyLen) != n {
		return false
	}
	if n < 8 {
		return true // same hash, same length: the same bytes (hashShort is a bijection)
	}
	off := int(s.ref >> refLenBits)
	return t.keys[off:off+n] == string(b[i:j])
}

// get returns the rank of b[i:j].
func (t *rankTable) get(b []byte, i, j int) (uint32, bool) {
	if j <= i {
		return 0, false // no token is empty (and 0 marks an empty slot)
	}
	h := hashKey(b, i, j)
	for k := h & t.mask; ; k = (k + 1) & t.mask {
		s := &t.slots[k]
		if s.h == h && t.equal(s, b, i, j) {
			return s.rank, true
		}
		if s.h == 0 {
			return 0, false
		}
	}
}

// lookup is get for a key given as a string (tests).
func (t *rankTable) lookup(key string) (uint32, bool) {
	return t.get([]byte(key), 0, len(key))
}

// len returns the number of keys.
func (t *rankTable) len() int { return t.n }

// hotCache is a small direct-mapped cache in front of the rank table for keys
// shorter than 8 bytes, the most looked up (a piece that is one token, the pairs
// of a merge), hits and misses alike: the rank table is megabytes, so each of its
// lookups waits on memory, while a text's common tokens fit in this one. A
// count borrows its table's for its duration (tokenizer.borrow), so it needs no
// lock; what it holds is a pure function of the table, so it is kept between uses.
type hotCache struct {
	keys  [hotSize]uint64
	ranks [hotSize]uint32
	buf   []byte // the piece buffer of the count (see pieceBuf)
	// pieces and counts are the merge cache: the token count of pieces that are not
	// one token (each needs a merge), direct-mapped by the piece's hash, the piece
	// kept to compare. Code and prose repeat their words, so most merges are ones
	// a text did before (what gives gpt-tokenizer its warm speed).
	pieces [mergeSize]string
	counts [mergeSize]int32
}

const (
	hotBits = 12
	hotSize = 1 << hotBits

	mergeBits = 13
	mergeSize = 1 << mergeBits
	// maxMergeCached is the longest piece the merge cache keeps: longer ones are
	// rare and would make its strings megabytes.
	maxMergeCached = 48
)

// mergeSlot is the merge cache slot of a piece: the top bits of its rank-table hash
// (hashKey; the piece has pieceBuf's 8 bytes of capacity past its end).
func mergeSlot(piece []byte) uint32 {
	return uint32(hashKey(piece, 0, len(piece)) >> (64 - mergeBits))
}

// getHot is get through hc for a short key (the caller checks 0 < j-i < 8 and
// that b has 8 bytes of capacity from i).
func (t *rankTable) getHot(hc *hotCache, b []byte, i, j int) (uint32, bool) {
	n := j - i
	key := load8(b, i)&(1<<(8*uint(n))-1) | uint64(n)<<56 // never 0: n >= 1
	slot := (key * 0x9e3779b97f4a7c15) >> (64 - hotBits)
	if hc.keys[slot] == key {
		r := hc.ranks[slot]
		return r, r != noMerge
	}
	h := mix(key)
	r, ok := noMerge, false
	for k := h & t.mask; ; k = (k + 1) & t.mask {
		s := &t.slots[k]
		if s.h == h && int(s.ref&maxKeyLen) == n {
			r, ok = s.rank, true
			break
		}
		if s.h == 0 {
			break
		}
	}
	hc.keys[slot], hc.ranks[slot] = key, r
	return r, ok
}
