package core

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Prompt caching (docs/DESIGN.md §9): Anthropic cache_control breakpoints in the
// "system_and_3" layout, and the policy that decides when to use them.

// Layouts a request can be sent in.
const (
	// LayoutOpenAI is the OpenAI-style chat envelope sent to OpenRouter, which
	// converts it to Anthropic's format: markers go on content parts only.
	LayoutOpenAI = "openai"
	// LayoutAnthropic is the native Anthropic Messages format: system outside the
	// list, tool results as tool_result blocks inside user messages.
	LayoutAnthropic = "anthropic"
)

// Cache TTLs Anthropic offers.
const (
	CacheTTL5m = "5m"
	CacheTTL1h = "1h"
)

// MaxCacheBreakpoints is Anthropic's limit of cache_control markers per request.
const MaxCacheBreakpoints = 4

// CacheOptions chooses the layout ("openai" when empty: where the request is sent),
// the TTL ("5m" when empty) and the messages' format ("" detected: Anthropic when a
// top-level system is given or a message holds tool_use/tool_result blocks) of
// ApplyCache.
type CacheOptions struct {
	Layout string
	TTL    string
	Format Format
}

// CacheResult is what ApplyCache did. Messages (and System when one was given) are
// JSON; Marked lists the indices of the messages that carry a marker; Markers counts
// every marker, the system prompt's included.
type CacheResult struct {
	Messages     []byte
	System       []byte
	Marked       []int
	SystemMarked bool
	Markers      int
}

// ApplyCache strips every cache_control marker from messages (a JSON array) and
// from system (Anthropic's top-level system, a string or a list of blocks; nil when
// absent), then places at most four: on the system prompt, then on the last
// non-system messages that can carry one (three when the system prompt took a
// slot, four otherwise). A message that cannot carry a marker (empty content, an
// assistant turn that is only tool calls) does not use up a slot. Applying it to
// its own output gives the same bytes. The input is never modified.
func ApplyCache(messages, system []byte, opts CacheOptions) (CacheResult, error) {
	msgs, sys, err := parseConversation(messages, system)
	if err != nil {
		return CacheResult{}, err
	}
	return applyCache(msgs, sys, opts)
}

// parseConversation checks and parses the messages array and the optional native
// top-level system (nil when absent) that the cache functions take as bytes.
func parseConversation(messages, system []byte) (msgs, sys gjson.Result, err error) {
	if !gjson.ValidBytes(messages) {
		return msgs, sys, errorf(CodeInvalidJSON, "/messages", "messages is not valid JSON")
	}
	if system != nil {
		if !gjson.ValidBytes(system) {
			return msgs, sys, errorf(CodeInvalidJSON, "/system", "system is not valid JSON")
		}
		sys = gjson.ParseBytes(system)
	}
	return gjson.ParseBytes(messages), sys, nil
}

// cacheMarks is the part of a message format that places and removes prompt-cache
// breakpoints; the placement policy (placeSystemAnd3, the simulator's strategies)
// is the same for every format. layout says where the request is sent (native
// Anthropic or an OpenAI-style envelope), which changes what may carry a marker.
type cacheMarks interface {
	// carrier decides where a message with this role and content can carry one.
	carrier(role string, content gjson.Result, layout string) carrier
	// contentCarrier is carrier for a content value alone (a top-level system).
	contentCarrier(content gjson.Result, layout string) carrier
	// strip returns the message with every marker removed (its own bytes when it
	// has none); stripContent is strip for a content value.
	strip(m gjson.Result) string
	stripContent(content gjson.Result) string
	// mark returns the message with the marker on its carrier c; markContent is
	// mark for a content value.
	mark(m gjson.Result, c carrier, marker string) string
	markContent(content gjson.Result, c carrier, marker string) string
}

// blockMarks is cacheMarks for the chat formats: Anthropic's cache_control on
// content parts and blocks (on a tool row itself in the native layout).
type blockMarks struct{}

