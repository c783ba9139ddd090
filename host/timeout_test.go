package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ctxcompact/ctxcompact/core"
)

// hang is a summarizer that ignores its context and answers only when the test
// ends (so that the goroutine Compact abandons does not outlive the test).
func hang(t *testing.T) Summarize {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return func(context.Context, core.SummaryRequest) (string, error) {
		<-release
		return "## Goal\nToo late.", nil
	}
}

// compactSmall is a forced compaction of the small trace in a 32K window.
func compactSmall(t *testing.T, e *Engine, ctx context.Context, summarize Summarize, timeout time.Duration) (core.CompactResult, error) {
	t.Helper()
	return e.Compact(ctx, traceNamed(t, smallTrace), []byte(`{"model":{"context_length":32000}}`),
		summarize, CompactOptions{Force: true, Timeout: timeout})
}

// requireFallback checks that res is a finished compaction that fell back with
// code, and that the reason contains reason.
func requireFallback(t *testing.T, what string, res core.CompactResult, err error, code core.FallbackCode, reason string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	r := res.Report
	if !res.Done || r == nil || !r.FallbackUsed || !strings.Contains(r.FallbackReason, reason) {
		t.Fatalf("%s: want a fallback whose reason contains %q, got %+v", what, reason, r)
	}
	if got := r.FallbackCode; got != code {
		t.Fatalf("%s: fallback_code %q, want %q (reason %q)", what, got, code, r.FallbackReason)
	}
}

// TestSummarizerTimeout: a summarizer that hangs and ignores its context is
// abandoned at the timeout and the compaction falls back with code timeout; one
// that honours its context ends the same way.
func TestSummarizerTimeout(t *testing.T) {
	requireOps(t, "compact.begin", "compact.finish")
	e := sharedEngine(t)
	ctx := context.Background()
	res, err := compactSmall(t, e, ctx, hang(t), 30*time.Millisecond)
	requireFallback(t, "a hanging summarizer", res, err, "timeout", "the summarizer did not answer within 30 ms")

	honours := func(ctx context.Context, _ core.SummaryRequest) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}
	res, err = compactSmall(t, e, ctx, honours, 30*time.Millisecond)
	requireFallback(t, "a summarizer that stops at its context's deadline", res, err, "timeout", "did not answer within 30 ms")

	own := func(context.Context, core.SummaryRequest) (string, error) {
		return "", fmt.Errorf("POST /v1/chat/completions: %w", context.DeadlineExceeded)
	}
	res, err = compactSmall(t, e, ctx, own, 0)
	requireFallback(t, "a summarizer whose own deadline passed", res, err, "timeout", "POST /v1/chat/completions")
}

