package host

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxcompact/ctxcompact/core"
)

func requireCode(t *testing.T, what string, err error, code core.ErrorCode, path string) {
	t.Helper()
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != code || ce.Path != path || !strings.HasPrefix(ce.Message, "ctxcompact: ") {
		t.Fatalf("%s: %v, want %s at %q", what, err, code, path)
	}
}

// TestMergeConfig: config.merge through the module, and NewCompactor validating
// at creation with the merged config kept.
func TestMergeConfig(t *testing.T) {
	requireOps(t, "config.merge")
	ctx := context.Background()
	e := sharedEngine(t)
	got, err := e.MergeConfig(ctx, json.RawMessage(`{"model":{"name":"gpt-4o","context_length":8000}}`),
		json.RawMessage(`{"model":{"context_length":4000},"compression":{"threshold":0.6}}`))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Model       map[string]any `json:"model"`
		Compression map[string]any `json:"compression"`
	}
	if json.Unmarshal(got, &m) != nil || m.Model["name"] != "gpt-4o" || m.Model["context_length"] != 4000.0 || m.Compression["threshold"] != 0.6 {
		t.Fatalf("merged %s", got)
	}
	_, err = e.MergeConfig(ctx, json.RawMessage(`{"model":{"context_length":-1}}`), nil)
	requireCode(t, "a bad base", err, core.CodeInvalidConfig, "/base/model/context_length")
	_, err = NewCompactor(ctx, e, json.RawMessage(`{"model":{"context_lenght":1}}`))
	requireCode(t, "NewCompactor with a misspelled key", err, core.CodeInvalidConfig, "/config/model/context_lenght")
	_, err = NewCompactor(ctx, e, json.RawMessage(`{"model":`))
	requireCode(t, "NewCompactor with invalid JSON", err, core.CodeInvalidJSON, "/config")
	c, err := NewCompactor(ctx, e, json.RawMessage(`{"model":{"context_length":32000}}`))
	if err != nil || !strings.Contains(string(c.Config()), `"context_length":32000`) {
		t.Fatalf("NewCompactor: %v %s", err, c.Config())
	}
	// A per-call config merges over the Compactor's; Engine.Compact merges it over cfg.
	msgs := traceNamed(t, smallTrace)
	res, err := c.Compact(ctx, msgs, nil, CompactOptions{Force: true, Config: json.RawMessage(`{"model":{"name":"gpt-4o"}}`)})
	if err != nil || res.Report.ThresholdTokens != 24000 {
		t.Fatalf("a per-call model name over a 32K compactor: %v, threshold %d, want 24000", err, res.Report.ThresholdTokens)
	}
	res, err = e.Compact(ctx, msgs, json.RawMessage(`{"model":{"context_length":32000}}`), nil,
		CompactOptions{Force: true, Config: json.RawMessage(`{"model":{"context_length":16000}}`)})
	if err != nil || res.Report.ThresholdTokens != 12000 {
		t.Fatalf("Engine.Compact with a per-call window: %v, threshold %d, want 12000", err, res.Report.ThresholdTokens)
	}
}