func (blockMarks) carrier(role string, content gjson.Result, layout string) carrier {
	return findCarrier(role, content, layout)
}
func (blockMarks) contentCarrier(content gjson.Result, layout string) carrier {
	return contentCarrier(content, layout)
}
func (blockMarks) strip(m gjson.Result) string              { return stripMessage(m) }
func (blockMarks) stripContent(content gjson.Result) string { return stripContent(content) }
func (blockMarks) mark(m gjson.Result, c carrier, marker string) string {
	return markMessage(m, c, marker)
}
func (blockMarks) markContent(content gjson.Result, c carrier, marker string) string {
	return markContent(content, c, marker)
}

// carrierKind says where a message can take a cache_control marker.
type carrierKind uint8

const (
	carryNone     carrierKind = iota // cannot carry one
	carryString                      // string content, turned into one text part with the marker
	carryPart                        // on the content part at carrier.part
	carryTopLevel                    // on the message itself (a tool row in the native layout)
)

type carrier struct {
	kind carrierKind
	part int
}

// cacheMsg is what marker placement needs to know about one message.
type cacheMsg struct {
	v        gjson.Result // the message as given
	role     string
	marked   gjson.Result // the value its marker goes on: its content, or a format's own
	carrier  carrier
	isSystem bool // the system prompt (index 0) or a later system/developer message
}

// findCarrier decides where a message with this role and content can carry a
// marker in the layout. Rules (docs/DESIGN.md §9):
//   - a non-empty string becomes one text part carrying it;
//   - a list carries it on its last part that can: in the OpenAI envelope only a
//     non-empty text part (OpenRouter reads markers from text parts), natively any
//     block except thinking/redacted_thinking and empty text (Anthropic rejects
//     markers there);
//   - empty string, null, a missing or empty list cannot carry one;
//   - a tool row (role "tool") in the native layout carries it at the top level:
//     the host's converter moves it onto the tool_result block it becomes. In the
//     OpenAI envelope a tool row follows the content rules (a part marker, never a
//     top-level key).
func findCarrier(role string, content gjson.Result, layout string) carrier {
	if role == "tool" && layout == LayoutAnthropic {
		return carrier{kind: carryTopLevel}
	}
	return contentCarrier(content, layout)
}

func contentCarrier(content gjson.Result, layout string) carrier {
	return lastPartCarrier(content, carryString, func(p gjson.Result) bool { return partCanCarry(p, layout) })
}

// lastPartCarrier is where a content value can carry a marker, by the rule every
// format shares: a non-empty string as str, a list on its last part canCarry takes,
// anything else nowhere. (The formats differ in str and canCarry.)
func lastPartCarrier(content gjson.Result, str carrierKind, canCarry func(gjson.Result) bool) carrier {
	switch {
	case content.Type == gjson.String:
		if content.Str != "" {
			return carrier{kind: str}
		}
	case content.IsArray():
		parts := content.Array()
		for i := len(parts) - 1; i >= 0; i-- {
			if canCarry(parts[i]) {
				return carrier{kind: carryPart, part: i}
			}
		}
	}
	return carrier{}
}

func partCanCarry(p gjson.Result, layout string) bool {
	if !p.IsObject() {
		return false
	}
	t := fieldOf(p, "type").Str
	if t == "text" {
		txt := fieldOf(p, "text")
		return txt.Type == gjson.String && txt.Str != ""
	}
	if layout == LayoutOpenAI {
		return false
	}
	return t != "" && t != "thinking" && t != "redacted_thinking"
}

// cacheMarker returns the marker JSON for a TTL.
func cacheMarker(ttl string) string {
	if ttl == CacheTTL1h {
		return `{"type":"ephemeral","ttl":"1h"}`
	}
	return `{"type":"ephemeral"}`
}

