package core

import (
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// Config is the configuration of every op, parsed from the request's "config" object.
// The JSON keys mirror the Hermes config keys (docs/DESIGN.md §4).
type Config struct {
	Compression   CompressionConfig `json:"compression"`
	PromptCaching CachingConfig     `json:"prompt_caching"`
	Model         ModelConfig       `json:"model"`
	Tokens        TokensConfig      `json:"tokens"`
	// Context is left out of compact.begin's state fingerprint (stateFor): it
	// does not change a compaction.
	Context ContextConfig `json:"context,omitzero"`
}

// ContextConfig holds the "context" keys: which context engine a host's
// ContextEngine runs (issue 17).
type ContextConfig struct {
	// Engine is compressor (compaction only, the default) or lossless (compaction
	// whose originals are archived to a recall store, with context_search and
	// context_expand tools for the agent).
	Engine string `json:"engine"`
	// ArchivePart is how many consecutive input messages one part of a lossless
	// compaction's archive spans (0: DefaultArchivePart): a smaller part holds
	// less in memory at once, in more steps (docs/SESSION.md).
	ArchivePart int `json:"archive_part,omitempty"`
}

// Context engines (ContextConfig.Engine).
const (
	ContextEngineCompressor = "compressor"
	ContextEngineLossless   = "lossless"
)

// CompressionConfig holds the "compression" keys.
type CompressionConfig struct {
	Enabled         bool             `json:"enabled"`
	Threshold       float64          `json:"threshold"`
	ModelThresholds []ModelThreshold `json:"model_thresholds"`
	TargetRatio     float64          `json:"target_ratio"`
	// TailMode is tiered (the default), legacy (Hermes Agent's tail and no facts
	// index) or lean; see the TailMode constants.
	TailMode string `json:"tail_mode"`
	// PruneFirst: a compaction only prunes tool outputs, with no summary, when that
	// leaves the conversation no larger than a summarizing compaction would (off by
	// default: see RATIONALE.md, "Why is pruning first off by default?").
	PruneFirst          bool    `json:"prune_first"`
	ProtectFirstN       int     `json:"protect_first_n"`
	ProtectLastN        int     `json:"protect_last_n"`
	MinTailUserMessages int     `json:"min_tail_user_messages"`
	CodexGPT55Autoraise bool    `json:"codex_gpt55_autoraise"`
	SmallContextFloor   float64 `json:"small_context_floor"`
	SmallContextLimit   int     `json:"small_context_limit"`
	HygieneThreshold    float64 `json:"hygiene_threshold"`
	// SummaryContextLength is the summarizer model's window; 0 means the main model's.
	SummaryContextLength int `json:"summary_context_length"`
	// Instructions is standing guidance added to every summary request (what to
	// keep, how to write it); the builtin summary cannot follow free text.
	Instructions string `json:"instructions,omitempty"`
	// PrepareRatio is the share of the threshold at which a context engine's
	// should_compress says to prepare the next compaction in the background
	// (session_prepare.go); 0 means DefaultPrepareRatio.
	PrepareRatio float64 `json:"prepare_ratio,omitempty"`
	// Native holds the keys of provider-native compaction (native.go); json "-" keeps
	// them out of compact.begin's fingerprint, which they do not change.
	Native NativeConfig `json:"-"`
	// protectLastNSet and targetRatioSet record that the config gave these keys: the
	// small-window tail rule (threshold.go) sizes the tail only where they are unset.
	protectLastNSet, targetRatioSet bool
}

// ModelThreshold is one entry of compression.model_thresholds: a substring of the
// model name and the fraction it selects.
type ModelThreshold struct {
	Key      string  `json:"key"`
	Fraction float64 `json:"fraction"`
}

// CachingConfig holds the "prompt_caching" keys.
type CachingConfig struct {
	CacheTTL string `json:"cache_ttl"`
}

// ModelConfig names the main model and its window.
type ModelConfig struct {
	Name          string `json:"name"`
	Provider      string `json:"provider"`
	ContextLength int    `json:"context_length"`
}

// TokensConfig chooses the token counter: an encoding and a calibration factor.
type TokensConfig struct {
	Encoding string `json:"encoding"`
	// Calibration scales every estimate; 0 (not given) means the model family's
	// prior (docs/TOKENS.md, Priors), else 1.
	Calibration float64 `json:"calibration"`
}

// Defaults (docs/DESIGN.md §4).
const (
	DefaultContextLength = 200_000
	maxContextLength     = 100_000_000
)

// DefaultConfig returns the configuration used for every key a request leaves out.
func DefaultConfig() Config {
	return Config{
		Compression: CompressionConfig{
			Enabled:             true,
			Threshold:           0.50,
			TargetRatio:         0.20,
			TailMode:            TailModeTiered,
			ProtectFirstN:       3,
			ProtectLastN:        20,
			MinTailUserMessages: 1,
			CodexGPT55Autoraise: true,
			SmallContextFloor:   0.75,
			SmallContextLimit:   512_000,
			HygieneThreshold:    0.85,
			Native:              defaultNativeConfig(),
		},
		PromptCaching: CachingConfig{CacheTTL: "5m"},
		Model:         ModelConfig{ContextLength: DefaultContextLength},
		Tokens:        TokensConfig{Encoding: EncodingRough},
		Context:       ContextConfig{Engine: ContextEngineCompressor},
	}
}

// ParseConfig parses a config object (JSON) over the defaults. Empty input means
// the defaults. A bad value is a *Error naming the key and what is allowed.
func ParseConfig(raw []byte) (Config, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return DefaultConfig(), nil
	}
	if !gjson.ValidBytes(raw) {
		return Config{}, errorf(CodeInvalidJSON, "", "config is not valid JSON")
	}
	return parseConfig(gjson.ParseBytes(raw), "")
}

