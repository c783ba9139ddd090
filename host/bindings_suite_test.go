package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ctxcompact/ctxcompact/core"
)

// The shared bindings suite (testdata/bindings/README.md): what the runtimes' own
// APIs do around the ops. This runner runs the cases that list "go" (or list no
// runtimes) against NewCompactor and NewContextEngine.

var bindingsDir = filepath.Join(repoRoot, "testdata", "bindings")

type bindingsFile struct {
	Comment string         `json:"_comment"`
	Cases   []bindingsCase `json:"cases"`
}

type bindingsCase struct {
	Name     string         `json:"name"`
	Runtimes []string       `json:"runtimes"`
	Steps    []bindingsStep `json:"steps"`
}

type bindingsStep struct {
	Do         string              `json:"do"`
	Config     json.RawMessage     `json:"config"`
	Options    json.RawMessage     `json:"options"`
	OptionsRaw json.RawMessage     `json:"options_raw"`
	Messages   json.RawMessage     `json:"messages"`
	Summarizer *bindingsSummarizer `json:"summarizer"`
	Usage      json.RawMessage     `json:"usage"`
	// PromptTokens is raw: cases for other runtimes give it values Go cannot take.
	PromptTokens  json.RawMessage `json:"prompt_tokens"`
	Model         string          `json:"model"`
	ContextLength int             `json:"context_length"`
	Provider      string          `json:"provider"`
	Want          *bindingsWant   `json:"want"`
}

type bindingsSummarizer struct {
	Returns      *string         `json:"returns"`
	Throws       *string         `json:"throws"`
	ReturnsValue json.RawMessage `json:"returns_value"`
	Hangs        bool            `json:"hangs"`
	Cancels      bool            `json:"cancels"`
	TimesOut     *string         `json:"times_out"`
	Records      bool            `json:"records"`
}

type bindingsWant struct {
	Error *struct {
		Code       core.ErrorCode `json:"code"`
		Path       *string        `json:"path"`
		PathPrefix *string        `json:"path_prefix"`
	} `json:"error"`
	Report         map[string]json.RawMessage `json:"report"`
	Status         map[string]json.RawMessage `json:"status"`
	MessagesCount  *int                       `json:"messages_count"`
	SummaryRequest map[string]json.RawMessage `json:"summary_request"`
	Value          *bool                      `json:"value"`
	// BadBinary is the start of an ErrBadBinary's message.
	BadBinary *string `json:"bad_binary"`
}

// bindingsDo lists the step kinds of the format; bindingsRuntimes its runtimes.
var (
	bindingsDo = []string{"create", "compact", "trap", "engine.create", "engine.update_from_response",
		"engine.should_compress", "engine.compress", "engine.update_model", "engine.get_status", "engine.on_session_reset"}
	bindingsRuntimes = []string{"js", "python", "go"}
)

// loadBindings reads every case file (all but fixtures.json), strictly: a field
// the format does not define is an error, so the files and this runner cannot
// drift apart in silence.
func loadBindings(t *testing.T) (map[string]bindingsFile, map[string]json.RawMessage) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(bindingsDir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no bindings cases in %s: %v", bindingsDir, err)
	}
	files := map[string]bindingsFile{}
	var fixtures struct {
		Comment  string                     `json:"_comment"`
		Fixtures map[string]json.RawMessage `json:"fixtures"`
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		if name == "fixtures" {
			if err := dec.Decode(&fixtures); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			continue
		}
		var f bindingsFile
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		files[name] = f
	}
	if len(fixtures.Fixtures) == 0 {
		t.Fatalf("no fixtures in %s", filepath.Join(bindingsDir, "fixtures.json"))
	}
	return files, fixtures.Fixtures
}

// TestBindingsSuiteFiles checks the case files as every runner does: unique
// names, known do values and runtimes, at least one step, and the fixtures they
// name.
func TestBindingsSuiteFiles(t *testing.T) {
	files, fixtures := loadBindings(t)
	for file, f := range files {
		if f.Comment == "" || len(f.Cases) == 0 {
			t.Errorf("%s: a file needs a _comment and cases", file)
		}
		seen := map[string]bool{}
		for _, c := range f.Cases {
			if c.Name == "" || seen[c.Name] {
				t.Errorf("%s: case name %q is empty or not unique", file, c.Name)
			}
			seen[c.Name] = true
			for _, r := range c.Runtimes {
				if !slices.Contains(bindingsRuntimes, r) {
					t.Errorf("bindings/%s/%s: unknown runtime %q", file, c.Name, r)
				}
			}
			if len(c.Steps) == 0 {
				t.Errorf("bindings/%s/%s: no steps", file, c.Name)
			}
			for i, s := range c.Steps {
				if !slices.Contains(bindingsDo, s.Do) {
					t.Errorf("bindings/%s/%s: step %d: unknown do %q", file, c.Name, i, s.Do)
				}
				var ref struct {
					Fixture string `json:"fixture"`
				}
				if json.Unmarshal(s.Messages, &ref) == nil && ref.Fixture != "" && fixtures[ref.Fixture] == nil {
					t.Errorf("bindings/%s/%s: step %d: no fixture %q", file, c.Name, i, ref.Fixture)
				}
			}
		}
	}
}

