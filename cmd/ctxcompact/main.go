// Command ctxcompact inspects, compacts and caches LLM agent conversations with the
// ctxcompact core. Its subcommands (call, compact, ...) are a stable interface.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

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

// run is the CLI: exit 0 on success and for help and version, 1 when a command
// fails, 2 for a usage error (no or an unknown command).
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		if _, ok := commands[args[1]]; !ok {
			fmt.Fprintf(stderr, "ctxcompact: unknown command %q\n\n", args[1])
			usage(stderr)
			return 2
		}
		commandHelp(args[1], stdout)
		return 0
	case "-version", "--version", "version":
		fmt.Fprintf(stdout, "ctxcompact %s\n", core.Version)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ctxcompact: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if wantsHelp(args[1:]) {
		commandHelp(args[0], stdout)
		return 0
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

// wantsHelp tells whether a command's arguments ask for its help (-h, -help or
// --help before any "--"); the command then prints its usage and does nothing else.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandHelp prints command name's usage and flags to w: what its flag set prints
// for -h, which parses no further and runs nothing.
func commandHelp(name string, w io.Writer) {
	_ = commands[name].run([]string{"-h"}, strings.NewReader(""), io.Discard, w)
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
	fmt.Fprintln(w, "\nctxcompact help <command> (or <command> --help) prints a command's flags; ctxcompact --version its version.")
}
