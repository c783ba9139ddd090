package core

import (
	"math"

	"github.com/tidwall/gjson"
)

// Calibration (docs/DESIGN.md §7, we go further): the tokenizers of many models (Claude,
// Gemini, ...) are not public, and chars/4 undercounts Claude by about 2x on code
// and JSON. The API reports the prompt tokens of every request, so the host can
// tell the core how far its estimate is off and pass the factor back as
// config.tokens.calibration. See docs/TOKENS.md for how a host feeds it.

// CalibrationBaseline is an earlier request of the same conversation: its first
// MessageCount messages were sent and the API reported PromptTokens for them.
type CalibrationBaseline struct {
	MessageCount int
	PromptTokens int
}

// CalibrateOptions are the observations to calibrate on.
type CalibrateOptions struct {
	// Encoding and Model select the estimate being calibrated, as in CountTokens.
	Encoding string
	Model    string
	// PromptTokens is what the API reported for the whole message list.
	PromptTokens int
	// FixedOverhead is the part of PromptTokens the messages do not carry: a system
	// prompt and tool schemas sent outside the list. Ratio method only.
	FixedOverhead int
	// Baseline, when set, selects the delta method: the factor is fitted on the
	// tokens added since the baseline, so an unknown fixed overhead cancels out.
	Baseline *CalibrationBaseline
}

// CalibrateResult is a calibration factor and what it was computed from.
type CalibrateResult struct {
	// Encoding is the estimate the factor applies to ("auto" resolved).
	Encoding string `json:"encoding"`
	// Method is "ratio" (factor = (prompt_tokens - fixed_overhead) / estimate) or
	// "delta" (factor = (prompt_tokens - baseline prompt_tokens) / estimate of the
	// messages added since the baseline).
	Method string `json:"method"`
	// Factor goes into config.tokens.calibration. Rounded to 4 decimals.
	Factor float64 `json:"factor"`
	// Estimate is the uncalibrated estimate of the whole list (what tokens.count
	// returns as total without calibration).
	Estimate int `json:"estimate"`
	// EstimateDelta is the uncalibrated estimate of the messages after the baseline
	// (delta method only, else 0).
	EstimateDelta int `json:"estimate_delta"`
	// PromptTokens is the reported count calibrated on.
	PromptTokens int `json:"prompt_tokens"`
	// FixedOverhead is the given overhead (ratio) or the one the two observations
	// imply: prompt_tokens - factor * estimate (delta; may be negative on noisy data).
	FixedOverhead int `json:"fixed_overhead"`
}

// Calibrate returns the factor that maps the estimate of messages (a JSON array)
// to the prompt tokens the API reported for them.
func Calibrate(messages []byte, opts CalibrateOptions) (CalibrateResult, error) {
	msgs, err := tokenMessages(gjson.ParseBytes(messages), nil, "")
	if err != nil {
		return CalibrateResult{}, err
	}
	c, err := counterFor(opts.Encoding, opts.Model, 0, "", "")
	if err != nil {
		return CalibrateResult{}, err
	}
	return calibrate(c, msgs, opts, calibratePaths{})
}

type calibratePaths struct{ messages, promptTokens, fixedOverhead, baselineCount, baselineTokens string }

