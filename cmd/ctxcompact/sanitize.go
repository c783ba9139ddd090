package main

import (
	"fmt"
	"io"
)

func init() {
	commands["sanitize"] = command{
		summary: "repair a conversation file's tool-call/result pairs: sanitize FILE [--format NAME] [--wasm [--no-cache]]",
		run:     runSanitize,
	}
}

// runSanitize prints FILE's messages with their tool pairs repaired by the sanitize
// op (orphan results removed, calls without a result given a stub, Anthropic turns'
// orphan tool_result blocks taken out), as {"<list key>": [...], "<system key>"?:
// (as given), "removed", "stubbed", "repaired", "archived"}, and on stderr the
// format and what was repaired. It changes nothing else, and exits 0 whether or
// not anything needed repair.
func runSanitize(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("sanitize", stderr,
		"usage: ctxcompact sanitize FILE [--format NAME] [--wasm [--no-cache]]",
		"FILE holds {\"messages\": [...], \"system\"?}, {\"input\": [...], \"instructions\"?}, {\"contents\": [...], \"systemInstruction\"?} or a bare array; - reads stdin.",
		"Prints {\"messages\" (or the file's list key), \"system\"?, \"removed\", \"stubbed\", \"repaired\", \"archived\"}: the messages",
		"with orphan tool results removed and calls without a result given a stub, as compaction repairs them.")
	format := formatFlag(fs)
	useWasm := fs.Bool("wasm", false, "run the embedded WebAssembly module on wazero instead of the native core (same output)")
	noCache := fs.Bool("no-cache", false, "with --wasm, compile the module without the on-disk compilation cache")
	file, err := fileArg(fs, args)
	if err != nil {
		return err
	}
	conv, err := readConversation(file, stdin, *format)
	if err != nil {
		return err
	}
	params := []byte(`{"messages":` + conv.messages)
	if f := resolvedFormat(conv); f != "" { // a top-level system makes the chat formats Anthropic's
		params = appendJSONString(append(params, `,"format":`...), f)
	}
	res, err := opResult(callerFor(*useWasm, !*noCache, stderr), "sanitize", append(params, '}'))
	if err != nil {
		return err
	}
	out := make([]byte, 0, len(res.Raw)+len(conv.system)+64)
	out = append(append(append(out, `{"`...), conv.listKey...), `":`...)
	out = append(out, res.Get("messages").Raw...)
	if conv.system != "" {
		out = append(append(append(out, `,"`...), conv.systemKey...), `":`...)
		out = append(out, conv.system...)
	}
	for _, k := range []string{"removed", "stubbed", "repaired", "archived"} {
		out = append(append(append(out, `,"`...), k...), `":`...)
		out = append(out, res.Get(k).Raw...)
	}
	out = append(out, "}\n"...)
	if _, err := stdout.Write(out); err != nil {
		return err
	}
	if note := formatNote(conv); note != "" {
		fmt.Fprintf(stderr, "ctxcompact: %s\n", note)
	}
	if len(res.Get("removed").Array())+len(res.Get("stubbed").Array())+len(res.Get("repaired").Array()) == 0 {
		fmt.Fprintf(stderr, "ctxcompact: %s: every tool call has its result; nothing to repair\n", displayName(file))
		return nil
	}
	writeRepairs(stderr, res.Get("removed"), res.Get("stubbed"), res.Get("repaired"))
	return nil
}