// readCacheMessages validates the messages array and reads each message's role and
// carrier. System prompt = message 0 with role system or developer, unless hasSystem
// (a native top-level system) takes that slot.
func readCacheMessages(v gjson.Result, layout string, cm cacheMarks) ([]cacheMsg, error) {
	if !v.Exists() {
		return nil, errorf(CodeInvalidMessages, "/messages", "messages is required: an array of chat messages")
	}
	if !v.IsArray() {
		return nil, errorf(CodeInvalidMessages, "/messages", "messages must be an array of chat messages")
	}
	var msgs []cacheMsg
	var err error
	v.ForEach(func(_, mv gjson.Result) bool {
		i := len(msgs)
		var m message
		var content gjson.Result
		if ci, ok := cm.(cacheItems); ok {
			m, content, err = ci.item(mv, pointer("/messages", i))
		} else {
			m, err = parseMessage(mv, pointer("/messages", i))
			content = fieldOf(mv, "content")
		}
		if err != nil {
			return false
		}
		msgs = append(msgs, cacheMsg{
			v:        mv,
			role:     m.role,
			marked:   content,
			carrier:  cm.carrier(m.role, content, layout),
			isSystem: m.isSystem(),
		})
		return true
	})
	return msgs, err
}

// cacheItems is implemented by the cache markers of a format whose items are not the
// chat envelope: item reads one item's view and the value its markers go on.
type cacheItems interface {
	item(mv gjson.Result, path string) (message, gjson.Result, error)
}

// placeSystemAnd3 chooses the breakpoints of the system_and_3 layout among
// msgs[:n]: the system prompt when it can carry one (sysCarries: the native
// top-level system; otherwise message 0 when it is a system message), then the last
// messages that can carry one, skipping system messages, until four are used. It
// returns whether the system prompt is marked and the marked message indices in
// ascending order.
func placeSystemAnd3(msgs []cacheMsg, n int, nativeSystem bool, sysCarries bool) (bool, []int) {
	used := 0
	sysMarked := false
	marked := make([]int, 0, MaxCacheBreakpoints)
	if nativeSystem {
		if sysCarries {
			sysMarked, used = true, 1
		}
	} else if n > 0 && msgs[0].isSystem && msgs[0].carrier.kind != carryNone {
		marked = append(marked, 0)
		used = 1
	}
	first := len(marked)
	for i := n - 1; i >= 0 && used < MaxCacheBreakpoints; i-- {
		if msgs[i].isSystem || msgs[i].carrier.kind == carryNone {
			continue
		}
		marked = append(marked, i)
		used++
	}
	// The rolling window was collected newest first; put it in ascending order.
	for a, b := first, len(marked)-1; a < b; a, b = a+1, b-1 {
		marked[a], marked[b] = marked[b], marked[a]
	}
	return sysMarked, marked
}

func applyCache(msgsV, sys gjson.Result, opts CacheOptions) (CacheResult, error) {
	layout, ttl := opts.Layout, opts.TTL
	if layout == "" {
		layout = LayoutOpenAI
	}
	if ttl == "" {
		ttl = CacheTTL5m
	}
	if layout != LayoutOpenAI && layout != LayoutAnthropic {
		return CacheResult{}, errorf(CodeInvalidRequest, "/layout", "layout must be %q or %q, got %q", LayoutOpenAI, LayoutAnthropic, layout)
	}
	if ttl != CacheTTL5m && ttl != CacheTTL1h {
		return CacheResult{}, errorf(CodeInvalidRequest, "/ttl", "ttl must be %q or %q, got %q", CacheTTL5m, CacheTTL1h, ttl)
	}
	cm, f, err := cacheMarksFor(msgsV, sys, opts.Format)
	if err != nil {
		return CacheResult{}, err
	}
	native := sys.Exists()
	if err := checkCacheSystem(f, sys, layout); err != nil {
		return CacheResult{}, err
	}
	msgs, err := readCacheMessages(msgsV, layout, cm)
	if err != nil {
		return CacheResult{}, err
	}

	marker := cacheMarker(ttl)
	sysCarries := native && cm.contentCarrier(sys, layout).kind != carryNone
	sysMarked, marked := placeSystemAnd3(msgs, len(msgs), native, sysCarries)

	res := CacheResult{Marked: marked, SystemMarked: sysMarked, Markers: len(marked)}
	if sysMarked {
		res.Markers++
	}
	if native {
		s := cm.stripContent(sys)
		if sysMarked {
			s = cm.markContent(gjson.Parse(s), cm.contentCarrier(gjson.Parse(s), layout), marker)
		}
		res.System = []byte(s)
	}

	size := len(msgsV.Raw) + len(marked)*64 + 2
	out := make([]byte, 0, size)
	out = append(out, '[')
	next := 0
	for i, m := range msgs {
		if i > 0 {
			out = append(out, ',')
		}
		raw := cm.strip(m.v)
		if next < len(marked) && marked[next] == i {
			next++
			raw = cm.mark(gjson.Parse(raw), m.carrier, marker)
		}
		out = append(out, raw...)
	}
	res.Messages = append(out, ']')
	return res, nil
}