// configReader walks one config object, checking keys against an allowed set.
type configReader struct {
	obj  gjson.Result
	path string
	err  error
}

// get returns the value of key and whether it is set (not null); at(key) is its
// JSON pointer, built only for an error.
func (r *configReader) get(key string) (gjson.Result, bool) {
	v := fieldOf(r.obj, key)
	return v, r.err == nil && v.Exists() && v.Type != gjson.Null
}

// at is the JSON pointer of key in this object.
func (r *configReader) at(key string) string { return pointer(r.path, key) }

func (r *configReader) fail(path, format string, args ...any) {
	if r.err == nil {
		r.err = errorf(CodeInvalidConfig, path, format, args...)
	}
}

func (r *configReader) boolean(key string, dst *bool) {
	if v, ok := r.get(key); ok {
		if !v.IsBool() {
			r.fail(r.at(key), "%s must be true or false", key)
			return
		}
		*dst = v.Bool()
	}
}

// fraction reads a number in (lo, 1] (or [0, 1] when zeroOK).
func (r *configReader) fraction(key string, dst *float64, zeroOK bool) {
	if v, ok := r.get(key); ok {
		if v.Type != gjson.Number || v.Num > 1 || v.Num < 0 || (!zeroOK && v.Num == 0) || math.IsNaN(v.Num) {
			lo := "greater than 0"
			if zeroOK {
				lo = "at least 0 (0 disables it)"
			}
			r.fail(r.at(key), "%s must be a number %s and at most 1, got %s", key, lo, v.Raw)
			return
		}
		*dst = v.Num
	}
}

func (r *configReader) integer(key string, dst *int, min, max int) {
	if v, ok := r.get(key); ok {
		if v.Type != gjson.Number || v.Num != math.Trunc(v.Num) || v.Num < float64(min) || v.Num > float64(max) {
			r.fail(r.at(key), "%s must be an integer from %d to %d, got %s", key, min, max, v.Raw)
			return
		}
		*dst = int(v.Num)
	}
}

func (r *configReader) str(key string, dst *string, allowed ...string) {
	if v, ok := r.get(key); ok {
		if v.Type != gjson.String {
			r.fail(r.at(key), "%s must be a string", key)
			return
		}
		if len(allowed) > 0 && !contains(allowed, v.Str) {
			r.fail(r.at(key), "%s must be one of %s, got %q", key, strings.Join(allowed, ", "), v.Str)
			return
		}
		*dst = v.Str
	}
}

// object opens a nested object, rejecting keys outside allowed.
func (r *configReader) object(key string, allowed ...string) *configReader {
	v, ok := r.get(key)
	sub := &configReader{obj: v, path: r.at(key)}
	if !ok {
		sub.obj = gjson.Result{}
		return sub
	}
	sub.checkObject(allowed)
	if sub.err != nil && r.err == nil {
		r.err = sub.err
	}
	return sub
}