func calibrate(c tokenCounter, msgs []gjson.Result, opts CalibrateOptions, p calibratePaths) (CalibrateResult, error) {
	if len(msgs) == 0 {
		return CalibrateResult{}, errorf(CodeInvalidRequest, p.messages, "calibration needs at least one message")
	}
	if opts.PromptTokens <= 0 {
		return CalibrateResult{}, errorf(CodeInvalidRequest, p.promptTokens, "prompt_tokens must be a positive integer (the API-reported prompt tokens)")
	}
	if opts.FixedOverhead < 0 || opts.FixedOverhead >= opts.PromptTokens {
		return CalibrateResult{}, errorf(CodeInvalidRequest, p.fixedOverhead, "fixed_overhead must be at least 0 and below prompt_tokens (%d)", opts.PromptTokens)
	}
	base := c
	base.scale = 1
	r := CalibrateResult{Encoding: c.name, Method: "ratio", PromptTokens: opts.PromptTokens}
	per := countTokens(base, msgs)
	r.Estimate = per.Total
	var factor float64
	if b := opts.Baseline; b != nil {
		if opts.FixedOverhead != 0 {
			return CalibrateResult{}, errorf(CodeInvalidRequest, p.fixedOverhead, "give fixed_overhead or baseline, not both: the delta method finds the overhead itself")
		}
		if b.MessageCount < 0 || b.MessageCount >= len(msgs) {
			return CalibrateResult{}, errorf(CodeInvalidRequest, p.baselineCount, "baseline message_count must be in [0, %d): the baseline request sent fewer messages than this one", len(msgs))
		}
		if b.PromptTokens <= 0 || b.PromptTokens >= opts.PromptTokens {
			return CalibrateResult{}, errorf(CodeInvalidRequest, p.baselineTokens, "baseline prompt_tokens must be positive and below prompt_tokens (%d)", opts.PromptTokens)
		}
		for _, n := range per.PerMessage[b.MessageCount:] {
			r.EstimateDelta += n
		}
		if r.EstimateDelta <= 0 {
			return CalibrateResult{}, errorf(CodeInvalidRequest, p.messages, "the messages after the baseline have no tokens to calibrate on")
		}
		r.Method = "delta"
		factor = float64(opts.PromptTokens-b.PromptTokens) / float64(r.EstimateDelta)
	} else {
		if r.Estimate <= 0 {
			return CalibrateResult{}, errorf(CodeInvalidRequest, p.messages, "the messages have no tokens to calibrate on")
		}
		factor = float64(opts.PromptTokens-opts.FixedOverhead) / float64(r.Estimate)
	}
	r.Factor = math.Round(factor*1e4) / 1e4
	if r.Factor <= 0 || r.Factor > maxCalibration {
		return CalibrateResult{}, errorf(CodeInvalidRequest, p.promptTokens, "the observations give a calibration factor of %v, outside (0, %d]: check prompt_tokens, fixed_overhead and the message list", r.Factor, maxCalibration)
	}
	if r.Method == "delta" {
		r.FixedOverhead = opts.PromptTokens - int(math.Round(r.Factor*float64(r.Estimate)))
	} else {
		r.FixedOverhead = opts.FixedOverhead
	}
	return r, nil
}

// opTokensCalibrate: {messages, prompt_tokens, encoding?, config?, fixed_overhead?,
// baseline?: {message_count, prompt_tokens}} -> CalibrateResult.
func opTokensCalibrate(req opRequest) ([]byte, error) {
	msgs, err := tokenMessages(req.params.Get("messages"), req.arrays["messages"].ElementList(), "/messages")
	if err != nil {
		return nil, err
	}
	c, err := requestCounter(req.params, false)
	if err != nil {
		return nil, err
	}
	var opts CalibrateOptions
	if opts.PromptTokens, err = requestInt(req.Fields(), "prompt_tokens", "/prompt_tokens", true); err != nil {
		return nil, err
	}
	if opts.FixedOverhead, err = requestInt(req.Fields(), "fixed_overhead", "/fixed_overhead", false); err != nil {
		return nil, err
	}
	if b := req.Field("baseline"); b.Exists() && b.Type != gjson.Null {
		if !b.IsObject() {
			return nil, errorf(CodeInvalidRequest, "/baseline", "baseline must be an object {message_count, prompt_tokens}")
		}
		opts.Baseline = &CalibrationBaseline{}
		if opts.Baseline.MessageCount, err = requestInt(objectFields(b), "message_count", "/baseline/message_count", true); err != nil {
			return nil, err
		}
		if opts.Baseline.PromptTokens, err = requestInt(objectFields(b), "prompt_tokens", "/baseline/prompt_tokens", true); err != nil {
			return nil, err
		}
	}
	r, err := calibrate(c, msgs, opts, calibratePaths{
		messages: "/messages", promptTokens: "/prompt_tokens", fixedOverhead: "/fixed_overhead",
		baselineCount: "/baseline/message_count", baselineTokens: "/baseline/prompt_tokens",
	})
	if err != nil {
		return nil, err
	}
	return marshal(r)
}

// requestInt reads an integer field of obj; absent (when not required) gives 0.
func requestInt(obj fieldReader, key, path string, required bool) (int, error) {
	v := obj.Get(key)
	if !v.Exists() || v.Type == gjson.Null {
		if required {
			return 0, errorf(CodeInvalidRequest, path, "%s is required: an integer", key)
		}
		return 0, nil
	}
	if v.Type != gjson.Number || v.Num != math.Trunc(v.Num) || math.Abs(v.Num) > 1<<40 {
		return 0, errorf(CodeInvalidRequest, path, "%s must be an integer", key)
	}
	return int(v.Num), nil
}