// TestBindingsSuite runs every case that applies to Go; the others are skipped as
// not applicable (never counted as passed).
func TestBindingsSuite(t *testing.T) {
	requireOps(t, "config.merge", "engine.start", "engine.record")
	files, fixtures := loadBindings(t)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	ran, notApplicable := 0, 0
	for _, file := range names {
		for _, c := range files[file].Cases {
			applies := len(c.Runtimes) == 0 || slices.Contains(c.Runtimes, "go")
			if applies {
				ran++
			} else {
				notApplicable++
			}
			t.Run(file+"/"+c.Name, func(t *testing.T) {
				if !applies {
					t.Skipf("not applicable to go (runtimes %v)", c.Runtimes)
				}
				r := &bindingsRun{t: t, fixtures: fixtures}
				r.run(c)
			})
		}
	}
	t.Logf("bindings suite: %d cases run for go, %d not applicable to go", ran, notApplicable)
	if ran == 0 {
		t.Fatal("no bindings case applies to go")
	}
}

// bindingsRun is one case: one compactor and one context engine, once created.
type bindingsRun struct {
	t        *testing.T
	fixtures map[string]json.RawMessage
	eng      *Engine
	comp     *Compactor
	ctxEng   *ContextEngine
	asked    *core.SummaryRequest // the summary request a "records" summarizer got
}

func (r *bindingsRun) run(c bindingsCase) {
	t := r.t
	// A case that traps gets an engine of its own, with one instance, so that the
	// instance made to trap is the one the next call gets.
	if slices.ContainsFunc(c.Steps, func(s bindingsStep) bool { return s.Do == "trap" }) {
		r.eng = newEngine(t, WithPoolSize(1))
	} else {
		r.eng = sharedEngine(t)
	}
	for i, s := range c.Steps {
		if t.Failed() {
			return
		}
		r.step(fmt.Sprintf("step %d (%s)", i, s.Do), s)
	}
}

func (r *bindingsRun) step(at string, s bindingsStep) {
	t := r.t
	t.Helper()
	ctx := context.Background()
	if len(s.OptionsRaw) > 0 {
		t.Fatalf("%s: options_raw has no Go spelling; the case must not list go", at)
	}
	var err error
	switch s.Do {
	case "create":
		if len(s.Options) > 0 {
			t.Fatalf("%s: a Go Compactor takes no options but its config", at)
		}
		r.comp, err = NewCompactor(ctx, r.eng, s.Config)
		r.check(at, s.Want, err)
	case "compact":
		if r.comp == nil {
			t.Fatalf("%s: no compactor (a create step must succeed first)", at)
		}
		opts := r.compactOptions(at, s.Options)
		res, err := r.comp.Compact(ctx, r.messages(at, s.Messages), r.summarizer(s.Summarizer), opts)
		if r.check(at, s.Want, err) {
			r.checkResult(at, s.Want, res)
		}
	case "trap":
		trapNext(t, r.eng)
	case "engine.create":
		opts := ContextEngineOptions{Summarize: r.summarizer(s.Summarizer)}
		if len(s.Options) > 0 {
			co := r.compactOptions(at, s.Options)
			if co.Force || co.PromptTokens != 0 || co.Config != nil || co.Output != "" || co.Format != "" || co.System != nil {
				t.Fatalf("%s: a ContextEngine takes only timeout_ms among the options", at)
			}
			opts.Timeout = co.Timeout
		}
		r.ctxEng, err = NewContextEngine(ctx, r.eng, s.Config, opts)
		if r.check(at, s.Want, err) {
			r.checkStatus(at, s.Want)
		}
	case "engine.update_from_response":
		err = r.engine(at).UpdateFromResponse(ctx, s.Usage)
		if r.check(at, s.Want, err) {
			r.checkStatus(at, s.Want)
		}
	case "engine.should_compress":
		n := 0
		if s.PromptTokens != nil {
			if err := json.Unmarshal(s.PromptTokens, &n); err != nil {
				t.Fatalf("%s: prompt_tokens %s is not a Go int: list the case for other runtimes only", at, s.PromptTokens)
			}
			if n == 0 {
				t.Fatalf("%s: prompt_tokens 0 means the last reported in Go; use another count", at)
			}
		}
		v, err := r.engine(at).ShouldCompress(ctx, n)
		if r.check(at, s.Want, err) {
			if s.Want != nil && s.Want.Value != nil && v != *s.Want.Value {
				t.Fatalf("%s: ShouldCompress = %v, want %v (status %+v)", at, v, *s.Want.Value, r.ctxEng.Status())
			}
			r.checkStatus(at, s.Want)
		}
	case "engine.compress":
		co := r.compactOptions(at, s.Options)
		if co.Timeout != 0 {
			t.Fatalf("%s: the ContextEngine's timeout is an engine.create option", at)
		}
		res, err := r.engine(at).Compress(ctx, r.messages(at, s.Messages),
			CompressOptions{Force: co.Force, PromptTokens: co.PromptTokens, Config: co.Config, Output: co.Output,
				Format: co.Format, System: co.System})
		if r.check(at, s.Want, err) {
			r.checkResult(at, s.Want, res)
			r.checkStatus(at, s.Want)
		}
	case "engine.update_model":
		err = r.engine(at).UpdateModel(ctx, core.ModelUpdate{Model: s.Model, ContextLength: s.ContextLength, Provider: s.Provider})
		if r.check(at, s.Want, err) {
			r.checkStatus(at, s.Want)
		}
	case "engine.get_status":
		r.checkStatus(at, s.Want)
	case "engine.on_session_reset":
		err = r.engine(at).OnSessionReset(ctx)
		if r.check(at, s.Want, err) {
			r.checkStatus(at, s.Want)
		}
	default:
		t.Fatalf("%s: unknown do %q", at, s.Do)
	}
}

