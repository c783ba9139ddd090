package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/ctxcompact/ctxcompact/core"
)

func init() {
	commands["call"] = command{
		summary: "read one request envelope {\"op\": ...} on stdin, print the response envelope",
		run:     runCall,
	}
}

func runCall(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	req, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("ctxcompact: reading stdin: %w", err)
	}
	_, err = stdout.Write(core.Call(req))
	return err
}
