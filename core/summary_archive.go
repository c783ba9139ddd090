package core

import (
	"strconv"
	"strings"
)

// What the summary of a lossless compaction says (docs/RECALL.md "What the summary
// says"): with compact.begin's archive_id, the summary message ends with two lines
// that name the archived range and what of it the summary leaves out, so the agent
// knows what context_expand and context_search can fetch.

// recallDetailsChars bounds the list of the "Expand for details about" line.
const recallDetailsChars = 400

// recallRequestChars is how much of a user request the line quotes.
const recallRequestChars = 80

// RecallDetailsPrefix starts the second closing line.
const RecallDetailsPrefix = "Expand for details about: "

// archiveIDParam reads compact.begin's and compact.finish's optional archive_id.
func archiveIDParam(req params) (string, error) {
	v := req.Get("archive_id")
	if !v.Exists() || v.Type == 0 { // absent or null
		return "", nil
	}
	if v.Str == "" || !IsRangeID(v.Str) {
		return "", errorf(CodeInvalidRequest, "/archive_id", "archive_id must be a range id r<k> (r1, r2, ...)")
	}
	return v.Str, nil
}

// recallClosing is the two lines a summary of the range p summarizes ends with when
// it is archived as id: where the originals are, and the anchors of the range
// (file paths of tool calls, tool calls with their key argument, user requests,
// the last error; in that order, each once) that the summary does not mention,
// within about 400 characters.
func recallClosing(msgs []message, p plan, summary, id string) string {
	from, to := p.headEnd, p.tailStart
	line1 := "Archived as " + id + " (messages " + strconv.Itoa(from) + "-" + strconv.Itoa(to-1) +
		" of the conversation before this compaction): call context_expand with {\"id\": \"" + id +
		"\"} for the originals, or context_search to find something in them."
	var files, tools, requests []string
	lastError := ""
	seen := map[string]bool{}
	add := func(list *[]string, item string) {
		if item != "" && !seen[item] {
			seen[item] = true
			*list = append(*list, item)
		}
	}
	flat := collapseSpace(summary)
	for i := from; i < to && i < len(msgs); i++ {
		m := &msgs[i]
		switch {
		case m.isRealUser():
			req := truncateRunesPlain(collapseSpace(m.text()), recallRequestChars)
			if req != "" && !strings.Contains(flat, req) {
				add(&requests, "the request \""+req+"\"")
			}
		case m.isToolResult():
			if lines := errorLines(m); len(lines) > 0 {
				lastError = lines[len(lines)-1]
			}
		}
		for k := range m.calls {
			c := &m.calls[k]
			paths := callPaths(*c, false)
			for _, path := range paths {
				if v := strings.TrimSpace(path); v != "" && len(v) <= 300 && !containsPath(summary, v) {
					add(&files, v)
				}
			}
			if len(paths) > 0 {
				continue // a call on a file is listed by its path
			}
			mentioned := c.name != "" && strings.Contains(summary, c.name)
			if args := c.stringArgs(nil); len(args) > 0 {
				mentioned = false
				for _, a := range args {
					if v := collapseSpace(a.value()); v != "" && strings.Contains(flat, v) {
						mentioned = true
					}
				}
			}
			if !mentioned {
				add(&tools, describeCall(c))
			}
		}
	}
	items := append(append(files, tools...), requests...)
	if e := truncateRunesPlain(collapseSpace(lastError), recallRequestChars); e != "" && !strings.Contains(flat, e) {
		items = append(items, "the error \""+e+"\"")
	}
	var b strings.Builder
	kept := 0
	for _, it := range items {
		if b.Len() > 0 && b.Len()+2+len(it) > recallDetailsChars {
			continue // a shorter one may still fit
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(it)
		kept++
	}
	if kept < len(items) {
		b.WriteString(", ...")
	}
	if kept == 0 {
		b.WriteString("nothing the summary leaves out; context_search finds any detail of the range")
	}
	return line1 + "\n" + RecallDetailsPrefix + b.String()
}