func (r *bindingsRun) engine(at string) *ContextEngine {
	if r.ctxEng == nil {
		r.t.Fatalf("%s: no context engine (an engine.create step must succeed first)", at)
	}
	return r.ctxEng
}

// compactOptions maps the options' wire names to CompactOptions. A key or value
// Go cannot express (an unknown key, a string for force) fails the case: such a
// case must not list go.
func (r *bindingsRun) compactOptions(at string, raw json.RawMessage) CompactOptions {
	t := r.t
	var opts CompactOptions
	if len(raw) == 0 {
		return opts
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: options %s have no Go spelling (%v); the case must not list go", at, raw, err)
	}
	for key, v := range m {
		var err error
		switch key {
		case "config":
			opts.Config = v
		case "force":
			err = json.Unmarshal(v, &opts.Force)
		case "prompt_tokens":
			err = json.Unmarshal(v, &opts.PromptTokens)
		case "output":
			err = json.Unmarshal(v, &opts.Output)
		case "format":
			err = json.Unmarshal(v, &opts.Format)
		case "system":
			opts.System = v
		case "timeout_ms":
			var ms int64
			err = json.Unmarshal(v, &ms)
			opts.Timeout = time.Duration(ms) * time.Millisecond
		default:
			err = errors.New("not an option of the Go host")
		}
		if err != nil {
			t.Fatalf("%s: option %s = %s has no Go spelling (%v); the case must not list go", at, key, v, err)
		}
	}
	return opts
}

