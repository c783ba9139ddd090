// Command ctxcompact inspects, compacts and caches LLM agent conversations with the
// ctxcompact core. Its subcommands (call, compact, ...) are a stable interface.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/ctxcompact/ctxcompact/core"
)

// command is one subcommand. Each lives in its own file and registers itself in init.
type command struct {
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ctxcompact: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(args[1:], stdin, stdout, stderr); err != nil {
		var ce *core.Error
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "%s [%s]\n", ce.Message, ce.Code) // the code is what scripts match on
		} else {
			fmt.Fprintln(stderr, err)
		}
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ctxcompact <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}
