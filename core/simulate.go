package core

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// The cache-cost simulator (docs/DESIGN.md §9, "we go further"): replay a recorded
// conversation as the requests an agent made, place each strategy's markers on each
// request, model Anthropic's prompt cache and price the input tokens.
//
// The model of the cache, after Anthropic's prompt-caching documentation
// (docs.anthropic.com/en/docs/build-with-claude/prompt-caching):
//   - A request is a sequence of content blocks: the system prompt's, then each
//     message's (a string content is one text block, each part of a list one block,
//     each tool call one tool_use block, a tool row one tool_result block).
//   - A breakpoint after block b names the prefix of blocks [0, b). Its entry is
//     keyed by a hash of that exact prefix (content and message structure), so a
//     read needs a byte-identical prefix.
//   - Lookback: at each breakpoint the cache checks the prefix ending there and the
//     prefixes ending at up to ~20 earlier block boundaries ("the system
//     automatically checks for cache hits at all previous content block boundaries
//     (up to approximately 20 blocks before your explicit breakpoint)"), and uses
//     the longest one found. Only prefixes that an earlier request marked were
//     written, so only those can be found.
//   - Tokens up to the longest prefix found are read (0.1x); tokens from there to
//     the last breakpoint are written (1.25x for the 5-minute TTL, 2x for 1 hour);
//     tokens after the last breakpoint are plain input (1x). A read refreshes the
//     entry's lifetime; every breakpoint of the request leaves an entry.
//   - A breakpoint whose prefix is shorter than the model's minimum cacheable
//     length is ignored (see minCacheableTokens).
//   - Entries expire TTL after their last use when the messages carry timestamps;
//     without timestamps every turn is assumed to come within the TTL.
//
// Token counts come from the core's estimator (tokens.go), block by block.

// Prices in hundredths of the base input-token price, so totals are exact integers.
const (
	priceUncached100 = 100
	priceRead100     = 10
	priceWrite5m100  = 125
	priceWrite1h100  = 200
)

// cacheLookbackBlocks is how many block boundaries before a breakpoint the cache
// checks for an earlier entry ("approximately 20" in Anthropic's documentation).
const cacheLookbackBlocks = 20

// Strategy names a placement of prompt-cache breakpoints the simulator prices.
type Strategy string

// Simulation strategies, in output order.
const (
	// StrategyNone places no markers: every input token is paid in full.
	StrategyNone Strategy = "none"
	// StrategySystemAnd3 is cache.apply's placement: the system prompt and the last
	// three (four without a system prompt) messages that can carry a marker.
	StrategySystemAnd3 Strategy = "system_and_3"
	// StrategyAnchored marks the system prompt, the end of the previous request's
	// prompt (the last marker-carrying message before the newest assistant message),
	// the end of this prompt, and the end of the head the compactor keeps verbatim
	// (the first protect_first_n messages); without a system prompt the free slot
	// goes to the end of the request before the previous one. The previous
	// request's last breakpoint sits exactly where this one's anchor is, so the read
	// is exact however many blocks the newest turn added, where system_and_3's
	// rolling window relies on the ~20-block lookback once a turn adds more blocks
	// than that (many parallel tool calls).
	StrategyAnchored Strategy = "anchored"
)

// Strategies lists the simulator's strategies in output order.
func Strategies() []Strategy { return []Strategy{StrategyNone, StrategySystemAnd3, StrategyAnchored} }

// minCacheableTokens returns the minimum cacheable prompt length for a model name,
// per Anthropic's prompt-caching documentation ("Cache limitations"): 1024 tokens
// for Claude Opus 3/4/4.1 and Sonnet 3.7/4/4.5; 2048 for Claude Haiku 3 and 3.5 and
// Sonnet 4.6; 4096 for Claude Haiku 4.5 and Opus 4.5/4.6. Unknown or empty names
// get 1024, the documented minimum of the Sonnet/Opus families.
func minCacheableTokens(model string) int {
	m := strings.ToLower(model)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(m, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("haiku-4-5", "haiku-4.5", "opus-4-5", "opus-4.5", "opus-4-6", "opus-4.6"):
		return 4096
	case has("sonnet-4-6", "sonnet-4.6", "haiku"):
		return 2048
	}
	return 1024
}

