package core

// activeRequestSlack: the newest real user message stays in the tail when that keeps
// the tail within 1.5x its budget (docs/DESIGN.md §8 phase 2).
const activeRequestSlack = 1.5

// prunedTokensEstimate is the rough size of a pruned tool message (overhead and a
// placeholder of about 170 characters), used while placing the boundaries.
const prunedTokensEstimate = 48

// plan is where a compaction cuts: head [0, headEnd), middle [headEnd, tailStart)
// (summarized), tail [tailStart, n) kept. Tool outputs in [tailStart, budgetStart)
// are kept but pruned: they are protected by count, not by the token budget.
type plan struct {
	headEnd, tailStart, budgetStart int
	// pruned holds which messages are kept pruned, and their outputs' sizes: planning
	// decides, assembly writes the placeholders (through the format).
	pruned prunedSet
	// activeRequest is the index of the newest real user message when it could not
	// stay in the tail and the summary carries it verbatim; -1 otherwise.
	activeRequest int
	thr           ThresholdResult
	summaryTarget int
	// estimate is the expected size after compaction, with the summary at its target.
	estimate int
	// roomMargin is the room a compaction leaves free under the threshold for the
	// turns that follow (the configured tail budget): head outputs are pruned when
	// the result would leave less, and the active request is capped to leave it.
	roomMargin int
	// calls indexes every tool call of the messages by id (placeholders and the
	// extractive summary name the call an output answers).
	calls callIndex
	// focus is the request's focus (focus.go): the summary request asks for it, the
	// extractive summary and the facts index put what matches it first.
	focus string
}

// planCompaction places the head and tail boundaries (docs/DESIGN.md §8 phases 1 and 2).
// No boundary splits a tool group: head ends after the results of its last call,
// the tail starts at an assistant, never at a tool result.
//
// fixed is the size of what is sent besides the messages (an Anthropic top-level
// system prompt), counted with the head; f says which messages hold prunable output
// and which items join the group before them.
func planCompaction(f messageFormat, msgs []message, thr ThresholdResult, cc CompressionConfig, fixed int) plan {
	pl := &planner{f: f, msgs: msgs, cc: cc, p: plan{thr: thr, activeRequest: -1}}
	pl.placeHead()
	pl.placeBudgetedTail()
	pl.placeCountedTail()
	pl.measureKept()
	pl.keepAnchors()
	pl.fit(fixed)
	pl.pruneSuffices(fixed)
	pl.recordPruned()
	return pl.p
}

// pruneSuffices is the prune-first tier (compression.prune_first): when pruning
// every tool output before the budgeted tail leaves the conversation no larger
// than the planned compaction (head, summary, index and tail) would, the
// compaction only prunes: it asks for no summary (no LLM call, no cost), keeps
// every message's text, and reports pruned_only. Off by default: the names in the
// pruned outputs are then lost with no index to carry them (RATIONALE.md).
func (pl *planner) pruneSuffices(fixed int) {
	p := &pl.p
	if !pl.cc.PruneFirst || p.budgetStart <= p.headEnd || p.tailStart <= p.headEnd {
		return
	}
	size := fixed + pl.kept[p.headEnd]
	for i := 0; i < p.headEnd; i++ {
		size += pl.msgs[i].tokens
	}
	if size > p.estimate {
		return
	}
	pruned := false
	for _, c := range pl.pruneChars {
		pruned = pruned || c > 0
	}
	if !pruned {
		return
	}
	p.tailStart, p.activeRequest, pl.headPruned = p.headEnd, -1, nil
	p.summaryTarget, p.estimate = 0, size
}

// planner holds a plan while planCompaction places its boundaries, one step per
// method, each reading what the steps before it placed.
type planner struct {
	f    messageFormat
	msgs []message
	cc   CompressionConfig
	p    plan
	// newestUser is the index of the newest real user message after the head, -1
	// if none; slack is the anchor budget times activeRequestSlack.
	newestUser, slack int
	// pruneChars[i-headEnd] is the length of message i's prunable output, 0 if it
	// has none, for messages before budgetStart; kept[i] is the tokens of messages
	// [i, n) as kept (the ones before budgetStart pruned).
	pruneChars, kept []int
	// headPruned are the head messages pruned under pressure (see fit).
	headPruned []int
	// pinPre[i] is the tokens of the pinned messages in [0, i): those in the
	// summarized span are kept after the summary (pins.go).
	pinPre []int
}

// placeHead ends the head after protect_first_n messages and the results of its
// last group.
func (pl *planner) placeHead() {
	n := len(pl.msgs)
	pl.p.headEnd = pl.afterTurns(pl.cc.ProtectFirstN)
	for pl.p.headEnd < n && pl.f.joinsPrevious(&pl.msgs[pl.p.headEnd]) {
		pl.p.headEnd++
	}
}

// afterTurns returns the index just past the first k turns (a turn is an item and
// the items that continue it), or len(msgs).
func (pl *planner) afterTurns(k int) int {
	i := 0
	for turns := 0; i < len(pl.msgs); i++ {
		if !pl.msgs[i].continuesTurn {
			if turns == k {
				break
			}
			turns++
		}
	}
	return i
}

