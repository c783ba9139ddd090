package bpe

// Byte-pair encoding over an embedded rank table (vocab/<encoding>.bin, written by
// ./vocabgen): the token bytes in rank order, each behind a uvarint length. The
// reference library's own vocabularies are Go map literals, compiled to 8.7 MB of
// static arrays in the wasm module; these tables are 2.3 MB, and the rank map is
// built from one on the first count with its encoding (docs/TOKENS.md has the sizes
// and times).

// vocabMagic starts every rank table; see ./vocabgen for the format.
const vocabMagic = "ctxcvocab1\n"

// tokenizer is one encoding's rank map and pre-tokenizer. It is read-only once
// built and safe for concurrent use.
type tokenizer struct {
	ranks *rankTable
	split splitter
	// hot is the cache of a tokenizer copy that one count or encode works with
	// (nil in the shared tokenizer).
	hot *hotCache
}

// borrow returns a copy of b with a hot cache of its table: the table's spare one
// when no other count holds it, else a new one. giveBack makes it the spare again;
// kept in the table, not a sync.Pool, it survives garbage collections warm.
func (b *tokenizer) borrow() tokenizer {
	hc := b.ranks.spare.Swap(nil)
	if hc == nil {
		hc = &hotCache{}
	}
	w := *b
	w.hot = hc
	return w
}

// giveBack returns the hot cache of a borrowed copy to its table.
func (b *tokenizer) giveBack() { b.ranks.spare.Store(b.hot) }

// newTokenizer builds the encoder from a rank table and a split pattern. The keys of the
// rank map are substrings of table, so building it copies no token bytes. A
// malformed table is a build error of this package (the tables are generated and
// pinned by a test), so it panics.
func newTokenizer(table, pattern string) *tokenizer {
	if len(table) < len(vocabMagic) || table[:len(vocabMagic)] != vocabMagic {
		panic("ctxcompact: rank table: bad magic")
	}
	pos := len(vocabMagic)
	uvarint := func() int {
		var x uint64
		for shift := 0; pos < len(table) && shift < 64; shift += 7 {
			b := table[pos]
			pos++
			x |= uint64(b&0x7f) << shift
			if b < 0x80 {
				return int(x)
			}
		}
		panic("ctxcompact: rank table: truncated varint")
	}
	n := uvarint()
	ranks := newRankTable(table, n)
	for r := 0; r < n; r++ {
		l := uvarint()
		if l <= 0 || pos+l > len(table) {
			panic("ctxcompact: rank table: bad token length")
		}
		if !ranks.add(pos, l, uint32(r)) {
			panic("ctxcompact: rank table: duplicate tokens")
		}
		pos += l
	}
	if pos != len(table) || ranks.len() != n {
		panic("ctxcompact: rank table: trailing bytes or duplicate tokens")
	}
	return &tokenizer{ranks: ranks, split: splitterFor(pattern)}
}

// count returns the number of tokens of s (see Encoding.Count).
func (b *tokenizer) count(s string) int {
	w := b.borrow()
	n := w.countWith(s)
	w.giveBack()
	return n
}

func (b *tokenizer) countWith(s string) int {
	n := 0
	buf := b.hot.buf
	b.split(s, func(piece string) {
		buf = pieceBuf(buf, piece)
		n += b.pieceTokens(buf)
	})
	b.hot.buf = buf
	return n
}

// pieceBuf copies piece into buf (reused) with 8 bytes of capacity past its end,
// which the rank table's word loads need.
func pieceBuf(buf []byte, piece string) []byte {
	if cap(buf) < len(piece)+8 {
		buf = make([]byte, 0, max(2*cap(buf), len(piece)+8, 64))
	}
	return append(buf[:0], piece...)
}

// encode returns the ranks of the tokens of s (see Encoding.Encode).
func (b *tokenizer) encode(s string) []int {
	w := b.borrow()
	ids := w.encodeWith(s)
	w.giveBack()
	return ids
}

func (b *tokenizer) encodeWith(s string) []int {
	var ids []int
	var buf []byte
	b.split(s, func(piece string) {
		buf = pieceBuf(buf, piece)
		if r, ok := b.get(buf, 0, len(buf)); ok {
			ids = append(ids, int(r))
			return
		}
		if len(buf) < bpeHeapThreshold {
			b.mergeScan(buf, &ids)
		} else {
			b.mergeHeap(buf, &ids)
		}
	})
	return ids
}

// pieceTokens returns the number of tokens of one piece: 1 if the piece is a token,
// else the number of parts left when merging adjacent parts, lowest rank first,
// stops (tiktoken's byte_pair_merge).
func (b *tokenizer) pieceTokens(piece []byte) int {
	if len(piece) == 0 {
		return 0
	}
	if _, ok := b.get(piece, 0, len(piece)); ok {
		return 1
	}
	if b.hot != nil && len(piece) <= maxMergeCached {
		slot := mergeSlot(piece)
		if b.hot.pieces[slot] == string(piece) { // no allocation: a comparison
			return int(b.hot.counts[slot])
		}
		n := b.mergeScan(piece, nil)
		b.hot.pieces[slot], b.hot.counts[slot] = string(piece), int32(n)
		return n
	}
	if len(piece) < bpeHeapThreshold {
		return b.mergeScan(piece, nil)
	}
	return b.mergeHeap(piece, nil)
}

