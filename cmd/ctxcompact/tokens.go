package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/ctxcompact/ctxcompact/core"
)

func init() {
	commands["tokens"] = command{
		summary: "count the tokens of a conversation file: tokens FILE [--encoding NAME]",
		run:     runTokens,
	}
}

// tokensOutput is the stable output of `ctxcompact tokens`: the encoding used
// ("auto" resolved), the calibration factor, the total and each message's count,
// and the Anthropic top-level system prompt's count when FILE has one (in Total).
type tokensOutput struct {
	Encoding    string  `json:"encoding"`
	Calibration float64 `json:"calibration"`
	Total       int     `json:"total"`
	System      *int    `json:"system,omitempty"`
	PerMessage  []int   `json:"per_message"`
}

// runTokens prints {"encoding", "calibration", "total", "system"?, "per_message"}
// for FILE ("-" for stdin), which holds {"messages": [...], "system"?: ...,
// "config"?: {...}} or a bare array of messages, and names the encoding on stderr.
// The messages are checked as compact checks them. Flags may come before or after
// FILE.
func runTokens(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("tokens", stderr,
		"usage: ctxcompact tokens FILE [--format NAME] [--encoding rough|o200k_base|cl100k_base|auto] [--model NAME] [--calibration F]",
		"FILE holds {\"messages\": [...], \"system\"?: ..., \"config\"?: {...}}, {\"input\": [...], \"instructions\"?},",
		"{\"contents\": [...], \"systemInstruction\"?} or a bare array; - reads stdin.",
		"Prints {\"encoding\", \"calibration\", \"total\", \"system\"?, \"per_message\": [...]}; a top-level system is counted",
		"as a first system message, in total and in \"system\".")
	encoding := fs.String("encoding", "", "token encoding: rough (default), o200k_base, cl100k_base, or auto (from --model or the file's config.model.name)")
	model := fs.String("model", "", "model name for --encoding auto (overrides config.model.name)")
	format := formatFlag(fs)
	calibration := fs.Float64("calibration", 0, "calibration factor from tokens.calibrate, > 0 (overrides config.tokens.calibration)")
	file, err := fileArg(fs, args)
	if err != nil {
		return err
	}
	if isSet(fs, "calibration") && !(*calibration > 0) {
		return fmt.Errorf("ctxcompact tokens: --calibration must be a positive factor, got %v", *calibration)
	}
	conv, err := readConversation(file, stdin, *format)
	if err != nil {
		return err
	}
	cfg := []byte(conv.config)
	set := func(path string, v any) {
		if err == nil {
			if len(cfg) == 0 {
				cfg = []byte("{}")
			}
			cfg, err = sjson.SetBytes(cfg, path, v)
		}
	}
	if *model != "" {
		set("model.name", *model)
	}
	if *calibration != 0 {
		set("tokens.calibration", *calibration)
	}
	if err != nil {
		return fmt.Errorf("ctxcompact tokens: %w", err)
	}
	if err := checkLikeCompact(conv, cfg); err != nil {
		return err
	}

	// A top-level system is counted as the system message it stands for (the chat
	// formats), or by the format's own rule (the op's "system").
	msgs := []byte(conv.messages)
	chat := chatFormat(conv.format)
	if conv.system != "" && chat {
		msgs = make([]byte, 0, len(conv.messages)+len(conv.system)+40)
		msgs = append(msgs, `[{"role":"system","content":`...)
		msgs = append(msgs, conv.system...)
		msgs = append(msgs, '}')
		if rest := bytes.TrimSpace([]byte(conv.messages)[1:]); len(rest) > 0 && rest[0] != ']' {
			msgs = append(msgs, ',')
		}
		msgs = append(msgs, conv.messages[1:]...)
	}
	req := []byte(`{"op":"tokens.count"}`)
	req, err = sjson.SetRawBytes(req, "messages", msgs)
	if len(cfg) > 0 && err == nil {
		req, err = sjson.SetRawBytes(req, "config", cfg)
	}
	if *encoding != "" && err == nil {
		req, err = sjson.SetBytes(req, "encoding", *encoding)
	}
	if conv.format != "" && !chat && err == nil {
		req, err = sjson.SetBytes(req, "format", conv.format)
		if conv.system != "" && err == nil {
			req, err = sjson.SetRawBytes(req, "system", []byte(conv.system))
		}
	}
	if err != nil {
		return fmt.Errorf("ctxcompact tokens: %w", err)
	}

	var resp struct {
		Result *tokensOutput `json:"result"`
		Error  *core.Error   `json:"error"`
	}
	raw := core.Call(req)
	if err := json.Unmarshal(raw, &resp); err != nil {
		return fmt.Errorf("ctxcompact tokens: %w", err)
	}
	if resp.Error != nil {
		return resp.Error
	}
	res := resp.Result
	if conv.system != "" && chat && len(res.PerMessage) > 0 {
		n := res.PerMessage[0]
		res.System, res.PerMessage = &n, res.PerMessage[1:]
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return err
	}
	if _, err = stdout.Write(out.Bytes()); err != nil {
		return err
	}

	asked := *encoding
	if asked == "" {
		asked = gjson.GetBytes(cfg, "tokens.encoding").Str
	}
	how := ""
	switch {
	case asked == core.EncodingAuto:
		how = " (auto"
		if m := gjson.GetBytes(cfg, "model.name").Str; m != "" {
			how += ", from model " + m
		}
		how += ")"
	case asked == "":
		how = " (the default)"
	}
	switch src := gjson.GetBytes(raw, "result.calibration_source").Str; {
	case strings.HasPrefix(src, core.CalibrationFromPrior):
		how += fmt.Sprintf(", calibrated ×%g by the %s family's prior (give --calibration to replace it)", res.Calibration, strings.TrimPrefix(src, core.CalibrationFromPrior+":"))
	case res.Calibration != 1:
		how += fmt.Sprintf(", calibrated ×%g", res.Calibration)
	}
	fmt.Fprintf(stderr, "ctxcompact: %s tokens over %d messages, encoding %s%s\n", groupDigits(int64(res.Total)), len(res.PerMessage), res.Encoding, how)
	return nil
}

// checkLikeCompact checks a conversation as compact.begin does (the messages, the
// top-level system and the roles its layout allows), with the error code and path
// compact gives: compact.begin with a reported prompt of 1 token returns unchanged
// right after that check, and the builtin summarizer keeps nothing for a finish.
func checkLikeCompact(conv conversation, cfg []byte) error {
	params := make([]byte, 0, len(conv.messages)+len(conv.system)+len(cfg)+96)
	params = append(params, `{"force":false,"prompt_tokens":1,"summarizer":"builtin","output":"refs"`...)
	if len(cfg) > 0 {
		params = append(params, `,"config":`...)
		params = append(params, cfg...)
	}
	if conv.format != "" {
		params = appendJSONString(append(params, `,"format":`...), conv.format)
	}
	if conv.system != "" {
		params = append(params, `,"system":`...)
		params = append(params, conv.system...)
	}
	params = append(params, `,"messages":`...)
	params = append(params, conv.messages...)
	params = append(params, '}')
	_, err := opResult(nativeCaller, "compact.begin", params)
	return err
}

// chatFormat reports whether format (a name, an alias or "" for detected) is one of
// the chat formats, whose top-level system tokens counts as a first system message.
func chatFormat(format string) bool {
	f, ok := core.ParseFormat(format)
	return format == "" || ok && (f == core.FormatOpenAI || f == core.FormatAnthropic)
}