// lastTurns returns the index where the last k turns start (0 when there are
// fewer).
func (pl *planner) lastTurns(k int) int {
	i := len(pl.msgs)
	for turns := 0; i > 0 && turns < k; {
		i--
		if !pl.msgs[i].continuesTurn {
			turns++
		}
	}
	return i
}

// alignBack moves a tail start at i back to the start of its group (never into the
// head).
func (pl *planner) alignBack(i int) int {
	for i > pl.p.headEnd && i < len(pl.msgs) && pl.f.joinsPrevious(&pl.msgs[i]) {
		i--
	}
	return i
}

// placeBudgetedTail walks back from the end while the tail budget lasts. The newest
// tool group, when it answers the newest request, is the agent's current step: its
// outputs stay whole when the group fits the anchor slack (a budget the
// small-window rule shrank would otherwise prune the output the agent is reading).
func (pl *planner) placeBudgetedTail() {
	msgs, p := pl.msgs, &pl.p
	n := len(msgs)
	p.budgetStart = n
	for acc := 0; p.budgetStart > p.headEnd; p.budgetStart-- {
		acc += msgs[p.budgetStart-1].tokens
		if acc > p.thr.TailTokenBudget {
			break
		}
	}
	p.budgetStart = pl.alignBack(p.budgetStart)
	pl.newestUser = -1
	for i := n - 1; i >= p.headEnd; i-- {
		if msgs[i].isRealUser() {
			pl.newestUser = i
			break
		}
	}
	pl.slack = int(float64(anchorBudget(p.thr, pl.cc)) * activeRequestSlack)
	if g := newestToolGroup(msgs, p.headEnd); g > pl.newestUser && g < p.budgetStart {
		size := 0
		for i := g; i < n; i++ {
			size += msgs[i].tokens
		}
		if size <= pl.slack/3 {
			p.budgetStart = g
		}
	}
}

// placeCountedTail starts the tail at the earlier of the budgeted tail and the last
// protect_last_n messages.
func (pl *planner) placeCountedTail() {
	p := &pl.p
	countStart := pl.alignBack(max(p.headEnd, pl.lastTurns(pl.cc.ProtectLastN)))
	p.tailStart = min(p.budgetStart, countStart)
}

// measureKept sizes the messages as kept: those in [tailStart, budgetStart) are
// kept pruned. Pruned sizes are estimated here; the placeholders are written at
// assembly.
func (pl *planner) measureKept() {
	msgs, p := pl.msgs, &pl.p
	n := len(msgs)
	pl.pruneChars = make([]int, p.budgetStart-p.headEnd)
	pl.kept = make([]int, n+1)
	for i := n - 1; i >= p.headEnd; i-- {
		t := msgs[i].tokens
		if i < p.budgetStart && !msgs[i].pinned {
			if chars, ok := pl.f.prunable(&msgs[i]); ok {
				pl.pruneChars[i-p.headEnd], t = chars, prunedTokensEstimate
			}
		}
		pl.kept[i] = pl.kept[i+1] + t
	}
	pl.pinPre = make([]int, n+1)
	for i := range msgs {
		pl.pinPre[i+1] = pl.pinPre[i]
		if msgs[i].pinned {
			pl.pinPre[i+1] += msgs[i].tokens
		}
	}
}

// keepAnchors moves the tail start back over the real user messages the tail must
// keep (min_tail_user_messages, head ones counting), within the slack. The newest
// real user message is never lost, whatever the floors (protect_last_n 0,
// min_tail_user_messages 0, or a head user that satisfied the count): it stays in
// the tail when that keeps the tail within the slack, else the summary carries it
// as the active request.
func (pl *planner) keepAnchors() {
	msgs, p := pl.msgs, &pl.p
	users := 0
	for i := range msgs {
		if (i < p.headEnd || i >= p.tailStart) && msgs[i].isRealUser() {
			users++
		}
	}
	for i := p.tailStart - 1; i >= p.headEnd && users < pl.cc.MinTailUserMessages; i-- {
		if !msgs[i].isRealUser() {
			continue
		}
		if pl.kept[i] > pl.slack {
			break
		}
		p.tailStart, users = i, users+1
	}
	if u := pl.newestUser; u >= 0 && u < p.tailStart {
		if pl.kept[u] <= pl.slack {
			p.tailStart = u
		} else {
			p.activeRequest = u
		}
	}
}