// SimulateOptions configures SimulateCache. Zero values mean: layout and format
// detected from the messages, TTL "5m", every strategy, the minimum cacheable length
// of Model.
type SimulateOptions struct {
	Layout     string
	Format     Format
	TTL        string
	Strategies []Strategy
	Model      string
	// MinCacheableTokens overrides the model's minimum when HasMinCacheable is set.
	MinCacheableTokens int
	HasMinCacheable    bool
	// ProtectFirstN is the compactor's protected head (the anchored strategy marks
	// its end); 0 means 3.
	ProtectFirstN int
	// PerRequest adds each request's numbers to the result.
	PerRequest bool
	// Timestamps, when not nil, gives each message's time in milliseconds since the
	// Unix epoch (one per message; math.MinInt64 for unknown) instead of the
	// messages' own "timestamp" fields.
	Timestamps []int64
}

// SimulateResult is the outcome of SimulateCache.
type SimulateResult struct {
	Requests           int              `json:"requests"`
	TotalInputTokens   int              `json:"total_input_tokens"`
	Layout             string           `json:"layout"`
	TTL                string           `json:"ttl"`
	MinCacheableTokens int              `json:"min_cacheable_tokens"`
	LookbackBlocks     int              `json:"lookback_blocks"`
	Timed              bool             `json:"timed"`
	Strategies         []StrategyResult `json:"-"`
}

// StrategyResult totals one strategy over all requests. Cost is in base
// input-token units; Savings is the fraction of the no-caching cost saved.
type StrategyResult struct {
	Name             Strategy        `json:"-"`
	Cost             float64         `json:"cost"`
	Savings          float64         `json:"savings"`
	CacheReadTokens  int             `json:"cache_read_tokens"`
	CacheWriteTokens int             `json:"cache_write_tokens"`
	UncachedTokens   int             `json:"uncached_tokens"`
	Hits             int             `json:"hits"`
	Misses           int             `json:"misses"`
	Requests         []RequestResult `json:"requests,omitempty"`
}

// RequestResult is one request of a strategy. Message is the index of the assistant
// message the request produced (its prompt is every message before it). Status is
// "hit" (part of the prompt was read from the cache), "miss" (it had breakpoints
// but found nothing) or "none" (no breakpoint long enough to cache).
type RequestResult struct {
	Message          int     `json:"message"`
	PromptTokens     int     `json:"prompt_tokens"`
	CacheReadTokens  int     `json:"cache_read_tokens"`
	CacheWriteTokens int     `json:"cache_write_tokens"`
	UncachedTokens   int     `json:"uncached_tokens"`
	Cost             float64 `json:"cost"`
	Breakpoints      int     `json:"breakpoints"`
	Status           string  `json:"status"`
}

// simMsg is one message of the replayed conversation.
type simMsg struct {
	role       string
	isSystem   bool
	carrier    carrier
	firstBlock int // index of its first block
	carrierEnd int // breakpoint position (prefix length in blocks) of its marker, 0 if none
	hasTime    bool
	timeMS     int64
	startsTurn bool // a request is sent before it: it starts an assistant turn
}

type simConversation struct {
	msgs       []simMsg
	cache      []cacheMsg // the same messages as cache.apply sees them
	native     bool       // a top-level system is part of every request
	sysEnd     int        // breakpoint position of the native system's marker, 0 if none
	prefTokens []int
	prefHash   []uint64 // prefHash[b] identifies the prefix of blocks [0, b)
	timed      bool
}

// fnvString is the running FNV-1a of h over s (fnv.go).
func fnvString(h uint64, s string) uint64 { return uint64(fnv64a(h).string(s)) }

// simBuilder accumulates blocks with their tokens and running prefix hash.
type simBuilder struct {
	tc     tokenCounter
	h      uint64
	tokens []int
	hashes []uint64
	// pendingOverhead is added to the next block of the current message.
	pendingOverhead int
}

