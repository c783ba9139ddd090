package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tidwall/sjson"

	"github.com/ctxcompact/ctxcompact/core"
)

func init() {
	commands["tokens"] = command{
		summary: "count the tokens of a conversation file: tokens FILE [--encoding NAME]",
		run:     runTokens,
	}
}

// tokensOutput is the stable output of `ctxcompact tokens`.
type tokensOutput struct {
	Total      int   `json:"total"`
	PerMessage []int `json:"per_message"`
}

// runTokens prints {"total": N, "per_message": [...]} for FILE ("-" for stdin), which
// holds {"messages": [...], "config"?: {...}} or a bare array of messages. Flags may
// come before or after FILE.
func runTokens(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := commandFlags("tokens", stderr,
		"usage: ctxcompact tokens FILE [--encoding rough|o200k_base|cl100k_base|auto] [--model NAME] [--calibration F]",
		"FILE holds {\"messages\": [...]} or a bare array; - reads stdin. Prints {\"total\": N, \"per_message\": [...]}.")
	encoding := fs.String("encoding", "", "token encoding: rough (default), o200k_base, cl100k_base, or auto (from --model or the file's config.model.name)")
	model := fs.String("model", "", "model name for --encoding auto (overrides config.model.name)")
	calibration := fs.Float64("calibration", 0, "calibration factor from tokens.calibrate (overrides config.tokens.calibration)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("ctxcompact tokens: FILE is required")
	}
	file := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("ctxcompact tokens: one FILE only, got also %q", fs.Args())
	}
	conv, err := readConversation(file, stdin)
	if err != nil {
		return err
	}
	req := []byte(`{"op":"tokens.count"}`)
	req, err = sjson.SetRawBytes(req, "messages", []byte(conv.messages))
	if conv.config != "" && err == nil {
		req, err = sjson.SetRawBytes(req, "config", []byte(conv.config))
	}
	set := func(path string, v any) {
		if err == nil {
			req, err = sjson.SetBytes(req, path, v)
		}
	}
	if *encoding != "" {
		set("encoding", *encoding)
	}
	if *model != "" {
		set("config.model.name", *model)
	}
	if *calibration != 0 {
		set("config.tokens.calibration", *calibration)
	}
	if err != nil {
		return fmt.Errorf("ctxcompact tokens: %w", err)
	}

	var resp struct {
		Result *tokensOutput `json:"result"`
		Error  *core.Error   `json:"error"`
	}
	if err := json.Unmarshal(core.Call(req), &resp); err != nil {
		return fmt.Errorf("ctxcompact tokens: %w", err)
	}
	if resp.Error != nil {
		return resp.Error
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp.Result); err != nil {
		return err
	}
	_, err = stdout.Write(out.Bytes())
	return err
}