// fit shrinks the tail toward the budgeted tail, one group at a time, while head +
// summary + tail would exceed the threshold: fitting wins over counts. The tail
// never starts after the newest tool group when that group answers the newest
// request (it is the agent's current step); its outputs are kept pruned when they
// are outside the budget.
//
// Under pressure (the result would leave less than the configured tail budget free
// under the threshold) the head's tool outputs are pruned like the middle's, an
// intended departure from docs/DESIGN.md §8, whose head is kept whole: a first tool
// group of 20K tokens would otherwise leave every compaction at the threshold, and
// the next turn would compact again.
func (pl *planner) fit(fixed int) {
	msgs, p := pl.msgs, &pl.p
	n := len(msgs)
	shrinkTo := p.budgetStart
	if g := newestToolGroup(msgs, p.headEnd); g > pl.newestUser && g < shrinkTo {
		shrinkTo = g
	}
	pre := make([]int, n+1) // pre[i] = tokens of messages [0, i) as given
	for i := range msgs {
		pre[i+1] = pre[i] + msgs[i].tokens
	}
	head := fixed + pre[p.headEnd]
	p.summaryTarget, p.estimate = pl.estimate(pre, head)
	p.roomMargin = anchorBudget(p.thr, pl.cc)
	if p.estimate > p.thr.ThresholdTokens-p.roomMargin {
		for i := 0; i < p.headEnd; i++ {
			if _, ok := pl.f.prunable(&msgs[i]); ok && !msgs[i].pinned && msgs[i].tokens > prunedTokensEstimate {
				pl.headPruned = append(pl.headPruned, i)
				head -= msgs[i].tokens - prunedTokensEstimate
			}
		}
		p.summaryTarget, p.estimate = pl.estimate(pre, head)
	}
	for p.estimate > p.thr.ThresholdTokens && p.tailStart < shrinkTo {
		next := p.tailStart + 1
		for next < shrinkTo && pl.f.joinsPrevious(&msgs[next]) {
			next++
		}
		if p.tailStart <= pl.newestUser && pl.newestUser < next {
			p.activeRequest = pl.newestUser
		}
		p.tailStart = next
		p.summaryTarget, p.estimate = pl.estimate(pre, head)
	}
	if p.tailStart <= p.headEnd {
		p.activeRequest = -1 // nothing is summarized: the message stays where it is
	}
}

// estimate returns the summary's target for the current tail and the expected
// size after compaction with it; pre are the prefix sums of the messages' tokens,
// head the head's size as kept.
func (pl *planner) estimate(pre []int, head int) (summaryTarget, total int) {
	p := &pl.p
	index, pinned := 0, 0
	if p.tailStart > p.headEnd {
		pinned = pl.pinPre[p.tailStart] - pl.pinPre[p.headEnd]
		summaryTarget = summaryTargetTokens(pre[p.tailStart]-pre[p.headEnd]-pinned, p.thr.MaxSummaryTokens)
		if pl.cc.factsIndex() {
			index = factsBudgetTokens(p.thr)
		}
	}
	return summaryTarget, head + summaryTarget + index + pinned + pl.kept[p.tailStart] + systemNoteTokens
}

// recordPruned records which messages are kept pruned: the head's pruned under
// pressure, and the tool outputs in [tailStart, budgetStart).
func (pl *planner) recordPruned() {
	p := &pl.p
	p.calls = indexCalls(pl.msgs)
	p.pruned.from = p.tailStart
	if len(pl.headPruned) > 0 {
		p.pruned.from = pl.headPruned[0]
		for _, i := range pl.headPruned {
			chars, _ := pl.f.prunable(&pl.msgs[i])
			p.pruned.add(i, chars)
		}
	}
	for i := p.tailStart; i < p.budgetStart; i++ {
		if chars := pl.pruneChars[i-p.headEnd]; chars > 0 {
			p.pruned.add(i, chars)
		}
	}
}

// prunedSet maps input indices, from a first one on, to the sizes (in characters)
// of the outputs pruned in those messages: a slice, not a map (a few pruned
// messages in a run of the tail).
type prunedSet struct {
	from  int
	chars []int // chars[k] is the pruned size of message from+k; 0 when it is not pruned; ends with one that is
}

func (s *prunedSet) add(i, chars int) {
	for len(s.chars) <= i-s.from {
		s.chars = append(s.chars, 0)
	}
	s.chars[i-s.from] = chars
}

// empty reports whether no message is pruned.
func (s *prunedSet) empty() bool { return len(s.chars) == 0 }

// at returns the pruned size of message i, if it is pruned.
func (s *prunedSet) at(i int) (int, bool) {
	if k := i - s.from; k >= 0 && k < len(s.chars) && s.chars[k] > 0 {
		return s.chars[k], true
	}
	return 0, false
}

// indices returns the pruned messages' indices in order.
func (s *prunedSet) indices() []int {
	out := []int{}
	for k, n := range s.chars {
		if n > 0 {
			out = append(out, s.from+k)
		}
	}
	return out
}

// anchorBudget is the tail budget the user and tool-group anchors are measured
// against: the configured one, not the one the small-window rule shrank (that rule
// sizes the history kept, not the newest request or step).
func anchorBudget(thr ThresholdResult, cc CompressionConfig) int {
	if thr.TailRule != TailRuleSmallWindow {
		return thr.TailTokenBudget
	}
	return min(tokensOf(thr.ThresholdTokens, cc.TargetRatio), tokensOf(thr.ContextLength, tailWindowCap))
}

// newestToolGroup returns the index of the newest assistant message that makes tool
// calls, at or after from, or -1.
func newestToolGroup(msgs []message, from int) int {
	for i := len(msgs) - 1; i >= from; i-- {
		if msgs[i].kind() == kindCall {
			return i
		}
	}
	return -1
}
