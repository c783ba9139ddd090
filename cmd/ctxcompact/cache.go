package main

import (
	"io"
)

func init() {
	commands["cache"] = command{
		summary: "add system_and_3 prompt-cache breakpoints: cache FILE [--format NAME] [--native] [--ttl 1h]",
		run:     runCache,
	}
}

// runCache prints {"messages": [...], "marked": [indices]} (and "system" in the
// native layout) for the conversation in FILE ("-" for stdin).
func runCache(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("cache", stderr,
		"usage: ctxcompact cache FILE [--format NAME] [--native] [--ttl 1h]\n\nFILE holds {\"messages\": [...]}, {\"input\": [...]} or a bare array (\"-\" reads stdin).")
	native := fs.Bool("native", false, "native Anthropic layout: tool results as tool_result blocks, a top-level \"system\" (default when the file has a top-level \"system\" or says \"format\": \"anthropic-messages\")")
	ttl := fs.String("ttl", "5m", "marker TTL: 5m or 1h")
	format := formatFlag(fs)
	file, err := fileArg(fs, args)
	if err != nil {
		return err
	}
	conv, err := readConversation(file, stdin, *format)
	if err != nil {
		return err
	}
	if conv.native() || conv.system != "" && chatFormat(conv.format) { // a top-level system is the native layout, as compact reads it
		*native = true
	}
	req := cacheRequest(conv, *native, *ttl)
	res, err := opResult(nativeCaller, "cache.apply", req)
	if err != nil {
		return err
	}
	out := make([]byte, 0, len(res.Raw)+2)
	out = append(append(append(out, `{"`...), conv.listKey...), `":`...)
	out = append(out, res.Get("messages").Raw...)
	if s := res.Get("system"); s.Exists() {
		out = append(append(append(out, `,"`...), conv.systemKey...), `":`...)
		out = append(out, s.Raw...)
	}
	out = append(out, `,"marked":`...)
	out = append(out, res.Get("marked").Raw...)
	out = append(out, "}\n"...)
	_, err = stdout.Write(out)
	return err
}

// cacheRequest builds the op parameters shared by cache and simulate.
func cacheRequest(c conversation, native bool, ttl string) []byte {
	req := make([]byte, 0, len(c.messages)+len(c.system)+64)
	req = append(req, `{"ttl":`...)
	req = appendJSONString(req, ttl)
	if c.format != "" {
		req = appendJSONString(append(req, `,"format":`...), c.format)
	}
	if native {
		req = append(req, `,"layout":"anthropic"`...)
		if c.system != "" {
			req = append(req, `,"system":`...)
			req = append(req, c.system...)
		}
	} else if c.system != "" {
		// The op detects the layout (cache.simulate) or says a top-level system
		// needs the native one; it is never dropped.
		req = append(req, `,"system":`...)
		req = append(req, c.system...)
	}
	req = append(req, `,"messages":`...)
	req = append(req, c.messages...)
	return append(req, '}')
}