// noMerge is the rank of a pair that is not a token.
const noMerge = ^uint32(0)

// bpeHeapThreshold is the piece length from which mergeHeap (O(n log n)) replaces
// mergeScan (O(n^2), faster on short pieces).
const bpeHeapThreshold = 128

// get returns the rank of piece[i:j], through the hot cache when there is one.
func (b *tokenizer) get(piece []byte, i, j int) (uint32, bool) {
	if b.hot != nil && j-i < 8 && j > i && i+8 <= cap(piece) {
		return b.ranks.getHot(b.hot, piece, i, j)
	}
	return b.ranks.get(piece, i, j)
}

// rank returns the rank of piece[i:j], or noMerge.
func (b *tokenizer) rank(piece []byte, i, j int) uint32 {
	if r, ok := b.get(piece, i, j); ok {
		return r
	}
	return noMerge
}

// mergeScan merges with a linear scan for the lowest-ranked pair; among equal
// ranks the leftmost pair merges first. start[k] is where part k begins;
// pair[k] is the rank of parts k and k+1 merged. It returns the number of parts
// left, and appends their ranks to *ids unless ids is nil.
func (b *tokenizer) mergeScan(piece []byte, ids *[]int) int {
	var startBuf [bpeHeapThreshold + 1]int32
	var pairBuf [bpeHeapThreshold]uint32
	n := len(piece)
	start := startBuf[:n+1] // start[n] = n closes the last part
	pair := pairBuf[:n]
	for i := 0; i <= n; i++ {
		start[i] = int32(i)
	}
	for i := 0; i+1 < n; i++ {
		pair[i] = b.rank(piece, i, i+2)
	}
	pair[n-1] = noMerge
	parts := n
	for parts > 1 {
		best, at := noMerge, -1
		for k := 0; k < parts-1; k++ {
			if pair[k] < best {
				best, at = pair[k], k
			}
		}
		if at < 0 {
			break
		}
		// Merge parts at and at+1: drop boundary at+1.
		copy(start[at+1:parts], start[at+2:parts+1])
		copy(pair[at+1:parts-1], pair[at+2:parts])
		parts--
		pair[parts-1] = noMerge
		if at+1 < parts {
			pair[at] = b.rank(piece, int(start[at]), int(start[at+2]))
		} else {
			pair[at] = noMerge
		}
		if at > 0 {
			pair[at-1] = b.rank(piece, int(start[at-1]), int(start[at+1]))
		}
	}
	if ids != nil {
		for k := 0; k < parts; k++ {
			*ids = append(*ids, int(b.rank(piece, int(start[k]), int(start[k+1]))))
		}
	}
	return parts
}

// mergeHeap gives mergeScan's result in O(n log n) for long pieces (a run of
// symbols or a long word): parts form a linked list of boundaries and candidate
// pairs wait in a min-heap by (rank, offset), so among equal ranks the leftmost
// pair merges first, as in the scan. A popped candidate whose rank is stale (one
// of its parts merged since) is skipped. It returns and appends as mergeScan.
func (b *tokenizer) mergeHeap(piece []byte, ids *[]int) int {
	n := int32(len(piece))
	next := make([]int32, n+1) // next boundary; -1 after the end
	prev := make([]int32, n+1)
	pair := make([]uint32, n+1) // rank of the part starting here merged with the next
	for i := int32(0); i <= n; i++ {
		next[i], prev[i], pair[i] = i+1, i-1, noMerge
	}
	next[n] = -1
	rankAt := func(i int32) uint32 {
		j := next[i]
		if j < 0 || j == n {
			return noMerge
		}
		return b.rank(piece, int(i), int(next[j]))
	}
	h := make(mergeQueue, 0, n)
	for i := int32(0); i+1 < n; i++ {
		if pair[i] = rankAt(i); pair[i] != noMerge {
			h = append(h, mergeItem{pair[i], i})
		}
	}
	h.init()
	parts := int(n)
	for len(h) > 0 {
		top := h.pop()
		i := top.at
		if pair[i] != top.rank {
			continue
		}
		j := next[i] // the boundary that disappears
		pair[j] = noMerge
		next[i] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = i
		}
		parts--
		if pair[i] = rankAt(i); pair[i] != noMerge {
			h.push(mergeItem{pair[i], i})
		}
		if p := prev[i]; p >= 0 {
			if pair[p] = rankAt(p); pair[p] != noMerge {
				h.push(mergeItem{pair[p], p})
			}
		}
	}
	if ids != nil {
		for i := int32(0); i >= 0 && i < n; i = next[i] {
			*ids = append(*ids, int(b.rank(piece, int(i), int(next[i]))))
		}
	}
	return parts
}

type mergeItem struct {
	rank uint32
	at   int32
}

// mergeQueue is a binary min-heap of merge candidates by rank, then offset.
type mergeQueue []mergeItem

func (h mergeQueue) less(a, b int) bool {
	return h[a].rank < h[b].rank || h[a].rank == h[b].rank && h[a].at < h[b].at
}

func (h mergeQueue) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *mergeQueue) push(it mergeItem) {
	*h = append(*h, it)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *mergeQueue) pop() mergeItem {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	*h = q[:last]
	h.down(0)
	return top
}

func (h mergeQueue) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && h.less(r, c) {
			c = r
		}
		if !h.less(c, i) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
