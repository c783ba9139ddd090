package recall

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/ctxcompact/ctxcompact/core"
)

// ExportFormat is the first line's "ctxcompact_recall" value of an export.
const ExportFormat = 1

// exportHeader is an export's first line.
type exportHeader struct {
	Format        int    `json:"ctxcompact_recall"`
	SchemaVersion string `json:"schema_version"`
}

// exportedRange is one line of an export after the header: a range with every row
// of it, as archived. A row's json is the original message, byte for byte once the
// line is decoded.
type exportedRange struct {
	Session string           `json:"session"`
	Range   exportedRangeRow `json:"range"`
	Rows    []core.RecallRow `json:"rows"`
}

type exportedRangeRow struct {
	ID        string `json:"id"`
	Seq       int    `json:"seq"`
	FromIndex int    `json:"from_index"`
	ToIndex   int    `json:"to_index"`
	Summary   string `json:"summary"`
}

// Export writes sessions of b (all of them when none is named) to w as JSON lines
// (docs/RECALL.md "Moving between stores"): a header line, then one line per range,
// sessions in byte order and each session's ranges in order. It returns how many
// ranges and rows it wrote.
func Export(ctx context.Context, b Backend, w io.Writer, sessions ...string) (ranges, rows int, err error) {
	if len(sessions) == 0 {
		if sessions, err = b.Sessions(ctx); err != nil {
			return 0, 0, err
		}
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(exportHeader{Format: ExportFormat, SchemaVersion: SchemaVersion}); err != nil {
		return 0, 0, err
	}
	for _, session := range sessions {
		rs, err := b.Ranges(ctx, session)
		if err != nil {
			return ranges, rows, err
		}
		for _, r := range rs {
			rws, err := b.RangeRows(ctx, session, r.ID)
			if err != nil {
				return ranges, rows, err
			}
			for _, row := range rws {
				// encoding/json would write U+FFFD for bytes that are not UTF-8: the
				// original would not come back byte for byte.
				if !utf8.ValidString(row.JSON) || !utf8.ValidString(row.Text) {
					return ranges, rows, fmt.Errorf("ctxcompact: exporting session %q: row %s is not valid UTF-8 and cannot be exported byte for byte", session, row.ID)
				}
			}
			line := exportedRange{Session: session, Range: exportedRangeRow{ID: r.ID, Seq: r.Seq, FromIndex: r.FromIndex, ToIndex: r.ToIndex, Summary: r.Summary}, Rows: rws}
			if err := enc.Encode(line); err != nil {
				return ranges, rows, err
			}
			ranges++
			rows += len(rws)
		}
	}
	return ranges, rows, bw.Flush()
}

// ImportStats is what Import did.
type ImportStats struct {
	// Ranges and Rows were written; Present ranges were in the store already, the
	// same (an import is idempotent).
	Ranges, Rows, Present int
}

// MaxExportLine bounds one line of an export (one range with its rows).
const MaxExportLine = 1 << 30

// Import reads an export (Export's lines) from r into b. A range the session has
// already, with the same rows, is left as it is (Present); one that differs is an
// error (invalid_state), as is a range that is not the session's next. Each range is
// archived in its own transaction, so an import that fails part way keeps the ranges
// before the failing line, and running it again goes on from there.
func Import(ctx context.Context, b Backend, r io.Reader) (ImportStats, error) {
	var st ImportStats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), MaxExportLine)
	line := 0
	bad := func(format string, args ...any) error {
		return &core.Error{Code: core.CodeInvalidRequest, Path: fmt.Sprintf("/lines/%d", line), Message: fmt.Sprintf("ctxcompact: import line %d: ", line+1) + fmt.Sprintf(format, args...)}
	}
	for ; sc.Scan(); line++ {
		if line == 0 {
			var h exportHeader
			if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Format == 0 {
				return st, bad("not a ctxcompact recall export (its first line is {\"ctxcompact_recall\": %d, ...})", ExportFormat)
			}
			if h.Format != ExportFormat || h.SchemaVersion != SchemaVersion {
				return st, bad("an export of format %d, schema version %q; this ctxcompact reads format %d, schema version %s", h.Format, h.SchemaVersion, ExportFormat, SchemaVersion)
			}
			continue
		}
		var e exportedRange
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return st, bad("%v", err)
		}
		if e.Session == "" || !core.IsRangeID(e.Range.ID) {
			return st, bad("want a session and a range id r<k>, got session %q, range %q", e.Session, e.Range.ID)
		}
		have, err := b.Ranges(ctx, e.Session)
		if err != nil {
			return st, err
		}
		if i := indexOfRange(have, e.Range.ID); i >= 0 {
			if err := sameRange(ctx, b, e, have[i]); err != nil {
				return st, &core.Error{Code: core.CodeInvalidState, Path: fmt.Sprintf("/lines/%d", line), Message: fmt.Sprintf("ctxcompact: import line %d: session %q already has a range %s, and %v: nothing of this line is written", line+1, e.Session, e.Range.ID, err)}
			}
			st.Present++
			continue
		}
		a := core.RecallArchive{Range: core.RecallRange{ID: e.Range.ID, FromIndex: e.Range.FromIndex, ToIndex: e.Range.ToIndex, Summary: e.Range.Summary}, Rows: e.Rows}
		if err := b.Archive(ctx, e.Session, func(yield func(core.RecallArchive, error) bool) { yield(a, nil) }); err != nil {
			return st, fmt.Errorf("ctxcompact: import line %d (session %q, range %s): %w", line+1, e.Session, e.Range.ID, err)
		}
		st.Ranges++
		st.Rows += len(e.Rows)
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("ctxcompact: import line %d: %w", line+1, err)
	}
	if line == 0 {
		return st, &core.Error{Code: core.CodeInvalidRequest, Path: "/lines/0", Message: "ctxcompact: import: the export is empty (no header line)"}
	}
	return st, nil
}

func indexOfRange(rs []Range, id string) int {
	for i, r := range rs {
		if r.ID == id {
			return i
		}
	}
	return -1
}

// sameRange is nil when the store's range is the export's, row for row.
func sameRange(ctx context.Context, b Backend, e exportedRange, have Range) error {
	if have.FromIndex != e.Range.FromIndex || have.ToIndex != e.Range.ToIndex || have.Summary != e.Range.Summary {
		return fmt.Errorf("its span or summary differs")
	}
	rows, err := b.RangeRows(ctx, e.Session, e.Range.ID)
	if err != nil {
		return err
	}
	if len(rows) != len(e.Rows) {
		return fmt.Errorf("it has %d rows, the export %d", len(rows), len(e.Rows))
	}
	for i, r := range rows {
		if r != e.Rows[i] {
			return fmt.Errorf("its row %s differs", r.ID)
		}
	}
	return nil
}
