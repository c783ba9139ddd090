package recall_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/host"
	"github.com/ctxcompact/ctxcompact/recall"
	"github.com/stretchr/testify/require"
)

// A lossless engine archives what a provider's compaction stands for when
// PrepareRequest drops it from what is sent, once, and the agent's tools find it.
func TestLosslessEngineArchivesNativeDropsOnce(t *testing.T) {
	ctx := context.Background()
	store, err := recall.Open("")
	require.NoError(t, err)
	defer store.Close()
	cfg := `{"context":{"engine":"lossless"},"model":{"name":"gpt-5.6","provider":"openai","context_length":400000},"compression":{"codex_responses_native":true}}`
	ce, err := host.NewContextEngine(ctx, sharedEngine(t), json.RawMessage(cfg), host.ContextEngineOptions{Store: store, SessionID: "s1"})
	require.NoError(t, err)
	require.NoError(t, ce.UpdateModel(ctx, core.ModelUpdate{Model: "gpt-5.6", ContextLength: 400000, Provider: "openai", BaseURL: "https://api.openai.com/v1"}))
	body := json.RawMessage(`{"model":"gpt-5.6","input":[{"role":"user","content":"the flaky test is tests/test_io.py"},` +
		`{"role":"assistant","content":"fixed by a retry"},{"type":"compaction","id":"cmp_1","encrypted_content":"x"},{"role":"user","content":"next"}]}`)
	p, err := ce.PrepareRequest(ctx, body, host.PrepareRequestOptions{})
	require.NoError(t, err)
	require.Len(t, p.Trimmed.Archive, 2)
	require.Equal(t, "r1", p.Trimmed.ArchivedAs)
	found, err := ce.HandleToolCall(ctx, "context_search", json.RawMessage(`{"query":"test_io.py"}`))
	require.NoError(t, err)
	require.Contains(t, found, "r1")
	// The host resends its whole history: dropped again, archived once.
	p, err = ce.PrepareRequest(ctx, body, host.PrepareRequestOptions{})
	require.NoError(t, err)
	require.Len(t, p.Trimmed.Dropped, 2)
	require.Empty(t, p.Trimmed.Archive)
	require.Empty(t, p.Trimmed.ArchivedAs)
	expanded, err := ce.HandleToolCall(ctx, "context_expand", json.RawMessage(`{"id":"r1"}`))
	require.NoError(t, err)
	require.True(t, strings.Contains(expanded, "tests/test_io.py"), expanded)
}

// ApplyCompaction swaps an on-demand block in, archives what it summarized, and
// the prompt's size becomes the swapped conversation's estimate.
func TestLosslessApplyCompaction(t *testing.T) {
	ctx := context.Background()
	store, err := recall.Open("")
	require.NoError(t, err)
	defer store.Close()
	cfg := `{"context":{"engine":"lossless"},"model":{"name":"claude-opus-4-7","provider":"anthropic","context_length":200000},"compression":{"anthropic_native":"on_demand"}}`
	ce, err := host.NewContextEngine(ctx, sharedEngine(t), json.RawMessage(cfg), host.ContextEngineOptions{Store: store, SessionID: "s1"})
	require.NoError(t, err)
	require.NoError(t, ce.UpdateFromResponse(ctx, json.RawMessage(`{"input_tokens":150000,"output_tokens":10}`)))
	history := json.RawMessage(`[{"role":"user","content":"the schema lives in db/schema.sql"},{"role":"assistant","content":"noted"}]`)
	p, err := ce.PrepareRequest(ctx, json.RawMessage(`{"model":"claude-opus-4-7","messages":`+string(history)+`}`), host.PrepareRequestOptions{})
	require.NoError(t, err)
	require.True(t, p.Decision.CompactNow)
	require.NotNil(t, p.CompactionBody)
	resp := json.RawMessage(`{"type":"message","role":"assistant","stop_reason":"compaction","content":[{"type":"compaction","content":"Summary: db/schema.sql.","signature":"sig"}]}`)
	r, err := ce.ApplyCompaction(ctx, history, resp, host.ApplyCompactionOptions{})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	require.JSONEq(t, `{"role":"assistant","content":[{"type":"compaction","content":"Summary: db/schema.sql.","signature":"sig"}]}`, string(r.Messages[0]))
	require.Equal(t, "r1", r.ArchivedAs)
	found, err := ce.HandleToolCall(ctx, "context_search", json.RawMessage(`{"query":"schema.sql"}`))
	require.NoError(t, err)
	require.Contains(t, found, "r1")
	st := ce.Status()
	require.Less(t, st.LastPromptTokens, 1000, "the swapped conversation's estimate")
	p, err = ce.PrepareRequest(ctx, json.RawMessage(`{"model":"claude-opus-4-7","messages":[`+string(r.Messages[0])+`,{"role":"user","content":"go on"}]}`), host.PrepareRequestOptions{})
	require.NoError(t, err)
	require.False(t, p.Decision.CompactNow, "not due again")
	_, err = ce.ApplyCompaction(ctx, history, json.RawMessage(`{"content":[{"type":"text","text":"no"}]}`), host.ApplyCompactionOptions{})
	var ce2 *core.Error
	require.ErrorAs(t, err, &ce2)
	require.Equal(t, "/response/content", ce2.Path)
}
