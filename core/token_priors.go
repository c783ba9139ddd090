package core

import (
	"strconv"
	"strings"
)

// Token priors: the tokenizers of Claude, Gemini and DeepSeek are not public, so the
// core estimates their counts with rough (chars/4) or a tiktoken encoding, which
// undercount Claude by a third or more. A prior is the calibration factor a model
// family's estimate gets until the host calibrates from the usage the API reports
// (config.tokens.calibration, tokens.calibrate), which replaces it. Each factor has
// its source; docs/TOKENS.md gives them with the error measured against the usage
// recorded in the shared traces (TestTokenPriorsOnRecordedUsage).

// Where a count's calibration factor came from (CountTokensResult.CalibrationSource,
// Report.CalibrationSource).
const (
	// CalibrationFromConfig: config.tokens.calibration (or CountTokensOptions.Calibration).
	CalibrationFromConfig = "config"
	// CalibrationFromPrior: the model family's prior; the source names the family,
	// as "prior:claude".
	CalibrationFromPrior = "prior"
	// CalibrationNone: no factor (1): an exact encoding of the model's own tokenizer,
	// or a model the priors do not know.
	CalibrationNone = "none"
)

// tokenPrior is the factor of one model family's estimate under one encoding.
type tokenPrior struct {
	family   string
	encoding string
	factor   float64
}

// Model families with a prior.
const (
	familyClaude   = "claude"     // Claude 3 through Opus 4.6: one tokenizer
	familyClaude47 = "claude-4.7" // Opus 4.7 and later: a new tokenizer, 1.0-1.35x more tokens
	familyGemini   = "gemini"
	familyDeepSeek = "deepseek"
)

// tokenPriors: docs/TOKENS.md ("Priors") gives the source of each.
//   - claude: medians of the factors fitted (delta method) on the 7 recorded sessions of
//     claude-opus-4-6 in the shared traces (rough 1.38-1.91, exact 1.17-1.66);
//   - claude-4.7: claude's times 1.35, the top of the 1.0-1.35x more tokens Anthropic
//     states for the Opus 4.7 tokenizer (erring high compacts early; erring low overflows);
//   - gemini: Google documents about 4 characters a token, which is rough's rule;
//   - deepseek: DeepSeek documents 0.3 tokens an English character, 1.2x chars/4; the
//     exact encodings' factor is the median over its 5 recorded sessions.
var tokenPriors = []tokenPrior{
	{familyClaude, EncodingRough, 1.66},
	{familyClaude, EncodingO200k, 1.36},
	{familyClaude, EncodingCl100k, 1.36},
	{familyClaude47, EncodingRough, 2.24},
	{familyClaude47, EncodingO200k, 1.84},
	{familyClaude47, EncodingCl100k, 1.84},
	{familyGemini, EncodingRough, 1.0},
	{familyDeepSeek, EncodingRough, 1.2},
	{familyDeepSeek, EncodingO200k, 1.1},
	{familyDeepSeek, EncodingCl100k, 1.1},
}

// modelFamily returns the prior family of a model name ("" for none): Claude by its
// version (claude-3-5-sonnet, claude-sonnet-4-5, anthropic/claude-opus-4.7,
// us.anthropic.claude-opus-4-6-v1:0), Gemini and DeepSeek by name.
func modelFamily(model string) string {
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "claude"):
		major, minor, ok := claudeVersion(m[strings.Index(m, "claude")+len("claude"):])
		if ok && (major < 4 || major == 4 && minor < 7) {
			return familyClaude
		}
		return familyClaude47 // 4.7 and later, or no version: the newer tokenizer, which counts more
	case strings.Contains(m, "gemini"):
		return familyGemini
	case strings.Contains(m, "deepseek"):
		return familyDeepSeek
	}
	return ""
}

// claudeVersion reads the version in what follows "claude" in a model name: the first
// one or two numbers of at most two digits (a date such as 20250514 is not one).
func claudeVersion(rest string) (major, minor int, ok bool) {
	var nums []int
	for _, f := range strings.FieldsFunc(rest, func(r rune) bool { return r < '0' || r > '9' }) {
		if len(f) > 2 {
			if len(nums) > 0 {
				break // a date after the version
			}
			continue
		}
		n, _ := strconv.Atoi(f)
		nums = append(nums, n)
		if len(nums) == 2 {
			break
		}
	}
	if len(nums) == 0 {
		return 0, 0, false
	}
	if len(nums) == 1 {
		return nums[0], 0, true
	}
	return nums[0], nums[1], true
}

// priorFor is the prior of model's family under encoding (a resolved name).
func priorFor(model, encoding string) (tokenPrior, bool) {
	if encoding == "" {
		encoding = EncodingRough
	}
	fam := modelFamily(model)
	if fam == "" {
		return tokenPrior{}, false
	}
	for _, p := range tokenPriors {
		if p.family == fam && p.encoding == encoding {
			return p, true
		}
	}
	return tokenPrior{}, false
}