func (b *simBuilder) startMessage(role string) {
	b.h = fnvString(b.h, "\x00message\x00"+role+"\x00")
	b.pendingOverhead = messageOverheadTokens
}

func (b *simBuilder) block(text string, tokens int) {
	tokens += b.pendingOverhead
	b.pendingOverhead = 0
	if b.tc.scale != 1 && b.tc.scale > 0 {
		tokens = int(float64(tokens)*b.tc.scale + 0.5)
	}
	b.h = fnvString(fnvString(b.h, "\x00block\x00"), text)
	b.tokens = append(b.tokens, b.tokens[len(b.tokens)-1]+tokens)
	b.hashes = append(b.hashes, b.h)
}

func (b *simBuilder) pos() int { return len(b.tokens) - 1 }

// blockCounted adds a block of tokens already counted (and calibrated) by a
// format's reader: no overhead, no scaling.
func (b *simBuilder) blockCounted(text string, tokens int) {
	b.h = fnvString(fnvString(b.h, "\x00block\x00"), text)
	b.tokens = append(b.tokens, b.tokens[len(b.tokens)-1]+tokens)
	b.hashes = append(b.hashes, b.h)
}

// itemBlocks adds the blocks of one item of a format read by its own reader (the
// Responses items, the AI SDK's messages), whose tokens that reader counted: total,
// the same number tokens.count gives the item. The value that carries the item's
// markers (marked: a message's content, a function_call_output's output), when it is
// a list, is one block per part, the parts weighted by their estimate and the rest of
// the item (its envelope) on the first; any other item is one block. after[j] is the
// prefix length ending with part j; the item's blocks always add up to total.
func (b *simBuilder) itemBlocks(stripped string, marked gjson.Result, total int) (after []int) {
	if !marked.IsArray() || len(marked.Array()) == 0 {
		b.blockCounted(stripped, total)
		return []int{b.pos()}
	}
	parts := marked.Array()
	weights := make([]int, len(parts))
	sum := 0
	for j, p := range parts {
		weights[j] = b.tc.part(p)
		sum += weights[j]
	}
	cum, prev := 0, 0
	for j, p := range parts {
		cum += weights[j]
		end := total // the last part ends the item
		if j < len(parts)-1 {
			if sum <= total {
				end = total - sum + cum
			} else {
				end = total * cum / sum
			}
		}
		b.blockCounted(p.Raw, end-prev)
		prev = end
		after = append(after, b.pos())
	}
	return after
}

// contentBlocks adds the blocks of a content value and returns the block position
// after each part (for carriers): after[j] is the prefix length ending with part j.
func (b *simBuilder) contentBlocks(content gjson.Result) (after []int) {
	switch {
	case content.Type == gjson.String:
		if content.Str != "" {
			b.block(content.Raw, b.tc.text(content))
			after = append(after, b.pos())
		}
	case content.IsArray():
		content.ForEach(func(_, p gjson.Result) bool {
			b.block(stripPart(p), b.tc.part(p))
			after = append(after, b.pos())
			return true
		})
	}
	return after
}