// messages resolves a step's messages: a list, a fixture, a value, or a special
// value Go can hold.
func (r *bindingsRun) messages(at string, raw json.RawMessage) json.RawMessage {
	t := r.t
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		t.Fatalf("%s: no messages", at)
	}
	if raw[0] == '[' {
		return raw
	}
	var ref struct {
		Fixture string          `json:"fixture"`
		Value   json.RawMessage `json:"value"`
		Special string          `json:"special"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatalf("%s: messages %s: %v", at, raw, err)
	}
	switch {
	case ref.Fixture != "":
		f, ok := r.fixtures[ref.Fixture]
		if !ok {
			t.Fatalf("%s: no fixture %q", at, ref.Fixture)
		}
		return f
	case ref.Value != nil:
		return ref.Value
	case ref.Special == "invalid-utf8":
		// short-chat, with the bytes 0xff 0xfe in message 1's content.
		var chat []map[string]any
		if err := json.Unmarshal(r.fixtures["short-chat"], &chat); err != nil || len(chat) < 2 {
			t.Fatalf("%s: fixture short-chat: %v", at, err)
		}
		b, _ := json.Marshal(chat[0])
		return slices.Concat([]byte("["), b, []byte(`,{"role":"user","content":"`+"\xff\xfe"+`"}]`))
	default:
		t.Fatalf("%s: special messages %q are not expressible in Go; the case must not list go", at, ref.Special)
		return nil
	}
}

// summarizer builds the step's summarizer; nil for the built-in one.
func (r *bindingsRun) summarizer(s *bindingsSummarizer) Summarize {
	if s == nil {
		return nil
	}
	t := r.t
	var answer Summarize
	switch {
	case s.Returns != nil:
		text := *s.Returns
		answer = func(context.Context, core.SummaryRequest) (string, error) { return text, nil }
	case s.Throws != nil:
		msg := *s.Throws
		answer = func(context.Context, core.SummaryRequest) (string, error) { return "", errors.New(msg) }
	case s.Hangs:
		answer = hang(t) // ignores its context too
	case s.Cancels:
		answer = func(context.Context, core.SummaryRequest) (string, error) { return "", context.Canceled }
	case s.TimesOut != nil:
		err := suiteTimeout(*s.TimesOut)
		answer = func(context.Context, core.SummaryRequest) (string, error) { return "", err }
	case s.ReturnsValue != nil:
		t.Fatalf("a Go summarizer returns a string; returns_value cannot be expressed (the case must not list go)")
	default:
		t.Fatalf("summarizer %+v: nothing to do", s)
	}
	if !s.Records {
		return answer
	}
	return func(ctx context.Context, req core.SummaryRequest) (string, error) {
		r.asked = &req
		return answer(ctx, req)
	}
}

// check compares err with want.error and reports whether the step succeeded (so
// that its other wants are to be checked).
func (r *bindingsRun) check(at string, want *bindingsWant, err error) bool {
	t := r.t
	t.Helper()
	if want != nil && want.BadBinary != nil {
		if !errors.Is(err, ErrBadBinary) || !strings.HasPrefix(err.Error(), *want.BadBinary) {
			t.Fatalf("%s: got %v, want ErrBadBinary %q...", at, err, *want.BadBinary)
		}
		return false
	}
	if want == nil || want.Error == nil {
		if err != nil {
			t.Fatalf("%s: %v", at, err)
		}
		return true
	}
	w := want.Error
	var ce *core.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%s: got %v, want a *core.Error %s", at, err, w.Code)
	}
	switch {
	case ce.Code != w.Code:
		t.Fatalf("%s: code %s (%s), want %s", at, ce.Code, ce.Message, w.Code)
	case w.Path != nil && ce.Path != *w.Path:
		t.Fatalf("%s: path %q (%s), want %q", at, ce.Path, ce.Message, *w.Path)
	case w.PathPrefix != nil && !strings.HasPrefix(ce.Path, *w.PathPrefix):
		t.Fatalf("%s: path %q (%s), want one under %q", at, ce.Path, ce.Message, *w.PathPrefix)
	case !strings.HasPrefix(ce.Message, "ctxcompact:"):
		t.Fatalf("%s: message %q does not start with ctxcompact:", at, ce.Message)
	}
	return false
}

func (r *bindingsRun) checkResult(at string, want *bindingsWant, res core.CompactResult) {
	t := r.t
	t.Helper()
	if want == nil {
		return
	}
	if want.Report != nil {
		requireSubset(t, at+": report", want.Report, res.Report)
	}
	if want.MessagesCount != nil && len(res.Messages) != *want.MessagesCount {
		t.Fatalf("%s: %d messages, want %d", at, len(res.Messages), *want.MessagesCount)
	}
	if want.SummaryRequest != nil {
		if r.asked == nil {
			t.Fatalf("%s: the summarizer was not asked (or does not record)", at)
		}
		requireSubset(t, at+": summary request", want.SummaryRequest, r.asked)
	}
}

func (r *bindingsRun) checkStatus(at string, want *bindingsWant) {
	if want != nil && want.Status != nil {
		r.t.Helper()
		requireSubset(r.t, at+": status", want.Status, r.engine(at).Status())
	}
}

// requireSubset checks that every key of want is in got (encoded as JSON) with an
// equal value, numbers by value.
func requireSubset(t *testing.T, what string, want map[string]json.RawMessage, got any) {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var have map[string]any
	if err := json.Unmarshal(b, &have); err != nil {
		t.Fatalf("%s: %s is not an object", what, b)
	}
	for key, raw := range want {
		var w any
		if err := json.Unmarshal(raw, &w); err != nil {
			t.Fatal(err)
		}
		h, ok := have[key]
		if !ok || !reflect.DeepEqual(h, w) {
			t.Fatalf("%s: %s = %v (present: %v), want %s; all: %s", what, key, h, ok, raw, clip(b))
		}
	}
}

// suiteTimeout is the error of a request that timed out on its own, as an
// http.Client's Timeout gives: a net.Error whose Timeout is true.
type suiteTimeout string

func (e suiteTimeout) Error() string { return string(e) }
func (suiteTimeout) Timeout() bool   { return true }
func (suiteTimeout) Temporary() bool { return false }