// TestSummarizerClientTimeout: the ready summarizer's own http.Client timing out
// long before the compaction's timeout is fallback_code "timeout", as a client-side
// timeout is in JS and Python; so is any net.Error whose Timeout is true.
func TestSummarizerClientTimeout(t *testing.T) {
	requireOps(t, "compact.begin", "compact.finish")
	e := sharedEngine(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Answers only when the client gives up. The body is read first: net/http
		// notices a closed connection (and cancels r.Context()) only once the body is
		// read to its end, else srv.Close waits for this handler forever.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()
	summarize, err := OpenAISummarizer(OpenAISummarizerOptions{BaseURL: srv.URL, Model: "m",
		HTTPClient: &http.Client{Timeout: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := compactSmall(t, e, context.Background(), summarize, 0)
	requireFallback(t, "an HTTP client's timeout", res, err, "timeout", "Client.Timeout exceeded")

	deadline := func(context.Context, core.SummaryRequest) (string, error) {
		return "", fmt.Errorf("reading the answer: %w", os.ErrDeadlineExceeded) // a net.Conn deadline
	}
	res, err = compactSmall(t, e, context.Background(), deadline, 0)
	requireFallback(t, "a connection deadline", res, err, "timeout", "i/o timeout")
}

// TestSummarizerErrors: an error falls back with code error, a summarizer that
// reports its own cancellation (while Compact's context is live) with cancelled,
// and a blank summary with empty.
func TestSummarizerErrors(t *testing.T) {
	requireOps(t, "compact.begin", "compact.finish")
	e := sharedEngine(t)
	ctx := context.Background()
	failing := func(context.Context, core.SummaryRequest) (string, error) { return "", errors.New("rate limited") }
	res, err := compactSmall(t, e, ctx, failing, 0)
	requireFallback(t, "a failing summarizer", res, err, "error", "rate limited")

	cancels := func(context.Context, core.SummaryRequest) (string, error) {
		return "", fmt.Errorf("the request was aborted: %w", context.Canceled)
	}
	res, err = compactSmall(t, e, ctx, cancels, 0)
	requireFallback(t, "a summarizer that reports its own cancellation", res, err, "cancelled", "the request was aborted")

	blank := func(context.Context, core.SummaryRequest) (string, error) { return " \n", nil }
	res, err = compactSmall(t, e, ctx, blank, 0)
	if err != nil || !res.Report.FallbackUsed || res.Report.FallbackCode != "empty" {
		t.Fatalf("a blank summary: %v %+v", err, res.Report)
	}
}

// stoppable is a context the test ends with the error it chooses, at the moment
// it chooses: a deadline that passes exactly while the summarizer runs.
type stoppable struct {
	context.Context
	done chan struct{}
	err  error
}

func newStoppable() *stoppable {
	return &stoppable{Context: context.Background(), done: make(chan struct{})}
}

func (s *stoppable) Done() <-chan struct{} { return s.done }

func (s *stoppable) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

func (s *stoppable) stop(err error) { s.err = err; close(s.done) }

// TestCompactContextDone: when Compact's own context is done (canceled, or its
// deadline passed) while the summarizer hangs ignoring its context, Compact
// returns the context's error at once and sends no compact.finish: the instance
// is made to trap on its next call, so a finish would have failed with internal.
func TestCompactContextDone(t *testing.T) {
	requireOps(t, "compact.begin", "compact.finish")
	e := newEngine(t, WithPoolSize(1))
	wait := hang(t)
	for _, want := range []error{context.Canceled, context.DeadlineExceeded} {
		ctx := newStoppable()
		ran := false
		summarize := func(sctx context.Context, req core.SummaryRequest) (string, error) {
			ran = true
			trapNext(t, e)
			ctx.stop(want)
			return wait(sctx, req)
		}
		_, err := compactSmall(t, e, ctx, summarize, time.Hour)
		if !ran || !errors.Is(err, want) || errors.Is(err, ErrTrapped) || !strings.HasPrefix(err.Error(), "ctxcompact: ") {
			t.Fatalf("%v: Compact returned %v (summarizer ran: %v), want %v and no compact.finish", want, err, ran, want)
		}
		_, err = e.Info(context.Background()) // the instance trapNext closed
		requireTrap(t, fmt.Sprintf("%v: the call after", want), err)
	}
}

// TestSummarizeTimeoutDefault: the summarizer's context has a deadline
// DefaultSummarizeTimeout after Compact began with Timeout 0; a negative Timeout
// is invalid_request at /timeout, as in JS and Python.
func TestSummarizeTimeoutDefault(t *testing.T) {
	requireOps(t, "compact.begin", "compact.finish")
	if DefaultSummarizeTimeout != 2*time.Minute {
		t.Fatalf("DefaultSummarizeTimeout = %v, want the CLI's 2 minutes", DefaultSummarizeTimeout)
	}
	e := sharedEngine(t)
	var deadline time.Time
	var has bool
	record := func(ctx context.Context, _ core.SummaryRequest) (string, error) {
		deadline, has = ctx.Deadline()
		return "## Goal\nRebook.", nil
	}
	before := time.Now()
	if _, err := compactSmall(t, e, context.Background(), record, 0); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if !has || deadline.Before(before.Add(DefaultSummarizeTimeout)) || deadline.After(after.Add(DefaultSummarizeTimeout)) {
		t.Fatalf("with Timeout 0 the summarizer's deadline is %v (set %v), want %v after the call began", deadline, has, DefaultSummarizeTimeout)
	}
	has = false
	_, err := compactSmall(t, e, context.Background(), record, -time.Millisecond)
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != core.CodeInvalidRequest || ce.Path != "/timeout" || has {
		t.Fatalf("a negative Timeout: %v (summarizer ran: %v), want invalid_request at /timeout", err, has)
	}
}

// TestSummarizerPanics: a panic in the summarizer reaches the goroutine that
// called Compact, as when it ran there.
func TestSummarizerPanics(t *testing.T) {
	requireOps(t, "compact.begin", "compact.finish")
	e := sharedEngine(t)
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the summarizer's panic", r)
		}
	}()
	_, _ = compactSmall(t, e, context.Background(), func(context.Context, core.SummaryRequest) (string, error) {
		panic("boom")
	}, 0)
	t.Fatal("Compact returned after its summarizer panicked")
}
