package core

import (
	"strconv"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
)

const (
	// PrunedPrefix starts every placeholder that replaces an old tool output.
	PrunedPrefix = "[Old tool output cleared to save context space]"
	// pruneMinChars: tool outputs up to this many characters are left alone.
	pruneMinChars = 200
	// keyArgMaxChars bounds the key argument quoted in placeholders and summaries.
	keyArgMaxChars = 120
)

// keyArgNames are the tool-call arguments that best say what a call did, in order of
// preference: a path, then a command, then a query.
var keyArgNames = []string{
	"path", "file_path", "filepath", "filename", "file", "notebook_path", "command", "cmd",
	"query", "pattern", "url", "uri", "id", "name", "directory", "dir",
}

// callIndex maps tool_call ids to the calls that made them (in the messages: the
// first call with an id wins).
type callIndex map[string]*toolCall

func indexCalls(msgs []message) callIndex {
	n := 0
	for i := range msgs {
		n += len(msgs[i].calls)
	}
	idx := make(callIndex, n) // sized once: growing a map costs most in wasm
	for i := range msgs {
		for k := range msgs[i].calls {
			c := &msgs[i].calls[k]
			if c.id != "" {
				if _, dup := idx[c.id]; !dup {
					idx[c.id] = c
				}
			}
		}
	}
	return idx
}

// appendKeyArgument appends `name="value"` for the most telling argument of a call,
// or nothing.
func appendKeyArgument(dst []byte, c toolCall) []byte {
	best := len(keyArgNames)
	var buf [8]stringArg
	args := c.appendStringArgs(buf[:0], nil)
	if len(args) == 0 {
		args = c.appendStringArgs(buf[:0], keyArgNames) // big arguments that could not be walked are searched
	}
	chosen := -1
	for k, a := range args {
		if rank := indexOf(keyArgNames, a.key); rank >= 0 && rank < best && !a.empty() {
			best, chosen = rank, k
		}
	}
	for k := 0; chosen < 0 && k < len(args); k++ { // else the first string argument
		if !args[k].empty() {
			chosen = k
		}
	}
	if chosen < 0 {
		return dst
	}
	a := args[chosen]
	dst = append(append(dst, a.key...), '=')
	return jsonraw.AppendGoQuote(dst, truncateRunes(a.valueHead(keyArgMaxChars), keyArgMaxChars))
}

// describeCall renders a call as name(key="value"), once per call: placeholders, the
// summary request and the extractive summary all name calls this way.
func describeCall(c *toolCall) string {
	if c.described == "" {
		name := c.name
		if name == "" {
			name = "tool"
		}
		b := make([]byte, 0, len(name)+2*keyArgMaxChars)
		b = appendKeyArgument(append(append(b, name...), '('), *c)
		c.described = jsonraw.ViewString(append(b, ')')) // b is not written again
	}
	return c.described
}

// truncateRunes cuts s to at most n runes, marking the cut with "…".
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n-1 {
			break
		}
		count++
	}
	return s[:i] + "…"
}

// splice returns s with part, a substring of s (the same memory), replaced by with.
func splice(s, part, with string) string {
	off := jsonraw.OffsetOf(s, part)
	return s[:off] + with + s[off+len(part):]
}

// setString is the JSON that sjson.Set writes for the string value s (the bytes
// pruned messages always had): s quoted as it is when it holds nothing to escape,
// else encoding/json's encoding, HTML characters escaped (jsonraw.GoJSONHTML).
func setString(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > 0x7f || c == '"' || c == '\\' {
			return string(jsonraw.GoJSONHTML.Append(nil, s))
		}
	}
	return `"` + s + `"`
}

// placeholder is the text that replaces a pruned output of the call id.
func placeholder(calls callIndex, id string, chars int) string {
	what := "a tool call"
	if c, ok := calls[id]; ok {
		what = describeCall(c)
	}
	return PrunedPrefix + " " + what + " returned " + formatCount(chars) +
		" characters here; call the tool again if you need the output."
}

// formatCount writes n with thousands separators: 12,345.
func formatCount(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// PruneResult is the result of the prune op.
type PruneResult struct {
	Pruned       []int `json:"pruned"`
	TokensBefore int   `json:"tokens_before"`
	TokensAfter  int   `json:"tokens_after"`
}

// opPrune prunes long tool outputs between the head and the token-budgeted tail,
// with no summary: the cheap first phase on its own.
func opPrune(req opRequest) ([]byte, error) {
	r, err := parseCompactParams(req.params, req.arrays["messages"])
	if err != nil {
		return nil, err
	}
	p := r.plan()
	calls := indexCalls(r.msgs)
	o := &compactOutcome{}
	res := PruneResult{Pruned: []int{}, TokensBefore: r.tokensBefore()}
	for i := range r.msgs {
		if chars, ok := r.format.prunable(&r.msgs[i]); ok && i >= p.headEnd && i < p.budgetStart {
			o.out = append(o.out, newMsg(r.format, i, r.format.pruned(&r.msgs[i], calls, chars)))
			o.archived = append(o.archived, archivedMsg{index: i, reason: ArchivedPruned, raw: r.msgs[i].raw})
			res.Pruned = append(res.Pruned, i)
			continue
		}
		o.out = append(o.out, keptMsg(r.msgs, i))
	}
	res.TokensAfter = tokensOfOutput(r.format, r.msgs, o.out, r.tc)
	return writeWithFields(o, r.refs, res)
}

// writeWithFields writes {"messages", "archived"} plus the fields of extra (a
// struct whose JSON is an object).
func writeWithFields(o *compactOutcome, refs bool, extra any) ([]byte, error) {
	fields, err := marshal(extra)
	if err != nil {
		return nil, err
	}
	b := append([]byte(`{"messages":`), writeMessages(nil, o.out, refs)...)
	b = append(b, `,"archived":`...)
	b = writeArchived(b, o.archived, refs)
	if len(fields) > 2 {
		b = append(b, ',')
		b = append(b, fields[1:]...)
	} else {
		b = append(b, '}')
	}
	return b, nil
}
