package core

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// The context engine's rules: what a host's ContextEngine (JS, Python, Go) does
// between compactions, as ops over one JSON object the host keeps, the engine state.
// The core stays stateless: each op takes the state and returns the next one, so the
// three engines are thin wrappers with one set of rules (usage normalisation, the
// breaker, model switches, status), and a host can persist a session's state.

// engineStateVersion is the v of the engine state this core writes and reads.
const engineStateVersion = 1

// EngineState is a context engine's session: its config and counters.
type EngineState struct {
	V int `json:"v"`
	// Config is the engine's config (validated); every compaction uses it.
	Config               json.RawMessage `json:"config"`
	LastPromptTokens     int             `json:"last_prompt_tokens"`
	LastCompletionTokens int             `json:"last_completion_tokens"`
	LastTotalTokens      int             `json:"last_total_tokens"`
	CompressionCount     int             `json:"compression_count"`
	// BreakerTokens is tokens_after of the last compaction when it did not fit under
	// the threshold: should_compress stays quiet until the prompt has grown past it
	// by a tail budget. Null when the last compaction fitted.
	BreakerTokens *int `json:"breaker_tokens"`
	// LastCompaction is what the last compaction reported, null before the first.
	LastCompaction *EngineCompaction `json:"last_compaction"`
	// BaseURL and APIMode are the route of the model, as update_model last set it.
	BaseURL string `json:"base_url"`
	APIMode string `json:"api_mode"`
	// Native is the session of provider-native compaction (native.go), kept here by
	// a context engine; omitted until the engine first uses it.
	Native *NativeSession `json:"native,omitempty"`
	// Requested is a compaction the agent asked for (compact_now), until the next
	// compaction is recorded.
	Requested *CompactionRequest `json:"compaction_requested,omitempty"`
	// Prepared is a compaction summarized ahead of the trigger, until a
	// compaction is recorded (session_prepare.go).
	Prepared *PreparedCompaction `json:"prepared,omitempty"`
	// Pins are the identities of the session's pinned messages (pins.go).
	Pins []string `json:"pins,omitempty"`
	// Undo is what takes the last compaction back (session_undo.go).
	Undo *CompactionUndo `json:"undo,omitempty"`
}

// EngineCompaction is what the engine keeps of a compaction's report.
type EngineCompaction struct {
	Compacted    bool         `json:"compacted"`
	Reason       Reason       `json:"reason"`
	Fits         bool         `json:"fits"`
	TokensAfter  int          `json:"tokens_after"`
	FallbackUsed bool         `json:"fallback_used"`
	FallbackCode FallbackCode `json:"fallback_code"`
	// TokensBefore, Summarized and Pruned (the tool outputs it pruned) say what it
	// took, for context_status.
	TokensBefore int         `json:"tokens_before,omitempty"`
	Summarized   *IndexRange `json:"summarized,omitempty"`
	Pruned       int         `json:"pruned,omitempty"`
	// Summary is the summary's text (without its prefix and closing lines).
	Summary string `json:"summary,omitempty"`
}

// EngineStatus is what a context engine's get_status returns, and where the
// wrappers read their fields (threshold_tokens, last_prompt_tokens, ...).
type EngineStatus struct {
	Name             string  `json:"name"`
	Model            string  `json:"model"`
	Provider         string  `json:"provider"`
	ContextLength    int     `json:"context_length"`
	ThresholdTokens  int     `json:"threshold_tokens"`
	ThresholdPercent float64 `json:"threshold_percent"`
	// ThresholdRule is what decided the threshold (ThresholdResult.Rule).
	ThresholdRule        string        `json:"threshold_rule"`
	LastPromptTokens     int           `json:"last_prompt_tokens"`
	LastCompletionTokens int           `json:"last_completion_tokens"`
	LastTotalTokens      int           `json:"last_total_tokens"`
	UsagePercent         float64       `json:"usage_percent"`
	CompressionCount     int           `json:"compression_count"`
	BreakerTokens        *int          `json:"breaker_tokens"`
	LastCompactionFits   *bool         `json:"last_compaction_fits"`
	LastFallbackUsed     *bool         `json:"last_fallback_used"`
	LastFallbackCode     *FallbackCode `json:"last_fallback_code"`
	// CompactionRequested is true while a compact_now waits for the next compaction.
	CompactionRequested bool `json:"compaction_requested"`
	// LastCompaction is what the last compaction did (its summary included);
	// absent before the first. CanUndo is true while undo can take it back.
	LastCompaction *EngineCompaction `json:"last_compaction,omitempty"`
	CanUndo        bool              `json:"can_undo"`
}

