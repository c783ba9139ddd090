package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"unicode/utf8"

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

// conversation is a conversation file: its list of messages (or items), the top-level
// system prompt and config if any (raw JSON, "" when absent), the keys they came under
// (the output uses the same), and the format: the --format flag, else the file's
// "format", else the one its list key implies, else "" (the core detects it).
type conversation struct {
	messages  string
	system    string
	config    string
	format    string
	listKey   string // "messages", "input" (Responses) or "contents" (Gemini)
	systemKey string // "system", "instructions" (Responses) or "systemInstruction" (Gemini)
	// formatFrom says where format came from ("--format", "the file's \"format\"",
	// "the file's \"input\" key"), "" when it is to be detected.
	formatFrom string
}

// native reports whether the conversation is in the Anthropic Messages format.
func (c conversation) native() bool {
	f, _ := core.ParseFormat(c.format)
	return f == core.FormatAnthropic
}

// listKeys are the keys a conversation file may hold its list under, with the system
// prompt's key and the format each implies ("" : the chat formats, detected).
var listKeys = []struct{ list, system, format string }{
	{"messages", "system", ""},
	{"input", "instructions", "responses"},
	{"contents", "systemInstruction", "gemini"},
}

// readConversation reads FILE ("-" for stdin) holding {"messages": [...], "system"?,
// "config"?, "format"?} (the shared traces' shape), {"input": [...], "instructions"?}
// (OpenAI Responses), {"contents": [...], "systemInstruction"?} (Gemini) or a bare
// array. format is the --format flag ("" when not given).
func readConversation(file string, stdin io.Reader, format string) (conversation, error) {
	b, err := readJSON(file, stdin)
	if err != nil {
		return conversation{}, err
	}
	doc := gjson.ParseBytes(b)
	from := ""
	if format != "" {
		from = "--format"
	}
	if doc.IsArray() {
		return conversation{messages: doc.Raw, format: format, listKey: "messages", systemKey: "system", formatFrom: from}, nil
	}
	if doc.IsObject() {
		for _, k := range listKeys {
			list := lastField(doc, k.list)
			if !list.IsArray() {
				continue
			}
			c := conversation{messages: list.Raw, listKey: k.list, systemKey: k.system, format: format, formatFrom: from}
			if c.format == "" {
				c.format, c.formatFrom = lastField(doc, "format").Str, `the file's "format"`
			}
			if c.format == "" {
				c.format, c.formatFrom = k.format, `the file's "`+k.list+`" key`
			}
			if c.format == "" {
				c.formatFrom = ""
			}
			if s := lastField(doc, k.system); s.Exists() && s.Type != gjson.Null {
				c.system = s.Raw
			}
			if s := lastField(doc, "config"); s.Exists() && s.Type != gjson.Null {
				c.config = s.Raw
			}
			return c, nil
		}
	}
	return conversation{}, &core.Error{Code: core.CodeInvalidRequest,
		Message: fmt.Sprintf("ctxcompact: %s must hold {\"messages\": [...]}, {\"input\": [...]}, {\"contents\": [...]} or an array of messages", displayName(file))}
}

// lastField is obj's member key, the last one when the key is repeated: the rule of
// every op (docs/OPS.md, duplicate keys), where gjson's Get would take the first.
func lastField(obj gjson.Result, key string) gjson.Result {
	var v gjson.Result
	obj.ForEach(func(k, val gjson.Result) bool {
		if k.Str == key {
			v = val
		}
		return true
	})
	return v
}

// formatFlag adds the --format flag to a command's flags.
func formatFlag(fs *flag.FlagSet) *string {
	return fs.String("format", "", "the messages' format: openai (openai-chat), anthropic (anthropic-messages), responses (openai-responses), ai-sdk or gemini (default: the file's \"format\", else detected)")
}

// displayName names FILE in messages: "stdin" for "-".
func displayName(file string) string {
	if file == "-" {
		return "stdin"
	}
	return file
}

// readJSON reads FILE ("-" for stdin) and checks that it is one JSON value. A file
// that is not is an invalid_json error naming where it breaks:
// "ctxcompact: FILE: not valid JSON at line L, column C (byte B): what", all three
// counted from 1 (the column in characters).
func readJSON(file string, stdin io.Reader) ([]byte, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("ctxcompact: reading %s: %w", displayName(file), err)
	}
	if err := checkJSON(displayName(file), b); err != nil {
		return nil, err
	}
	return b, nil
}

// checkJSON returns nil when b is one JSON value, else the invalid_json error of
// readJSON for input called name.
func checkJSON(name string, b []byte) *core.Error {
	if gjson.ValidBytes(b) {
		return nil
	}
	msg := "ctxcompact: " + name + ": not valid JSON"
	var v json.RawMessage
	var se *json.SyntaxError
	if err := json.Unmarshal(b, &v); errors.As(err, &se) {
		at := int(se.Offset) - 1 // the byte the decoder stopped at
		what := se.Error()
		if what == "unexpected end of JSON input" {
			at, what = len(b), "unexpected end of input"
		}
		at = max(0, min(at, len(b)))
		line := 1 + bytes.Count(b[:at], []byte{'\n'})
		col := 1 + utf8.RuneCount(b[bytes.LastIndexByte(b[:at], '\n')+1:at])
		msg += fmt.Sprintf(" at line %d, column %d (byte %d): %s", line, col, at+1, what)
	} else if !utf8.Valid(b) {
		msg += ": invalid UTF-8"
	}
	return &core.Error{Code: core.CodeInvalidJSON, Message: msg}
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

// wasmCacheDir is where --wasm keeps the module's compiled code:
// $CTXCOMPACT_CACHE_DIR when set, else <user cache dir>/ctxcompact/wazero-<version>
// ("" when there is no user cache dir). wazero keys each entry by the module's bytes
// and its own version, so a rebuilt module never runs stale code.
func wasmCacheDir() string {
	if d := os.Getenv("CTXCOMPACT_CACHE_DIR"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "ctxcompact", "wazero-"+core.Version)
}

// wasmCaller runs envelopes through one process-wide engine on the embedded module,
// compiled through the on-disk cache of wasmCacheDir unless cache is false. A cache
// that cannot be used (a read-only or broken directory) is skipped with a note on
// stderr: the module is then compiled in memory, as without the cache.
func wasmCaller(cache bool, stderr io.Writer) caller {
	return func(envelope []byte) ([]byte, error) {
		wasmOnce.Do(func() {
			ctx := context.Background()
			if dir := wasmCacheDir(); cache && dir != "" {
				if wasmEngine, wasmErr = host.New(ctx, host.WithCompilationCache(dir)); wasmErr == nil {
					return
				}
				fmt.Fprintf(stderr, "%v; compiling without it\n", wasmErr)
			}
			wasmEngine, wasmErr = host.New(ctx)
		})
		if wasmErr != nil {
			return nil, wasmErr
		}
		return wasmEngine.Call(context.Background(), envelope)
	}
}

// callerFor is the native core, or with useWasm the embedded module (cache: through
// the on-disk compilation cache; notes go to stderr).
func callerFor(useWasm, cache bool, stderr io.Writer) caller {
	if useWasm {
		return wasmCaller(cache, stderr)
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
