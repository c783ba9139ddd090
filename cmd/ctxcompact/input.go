package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/host"
)

// commandFlags is the flag set of command name: errors and usage go to stderr, and
// usage, when given, prints these lines before the flags' defaults.
func commandFlags(name string, stderr io.Writer, usage ...string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if len(usage) > 0 {
		fs.Usage = func() {
			for _, line := range usage {
				fmt.Fprintln(stderr, line)
			}
			fs.PrintDefaults()
		}
	}
	return fs
}

// fileArg parses flags placed before or after the one FILE argument.
func fileArg(fs *flag.FlagSet, args []string) (string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		fs.Usage()
		return "", fmt.Errorf("ctxcompact %s: want exactly one FILE, got %d", fs.Name(), len(pos))
	}
	return pos[0], nil
}

// conversation is a conversation file: its messages, the native top-level system
// and config if any (raw JSON, "" when absent), and whether the file declares the
// Anthropic format.
type conversation struct {
	messages string
	system   string
	config   string
	native   bool
}

// readConversation reads FILE ("-" for stdin) holding {"messages": [...], "system"?,
// "config"?} (the shared traces' shape) or a bare array of messages.
func readConversation(file string, stdin io.Reader) (conversation, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return conversation{}, fmt.Errorf("ctxcompact: reading %s: %w", file, err)
	}
	if !gjson.ValidBytes(b) {
		return conversation{}, fmt.Errorf("ctxcompact: %s is not valid JSON", file)
	}
	doc := gjson.ParseBytes(b)
	switch {
	case doc.IsArray():
		return conversation{messages: doc.Raw}, nil
	case doc.IsObject() && doc.Get("messages").IsArray():
		c := conversation{messages: doc.Get("messages").Raw, native: doc.Get("format").Str == "anthropic-messages"}
		if s := doc.Get("system"); s.Exists() && s.Type != gjson.Null {
			c.system = s.Raw
		}
		if s := doc.Get("config"); s.Exists() && s.Type != gjson.Null {
			c.config = s.Raw
		}
		return c, nil
	}
	return conversation{}, fmt.Errorf("ctxcompact: %s must hold {\"messages\": [...]} or an array of messages", file)
}

// caller runs one request envelope: core.Call natively, or the embedded wasm module
// on wazero with --wasm. Both print the same bytes.
type caller func(envelope []byte) ([]byte, error)

func nativeCaller(envelope []byte) ([]byte, error) { return core.Call(envelope), nil }

var (
	wasmOnce   sync.Once
	wasmEngine *host.Engine
	wasmErr    error
)

// wasmCaller runs envelopes through one process-wide engine on the embedded module.
func wasmCaller(envelope []byte) ([]byte, error) {
	wasmOnce.Do(func() { wasmEngine, wasmErr = host.New(context.Background()) })
	if wasmErr != nil {
		return nil, wasmErr
	}
	return wasmEngine.Call(context.Background(), envelope)
}

func callerFor(useWasm bool) caller {
	if useWasm {
		return wasmCaller
	}
	return nativeCaller
}

// opResult runs op with params through call and returns its result, or its error
// envelope as a *core.Error (message, code and path).
func opResult(call caller, op string, params []byte) (gjson.Result, error) {
	env := make([]byte, 0, len(params)+len(op)+16)
	env = append(env, `{"op":`...)
	env = appendJSONString(env, op)
	if len(params) > 2 {
		env = append(env, ',')
		env = append(env, params[1:]...)
	} else {
		env = append(env, '}')
	}
	out, err := call(env)
	if err != nil {
		return gjson.Result{}, err
	}
	resp := gjson.ParseBytes(out)
	if e := resp.Get("error"); e.Exists() {
		return gjson.Result{}, &core.Error{Code: core.ErrorCode(e.Get("code").Str), Message: e.Get("message").Str, Path: e.Get("path").Str}
	}
	if !resp.Get("result").Exists() {
		return gjson.Result{}, errors.New("ctxcompact: malformed response from the core")
	}
	return resp.Get("result"), nil
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}