// Usage is the API-reported usage of one LLM call, normalised.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// Source is the shape it was read as: openai, responses, anthropic, ai-sdk,
	// gemini, or none (nothing to record).
	Source string `json:"source"`
}

// NewEngineState starts a session with config cfg (a config object, validated).
func NewEngineState(cfg []byte) (EngineState, error) {
	merged, err := MergeConfig(nil, cfg)
	if err != nil {
		return EngineState{}, err
	}
	return EngineState{V: engineStateVersion, Config: merged}, nil
}

// Status describes the session.
func (s EngineState) Status() EngineStatus {
	cfg, _ := ParseConfig(s.Config) // validated when the state was read
	t := ResolveThreshold(cfg)
	st := EngineStatus{
		Name: "ctxcompact", Model: cfg.Model.Name, Provider: cfg.Model.Provider,
		ContextLength: t.ContextLength, ThresholdTokens: t.ThresholdTokens,
		ThresholdPercent: t.Fraction, ThresholdRule: t.Rule,
		LastPromptTokens: s.LastPromptTokens, LastCompletionTokens: s.LastCompletionTokens,
		LastTotalTokens: s.LastTotalTokens, CompressionCount: s.CompressionCount,
		BreakerTokens: s.BreakerTokens,
	}
	if t.ContextLength > 0 {
		st.UsagePercent = math.Min(100, float64(s.LastPromptTokens)/float64(t.ContextLength)*100)
	}
	if c := s.LastCompaction; c != nil {
		st.LastCompactionFits, st.LastFallbackUsed, st.LastFallbackCode = &c.Fits, &c.FallbackUsed, &c.FallbackCode
		st.LastCompaction = c
	}
	st.CanUndo = s.Undo != nil
	st.CompactionRequested = s.Requested != nil
	return st
}

// RecordUsage records the usage of the last LLM call (see normalizeUsage).
func (s *EngineState) RecordUsage(u Usage) {
	if u.Source == "none" {
		return
	}
	s.LastPromptTokens, s.LastCompletionTokens, s.LastTotalTokens = u.PromptTokens, u.CompletionTokens, u.TotalTokens
}

// ShouldCompress is the agent trigger on the session: promptTokens (or, when
// negative, the last reported prompt tokens) against the threshold, with the
// session's breaker.
func (s EngineState) ShouldCompress(promptTokens int) ShouldCompressResult {
	cfg, _ := ParseConfig(s.Config)
	if promptTokens < 0 {
		promptTokens = s.LastPromptTokens
	}
	breaker := 0
	if s.BreakerTokens != nil {
		breaker = *s.BreakerTokens
	}
	r := ShouldCompress(cfg, promptTokens, breaker)
	if s.Requested != nil && cfg.Compression.Enabled {
		r.ShouldCompress, r.Reason = true, ReasonRequested
	}
	return r
}

// RecordCompaction records a compaction's report. A compaction that did not fit
// under the threshold sets the breaker, whether or not it compacted anything (a
// nothing_to_compact above the threshold would otherwise fire the trigger on every
// turn); one that fits clears it.
func (s *EngineState) RecordCompaction(r Report) {
	if r.Compacted {
		s.CompressionCount++
		// Until the next response reports real usage, the estimate after the
		// compaction is the best guess of the prompt's size.
		s.LastPromptTokens = r.TokensAfter
	}
	if r.Fits {
		s.BreakerTokens = nil
	} else {
		after := r.TokensAfter
		s.BreakerTokens = &after
	}
	s.LastCompaction = &EngineCompaction{Compacted: r.Compacted, Reason: r.Reason, Fits: r.Fits,
		TokensAfter: r.TokensAfter, FallbackUsed: r.FallbackUsed, FallbackCode: r.FallbackCode,
		TokensBefore: r.TokensBefore, Summarized: r.Summarized, Pruned: len(r.Pruned)}
	s.Requested = nil // a compaction ran, whether or not it was the one asked for
	s.Prepared = nil  // spliced, or made stale by it
}