func (r *configReader) checkObject(allowed []string) {
	if !r.obj.IsObject() {
		r.fail(r.path, "%s must be an object", strings.TrimPrefix(r.path, "/"))
		return
	}
	r.obj.ForEach(func(k, _ gjson.Result) bool {
		if !contains(allowed, k.Str) {
			r.fail(pointer(r.path, k.Str), "unknown key %q; allowed keys: %s", k.Str, strings.Join(allowed, ", "))
			return false
		}
		return true
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseConfig parses the config object v (missing or null means defaults); path is
// where v sits in the request, for error paths.
func parseConfig(v gjson.Result, path string) (Config, error) {
	cfg := DefaultConfig()
	if !v.Exists() || v.Type == gjson.Null {
		return cfg, nil
	}
	root := &configReader{obj: v, path: path}
	root.checkObject(configSections)
	if root.err != nil {
		return cfg, root.err
	}

	c := root.object("compression", append([]string{"enabled", "threshold", "model_thresholds", "target_ratio",
		"tail_mode", "prune_first", "protect_first_n", "protect_last_n", "min_tail_user_messages",
		"codex_gpt55_autoraise", "small_context_floor", "small_context_limit",
		"hygiene_threshold", "summary_context_length", "instructions", "prepare_ratio"}, nativeConfigKeys...)...)
	cc := &cfg.Compression
	c.boolean("enabled", &cc.Enabled)
	c.fraction("threshold", &cc.Threshold, false)
	c.fraction("target_ratio", &cc.TargetRatio, false)
	c.str("tail_mode", &cc.TailMode, TailModeTiered, TailModeLegacy, TailModeLean)
	c.boolean("prune_first", &cc.PruneFirst)
	c.integer("protect_first_n", &cc.ProtectFirstN, 0, 10_000)
	c.integer("protect_last_n", &cc.ProtectLastN, 0, 100_000)
	c.integer("min_tail_user_messages", &cc.MinTailUserMessages, 0, 1_000)
	c.boolean("codex_gpt55_autoraise", &cc.CodexGPT55Autoraise)
	if v := fieldOf(c.obj, "small_context_floor"); v.Exists() && v.Type == gjson.Null {
		cc.SmallContextFloor = 0 // null disables the floor, like 0
	} else {
		c.fraction("small_context_floor", &cc.SmallContextFloor, true)
	}
	c.integer("small_context_limit", &cc.SmallContextLimit, 0, maxContextLength)
	c.fraction("hygiene_threshold", &cc.HygieneThreshold, false)
	c.integer("summary_context_length", &cc.SummaryContextLength, 0, maxContextLength)
	c.str("instructions", &cc.Instructions)
	c.fraction("prepare_ratio", &cc.PrepareRatio, false)
	if len(cc.Instructions) > maxInstructionsBytes {
		c.fail(c.at("instructions"), "instructions must be at most %d bytes, got %d", maxInstructionsBytes, len(cc.Instructions))
	}
	cc.Native.read(c)
	_, cc.protectLastNSet = c.get("protect_last_n")
	_, cc.targetRatioSet = c.get("target_ratio")
	if mt, ok := c.get("model_thresholds"); ok {
		p := c.at("model_thresholds")
		if !mt.IsObject() {
			c.fail(p, "model_thresholds must be an object mapping a model-name substring to a fraction")
		}
		keys, values := configMembers(mt) // of duplicate keys the last, as everywhere
		for k, key := range keys {
			f, kp := gjson.Parse(values[k]), pointer(p, key)
			switch {
			case key == "":
				c.fail(kp, "model_thresholds keys must be non-empty model-name substrings")
			case f.Type != gjson.Number || f.Num <= 0 || f.Num > 1:
				c.fail(kp, "model_thresholds[%q] must be a number greater than 0 and at most 1, got %s", key, f.Raw)
			default:
				cc.ModelThresholds = append(cc.ModelThresholds, ModelThreshold{Key: key, Fraction: f.Num})
			}
			if c.err != nil {
				break
			}
		}
		sort.Slice(cc.ModelThresholds, func(i, j int) bool { return cc.ModelThresholds[i].Key < cc.ModelThresholds[j].Key })
	}
	if c.err != nil {
		return cfg, c.err
	}

	pc := root.object("prompt_caching", "cache_ttl")
	pc.str("cache_ttl", &cfg.PromptCaching.CacheTTL, "5m", "1h")
	if pc.err != nil {
		return cfg, pc.err
	}

	m := root.object("model", "name", "provider", "context_length")
	m.str("name", &cfg.Model.Name)
	m.str("provider", &cfg.Model.Provider)
	m.integer("context_length", &cfg.Model.ContextLength, 1, maxContextLength)
	if m.err != nil {
		return cfg, m.err
	}

	t := root.object("tokens", "encoding", "calibration")
	t.str("encoding", &cfg.Tokens.Encoding)
	if v, ok := t.get("calibration"); ok {
		if v.Type != gjson.Number || v.Num <= 0 || v.Num > 10 {
			t.fail(t.at("calibration"), "calibration must be a number greater than 0 and at most 10, got %s", v.Raw)
		} else {
			cfg.Tokens.Calibration = v.Num
		}
	}
	if t.err != nil {
		return cfg, t.err
	}

	cx := root.object("context", "engine", "archive_part")
	cx.str("engine", &cfg.Context.Engine, ContextEngineCompressor, ContextEngineLossless)
	cx.integer("archive_part", &cfg.Context.ArchivePart, 1, 1_000_000)
	if cx.err != nil {
		return cfg, cx.err
	}
	if root.err != nil {
		return cfg, root.err
	}
	return cfg, nil
}

// configSections are the config's sections, in the order a merged config lists them.
var configSections = []string{"compression", "prompt_caching", "model", "tokens", "context"}

// MergeConfig merges the config object over over the config object base: section
// by section and key by key, over's key winning, an explicit null included; a value
// that is itself an object below a section (compression.model_thresholds) replaces
// base's as a whole. Both are validated first (errors at /base/... and /config/...).
// Empty or null input is an empty config. This is the one rule every runtime uses
// for a per-call config over a compactor's or an engine's config.
func MergeConfig(base, over []byte) ([]byte, error) {
	b, o := gjson.ParseBytes(base), gjson.ParseBytes(over)
	if len(strings.TrimSpace(string(base))) > 0 && !gjson.ValidBytes(base) {
		return nil, errorf(CodeInvalidJSON, "/base", "base config is not valid JSON")
	}
	if len(strings.TrimSpace(string(over))) > 0 && !gjson.ValidBytes(over) {
		return nil, errorf(CodeInvalidJSON, "/config", "config is not valid JSON")
	}
	return mergeConfig(b, o)
}

func mergeConfig(base, over gjson.Result) ([]byte, error) {
	if _, err := parseConfig(base, "/base"); err != nil {
		return nil, err
	}
	if _, err := parseConfig(over, "/config"); err != nil {
		return nil, err
	}
	out := []byte{'{'}
	for _, section := range configSections {
		keys, values := configMembers(fieldOf(base, section))
		ok, ov := configMembers(fieldOf(over, section))
		for k, key := range ok {
			if at := slices.Index(keys, key); at >= 0 {
				values[at] = ov[k]
			} else {
				keys, values = append(keys, key), append(values, ov[k])
			}
		}
		if len(keys) == 0 {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(jsonraw.AppendString(out, section), ':', '{')
		for k, key := range keys {
			if k > 0 {
				out = append(out, ',')
			}
			out = append(append(jsonraw.AppendString(out, key), ':'), values[k]...)
		}
		out = append(out, '}')
	}
	return append(out, '}'), nil
}

// configMembers returns the keys of a validated config section and their raw
// values, in order; of duplicate keys the last wins, as JSON.parse and json.loads
// read them. A missing or null section has none.
func configMembers(section gjson.Result) (keys, values []string) {
	section.ForEach(func(k, v gjson.Result) bool {
		if at := slices.Index(keys, k.Str); at >= 0 {
			values[at] = v.Raw
		} else {
			keys, values = append(keys, k.Str), append(values, v.Raw)
		}
		return true
	})
	return keys, values
}

func opConfigMerge(req opRequest) ([]byte, error) {
	merged, err := mergeConfig(req.params.Get("base"), req.params.Get("config"))
	if err != nil {
		return nil, err
	}
	return append(append([]byte(`{"config":`), merged...), '}'), nil
}
