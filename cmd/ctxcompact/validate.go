package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ctxcompact/ctxcompact/core"
)

func init() {
	commands["validate"] = command{
		summary: "list what a provider would reject in a conversation file: validate FILE [--format NAME] [--provider NAME] [--json]",
		run:     runValidate,
	}
}

// errProblems is validate's failure when the file has problems: they are printed, and
// the exit status says so.
type errProblems int

func (n errProblems) Error() string {
	return fmt.Sprintf("ctxcompact validate: %d problem(s) found", int(n))
}

// runValidate prints one line per problem of FILE's messages ("PATH: CODE: message"),
// or the validate op's result with --json, and fails when there is any.
func runValidate(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("validate", stderr,
		"usage: ctxcompact validate FILE [--format NAME] [--provider NAME] [--json]",
		"FILE holds {\"messages\": [...]}, {\"input\": [...]}, {\"contents\": [...]} or a bare array; - reads stdin.",
		"Prints each problem as PATH: CODE: message and exits 1 when there is any.")
	format := formatFlag(fs)
	provider := fs.String("provider", "", "the provider whose rules AI SDK messages are checked against: anthropic, openai or gemini (other formats: their own; docs/RULES.md)")
	asJSON := fs.Bool("json", false, "print the validate op's result as JSON")
	file, err := fileArg(fs, args)
	if err != nil {
		return err
	}
	conv, err := readConversation(file, stdin, *format)
	if err != nil {
		return err
	}
	params := []byte(`{"messages":` + conv.messages)
	if conv.format != "" {
		params = appendJSONString(append(params, `,"format":`...), conv.format)
	}
	if *provider != "" {
		params = appendJSONString(append(params, `,"provider":`...), *provider)
	}
	res, err := opResult(nativeCaller, "validate", append(params, '}'))
	if err != nil {
		return err
	}
	var v core.ValidateResult
	if err := json.Unmarshal([]byte(res.Raw), &v); err != nil {
		return fmt.Errorf("ctxcompact validate: %w", err)
	}
	if *asJSON {
		if _, err := fmt.Fprintln(stdout, res.Raw); err != nil {
			return err
		}
	} else {
		for _, p := range v.Problems {
			fmt.Fprintf(stdout, "%s: %s: %s\n", p.Path, p.Code, strings.TrimPrefix(p.Message, "ctxcompact: "))
		}
	}
	if len(v.Problems) > 0 {
		return errProblems(len(v.Problems))
	}
	fmt.Fprintf(stderr, "ctxcompact: %s: no problems\n", displayName(file))
	return nil
}