// ModelUpdate is a model switch (or a fallback to another model).
type ModelUpdate struct {
	Model         string `json:"model"`
	ContextLength int    `json:"context_length"`
	Provider      string `json:"provider"`
	BaseURL       string `json:"base_url"`
	APIMode       string `json:"api_mode"`
}

// UpdateModel switches the session to another model: its config's model section
// becomes the new one (per-model thresholds are re-resolved from it), and the
// breaker is cleared, since the new window changes what fits.
func (s *EngineState) UpdateModel(m ModelUpdate) error {
	model := map[string]any{"name": m.Model, "context_length": m.ContextLength}
	if m.Provider != "" {
		model["provider"] = m.Provider
	}
	over, _ := marshal(map[string]any{"model": model})
	// The model section is replaced, not merged: a provider of the old model must
	// not stay with the new one.
	base := gjson.ParseBytes(s.Config)
	var kept []byte
	kept = append(kept, '{')
	for _, section := range configSections {
		if v := fieldOf(base, section); section != "model" && v.Exists() {
			if len(kept) > 1 {
				kept = append(kept, ',')
			}
			kept = append(append(jsonraw.AppendString(kept, section), ':'), v.Raw...)
		}
	}
	kept = append(kept, '}')
	merged, err := mergeConfig(gjson.ParseBytes(kept), gjson.ParseBytes(over))
	if err != nil {
		// The update's own fields, not /config: say which one.
		if e, ok := err.(*Error); ok {
			e.Path = strings.Replace(e.Path, "/config/model/name", "/model", 1)
			e.Path = strings.Replace(e.Path, "/config/model/", "/", 1)
		}
		return err
	}
	s.Config, s.BaseURL, s.APIMode, s.BreakerTokens = merged, m.BaseURL, m.APIMode, nil
	s.Prepared = nil // prepared for another window and summarizer
	return nil
}

// Reset starts the session over (/new, /reset): counters, usage, the breaker and
// the last compaction and the native session are cleared; the config and the route
// stay.
func (s *EngineState) Reset() {
	*s = EngineState{V: s.V, Config: s.Config, BaseURL: s.BaseURL, APIMode: s.APIMode}
}

// usageField is one way a provider names a count.
type usageField struct {
	key string
	dst *int
}

