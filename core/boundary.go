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
}

// planCompaction places the head and tail boundaries (docs/DESIGN.md §8 phases 1 and 2).
// No boundary splits a tool group: head ends after the results of its last call,
// the tail starts at an assistant, never at a tool result.
//
// fixed is the size of what is sent besides the messages (an Anthropic top-level
// system prompt), counted with the head; f says which messages hold prunable output.
func planCompaction(f messageFormat, msgs []message, thr ThresholdResult, cc CompressionConfig, fixed int) plan {
	n := len(msgs)
	p := plan{thr: thr, activeRequest: -1}

	p.headEnd = min(cc.ProtectFirstN, n)
	for p.headEnd < n && msgs[p.headEnd].isToolResult() {
		p.headEnd++
	}
	alignBack := func(i int) int {
		for i > p.headEnd && i < n && msgs[i].isToolResult() {
			i--
		}
		return i
	}

	// Token-budgeted tail: walk back from the end while the budget lasts.
	p.budgetStart = n
	for acc := 0; p.budgetStart > p.headEnd; p.budgetStart-- {
		acc += msgs[p.budgetStart-1].tokens
		if acc > thr.TailTokenBudget {
			break
		}
	}
	p.budgetStart = alignBack(p.budgetStart)
	// The newest tool group, when it answers the newest request, is the agent's
	// current step: its outputs stay whole when
	// the group fits the anchor slack (a budget the small-window rule shrank would
	// otherwise prune the output the agent is reading).
	newestUser := -1
	for i := n - 1; i >= p.headEnd; i-- {
		if msgs[i].isRealUser() {
			newestUser = i
			break
		}
	}
	slack := int(float64(anchorBudget(thr, cc)) * activeRequestSlack)
	if g := newestToolGroup(msgs, p.headEnd); g > newestUser && g < p.budgetStart {
		size := 0
		for i := g; i < n; i++ {
			size += msgs[i].tokens
		}
		if size <= slack/3 {
			p.budgetStart = g
		}
	}
	countStart := alignBack(max(p.headEnd, n-cc.ProtectLastN))
	p.tailStart = min(p.budgetStart, countStart)

	// Sizes as kept: messages in [tailStart, budgetStart) are kept pruned. Pruned
	// sizes are estimated here and the placeholders written once the tail is final.
	// pruneChars[i-headEnd] is the length of message i's prunable output, 0 if it
	// has none, for messages before budgetStart.
	pruneChars := make([]int, p.budgetStart-p.headEnd)
	kept := make([]int, n+1) // kept[i] = tokens of messages [i, n) as kept
	for i := n - 1; i >= p.headEnd; i-- {
		t := msgs[i].tokens
		if i < p.budgetStart {
			if chars, ok := f.prunable(&msgs[i]); ok {
				pruneChars[i-p.headEnd], t = chars, prunedTokensEstimate
			}
		}
		kept[i] = kept[i+1] + t
	}

	// The user anchor: real user messages the tail must keep (head ones count).
	users := 0
	for i := range msgs {
		if (i < p.headEnd || i >= p.tailStart) && msgs[i].isRealUser() {
			users++
		}
	}
	for i := p.tailStart - 1; i >= p.headEnd && users < cc.MinTailUserMessages; i-- {
		if !msgs[i].isRealUser() {
			continue
		}
		if kept[i] > slack {
			break
		}
		p.tailStart, users = i, users+1
	}
	// The newest real user message is never lost, whatever the floors (protect_last_n
	// 0, min_tail_user_messages 0, or a head user that satisfied the count): it stays
	// in the tail when that keeps the tail within the slack, else the summary carries
	// it as the active request.
	if newestUser >= 0 && newestUser < p.tailStart {
		if kept[newestUser] <= slack {
			p.tailStart = newestUser
		} else {
			p.activeRequest = newestUser
		}
	}
	// The tail never starts after the newest tool group when that group answers the
	// newest request (it is the agent's current step): fitting shrinks the tail down
	// to it, and its outputs are kept pruned when they are outside the budget.
	shrinkTo := p.budgetStart
	if g := newestToolGroup(msgs, p.headEnd); g > newestUser && g < shrinkTo {
		shrinkTo = g
	}

	// Fitting wins over counts: shrink the tail toward the budgeted tail, one group
	// at a time, while head + summary + tail would exceed the threshold.
	pre := make([]int, n+1) // pre[i] = tokens of messages [0, i) as given
	for i := range msgs {
		pre[i+1] = pre[i] + msgs[i].tokens
	}
	head := fixed + pre[p.headEnd]
	estimate := func() int {
		middle := pre[p.tailStart] - pre[p.headEnd]
		p.summaryTarget = 0
		if p.tailStart > p.headEnd {
			p.summaryTarget = summaryTargetTokens(middle, thr.MaxSummaryTokens)
		}
		return head + p.summaryTarget + kept[p.tailStart] + systemNoteTokens
	}
	p.estimate = estimate()
	// Under pressure (the result would leave less than the configured tail budget
	// free under the threshold) the head's tool outputs are pruned like the
	// middle's, an intended departure from docs/DESIGN.md §8, whose head is kept whole: a
	// first tool group of 20K tokens would otherwise leave every compaction at the
	// threshold, and the next turn would compact again.
	var headPruned []int
	p.roomMargin = anchorBudget(thr, cc)
	if p.estimate > thr.ThresholdTokens-p.roomMargin {
		for i := 0; i < p.headEnd; i++ {
			if _, ok := f.prunable(&msgs[i]); ok && msgs[i].tokens > prunedTokensEstimate {
				headPruned = append(headPruned, i)
				head -= msgs[i].tokens - prunedTokensEstimate
			}
		}
		p.estimate = estimate()
	}
	for p.estimate > thr.ThresholdTokens && p.tailStart < shrinkTo {
		next := p.tailStart + 1
		for next < shrinkTo && msgs[next].isToolResult() {
			next++
		}
		if p.tailStart <= newestUser && newestUser < next {
			p.activeRequest = newestUser
		}
		p.tailStart = next
		p.estimate = estimate()
	}
	if p.tailStart <= p.headEnd {
		p.activeRequest = -1 // nothing is summarized: the message stays where it is
	}
	p.calls = indexCalls(msgs)
	p.pruned.from = p.tailStart
	if len(headPruned) > 0 {
		p.pruned.from = headPruned[0]
		for _, i := range headPruned {
			chars, _ := f.prunable(&msgs[i])
			p.pruned.add(i, chars)
		}
	}
	for i := p.tailStart; i < p.budgetStart; i++ {
		if chars := pruneChars[i-p.headEnd]; chars > 0 {
			p.pruned.add(i, chars)
		}
	}
	return p
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
		if msgs[i].role == "assistant" && len(msgs[i].calls) > 0 {
			return i
		}
	}
	return -1
}