// buildSimConversation reads messages (validated like every op) of format f, whose
// markers are marks, into blocks. The chat formats are read block by block (their
// counts are the chat rule's); the other formats by their own reader, item by item,
// so that every prompt costs what tokens.count gives for the same items.
func buildSimConversation(msgsV, sys gjson.Result, layout string, f Format, marks cacheMarks, tc tokenCounter, stamps []int64) (*simConversation, error) {
	cm, err := readCacheMessages(msgsV, layout, marks)
	if err != nil {
		return nil, err
	}
	var views []message // the format reader's, for the formats that are not chat
	sysTokens := 0
	if !isChatFormat(f) {
		mf := formatOf(f)
		if views, err = mf.read(msgsV, tc, nil); err != nil {
			return nil, err
		}
		if len(views) != len(cm) {
			return nil, errorf(CodeInternal, "/messages", "the %s reader read %d items, the cache reader %d", f, len(views), len(cm))
		}
		if sys.Exists() {
			if sysTokens, err = mf.checkSystem(sys, tc); err != nil {
				return nil, err
			}
		}
	}
	conv := &simConversation{msgs: make([]simMsg, len(cm)), cache: cm, native: sys.Exists()}
	b := &simBuilder{tc: tc, h: fnvOffset64, tokens: make([]int, 1, 4*len(cm)+1), hashes: make([]uint64, 1, 4*len(cm)+1)}
	b.hashes[0] = fnvOffset64
	if conv.native {
		b.startMessage("system")
		if views != nil {
			b.pendingOverhead = 0
			b.blockCounted(sys.Raw, sysTokens) // the format's system carries no marker
		} else {
			after := b.contentBlocks(sys)
			if c := marks.contentCarrier(sys, layout); c.kind == carryString || c.kind == carryPart {
				conv.sysEnd = after[c.part]
			}
		}
	}
	for i, m := range cm {
		sm := simMsg{role: m.role, isSystem: m.isSystem, carrier: m.carrier, startsTurn: m.role == "assistant"}
		sm.firstBlock = b.pos()
		b.startMessage(m.role)
		content := fieldOf(m.v, "content")
		switch {
		case views != nil:
			v := &views[i]
			sm.startsTurn = (v.role == "assistant" || v.opaque) && !v.continuesTurn
			b.pendingOverhead = 0
			after := b.itemBlocks(marks.strip(m.v), m.marked, v.tokens)
			switch m.carrier.kind {
			case carryString, carryTopLevel:
				sm.carrierEnd = after[len(after)-1]
			case carryPart:
				sm.carrierEnd = after[min(m.carrier.part, len(after)-1)]
			}
		case m.role == "tool":
			// One tool_result block, whatever its content's shape.
			b.block("tool_result\x00"+fieldOf(m.v, "tool_call_id").Raw+"\x00"+marks.stripContent(content), tc.content(content))
			if m.carrier.kind != carryNone {
				sm.carrierEnd = b.pos()
			}
		default:
			after := b.contentBlocks(content)
			if m.carrier.kind == carryString || m.carrier.kind == carryPart {
				sm.carrierEnd = after[m.carrier.part]
			}
			fieldOf(m.v, "tool_calls").ForEach(func(_, call gjson.Result) bool {
				fn := fieldOf(call, "function")
				b.block(call.Raw, toolCallOverheadTokens+tc.value(fieldOf(fn, "name"))+tc.value(fieldOf(fn, "arguments")))
				return true
			})
			if m.carrier.kind == carryTopLevel {
				sm.carrierEnd = b.pos()
			}
		}
		if stamps != nil {
			if t := stamps[i]; t != math.MinInt64 {
				sm.hasTime, sm.timeMS = true, t
			}
		} else if ts := fieldOf(m.v, "timestamp"); ts.Exists() && ts.Type != gjson.Null {
			t, ok := parseTimestamp(ts)
			if !ok {
				return nil, errorf(CodeInvalidMessages, pointer("/messages", i, "timestamp"), "timestamp must be an RFC 3339 date-time string or Unix seconds")
			}
			sm.hasTime, sm.timeMS = true, t
		}
		conv.timed = conv.timed || sm.hasTime
		conv.msgs[i] = sm
	}
	conv.prefTokens, conv.prefHash = b.tokens, b.hashes
	return conv, nil
}

// strategyFunc returns the breakpoint positions (prefix lengths in blocks) a
// strategy places on the request whose prompt is msgs[:k].
type strategyFunc func(conv *simConversation, k int) []int

func systemAnd3Positions(conv *simConversation, k int) []int {
	_, marked := placeSystemAnd3(conv.cache, k, conv.native, conv.sysEnd > 0)
	pos := make([]int, 0, MaxCacheBreakpoints)
	if conv.native && conv.sysEnd > 0 {
		pos = append(pos, conv.sysEnd)
	}
	for _, i := range marked {
		pos = append(pos, conv.msgs[i].carrierEnd)
	}
	return pos
}