// rebuildObject writes obj compactly, key by key in input order, with each value's
// raw JSON as given, except that edit may replace a value (return it, true) or drop
// the key (return "", false). Of duplicate keys only the last is written (and
// edited): it is the one every reader reads. extra is appended as further members
// (",k:v" pairs without the leading comma are joined by the caller).
func rebuildObject(obj gjson.Result, edit func(key string, v gjson.Result) (string, bool), extra string) string {
	var b strings.Builder
	b.Grow(len(obj.Raw) + len(extra) + 2)
	b.WriteByte('{')
	var keys []string
	obj.ForEach(func(k, _ gjson.Result) bool {
		keys = append(keys, k.Str)
		return true
	})
	n, at := 0, -1
	obj.ForEach(func(k, v gjson.Result) bool {
		at++
		if slices.Contains(keys[at+1:], k.Str) {
			return true // a later duplicate wins
		}
		raw, keep := v.Raw, true
		if edit != nil {
			raw, keep = edit(k.Str, v)
		}
		if !keep {
			return true
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k.Raw)
		b.WriteByte(':')
		b.WriteString(raw)
		n++
		return true
	})
	if extra != "" {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(extra)
	}
	b.WriteByte('}')
	return b.String()
}

// hasMarker is the fast path of stripping: a value that does not contain the key's
// text cannot contain a marker.
func hasMarker(raw string) bool { return strings.Contains(raw, `"cache_control"`) }

// stripMessage returns the message with every cache_control marker removed: at the
// top level, on content parts, and on the parts nested in tool_result blocks. A
// message without markers is returned as its original bytes.
func stripMessage(m gjson.Result) string {
	if !hasMarker(m.Raw) || !m.IsObject() {
		return m.Raw
	}
	return rebuildObject(m, func(key string, v gjson.Result) (string, bool) {
		switch key {
		case "cache_control":
			return "", false
		case "content":
			return stripContent(v), true
		}
		return v.Raw, true
	}, "")
}

// stripContent removes markers from a content value (string, null or list).
func stripContent(c gjson.Result) string {
	if !hasMarker(c.Raw) || !c.IsArray() {
		return c.Raw
	}
	var b strings.Builder
	b.Grow(len(c.Raw))
	b.WriteByte('[')
	i := 0
	c.ForEach(func(_, p gjson.Result) bool {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(stripPart(p))
		i++
		return true
	})
	b.WriteByte(']')
	return b.String()
}

func stripPart(p gjson.Result) string {
	if !hasMarker(p.Raw) || !p.IsObject() {
		return p.Raw
	}
	isResult := fieldOf(p, "type").Str == "tool_result"
	return rebuildObject(p, func(key string, v gjson.Result) (string, bool) {
		switch {
		case key == "cache_control":
			return "", false
		case key == "content" && isResult:
			return stripContent(v), true
		}
		return v.Raw, true
	}, "")
}

// markMessage puts the marker on a stripped message at its carrier.
func markMessage(m gjson.Result, c carrier, marker string) string {
	if c.kind == carryTopLevel {
		return rebuildObject(m, nil, `"cache_control":`+marker)
	}
	return rebuildObject(m, func(key string, v gjson.Result) (string, bool) {
		if key == "content" {
			return markContent(v, c, marker), true
		}
		return v.Raw, true
	}, "")
}

