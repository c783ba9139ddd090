package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/tidwall/gjson"
)

func init() {
	commands["cache"] = command{
		summary: "add system_and_3 prompt-cache breakpoints: cache FILE [--native] [--ttl 1h]",
		run:     runCache,
	}
}

// runCache prints {"messages": [...], "marked": [indices]} (and "system" in the
// native layout) for the conversation in FILE ("-" for stdin).
func runCache(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cache", flag.ContinueOnError)
	fs.SetOutput(stderr)
	native := fs.Bool("native", false, "native Anthropic layout: tool results as tool_result blocks, a top-level \"system\" (default when the file says \"format\": \"anthropic-messages\")")
	ttl := fs.String("ttl", "5m", "marker TTL: 5m or 1h")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ctxcompact cache FILE [--native] [--ttl 1h]\n\nFILE holds {\"messages\": [...]} or a bare array (\"-\" reads stdin).")
		fs.PrintDefaults()
	}
	file, err := cacheParseArgs(fs, args)
	if err != nil {
		return err
	}
	conv, err := cacheReadConversation(file, stdin)
	if err != nil {
		return err
	}
	if conv.native {
		*native = true
	}
	req := cacheRequest(conv, *native, *ttl)
	res, err := cacheDispatch("cache.apply", req)
	if err != nil {
		return err
	}
	out := make([]byte, 0, len(res.Raw)+2)
	out = append(out, `{"messages":`...)
	out = append(out, res.Get("messages").Raw...)
	if s := res.Get("system"); s.Exists() {
		out = append(out, `,"system":`...)
		out = append(out, s.Raw...)
	}
	out = append(out, `,"marked":`...)
	out = append(out, res.Get("marked").Raw...)
	out = append(out, "}\n"...)
	_, err = stdout.Write(out)
	return err
}

// cacheParseArgs parses flags placed before or after the one FILE argument.
func cacheParseArgs(fs *flag.FlagSet, args []string) (string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		fs.Usage()
		return "", fmt.Errorf("ctxcompact %s: want exactly one FILE, got %d", fs.Name(), len(pos))
	}
	return pos[0], nil
}

// cacheConversation is a conversation file: its messages, the native top-level
// system if any, and whether the file declares the Anthropic format.
type cacheConversation struct {
	messages string
	system   string // raw JSON, "" when absent
	native   bool
}

// cacheReadConversation reads {"messages": [...], "system"?: ...} or a bare array.
func cacheReadConversation(file string, stdin io.Reader) (cacheConversation, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return cacheConversation{}, fmt.Errorf("ctxcompact: reading %s: %w", file, err)
	}
	if !gjson.ValidBytes(b) {
		return cacheConversation{}, fmt.Errorf("ctxcompact: %s is not valid JSON", file)
	}
	doc := gjson.ParseBytes(b)
	switch {
	case doc.IsArray():
		return cacheConversation{messages: doc.Raw}, nil
	case doc.IsObject() && doc.Get("messages").IsArray():
		c := cacheConversation{messages: doc.Get("messages").Raw, native: doc.Get("format").Str == "anthropic-messages"}
		if s := doc.Get("system"); s.Exists() && s.Type != gjson.Null {
			c.system = s.Raw
		}
		return c, nil
	}
	return cacheConversation{}, fmt.Errorf("ctxcompact: %s must hold {\"messages\": [...]} or an array of messages", file)
}

// cacheRequest builds the op parameters shared by cache and simulate.
func cacheRequest(c cacheConversation, native bool, ttl string) []byte {
	req := make([]byte, 0, len(c.messages)+len(c.system)+64)
	req = append(req, `{"ttl":`...)
	req = cacheAppendString(req, ttl)
	if native {
		req = append(req, `,"layout":"anthropic"`...)
		if c.system != "" {
			req = append(req, `,"system":`...)
			req = append(req, c.system...)
		}
	} else if c.system != "" {
		// Let the op report it: a top-level system is the native format.
		req = append(req, `,"layout":"openai","system":`...)
		req = append(req, c.system...)
	}
	req = append(req, `,"messages":`...)
	req = append(req, c.messages...)
	return append(req, '}')
}

func cacheAppendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

// cacheDispatch runs an op and returns its result, or its error as a Go error
// that names the code and the JSON pointer.
func cacheDispatch(op string, req []byte) (gjson.Result, error) {
	resp := gjson.ParseBytes(core.Dispatch(op, req))
	if e := resp.Get("error"); e.Exists() {
		msg := e.Get("message").Str
		if msg == "" {
			msg = "ctxcompact: " + op + " failed"
		}
		return gjson.Result{}, errors.New(msg + " [" + e.Get("code").Str + "]")
	}
	return resp.Get("result"), nil
}