// lastCarrierBefore returns the breakpoint position of the last non-system message
// before index k that can carry a marker, or 0.
func (conv *simConversation) lastCarrierBefore(k int) int {
	for i := k - 1; i >= 0; i-- {
		if m := &conv.msgs[i]; !m.isSystem && m.carrierEnd > 0 {
			return m.carrierEnd
		}
	}
	return 0
}

// lastTurnBefore returns the index of the last message before k that starts an
// assistant turn (the message the previous request produced), or -1.
func (conv *simConversation) lastTurnBefore(k int) int {
	for i := k - 1; i >= 0; i-- {
		if conv.msgs[i].startsTurn {
			return i
		}
	}
	return -1
}

func anchoredPositions(protectFirstN int) strategyFunc {
	return func(conv *simConversation, k int) []int {
		var cand [5]int
		n := 0
		add := func(p int) {
			if p > 0 {
				cand[n] = p
				n++
			}
		}
		if conv.native {
			add(conv.sysEnd)
		} else if k > 0 && conv.msgs[0].isSystem {
			add(conv.msgs[0].carrierEnd)
		}
		add(conv.lastCarrierBefore(k)) // this prompt's end
		prev := conv.lastTurnBefore(k)
		if prev >= 0 {
			add(conv.lastCarrierBefore(prev)) // the previous request's end
		}
		add(conv.lastCarrierBefore(min(protectFirstN, k))) // the protected head
		if prev >= 0 {
			if prev2 := conv.lastTurnBefore(prev); prev2 >= 0 {
				add(conv.lastCarrierBefore(prev2)) // the request before the previous one
			}
		}
		// Deduplicate, keeping priority order, at most four.
		pos := make([]int, 0, MaxCacheBreakpoints)
		for _, p := range cand[:n] {
			dup := false
			for _, q := range pos {
				dup = dup || q == p
			}
			if !dup && len(pos) < MaxCacheBreakpoints {
				pos = append(pos, p)
			}
		}
		return pos
	}
}

type cacheKey struct {
	hash uint64
	n    int
}

// simulateStrategy replays every request under one strategy.
func simulateStrategy(conv *simConversation, reqs []int, place strategyFunc, ttl string, minTokens int, perRequest bool) StrategyResult {
	var res StrategyResult
	write100 := priceWrite5m100
	ttlMS := int64(5 * 60 * 1000)
	if ttl == CacheTTL1h {
		write100, ttlMS = priceWrite1h100, 60*60*1000
	}
	cache := map[cacheKey]int64{} // entry -> time of last use (ms)
	alive := func(p int, now int64) bool {
		last, ok := cache[cacheKey{conv.prefHash[p], p}]
		return ok && (!conv.timed || now-last <= ttlMS)
	}
	var cost100 int64
	for _, k := range reqs {
		end := conv.msgs[k].firstBlock
		now := conv.requestTime(k)
		var bps []int
		if place != nil {
			for _, p := range place(conv, k) {
				if p <= end && conv.prefTokens[p] >= minTokens {
					bps = append(bps, p)
				}
			}
		}
		last, read := 0, 0
		for _, p := range bps {
			last = max(last, p)
			for q := p; q >= 1 && q >= p-cacheLookbackBlocks && q > read; q-- {
				if alive(q, now) {
					read = q
					break
				}
			}
		}
		readTok := conv.prefTokens[read]
		writeTok := 0
		if last > read {
			writeTok = conv.prefTokens[last] - conv.prefTokens[read]
		}
		uncached := conv.prefTokens[end] - conv.prefTokens[max(read, last)]
		if read > 0 {
			cache[cacheKey{conv.prefHash[read], read}] = now
		}
		for _, p := range bps {
			cache[cacheKey{conv.prefHash[p], p}] = now
		}
		c100 := int64(uncached)*priceUncached100 + int64(writeTok)*int64(write100) + int64(readTok)*priceRead100
		cost100 += c100
		res.CacheReadTokens += readTok
		res.CacheWriteTokens += writeTok
		res.UncachedTokens += uncached
		status := "none"
		switch {
		case read > 0:
			res.Hits++
			status = "hit"
		case len(bps) > 0:
			res.Misses++
			status = "miss"
		}
		if perRequest {
			res.Requests = append(res.Requests, RequestResult{
				Message: k, PromptTokens: conv.prefTokens[end], CacheReadTokens: readTok,
				CacheWriteTokens: writeTok, UncachedTokens: uncached, Cost: float64(c100) / 100,
				Breakpoints: len(bps), Status: status,
			})
		}
	}
	res.Cost = float64(cost100) / 100
	return res
}