// markContent puts the marker on a stripped content value at its carrier: a string
// becomes [{"type":"text","text":<the same string>,"cache_control":marker}]; in a list
// the carrier part gets the marker as its last key.
func markContent(content gjson.Result, c carrier, marker string) string {
	switch c.kind {
	case carryString:
		return `[{"type":"text","text":` + content.Raw + `,"cache_control":` + marker + `}]`
	case carryPart:
		var b strings.Builder
		b.Grow(len(content.Raw) + len(marker) + 20)
		b.WriteByte('[')
		i := 0
		content.ForEach(func(_, p gjson.Result) bool {
			if i > 0 {
				b.WriteByte(',')
			}
			if i == c.part {
				b.WriteString(rebuildObject(p, nil, `"cache_control":`+marker))
			} else {
				b.WriteString(p.Raw)
			}
			i++
			return true
		})
		b.WriteByte(']')
		return b.String()
	}
	return content.Raw
}

// cacheTTLParam reads the TTL: the "ttl" param, else config.prompt_caching.cache_ttl.
func cacheTTLParam(req params, cfg Config) (string, error) {
	v := req.Get("ttl")
	if !v.Exists() || v.Type == gjson.Null {
		return cfg.PromptCaching.CacheTTL, nil
	}
	if v.Type != gjson.String || (v.Str != CacheTTL5m && v.Str != CacheTTL1h) {
		return "", errorf(CodeInvalidRequest, "/ttl", "ttl must be %q or %q, got %s", CacheTTL5m, CacheTTL1h, v.Raw)
	}
	return v.Str, nil
}

// optString reads an optional string param.
func optString(req params, key string) (string, bool, error) {
	v := req.Get(key)
	if !v.Exists() || v.Type == gjson.Null {
		return "", false, nil
	}
	if v.Type != gjson.String {
		return "", false, errorf(CodeInvalidRequest, "/"+key, "%s must be a string", key)
	}
	return v.Str, true, nil
}

// cacheConfigTTL reads the config and the TTL (the ttl param, else the config's)
// that both cache.apply and cache.policy start from.
func cacheConfigTTL(req params) (Config, string, error) {
	cfg, err := parseConfig(req.Get("config"), "/config")
	if err != nil {
		return cfg, "", err
	}
	ttl, err := cacheTTLParam(req, cfg)
	return cfg, ttl, err
}

func opCacheApply(req opRequest) ([]byte, error) {
	_, ttl, err := cacheConfigTTL(req.Fields())
	if err != nil {
		return nil, err
	}
	layout, _, err := optString(req.Fields(), "layout")
	if err != nil {
		return nil, err
	}
	sys := req.Field("system")
	if sys.Type == gjson.Null {
		sys = gjson.Result{}
	}
	format, err := readFormatParam(req.Field("format"))
	if err != nil {
		return nil, err
	}
	res, err := applyCache(req.Field("messages"), sys, CacheOptions{Layout: layout, TTL: ttl, Format: format})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(res.Messages)+len(res.System)+96)
	out = append(out, `{"messages":`...)
	out = append(out, res.Messages...)
	if res.System != nil {
		out = append(out, `,"system":`...)
		out = append(out, res.System...)
	}
	out = append(out, `,"marked":[`...)
	for i, idx := range res.Marked {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(idx), 10)
	}
	out = append(out, `],"system_marked":`...)
	out = strconv.AppendBool(out, res.SystemMarked)
	out = append(out, `,"markers":`...)
	out = strconv.AppendInt(out, int64(res.Markers), 10)
	out = append(out, `,"ttl":"`...)
	out = append(out, ttl...)
	return append(out, `"}`...), nil
}

// CachePolicy is the decision whether to place cache markers for a model.
type CachePolicy struct {
	Enabled bool   `json:"enabled"`
	TTL     string `json:"ttl"`
	// Layout is "anthropic" (native API) or "openai" (OpenRouter's envelope); "" when disabled.
	Layout string `json:"layout"`
	Reason string `json:"reason"`
	// Status is the one line a host shows, e.g.
	// "Prompt caching: ENABLED (Claude via OpenRouter, 5m TTL)".
	Status string `json:"status"`
}

