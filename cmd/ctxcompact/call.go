package main

import (
	"fmt"
	"io"
)

func init() {
	commands["call"] = command{
		summary: "read one request envelope {\"op\": ...} on stdin, print the response envelope [--wasm]",
		run:     runCall,
	}
}

// runCall prints core.Call's response to the envelope on stdin, byte for byte, and
// exits 0 also for an error envelope. When stdin is not valid JSON the response is
// the core's invalid_json envelope, and stderr says where the JSON breaks.
func runCall(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("call", stderr,
		"usage: ctxcompact call [--wasm [--no-cache]] < request.json",
		"Reads one request envelope {\"op\": ..., ...params} on stdin and prints the response envelope.")
	useWasm := fs.Bool("wasm", false, "run the embedded WebAssembly module on wazero instead of the native core (same bytes)")
	noCache := fs.Bool("no-cache", false, "with --wasm, compile the module without the on-disk compilation cache")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("ctxcompact call: no arguments expected (the envelope comes on stdin), got %q", fs.Args())
	}
	req, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("ctxcompact: reading stdin: %w", err)
	}
	if e := checkJSON("stdin", req); e != nil {
		fmt.Fprintf(stderr, "%s [%s]\n", e.Message, e.Code)
	}
	out, err := callerFor(*useWasm, !*noCache, stderr)(req)
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
