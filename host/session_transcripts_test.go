package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"os"
	"sort"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// TestSessionTranscripts replays testdata/session/transcripts.json through the
// ContextEngine's loop (runSession) on the module, with a scripted performer: the
// effects asked for, the result, the state and the failures must be the ones the
// core gave natively when the file was generated (docs/SESSION.md).
func TestSessionTranscripts(t *testing.T) {
	requireOps(t, "session.run")
	data, err := os.ReadFile("../testdata/session/transcripts.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Transcripts []struct {
			Name  string          `json:"name"`
			State json.RawMessage `json:"state"`
			Steps []struct {
				Event   string                     `json:"event"`
				Fields  map[string]json.RawMessage `json:"fields"`
				Effects []struct {
					Effect json.RawMessage `json:"effect"`
					Answer json.RawMessage `json:"answer"`
					Cancel bool            `json:"cancel"`
				} `json:"effects"`
				End map[string]json.RawMessage `json:"end"`
			} `json:"steps"`
		} `json:"transcripts"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Transcripts) == 0 {
		t.Fatal("no transcripts")
	}
	e := sharedEngine(t)
	for _, tr := range file.Transcripts {
		t.Run(tr.Name, func(t *testing.T) {
			ce := &ContextEngine{e: e, state: tr.State}
			for si, step := range tr.Steps {
				ctx, cancel := context.WithCancel(context.Background())
				k := 0
				// answer checks the next effect of the script against got (an
				// effect, or an archive part's range and rows when archive) and
				// gives its scripted answer.
				answer := func(typ string, got []byte, archive bool) (json.RawMessage, error) {
					if k >= len(step.Effects) {
						t.Fatalf("step %d: an effect beyond the script: %s", si, clip(got))
					}
					want := step.Effects[k]
					k++
					wantJSON := want.Effect
					if archive {
						wantJSON = json.RawMessage(gjson.GetBytes(want.Effect, "archive").Raw)
					}
					if !jsonEqual(wantJSON, got) {
						t.Fatalf("step %d effect %d:\n got %s\nwant %s", si, k-1, clip(got), clip(wantJSON))
					}
					if want.Cancel {
						cancel()
						return nil, ctx.Err()
					}
					a := gjson.ParseBytes(want.Answer)
					if f := a.Get("error"); f.Exists() {
						if typ == "summarize" {
							return nil, summarizerFailure(f.Raw)
						}
						return nil, errors.New(f.Get("message").Str)
					}
					return json.RawMessage(a.Get("ok").Raw), nil
				}
				perform := func(ctx context.Context, e *sessionEffect) (json.RawMessage, error) {
					return answer(e.Type, e.JSON, false)
				}
				ce.store = scriptedStore(func(a core.RecallArchive) error {
					_, err := answer("archive", archivePartJSON(a), true)
					return err
				})
				before := ce.state
				res, err := ce.runSession(ctx, step.Event, func(r *request) {
					keys := make([]string, 0, len(step.Fields))
					for key := range step.Fields {
						if key != "messages" {
							keys = append(keys, key)
						}
					}
					sort.Strings(keys)
					// Compact, as a host's encoder writes them: the archived
					// originals are the bytes sent.
					compact := func(v json.RawMessage) json.RawMessage {
						var b bytes.Buffer
						if len(v) > 0 && json.Compact(&b, v) == nil {
							return b.Bytes()
						}
						return v
					}
					for _, key := range keys {
						r.raw(key, compact(step.Fields[key]))
					}
					r.raw("messages", compact(step.Fields["messages"]))
				}, perform)
				cancel()
				if k != len(step.Effects) {
					t.Fatalf("step %d: %d of %d effects asked for", si, k, len(step.Effects))
				}
				switch {
				case step.End["failed"] != nil:
					want := gjson.GetBytes(step.End["failed"], "message").Str
					if err == nil || err.Error() != want {
						t.Fatalf("step %d: got error %v, want %q", si, err, want)
					}
					if !jsonEqual(before, ce.state) {
						t.Fatalf("step %d: a failed sequence changed the state", si)
					}
				case step.End["cancelled"] != nil:
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("step %d: got %v, want a cancellation", si, err)
					}
					if !jsonEqual(before, ce.state) {
						t.Fatalf("step %d: a cancelled sequence changed the state", si)
					}
				default:
					if err != nil {
						t.Fatalf("step %d: %v", si, err)
					}
					if want := step.End["result"]; !jsonEqual(orNull(want), orNull(res)) {
						t.Fatalf("step %d result:\n got %s\nwant %s", si, clip(res), clip(want))
					}
					if !jsonEqual(step.End["state"], ce.state) {
						t.Fatalf("step %d state:\n got %s\nwant %s", si, ce.state, step.End["state"])
					}
				}
			}
		})
	}
}

// scriptedStore is a recall store whose Archive hands each part to its func and
// stops at the first error; the transcripts answer every other store effect.
type scriptedStore func(a core.RecallArchive) error

func (f scriptedStore) Archive(_ context.Context, _ string, parts iter.Seq2[core.RecallArchive, error]) error {
	for a, err := range parts {
		if err == nil {
			err = f(a)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (scriptedStore) NextRangeID(context.Context, string) (string, error) {
	panic("answered by the transcript")
}

func (scriptedStore) Find(context.Context, string, string, int) ([]core.RecallHit, int, error) {
	panic("answered by the transcript")
}

func (scriptedStore) Messages(context.Context, string, string) ([]string, error) {
	panic("answered by the transcript")
}

// archivePartJSON is an archive part as its effect's archive object has it: the
// range in the first part only.
func archivePartJSON(a core.RecallArchive) []byte {
	v := map[string]any{"rows": a.Rows}
	if a.Range.ID != "" {
		v["range"] = a.Range
	}
	b, _ := json.Marshal(v)
	return b
}