// ResolveCachePolicy decides whether prompt caching applies: Claude models (the name
// contains "claude", any case) on the native Anthropic API (provider "anthropic",
// native layout) or on OpenRouter (provider "openrouter", OpenAI-style envelope).
// Other providers do not take Anthropic's cache_control markers.
func ResolveCachePolicy(model, provider, ttl string) CachePolicy {
	if ttl == "" {
		ttl = CacheTTL5m
	}
	p := CachePolicy{TTL: ttl}
	prov := strings.ToLower(strings.TrimSpace(provider))
	claude := strings.Contains(strings.ToLower(model), "claude")
	switch {
	case model == "":
		p.Reason = "no model name given"
	case !claude:
		p.Reason = "model " + strconv.Quote(model) + " is not a Claude model"
	case prov == "":
		p.Reason = "no provider given; Claude caching needs provider anthropic or openrouter"
	case prov == "anthropic":
		p.Enabled, p.Layout, p.Reason = true, LayoutAnthropic, "Claude via native Anthropic API"
	case prov == "openrouter":
		p.Enabled, p.Layout, p.Reason = true, LayoutOpenAI, "Claude via OpenRouter"
	default:
		p.Reason = "provider " + strconv.Quote(provider) + " does not take Anthropic cache_control markers"
	}
	if p.Enabled {
		p.Status = "Prompt caching: ENABLED (" + p.Reason + ", " + ttl + " TTL)"
	} else {
		p.Status = "Prompt caching: DISABLED (" + p.Reason + ")"
	}
	return p
}

func opCachePolicy(req opRequest) ([]byte, error) {
	cfg, ttl, err := cacheConfigTTL(req.Fields())
	if err != nil {
		return nil, err
	}
	model, provider := cfg.Model.Name, cfg.Model.Provider
	if s, ok, err := optString(req.Fields(), "model"); err != nil {
		return nil, err
	} else if ok {
		model = s
	}
	if s, ok, err := optString(req.Fields(), "provider"); err != nil {
		return nil, err
	} else if ok {
		provider = s
	}
	return marshal(ResolveCachePolicy(model, provider, ttl))
}

// cacheMarksFor returns the cache markers of the messages' format and the format:
// f, or detected from msgsV and sys when f is "". A format without breakpoints is
// refused, whatever else the request holds (its system prompt included), so the
// error names what is wrong.
func cacheMarksFor(msgsV, sys gjson.Result, f Format) (cacheMarks, Format, error) {
	if f == "" {
		f = sniffFormat(msgsV, nil) // a format without breakpoints is refused, not marked as chat
	}
	if f == "" {
		f = FormatOpenAI
		if detectLayout(msgsV, sys) == LayoutAnthropic {
			f = FormatAnthropic
		} else if hasAISDKParts(msgsV) {
			f = FormatAISDK
		}
	} else if _, ok := ParseFormat(string(f)); !ok {
		return nil, "", errorf(CodeInvalidRequest, "/format", "format must be one of %s", formatNames())
	}
	cm := formatOf(f).cacheMarks()
	if cm == nil {
		return nil, "", errorf(CodeInvalidRequest, "/format", "format %q has no prompt-cache breakpoints", f)
	}
	return cm, f, nil
}

// isChatFormat reports whether f is one of the chat formats, whose top-level system
// is Anthropic's native one.
func isChatFormat(f Format) bool { return f == FormatOpenAI || f == FormatAnthropic }

// checkCacheSystem checks the top-level system prompt sys (absent: nothing to check)
// of a cache op on messages of format f sent in layout. In the chat formats it is
// Anthropic's native system, which only the native layout has; in a format whose
// system prompt lives outside its list (Responses' instructions) it is checked as the
// format's own, whatever the layout; a format without one (the AI SDK) refuses it.
func checkCacheSystem(f Format, sys gjson.Result, layout string) error {
	if !sys.Exists() {
		return nil
	}
	if isChatFormat(f) {
		if layout != LayoutAnthropic {
			return errorf(CodeInvalidRequest, "/system", "a top-level system is Anthropic's native format: use layout %q", LayoutAnthropic)
		}
		if sys.Type != gjson.String && !sys.IsArray() {
			return errorf(CodeInvalidRequest, "/system", "system must be a string or a list of content blocks")
		}
		return nil
	}
	mf := formatOf(f)
	if !mf.topLevelSystem() {
		return errorf(CodeInvalidRequest, "/system", "format %q has no top-level system prompt: put it in the list", f)
	}
	_, err := mf.checkSystem(sys, roughCounter)
	return err
}