// requestTime is when the request producing message k was sent: the newest known
// timestamp among its prompt messages, else message k's own, else the first one
// known. 0 when the conversation has no timestamps (then nothing expires).
func (conv *simConversation) requestTime(k int) int64 {
	if !conv.timed {
		return 0
	}
	for i := k - 1; i >= 0; i-- {
		if conv.msgs[i].hasTime {
			return conv.msgs[i].timeMS
		}
	}
	for i := k; i < len(conv.msgs); i++ {
		if conv.msgs[i].hasTime {
			return conv.msgs[i].timeMS
		}
	}
	return 0
}

// detectLayout: native Anthropic when a top-level system is given or a message holds
// tool_use / tool_result blocks; the OpenAI-style envelope otherwise.
func detectLayout(msgsV, sys gjson.Result) string {
	if sys.Exists() {
		return LayoutAnthropic
	}
	layout := LayoutOpenAI
	msgsV.ForEach(func(_, m gjson.Result) bool {
		c := fieldOf(m, "content")
		if c.IsArray() {
			c.ForEach(func(_, p gjson.Result) bool {
				if t := fieldOf(p, "type").Str; t == "tool_use" || t == "tool_result" {
					layout = LayoutAnthropic
				}
				return layout == LayoutOpenAI
			})
		}
		return layout == LayoutOpenAI
	})
	return layout
}

// SimulateCache replays messages (a JSON array; system is the native top-level
// system or nil) as the requests an agent made, one before each assistant message,
// and prices each strategy's cache use. See the model at the top of simulate.go.
func SimulateCache(messages, system []byte, opts SimulateOptions) (SimulateResult, error) {
	msgs, sys, err := parseConversation(messages, system)
	if err != nil {
		return SimulateResult{}, err
	}
	return simulateCache(msgs, sys, opts, roughCounter)
}