// TestContextEngine drives one session through every method and resumes it from
// its state in a second engine.
func TestContextEngine(t *testing.T) {
	requireOps(t, "engine.start", "engine.record")
	ctx := context.Background()
	e := sharedEngine(t)
	var asked int
	ce, err := NewContextEngine(ctx, e, json.RawMessage(`{"model":{"name":"gpt-4o","context_length":32000}}`),
		ContextEngineOptions{Summarize: func(context.Context, core.SummaryRequest) (string, error) {
			asked++
			return "## Goal\nRebook the flight.", nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if st := ce.Status(); st.Name != "ctxcompact" || st.Model != "gpt-4o" || st.ContextLength != 32000 || st.ThresholdTokens != 24000 {
		t.Fatalf("status after start: %+v", st)
	}
	err = ce.UpdateFromResponse(ctx, json.RawMessage(`{"usage_is":"not here"}`))
	requireCode(t, "a usage object with no counts", err, core.CodeInvalidRequest, "/usage")
	for _, none := range []string{"", "null", "{}"} {
		if err := ce.UpdateFromResponse(ctx, json.RawMessage(none)); err != nil {
			t.Fatalf("usage %q: %v", none, err)
		}
	}
	if err := ce.UpdateFromResponse(ctx, json.RawMessage(`{"prompt_tokens":30000,"completion_tokens":100}`)); err != nil {
		t.Fatal(err)
	}
	if st := ce.Status(); st.LastPromptTokens != 30000 || st.LastTotalTokens != 30100 {
		t.Fatalf("status after usage: %+v", st)
	}
	if yes, err := ce.ShouldCompress(ctx, 0); err != nil || !yes {
		t.Fatalf("ShouldCompress at 30000 of 32000: %v %v", yes, err)
	}
	if yes, err := ce.ShouldCompress(ctx, 1000); err != nil || yes {
		t.Fatalf("ShouldCompress(1000): %v %v", yes, err)
	}
	_, err = ce.ShouldCompress(ctx, -1)
	requireCode(t, "ShouldCompress(-1)", err, core.CodeInvalidRequest, "/prompt_tokens")

	// A failing compaction records nothing.
	before := ce.State()
	_, err = ce.Compress(ctx, json.RawMessage(`{"role":"user"}`), CompressOptions{})
	requireCode(t, "Compress of a non-list", err, core.CodeInvalidMessages, "/messages")
	_, err = ce.Compress(ctx, traceNamed(t, smallTrace), CompressOptions{Config: json.RawMessage(`{"compression":{"threshold":3}}`)})
	requireCode(t, "Compress with a bad call config", err, core.CodeInvalidConfig, "/config/compression/threshold")
	if string(ce.State()) != string(before) || asked != 0 {
		t.Fatalf("a failed Compress changed the state or asked the summarizer")
	}

	res, err := ce.Compress(ctx, traceNamed(t, smallTrace), CompressOptions{})
	if err != nil || !res.Done || !res.Report.Compacted || asked != 1 {
		t.Fatalf("Compress at the reported 30000 tokens: %v %+v (asked %d)", err, res.Report, asked)
	}
	st := ce.Status()
	if st.CompressionCount != 1 || st.LastPromptTokens != res.Report.TokensAfter || st.LastCompactionFits == nil || !*st.LastCompactionFits {
		t.Fatalf("status after Compress: %+v", st)
	}

	// Status is a copy: changing it changes nothing in the engine.
	*st.LastCompactionFits = false
	if !*ce.Status().LastCompactionFits {
		t.Fatal("Status shares its pointers with the engine")
	}

	saved := ce.State()
	resumed, err := NewContextEngine(ctx, e, nil, ContextEngineOptions{State: saved})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := resumed.Status(), ce.Status(); a.CompressionCount != 1 || a.LastPromptTokens != b.LastPromptTokens || a.Model != "gpt-4o" {
		t.Fatalf("resumed status %+v, want %+v", a, b)
	}

	err = ce.UpdateModel(ctx, core.ModelUpdate{Model: "claude-sonnet-4", ContextLength: 200000, Provider: "anthropic", BaseURL: "https://api.anthropic.com"})
	if err != nil {
		t.Fatal(err)
	}
	if st := ce.Status(); st.Model != "claude-sonnet-4" || st.Provider != "anthropic" || st.ThresholdTokens != 150000 || st.BreakerTokens != nil {
		t.Fatalf("status after UpdateModel: %+v", st)
	}
	if !strings.Contains(string(ce.State()), `"base_url":"https://api.anthropic.com"`) {
		t.Fatalf("the state does not keep the route: %s", ce.State())
	}
	err = ce.UpdateModel(ctx, core.ModelUpdate{Model: "x"})
	requireCode(t, "UpdateModel with no window", err, core.CodeInvalidRequest, "/context_length")

	if err := ce.OnSessionReset(ctx); err != nil {
		t.Fatal(err)
	}
	if st := ce.Status(); st.CompressionCount != 0 || st.LastPromptTokens != 0 || st.Model != "claude-sonnet-4" {
		t.Fatalf("status after reset: %+v", st)
	}
}

// TestContextEngineCreation: config and state are checked when the engine is made.
func TestContextEngineCreation(t *testing.T) {
	requireOps(t, "engine.start")
	ctx := context.Background()
	e := sharedEngine(t)
	_, err := NewContextEngine(ctx, e, json.RawMessage(`{"compression":{"threshold":"high"}}`), ContextEngineOptions{})
	requireCode(t, "a bad config", err, core.CodeInvalidConfig, "/config/compression/threshold")
	for name, state := range map[string]string{"empty": " ", "not an object": `[1]`, "unknown field": `{"v":1,"config":{},"extra":1}`} {
		_, err = NewContextEngine(ctx, e, nil, ContextEngineOptions{State: json.RawMessage(state)})
		var ce *core.Error
		if !errors.As(err, &ce) || ce.Code != core.CodeInvalidState || !strings.HasPrefix(ce.Path, "/state") {
			t.Errorf("state %s: %v, want invalid_state at /state", name, err)
		}
	}
	ok, err := NewContextEngine(ctx, e, nil, ContextEngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewContextEngine(ctx, e, json.RawMessage(`{}`), ContextEngineOptions{State: ok.State()})
	requireCode(t, "both a config and a state", err, core.CodeInvalidRequest, "/config")
	_, err = NewContextEngine(ctx, e, nil, ContextEngineOptions{Timeout: -time.Second})
	requireCode(t, "a negative timeout", err, core.CodeInvalidRequest, "/timeout")
}

// TestContextEngineTimeout: the engine's summarizer times out as Compact's does,
// and the status says so.
func TestContextEngineTimeout(t *testing.T) {
	requireOps(t, "engine.start", "engine.record")
	ctx := context.Background()
	ce, err := NewContextEngine(ctx, sharedEngine(t), json.RawMessage(`{"model":{"context_length":32000}}`),
		ContextEngineOptions{Summarize: hang(t), Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ce.Compress(ctx, traceNamed(t, smallTrace), CompressOptions{Force: true})
	if err != nil || res.Report.FallbackCode != core.FallbackTimeout {
		t.Fatalf("Compress with a hanging summarizer: %v %+v", err, res.Report)
	}
	if st := ce.Status(); st.LastFallbackCode == nil || *st.LastFallbackCode != "timeout" || st.CompressionCount != 1 {
		t.Fatalf("status: %+v", st)
	}
}

// TestContextEngineConcurrent: usage updates, triggers, status reads and
// compactions from many goroutines (run with -race); every usage and compaction
// is counted once.
func TestContextEngineConcurrent(t *testing.T) {
	requireOps(t, "engine.start", "engine.record")
	ctx := context.Background()
	ce, err := NewContextEngine(ctx, sharedEngine(t), json.RawMessage(`{"model":{"context_length":32000}}`), ContextEngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := traceNamed(t, smallTrace)
	const workers, compactions = 4, 3
	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	for range workers {
		wg.Go(func() {
			for range compactions {
				if _, err := ce.Compress(ctx, msgs, CompressOptions{Force: true}); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for i := range 20 {
				if err := ce.UpdateFromResponse(ctx, json.RawMessage(`{"prompt_tokens":1000,"completion_tokens":1}`)); err != nil {
					errs <- err
					return
				}
				if _, err := ce.ShouldCompress(ctx, 100+i); err != nil {
					errs <- err
					return
				}
				_ = ce.Status()
				_ = ce.State()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := ce.Status().CompressionCount; n != workers*compactions {
		t.Fatalf("compression_count %d, want %d", n, workers*compactions)
	}
}
