package core

import (
	"math"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// maxCalibration bounds a calibration factor, as config.tokens.calibration does.
const maxCalibration = 10

// CountTokensOptions selects how CountTokens counts.
type CountTokensOptions struct {
	// Encoding is "rough" (the default when empty), "o200k_base", "cl100k_base" or
	// "auto" (from Model, see EncodingForModel).
	Encoding string
	// Model is the model name "auto" resolves from.
	Model string
	// Calibration scales every message count; 0 means Model's family prior, if it
	// has one (docs/TOKENS.md, Priors), else 1. See Calibrate.
	Calibration float64
}

// CountTokensResult is the count of a message list.
type CountTokensResult struct {
	// Encoding is the encoding used ("auto" resolved).
	Encoding string `json:"encoding"`
	// Calibration is the factor applied to each message count (1 for none).
	Calibration float64 `json:"calibration"`
	// CalibrationSource says where it came from: "config" (given), "prior:<family>"
	// (the model family's prior) or "none".
	CalibrationSource string `json:"calibration_source"`
	// Total is the sum of PerMessage plus the reply priming the request adds once
	// (3 tokens for the exact encodings, 0 for rough).
	Total int `json:"total"`
	// PerMessage holds the calibrated count of each message, in input order.
	PerMessage []int `json:"per_message"`
	// CacheHits is how many messages were counted from the per-instance cache.
	// It depends on earlier calls, so the op reports it only when asked.
	CacheHits int `json:"-"`
}

// CountTokens counts the tokens of messages, a JSON array of chat messages (OpenAI
// or Anthropic shape). Exact counts of each message are cached per instance, so
// counting a conversation again after one message was appended tokenizes only that
// message. See docs/TOKENS.md for the per-message rules.
func CountTokens(messages []byte, opts CountTokensOptions) (CountTokensResult, error) {
	msgs, err := tokenMessages(gjson.ParseBytes(messages), nil, "")
	if err != nil {
		return CountTokensResult{}, err
	}
	c, err := counterFor(opts.Encoding, opts.Model, opts.Calibration, "", "")
	if err != nil {
		return CountTokensResult{}, err
	}
	return countTokens(c, msgs), nil
}

func countTokens(c tokenCounter, msgs []gjson.Result) CountTokensResult {
	r := CountTokensResult{Encoding: c.name, Calibration: c.scale, CalibrationSource: c.source, PerMessage: make([]int, len(msgs))}
	for i, m := range msgs {
		n, hit := c.messageRaw(m)
		if hit {
			r.CacheHits++
		}
		r.PerMessage[i] = c.scaled(n)
		r.Total += r.PerMessage[i]
	}
	if len(msgs) > 0 {
		r.Total += c.replyPriming()
	}
	return r
}

// counterFor validates an encoding name and a calibration factor and returns the
// counter. encPath and calPath locate them in the request for errors.
func counterFor(encoding, model string, calibration float64, encPath, calPath string) (tokenCounter, error) {
	if calibration < 0 || math.IsNaN(calibration) || math.IsInf(calibration, 0) || calibration > maxCalibration {
		return tokenCounter{}, errorf(CodeInvalidConfig, calPath, "calibration must be a factor in (0, %d], or 0 for none; got %v", maxCalibration, calibration)
	}
	return newModelCounter(encoding, model, calibration, encPath)
}

// tokenMessages checks that v is an array of message objects and returns them.
func tokenMessages(v gjson.Result, elements []string, path string) ([]gjson.Result, error) {
	if !v.IsArray() {
		if !v.Exists() {
			return nil, errorf(CodeInvalidMessages, path, "messages is required: an array of chat messages")
		}
		return nil, errorf(CodeInvalidMessages, path, "messages must be an array of chat messages")
	}
	if elements != nil { // found while the request was validated
		msgs := make([]gjson.Result, len(elements))
		for k, raw := range elements {
			if msgs[k] = rawValue(raw); !msgs[k].IsObject() {
				return nil, errorf(CodeInvalidMessages, pointer(path, k), "each message must be a JSON object")
			}
		}
		return msgs, nil
	}
	// Else walk the raw array (no string is decoded): a cached count needs only each
	// message's bytes.
	var msgs []gjson.Result
	var err error
	jsonraw.ForEachElement(v.Raw, func(raw string) bool {
		m := rawValue(raw)
		if !m.IsObject() {
			err = errorf(CodeInvalidMessages, pointer(path, len(msgs)), "each message must be a JSON object")
			return false
		}
		msgs = append(msgs, m)
		return true
	})
	return msgs, err
}

// requestCounter picks the counter for an op: the request's "encoding" if given,
// else config.tokens.encoding, else rough ("auto" from config.model.name);
// calibrated by config.tokens.calibration when calibrated is true. The whole config
// is validated as every op does.
func requestCounter(req params, calibrated bool) (tokenCounter, error) {
	cfg, err := parseConfig(req.Get("config"), "/config")
	if err != nil {
		return tokenCounter{}, err
	}
	encoding, model, calibration := cfg.Tokens.Encoding, cfg.Model.Name, cfg.Tokens.Calibration
	encPath := "/config/tokens/encoding"
	if v := req.Get("encoding"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.String {
			return tokenCounter{}, errorf(CodeInvalidRequest, "/encoding", "encoding must be a string: one of %v or %q", Encodings(), EncodingAuto)
		}
		encoding, encPath = v.Str, "/encoding"
	}
	if !calibrated {
		calibration = 0
	}
	c, err := counterFor(encoding, model, calibration, encPath, "/config/tokens/calibration")
	if e, ok := err.(*Error); ok && encPath == "/encoding" {
		e.Code = CodeInvalidRequest // a request parameter, not the config
	}
	c.images = imageRuleForProvider(cfg.Model.Provider)
	return c, err
}

// tokensCountResult is the wire form of the tokens.count result.
type tokensCountResult struct {
	CountTokensResult
	CacheHits *int `json:"cache_hits,omitempty"`
	// System is the top-level system prompt's count (in Total), for a format that
	// has one and a request that gives it.
	System *int `json:"system,omitempty"`
}

// itemFormat returns the format a tokens.count request names or its items have,
// when it is not one of the chat formats (whose messages tokens.count reads by the
// chat counting rule); ok is false for the chat formats.
func itemFormat(formatV, msgsV gjson.Result, known *jsonraw.ArrayParts) (messageFormat, bool, error) {
	name, err := readFormatParam(formatV)
	if err != nil {
		return nil, false, err
	}
	if name == "" {
		name = sniffFormat(msgsV, known)
	}
	if name == "" || name == FormatOpenAI || name == FormatAnthropic {
		return nil, false, nil
	}
	return formatOf(name), true, nil
}

// countItems counts a list of f's items with c, as f's reader estimates them, and
// the top-level system when given.
func countItems(f messageFormat, req params, c tokenCounter, known *jsonraw.ArrayParts) (tokensCountResult, error) {
	msgs, err := f.read(req.Get("messages"), c, known)
	if err != nil {
		return tokensCountResult{}, err
	}
	r := tokensCountResult{CountTokensResult: CountTokensResult{Encoding: c.name, Calibration: c.scale, CalibrationSource: c.source, PerMessage: make([]int, len(msgs))}}
	for i := range msgs {
		r.PerMessage[i] = msgs[i].tokens
		r.Total += msgs[i].tokens
	}
	if sys := req.Get("system"); sys.Exists() && sys.Type != gjson.Null {
		if !f.topLevelSystem() {
			return tokensCountResult{}, errorf(CodeInvalidRequest, "/system", "format %q has no top-level system prompt: put it in the list", f.name())
		}
		n, err := f.checkSystem(gjson.Parse(sys.Raw), c)
		if err != nil {
			return tokensCountResult{}, err
		}
		r.System, r.Total = &n, r.Total+n
	}
	if len(msgs) > 0 {
		r.Total += c.replyPriming()
	}
	return r, nil
}

// opTokensCount: {messages, encoding?, config?, report_cache_hits?} ->
// {encoding, calibration, total, per_message[], cache_hits (when asked)}.
func opTokensCount(q opRequest) ([]byte, error) {
	req := q.params // one pass over the request, not one per field
	msgs, err := tokenMessages(req.Get("messages"), q.arrays["messages"].ElementList(), "/messages")
	if err != nil {
		return nil, err
	}
	c, err := requestCounter(req, true)
	if err != nil {
		return nil, err
	}
	report := false
	if v := req.Get("report_cache_hits"); v.Exists() {
		if !v.IsBool() {
			return nil, errorf(CodeInvalidRequest, "/report_cache_hits", "report_cache_hits must be a boolean")
		}
		report = v.Bool()
	}
	var r tokensCountResult
	if f, ok, err := itemFormat(req.Get("format"), req.Get("messages"), q.arrays["messages"]); err != nil {
		return nil, err
	} else if ok { // a format whose items are not the chat envelope: counted by its reader
		if r, err = countItems(f, req, c, q.arrays["messages"]); err != nil {
			return nil, err
		}
		return marshal(r)
	}
	r.CountTokensResult = countTokens(c, msgs)
	if report {
		r.CacheHits = &r.CountTokensResult.CacheHits
	}
	return marshal(r)
}