func simulateCache(msgsV, sys gjson.Result, opts SimulateOptions, tc tokenCounter) (SimulateResult, error) {
	marks, f, err := cacheMarksFor(msgsV, sys, opts.Format)
	layout := opts.Layout
	if layout == "" {
		layout = LayoutOpenAI
		if isChatFormat(f) {
			layout = detectLayout(msgsV, sys)
		}
	}
	if layout != LayoutOpenAI && layout != LayoutAnthropic {
		return SimulateResult{}, errorf(CodeInvalidRequest, "/layout", "layout must be %q or %q, got %q", LayoutOpenAI, LayoutAnthropic, layout)
	}
	if err != nil {
		return SimulateResult{}, err
	}
	if err := checkCacheSystem(f, sys, layout); err != nil {
		return SimulateResult{}, err
	}
	ttl := opts.TTL
	if ttl == "" {
		ttl = CacheTTL5m
	}
	if ttl != CacheTTL5m && ttl != CacheTTL1h {
		return SimulateResult{}, errorf(CodeInvalidRequest, "/ttl", "ttl must be %q or %q, got %q", CacheTTL5m, CacheTTL1h, ttl)
	}
	names := opts.Strategies
	if names == nil {
		names = Strategies()
	}
	for i, n := range names {
		if !slices.Contains(Strategies(), n) {
			return SimulateResult{}, errorf(CodeInvalidRequest, pointer("/strategies", i), "unknown strategy %q; known: %s", n, joinNames(Strategies()))
		}
	}
	minTokens := minCacheableTokens(opts.Model)
	if opts.HasMinCacheable {
		minTokens = opts.MinCacheableTokens
	}
	protect := opts.ProtectFirstN
	if protect <= 0 {
		protect = 3
	}
	if opts.Timestamps != nil && msgsV.IsArray() && len(opts.Timestamps) != len(msgsV.Array()) {
		return SimulateResult{}, errorf(CodeInvalidRequest, "/timestamps", "timestamps must have one entry per message (%d), got %d", len(msgsV.Array()), len(opts.Timestamps))
	}
	conv, err := buildSimConversation(msgsV, sys, layout, f, marks, tc, opts.Timestamps)
	if err != nil {
		return SimulateResult{}, err
	}

	var reqs []int
	total := 0
	for k, m := range conv.msgs {
		if m.startsTurn && m.firstBlock > 0 {
			reqs = append(reqs, k)
			total += conv.prefTokens[m.firstBlock]
		}
	}
	res := SimulateResult{
		Requests: len(reqs), TotalInputTokens: total, Layout: layout, TTL: ttl,
		MinCacheableTokens: minTokens, LookbackBlocks: cacheLookbackBlocks, Timed: conv.timed,
	}
	for _, name := range Strategies() { // canonical order, whatever order was asked
		if !slices.Contains(names, name) {
			continue
		}
		var place strategyFunc
		switch name {
		case StrategySystemAnd3:
			place = systemAnd3Positions
		case StrategyAnchored:
			place = anchoredPositions(protect)
		}
		sr := simulateStrategy(conv, reqs, place, ttl, minTokens, opts.PerRequest)
		sr.Name = name
		if total > 0 {
			sr.Savings = math.Round((1-sr.Cost/float64(total))*1e6) / 1e6
		}
		res.Strategies = append(res.Strategies, sr)
	}
	return res, nil
}

// MarshalJSON writes the result with "strategies" as an object keyed by strategy
// name, in the canonical strategy order.
func (r SimulateResult) MarshalJSON() ([]byte, error) {
	type plain SimulateResult
	head, err := marshal(plain(r))
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(head)+256*len(r.Strategies))
	out = append(out, `{"strategies":{`...)
	for i, s := range r.Strategies {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, string(s.Name))
		out = append(out, ':')
		b, err := marshal(s)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	out = append(out, "},"...)
	return append(out, head[1:]...), nil
}

func opCacheSimulate(req opRequest) ([]byte, error) {
	cfg, err := parseConfig(req.Field("config"), "/config")
	if err != nil {
		return nil, err
	}
	tc, err := newModelCounter(cfg.Tokens.Encoding, cfg.Model.Name, cfg.Tokens.Calibration, "/config/tokens/encoding")
	if err != nil {
		return nil, err
	}
	tc.images = imageRuleForProvider(cfg.Model.Provider)
	opts := SimulateOptions{Model: cfg.Model.Name, ProtectFirstN: cfg.Compression.ProtectFirstN}
	if opts.TTL, err = cacheTTLParam(req.Fields(), cfg); err != nil {
		return nil, err
	}
	if opts.Layout, _, err = optString(req.Fields(), "layout"); err != nil {
		return nil, err
	}
	if s, ok, err := optString(req.Fields(), "model"); err != nil {
		return nil, err
	} else if ok {
		opts.Model = s
	}
	if opts.Format, err = readFormatParam(req.Field("format")); err != nil {
		return nil, err
	}
	if v := req.Field("strategies"); v.Exists() && v.Type != gjson.Null {
		if !v.IsArray() {
			return nil, errorf(CodeInvalidRequest, "/strategies", "strategies must be an array of strategy names")
		}
		opts.Strategies = []Strategy{}
		for i, s := range v.Array() {
			if s.Type != gjson.String {
				return nil, errorf(CodeInvalidRequest, pointer("/strategies", i), "a strategy name must be a string")
			}
			opts.Strategies = append(opts.Strategies, Strategy(s.Str))
		}
	}
	if v := req.Field("min_cacheable_tokens"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num != math.Trunc(v.Num) || v.Num < 0 || v.Num > 1e9 {
			return nil, errorf(CodeInvalidRequest, "/min_cacheable_tokens", "min_cacheable_tokens must be a non-negative integer, got %s", v.Raw)
		}
		opts.MinCacheableTokens, opts.HasMinCacheable = int(v.Num), true
	}
	if v := req.Field("per_request"); v.Exists() && v.Type != gjson.Null {
		if !v.IsBool() {
			return nil, errorf(CodeInvalidRequest, "/per_request", "per_request must be true or false")
		}
		opts.PerRequest = v.Bool()
	}
	if v := req.Field("timestamps"); v.Exists() && v.Type != gjson.Null {
		if !v.IsArray() {
			return nil, errorf(CodeInvalidRequest, "/timestamps", "timestamps must be an array with one time per message")
		}
		opts.Timestamps = []int64{}
		for i, t := range v.Array() {
			if t.Type == gjson.Null {
				opts.Timestamps = append(opts.Timestamps, math.MinInt64)
				continue
			}
			ms, ok := parseTimestamp(t)
			if !ok {
				return nil, errorf(CodeInvalidRequest, pointer("/timestamps", i), "a timestamp must be an RFC 3339 date-time string, Unix seconds, or null")
			}
			opts.Timestamps = append(opts.Timestamps, ms)
		}
	}
	sys := req.Field("system")
	if sys.Type == gjson.Null {
		sys = gjson.Result{}
	}
	res, err := simulateCache(req.Field("messages"), sys, opts, tc)
	if err != nil {
		return nil, err
	}
	return res.MarshalJSON()
}

