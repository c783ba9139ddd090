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

func runCall(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("call", stderr)
	useWasm := fs.Bool("wasm", false, "run the embedded WebAssembly module on wazero instead of the native core (same bytes)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	req, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("ctxcompact: reading stdin: %w", err)
	}
	out, err := callerFor(*useWasm)(req)
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