// normalizeUsage reads the usage object of an LLM response as one of the shapes
// providers and SDKs return (see Usage.Source): OpenAI chat (prompt_tokens, cached
// tokens included), OpenAI Responses (input_tokens with input_tokens_details, cached
// included), Anthropic (input_tokens, which leaves out cache reads and writes: they
// are added), the AI SDK (camelCase inputTokens or promptTokens; inputTokens may be
// an object with total), and Gemini's usageMetadata (promptTokenCount). The total
// defaults to prompt + completion. Null, absent or an empty object records nothing.
// path is where usage sits, for errors.
func normalizeUsage(usage gjson.Result, path string) (Usage, error) {
	if !usage.Exists() || usage.Type == gjson.Null {
		return Usage{Source: "none"}, nil
	}
	if !usage.IsObject() {
		return Usage{}, errorf(CodeInvalidRequest, path, "usage must be an object as the API returned it")
	}
	var u Usage
	var err error
	count := func(key string) (int, bool) {
		v := fieldOf(usage, key)
		if err != nil || !v.Exists() || v.Type == gjson.Null {
			return 0, false
		}
		if v.IsObject() && fieldOf(v, "total").Exists() { // AI SDK provider usage: {total, noCache, ...}
			v = fieldOf(v, "total")
		}
		if v.Type != gjson.Number || v.Num < 0 || v.Num != math.Trunc(v.Num) || v.Num > math.MaxInt32 {
			err = errorf(CodeInvalidRequest, pointer(path, key), "usage %s must be a non-negative integer, got %s", key, v.Raw)
			return 0, false
		}
		return int(v.Num), true
	}
	first := func(dst *int, keys ...string) bool {
		for _, k := range keys {
			if n, ok := count(k); ok {
				*dst = n
				return true
			}
		}
		return false
	}
	has := func(key string) bool { return fieldOf(usage, key).Exists() }
	switch {
	case has("prompt_tokens"):
		u.Source = "openai"
		first(&u.PromptTokens, "prompt_tokens")
		first(&u.CompletionTokens, "completion_tokens")
	case has("input_tokens") && (has("input_tokens_details") || has("output_tokens_details")):
		u.Source = "responses"
		first(&u.PromptTokens, "input_tokens")
		first(&u.CompletionTokens, "output_tokens")
	case has("input_tokens"):
		u.Source = "anthropic"
		var in, read, write int
		first(&in, "input_tokens")
		first(&read, "cache_read_input_tokens", "cache_read_tokens")
		first(&write, "cache_creation_input_tokens", "cache_write_tokens")
		u.PromptTokens = in + read + write
		first(&u.CompletionTokens, "output_tokens")
	case has("inputTokens") || has("promptTokens"):
		u.Source = "ai-sdk"
		first(&u.PromptTokens, "inputTokens", "promptTokens")
		first(&u.CompletionTokens, "outputTokens", "completionTokens")
	case has("promptTokenCount"):
		u.Source = "gemini"
		var candidates, thoughts int
		first(&u.PromptTokens, "promptTokenCount")
		first(&candidates, "candidatesTokenCount")
		first(&thoughts, "thoughtsTokenCount")
		u.CompletionTokens = candidates + thoughts
	default:
		if len(strings.TrimSpace(usage.Raw)) > 2 { // not {}
			return Usage{}, errorf(CodeInvalidRequest, path, "usage has no token counts this engine reads (prompt_tokens, input_tokens, inputTokens, promptTokens or promptTokenCount)")
		}
		return Usage{Source: "none"}, nil
	}
	if !first(&u.TotalTokens, "total_tokens", "totalTokens", "totalTokenCount") {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	if err != nil {
		return Usage{}, err
	}
	return u, nil
}

// readEngineState reads the engine state of a request (at /state).
func readEngineState(v gjson.Result) (EngineState, error) {
	var s EngineState
	if !v.IsObject() {
		return s, errorf(CodeInvalidState, "/state", "state must be the engine state object an engine op returned")
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(v.Raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, errorf(CodeInvalidState, "/state", "state is not an engine state: %v", err)
	}
	if s.V != engineStateVersion {
		return s, errorf(CodeInvalidState, "/state/v", "engine state version %d; this core reads version %d", s.V, engineStateVersion)
	}
	if _, err := parseConfig(gjson.ParseBytes(s.Config), "/state/config"); err != nil {
		if e, ok := err.(*Error); ok {
			e.Code = CodeInvalidState
		}
		return s, err
	}
	if n := fieldOf(v, "native"); n.Exists() && n.Type != gjson.Null {
		ns, err := readNativeSession(n, "/state/native")
		if err != nil {
			return s, err
		}
		s.Native = &ns
	}
	if s.LastPromptTokens < 0 || s.LastCompletionTokens < 0 || s.LastTotalTokens < 0 || s.CompressionCount < 0 ||
		s.BreakerTokens != nil && *s.BreakerTokens < 0 {
		return s, errorf(CodeInvalidState, "/state", "state counts must not be negative")
	}
	return s, nil
}

// engineResult writes {"state", "status", ...extra}.
func engineResult(s EngineState, extra map[string]any) ([]byte, error) {
	out := map[string]any{"state": s, "status": s.Status()}
	for k, v := range extra {
		out[k] = v
	}
	return marshal(out)
}

// engineOp makes the handler of an engine op that changes or reads the state of the
// request: step may return extra result fields.
func engineOp(step func(s *EngineState, req opRequest) (map[string]any, error)) handler {
	return returning(func(req opRequest) ([]byte, error) {
		s, err := readEngineState(req.params.Get("state"))
		if err != nil {
			return nil, err
		}
		extra, err := step(&s, req)
		if err != nil {
			return nil, err
		}
		return engineResult(s, extra)
	})
}

func opEngineStart(req opRequest) ([]byte, error) {
	cfg := req.params.Get("config")
	s, err := NewEngineState([]byte(cfg.Raw))
	if err != nil {
		return nil, err
	}
	return engineResult(s, nil)
}

var (
	opEngineUsage          = engineOp(stepUsage)
	opEngineShouldCompress = engineOp(stepShouldCompress)
	opEngineRecord         = engineOp(stepRecord)
	opEngineUpdateModel    = engineOp(stepUpdateModel)
	opEngineReset          = engineOp(stepReset)
	opEngineStatus         = engineOp(func(*EngineState, opRequest) (map[string]any, error) { return nil, nil })
)

// stepUsage records a response's usage.
func stepUsage(s *EngineState, req opRequest) (map[string]any, error) {
	u, err := normalizeUsage(req.params.Get("usage"), "/usage")
	if err != nil {
		return nil, err
	}
	s.RecordUsage(u)
	return map[string]any{"usage": u}, nil
}

// stepShouldCompress is the trigger on the session.
func stepShouldCompress(s *EngineState, req opRequest) (map[string]any, error) {
	prompt := -1
	if v := req.params.Get("prompt_tokens"); v.Exists() && v.Type != gjson.Null {
		n, err := intParam(req.params, "prompt_tokens")
		if err != nil {
			return nil, err
		}
		prompt = n
	}
	r := s.ShouldCompress(prompt)
	out := map[string]any{"should_compress": r.ShouldCompress, "reason": r.Reason,
		"prompt_tokens": r.PromptTokens, "threshold_tokens": r.ThresholdTokens}
	if s.shouldPrepare(r) {
		out["prepare_compaction"] = true
	}
	return out, nil
}

// stepRecord records a compaction's report.
func stepRecord(s *EngineState, req opRequest) (map[string]any, error) {
	v := req.params.Get("report")
	if !v.IsObject() {
		return nil, errorf(CodeInvalidRequest, "/report", "report must be the report object the compaction returned")
	}
	var r Report
	if err := json.Unmarshal([]byte(v.Raw), &r); err != nil {
		return nil, errorf(CodeInvalidRequest, "/report", "report is not a compaction report: %v", err)
	}
	if !fieldOf(v, "fits").Exists() || !fieldOf(v, "tokens_after").Exists() {
		return nil, errorf(CodeInvalidRequest, "/report", "report needs fits and tokens_after: pass the report the compaction returned")
	}
	s.RecordCompaction(r)
	return nil, nil
}

// stepUpdateModel switches the session's model.
func stepUpdateModel(s *EngineState, req opRequest) (map[string]any, error) {
	q := req.params
	var m ModelUpdate
	for key, dst := range map[string]*string{"model": &m.Model, "provider": &m.Provider, "base_url": &m.BaseURL, "api_mode": &m.APIMode} {
		if v := q.Get(key); v.Exists() && v.Type != gjson.Null {
			if v.Type != gjson.String {
				return nil, errorf(CodeInvalidRequest, "/"+key, "%s must be a string", key)
			}
			*dst = v.Str
		}
	}
	if v := q.Get("context_length"); !v.Exists() || v.Type != gjson.Number || v.Num < 1 || v.Num != math.Trunc(v.Num) || v.Num > maxContextLength {
		return nil, errorf(CodeInvalidRequest, "/context_length", "context_length must be an integer from 1 to %d: the new model's window", maxContextLength)
	} else {
		m.ContextLength = int(v.Num)
	}
	return nil, s.UpdateModel(m)
}

// stepReset starts the session over.
func stepReset(s *EngineState, _ opRequest) (map[string]any, error) {
	s.Reset()
	return nil, nil
}
