package core

// A middle too big for the summarizer's window (summary_context_length, or the
// main model's) is summarized in chunks instead of losing its oldest turns: the
// turns are cut into runs that each fit the window with bodies at their usual
// excerpt sizes, the first run is summarized (as an update of the previous
// compaction's summary, if there is one), and each later run updates the summary
// of the runs before it, the iterative update every compaction already makes. A
// compress event (session.run) asks for the chunks one summarize effect after the
// other; compact.begin, one request by design, keeps cutting to fit.

// maxSummaryChunks bounds the summarizer calls of one compaction: past it, the
// chunks grow, and each is cut to fit as a single request is.
const maxSummaryChunks = 32

// chunkCharsPerToken is the characters a token of the turns is taken to hold
// when cutting chunks: tool output (code, JSON, logs) runs nearer 3 than the
// rough estimate's 4, and a chunk must fit a summarizer that counts exactly.
const chunkCharsPerToken = 3

// summaryChunks cuts the middle of p into chunks when its turns do not fit one
// summary request at the usual excerpt sizes; nil when they do, or when the
// window leaves no room for a chunk beside the summary it updates.
func summaryChunks(msgs []message, p plan, cc CompressionConfig) []IndexRange {
	prev, prevIdx := previousSummary(msgs, p.headEnd, p.tailStart)
	target, maxTokens := summaryAskSize(p, cc)
	free := summarizerWindow(p, cc) - maxTokens - summaryReserve
	ts := sizeTurns(msgs, p.headEnd, p.tailStart, prevIdx)
	sizes := make([]int, len(ts.sizes))
	total := 0
	for k := range sizes {
		sizes[k] = ts.turn(k, bodyHeadChars, bodyTailChars)
		total += sizes[k]
	}
	// One request when they fit it as buildSummaryRequest sizes it.
	if total <= free*roughCharsPerToken-len(prev) {
		return nil
	}
	room := free * chunkCharsPerToken
	// Each chunk leaves room for the summary it updates: the previous
	// compaction's, or the answer to the chunk before, asked to be about target
	// tokens (a longer answer makes the next chunk's excerpts shorter).
	budget := room - max(len(prev), target*chunkCharsPerToken)
	if budget <= 0 {
		return nil
	}
	if total > budget*maxSummaryChunks {
		budget = (total + maxSummaryChunks - 1) / maxSummaryChunks
	}
	var chunks []IndexRange
	from, sum := p.headEnd, 0
	for k, n := range sizes {
		if i := p.headEnd + k; sum > 0 && sum+n > budget {
			chunks = append(chunks, IndexRange{From: from, To: i})
			from, sum = i, 0
		}
		sum += n
	}
	chunks = append(chunks, IndexRange{From: from, To: p.tailStart})
	if len(chunks) > maxSummaryChunks { // uneven turns: the last takes the rest
		chunks[maxSummaryChunks-1].To = p.tailStart
		chunks = chunks[:maxSummaryChunks]
	}
	if len(chunks) < 2 {
		return nil
	}
	return chunks
}

// buildChunkRequest is the summary request of chunk k: the first updates the
// previous compaction's summary (if any), each later one prev, the answer to the
// chunk before.
func buildChunkRequest(msgs []message, p plan, cc CompressionConfig, chunks []IndexRange, k int, prev string) summaryAsk {
	first, prevIdx := previousSummary(msgs, p.headEnd, p.tailStart)
	if k == 0 {
		prev = first
	}
	span := promptSpan{from: chunks[k].From, to: chunks[k].To, k: k, n: len(chunks)}
	return buildSummaryAsk(msgs, p, cc, span, prev, prevIdx)
}
