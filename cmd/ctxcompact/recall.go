package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/recall"
	_ "github.com/ctxcompact/ctxcompact/recall/postgres" // postgres:// store URLs
)

func init() {
	commands["recall"] = command{
		summary: "look into a lossless engine's recall store, or move it: recall search|expand|sessions|export|import --store URL ...",
		run:     runRecall,
	}
}

const recallUsage = `usage: ctxcompact recall search --store URL --session ID QUERY... [--limit N] [--json]
       ctxcompact recall expand --store URL --session ID ID [--max-tokens N] [--json]
       ctxcompact recall sessions --store URL [--json]
       ctxcompact recall export --store URL [--session ID] > FILE.jsonl
       ctxcompact recall import --store URL FILE.jsonl (or - for stdin)
search finds the session's archived messages and summaries that contain every word of
QUERY ("quoted phrase" for one piece; paths match literally), newest first; expand
prints the original messages behind a range id (r2) or a message id (r2.17), byte for
byte; sessions lists the sessions in the store. --json prints what the agent's
context_search / context_expand tools answer. export writes a session (or all) as JSON
lines, import writes such lines into a store (again: nothing changes), so a store moves
from SQLite to PostgreSQL. URL: a SQLite file (a path or sqlite:PATH), or a PostgreSQL
store (postgres://USER@HOST/DB, or a key=value DSN); without --store, $CTXCOMPACT_RECALL_URL.`

// runRecall is `ctxcompact recall`: a person's view of a recall store (the SQLite
// file of docs/RECALL.md), the same answers the agent's tools give.
func runRecall(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	// One flag set for the three subcommands; its usage (the help) lists its flags.
	fs := commandFlags("recall "+sub, stderr, strings.Split(recallUsage, "\n")...)
	storeURL := fs.String("store", "", "the recall store: a SQLite file, sqlite:PATH, or postgres://... (default $CTXCOMPACT_RECALL_URL)")
	session := fs.String("session", "", "the session id (required for search and expand; export: only this session)")
	limit := fs.Int("limit", 10, "search: how many hits, 1 to 50")
	maxTokens := fs.Int("max-tokens", 0, "expand: cut the messages to about this many tokens (0: whole)")
	asJSON := fs.Bool("json", false, "print the tool's JSON answer")
	const want = "want search, expand, sessions, export or import"
	if sub == "" {
		fs.Usage()
		return errors.New("ctxcompact recall: " + want)
	}
	if !slices.Contains([]string{"search", "expand", "sessions", "export", "import"}, sub) {
		fs.Usage()
		return fmt.Errorf("ctxcompact recall: unknown subcommand %q; %s", sub, want)
	}
	pos, err := fileArgs(fs, args[1:])
	if err != nil {
		return err
	}
	url := *storeURL
	if url == "" {
		url = os.Getenv(recall.EnvURL)
	}
	if url == "" {
		return fmt.Errorf("ctxcompact recall: --store URL is required (or set %s)", recall.EnvURL)
	}
	if kind, path := recall.Kind(url); kind == "sqlite" && sub != "import" {
		// Reading a file that is not there would create an empty store.
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("ctxcompact recall: no store at %s: %w", path, err)
		}
	}
	ctx := context.Background()
	st, err := recall.OpenURL(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()
	switch sub {
	case "sessions":
		return recallSessions(ctx, st, pos, *asJSON, stdout)
	case "export":
		return recallExport(ctx, st, *session, pos, stdout, stderr)
	case "import":
		return recallImport(ctx, st, pos, stdin, stderr)
	}
	if *session == "" {
		return fmt.Errorf("ctxcompact recall %s: --session ID is required", sub)
	}
	if sub == "search" {
		if *limit < 1 || *limit > 50 {
			return fmt.Errorf("ctxcompact recall search: --limit must be from 1 to 50, got %d", *limit)
		}
		if len(pos) == 0 {
			return errors.New("ctxcompact recall search: want a QUERY")
		}
		res, err := recall.SearchResult(ctx, st, *session, strings.Join(pos, " "), *limit)
		if err != nil {
			return err
		}
		if *asJSON {
			_, err = fmt.Fprintln(stdout, res)
			return err
		}
		return printHits(res, stdout)
	}
	if len(pos) != 1 {
		return fmt.Errorf("ctxcompact recall expand: want exactly one ID, got %d", len(pos))
	}
	if *maxTokens < 0 {
		return fmt.Errorf("ctxcompact recall expand: --max-tokens must be at least 0, got %d", *maxTokens)
	}
	res, err := recall.ExpandResult(ctx, st, *session, pos[0], *maxTokens)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err = fmt.Fprintln(stdout, res)
		return err
	}
	return printExpanded(ctx, st, *session, pos[0], res, stdout)
}