// parseTimestamp reads a time as milliseconds since the Unix epoch: a number of
// seconds (values above 1e11 are taken as milliseconds), or an RFC 3339 date-time
// such as "2026-02-12T10:11:12.345Z" or "2026-02-12 10:11:12+01:00" (no zone
// means UTC). The core has no clock and no time package, so it parses by hand.
func parseTimestamp(v gjson.Result) (int64, bool) {
	if v.Type == gjson.Number {
		if math.IsNaN(v.Num) || math.IsInf(v.Num, 0) || math.Abs(v.Num) > 1e15 {
			return 0, false
		}
		if math.Abs(v.Num) > 1e11 {
			return int64(math.Round(v.Num)), true
		}
		return int64(math.Round(v.Num * 1000)), true
	}
	if v.Type != gjson.String {
		return 0, false
	}
	s := v.Str
	num := func(from, n int) (int64, bool) {
		if from+n > len(s) {
			return 0, false
		}
		var x int64
		for i := from; i < from+n; i++ {
			if s[i] < '0' || s[i] > '9' {
				return 0, false
			}
			x = x*10 + int64(s[i]-'0')
		}
		return x, true
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 2)
	d, ok3 := num(8, 2)
	h, ok4 := num(11, 2)
	mi, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || s[4] != '-' || s[7] != '-' ||
		(s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':' ||
		mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 {
		return 0, false
	}
	i := 19
	var frac int64
	if i < len(s) && s[i] == '.' {
		i++
		digits := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if digits < 3 {
				frac = frac*10 + int64(s[i]-'0')
			}
			digits++
			i++
		}
		if digits == 0 {
			return 0, false
		}
		for ; digits < 3; digits++ {
			frac *= 10
		}
	}
	var offset int64
	switch {
	case i == len(s):
	case s[i] == 'Z' || s[i] == 'z':
		i++
	case s[i] == '+' || s[i] == '-':
		oh, ok1 := num(i+1, 2)
		j := i + 3
		if j < len(s) && s[j] == ':' {
			j++
		}
		om, ok2 := num(j, 2)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, false
		}
		offset = (oh*60 + om) * 60
		if s[i] == '-' {
			offset = -offset
		}
		i = j + 2
	default:
		return 0, false
	}
	if i != len(s) {
		return 0, false
	}
	secs := daysFromCivil(y, mo, d)*86400 + h*3600 + mi*60 + sec - offset
	return secs*1000 + frac, true
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian date
// (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