func recallSessions(ctx context.Context, st recall.Backend, pos []string, asJSON bool, stdout io.Writer) error {
	if len(pos) != 0 {
		return fmt.Errorf("ctxcompact recall sessions: takes no arguments, got %q", pos)
	}
	sessions, err := st.Sessions(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		b := []byte{'['}
		for i, s := range sessions {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		_, err = fmt.Fprintln(stdout, string(append(b, ']')))
		return err
	}
	for _, s := range sessions {
		rs, err := st.Ranges(ctx, s)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\t%d ranges\n", s, len(rs))
	}
	return nil
}

// recallExport writes the store's sessions (or one) as JSON lines to stdout.
func recallExport(ctx context.Context, st recall.Backend, session string, pos []string, stdout, stderr io.Writer) error {
	if len(pos) != 0 {
		return fmt.Errorf("ctxcompact recall export: takes no arguments (--session ID for one session), got %q", pos)
	}
	var only []string
	if session != "" {
		only = []string{session}
	}
	ranges, rows, err := recall.Export(ctx, st, stdout, only...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d ranges, %d rows\n", ranges, rows)
	return nil
}

// recallImport reads an export (a file, or - for stdin) into the store.
func recallImport(ctx context.Context, st recall.Backend, pos []string, stdin io.Reader, stderr io.Writer) error {
	if len(pos) != 1 {
		return fmt.Errorf("ctxcompact recall import: want one FILE (or - for stdin), got %d", len(pos))
	}
	in := stdin
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return fmt.Errorf("ctxcompact recall import: %w", err)
		}
		defer f.Close()
		in = f
	}
	stats, err := recall.Import(ctx, st, in)
	fmt.Fprintf(stderr, "imported %d ranges, %d rows; %d ranges were there already\n", stats.Ranges, stats.Rows, stats.Present)
	return err
}

// printHits prints a search answer for a person: a line per hit, its snippet below.
func printHits(res string, w io.Writer) error {
	r := gjson.Parse(res)
	hits := r.Get("hits").Array()
	fmt.Fprintf(w, "%d of %d hits for %q (newest first)\n", len(hits), r.Get("total").Int(), r.Get("query").Str)
	for _, h := range hits {
		fmt.Fprintf(w, "%s\t%s\tmessage %d of range %s\n    %s\n", h.Get("id").Str, h.Get("role").Str,
			h.Get("position").Int(), h.Get("range").Str, h.Get("snippet").Str)
	}
	return nil
}

// printExpanded prints the messages of an expand answer for a person: a header per
// message, then its JSON as archived.
func printExpanded(ctx context.Context, st recall.Backend, session, id, res string, w io.Writer) error {
	r := gjson.Parse(res)
	if e := r.Get("error"); e.Exists() {
		return fmt.Errorf("ctxcompact recall expand: %s", e.Str)
	}
	rows, err := st.Expand(ctx, session, id)
	if err != nil {
		return err
	}
	for i, m := range r.Get("messages").Array() {
		label := id
		if i < len(rows) {
			label = fmt.Sprintf("%s (%s, %s, message %d)", rows[i].ID, rows[i].Role, rows[i].Reason, rows[i].Position)
		}
		fmt.Fprintf(w, "== %s\n%s\n", label, m.Raw)
	}
	if r.Get("truncated").Bool() {
		fmt.Fprintf(w, "(%s)\n", r.Get("note").Str)
	}
	return nil
}
