package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Provider-native compaction (docs/NATIVE.md): where the provider can compact a
// conversation itself, the next request says so, and the local compressor stays
// armed as the fallback. Three ops, all pure: native.policy answers what the next
// request carries, native.observe updates the session from what came back (a
// response, an error, an app-server notification), native.trim removes from a
// conversation what must not be sent again. The session is data the host keeps
// (EngineState.Native for a context engine), like the engine state.

// nativeSessionVersion is the v of the native session this core writes and reads.
const nativeSessionVersion = 1

// Native compaction's constants.
const (
	// nativeHeadroom is how far below the local threshold a server-side trigger sits,
	// so the server compacts first and the local compressor stays the fallback.
	nativeHeadroom = 8192
	// anthropicMinTrigger is the smallest trigger compact_20260112 accepts.
	anthropicMinTrigger = 50_000
	// The Anthropic beta headers of the two mechanisms.
	betaCompactThreshold = "compact-2026-01-12"
	betaCompactOnDemand  = "compact-2026-09-04"
)

// Route keys: the route a request goes to, and the issuer a compaction item is
// recorded with when it is first seen.
const (
	RouteOpenAI         = "openai"           // api.openai.com
	RouteCodex          = "codex"            // the ChatGPT Codex backend
	RouteAnthropic      = "anthropic"        // api.anthropic.com
	RouteCodexAppServer = "codex_app_server" // a Codex app-server thread
)

// Mechanisms a native.policy decision can choose, and the names session.disabled
// holds for the two that a rejection can turn off.
const (
	MechanismOpenAICompaction  = "openai_compaction"
	MechanismAnthropicCompact  = "anthropic_threshold"
	MechanismAnthropicOnDemand = "anthropic_on_demand"
	MechanismAppServer         = "app_server"
	MechanismNone              = "none"
	disabledAnthropic          = "anthropic_compaction"
)

// The modes of compression.codex_app_server_auto and compression.anthropic_native.
const (
	AppServerNative = "native" // the app-server decides; the host records its events
	AppServerHermes = "hermes" // the local threshold starts thread/compact/start
	AppServerOff    = "off"    // never started automatically (a manual request still is)

	AnthropicNativeOff       = "off"
	AnthropicNativeThreshold = "threshold" // compact_20260112 with a token trigger
	AnthropicNativeOnDemand  = "on_demand" // the local threshold asks for a summary block
)

// NativeConfig holds the compression keys of provider-native compaction. They do
// not change a local compaction, so compact.begin's fingerprint leaves them out.
type NativeConfig struct {
	CodexResponsesNative         bool   `json:"codex_responses_native"`
	CodexResponsesThreshold      int    `json:"codex_responses_compact_threshold"`
	CodexAppServerAuto           string `json:"codex_app_server_auto"`
	CodexAutoraiseNotice         bool   `json:"codex_gpt55_autoraise_notice"`
	AnthropicNative              string `json:"anthropic_native"`
	AnthropicCompactInstructions string `json:"anthropic_compact_instructions"`
}

// defaultNativeConfig is NativeConfig's defaults: nothing native is sent until a
// config opts in, and the app-server compacts its own threads.
func defaultNativeConfig() NativeConfig {
	return NativeConfig{CodexResponsesThreshold: 200_000, CodexAppServerAuto: AppServerNative,
		CodexAutoraiseNotice: true, AnthropicNative: AnthropicNativeOff}
}

// nativeConfigKeys are NativeConfig's keys in the compression section.
var nativeConfigKeys = []string{"codex_responses_native", "codex_responses_compact_threshold",
	"codex_app_server_auto", "codex_gpt55_autoraise_notice", "anthropic_native", "anthropic_compact_instructions"}

// read reads the native keys of the compression section c.
func (n *NativeConfig) read(c *configReader) {
	c.boolean("codex_responses_native", &n.CodexResponsesNative)
	c.integer("codex_responses_compact_threshold", &n.CodexResponsesThreshold, 1, maxContextLength)
	c.str("codex_app_server_auto", &n.CodexAppServerAuto, AppServerNative, AppServerHermes, AppServerOff)
	c.boolean("codex_gpt55_autoraise_notice", &n.CodexAutoraiseNotice)
	c.str("anthropic_native", &n.AnthropicNative, AnthropicNativeOff, AnthropicNativeThreshold, AnthropicNativeOnDemand)
	c.str("anthropic_compact_instructions", &n.AnthropicCompactInstructions)
}

// NativeRoute is where a request goes: the provider, its base URL and API mode, as
// a host knows them (every field may be empty).
type NativeRoute struct {
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
	APIMode  string `json:"api_mode,omitempty"`
}

// Key returns the route's key: codex_app_server, openai, codex, anthropic, or
// other:<host> (other without a host).
func (r NativeRoute) Key() string {
	if r.APIMode == "codex_app_server" {
		return RouteCodexAppServer
	}
	host, path := hostAndPath(r.BaseURL)
	provider := strings.ToLower(r.Provider)
	switch {
	case host == "api.openai.com", host == "" && provider == "openai":
		return RouteOpenAI
	case host == "chatgpt.com" && (path == "/backend-api/codex" || strings.HasPrefix(path, "/backend-api/codex/")),
		host == "" && provider == "openai-codex":
		return RouteCodex
	case host == "api.anthropic.com", host == "" && provider == "anthropic":
		return RouteAnthropic
	case host != "":
		return "other:" + host
	}
	return "other"
}

// hostAndPath returns a URL's host (lower case, without userinfo or port) and its
// path. It is the small part of URL parsing a route needs; net/url would add its
// package initialization to every module instantiation.
func hostAndPath(raw string) (host, path string) {
	rest := strings.TrimSpace(raw)
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	} else {
		return "", "" // not an absolute URL: no host
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	host, path = rest[:end], rest[end:]
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	if strings.HasPrefix(host, "[") { // an IPv6 literal
		if i := strings.IndexByte(host, ']'); i >= 0 {
			host = host[:i+1]
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	return strings.ToLower(host), path
}

// NativeSession is what native compaction remembers across a session's requests.
type NativeSession struct {
	V int `json:"v"`
	// Route is the key of the route the last decision was for.
	Route string `json:"route"`
	// Disabled lists the mechanisms a provider rejected in this session
	// (openai_compaction, anthropic_compaction): they are not sent again.
	Disabled []string `json:"disabled"`
	// Issuers maps each compaction item seen (nativeItemKey) to the route key it
	// was first seen on: an item is only ever sent back to its issuer.
	Issuers map[string]string `json:"issuers"`
	// AppServer is the bookkeeping of a Codex app-server thread.
	AppServer AppServerState `json:"app_server"`
	// NoticeShown is "<model>@<threshold_tokens>" of the last autoraise notice shown.
	NoticeShown string `json:"notice_shown"`
	// Archived are the keys of what native.prepare has handed the host for
	// archiving (the newest compaction item whose predecessors it dropped, or a
	// dropped item's own key), so a host resending its full history each turn
	// archives each drop once.
	Archived []string `json:"archived"`
}

// AppServerState is what the host has seen of a Codex app-server thread's
// compactions.
type AppServerState struct {
	// Pending is true from thread/compact/start (or a contextCompaction item
	// starting) until the compaction completes or its turn does.
	Pending     bool `json:"pending"`
	Compactions int  `json:"compactions"`
	// Boundaries are the local message counts at each completed compaction: the
	// transcript is never rewritten on this route, the boundary is recorded instead.
	Boundaries []int `json:"boundaries"`
}

func newNativeSession() NativeSession {
	return NativeSession{V: nativeSessionVersion, Disabled: []string{}, Issuers: map[string]string{},
		AppServer: AppServerState{Boundaries: []int{}}, Archived: []string{}}
}

// readNativeSession reads the session at path (absent or null is a fresh one).
func readNativeSession(v gjson.Result, path string) (NativeSession, error) {
	if !v.Exists() || v.Type == gjson.Null {
		return newNativeSession(), nil
	}
	if !v.IsObject() {
		return NativeSession{}, errorf(CodeInvalidState, path, "session must be the native session object a native op returned")
	}
	s := newNativeSession()
	dec := json.NewDecoder(bytes.NewReader([]byte(v.Raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return NativeSession{}, errorf(CodeInvalidState, path, "session is not a native session: %v", err)
	}
	if s.V != nativeSessionVersion {
		return NativeSession{}, errorf(CodeInvalidState, path+"/v", "native session version %d; this core reads version %d", s.V, nativeSessionVersion)
	}
	for i, d := range s.Disabled {
		if d != MechanismOpenAICompaction && d != disabledAnthropic {
			return NativeSession{}, errorf(CodeInvalidState, pointer(path+"/disabled", i), "unknown mechanism %q", d)
		}
	}
	if s.AppServer.Compactions < 0 {
		return NativeSession{}, errorf(CodeInvalidState, path+"/app_server/compactions", "compactions must not be negative")
	}
	if s.Disabled == nil {
		s.Disabled = []string{}
	}
	if s.Issuers == nil {
		s.Issuers = map[string]string{}
	}
	if s.AppServer.Boundaries == nil {
		s.AppServer.Boundaries = []int{}
	}
	if s.Archived == nil {
		s.Archived = []string{}
	}
	return s, nil
}

func (s *NativeSession) disabled(mechanism string) bool {
	return slices.Contains(s.Disabled, mechanism)
}

func (s *NativeSession) disable(mechanism string) {
	if !s.disabled(mechanism) {
		s.Disabled = append(s.Disabled, mechanism)
	}
}

// readRoute reads the request's route (absent is an empty route).
func readRoute(v gjson.Result) (NativeRoute, error) {
	var r NativeRoute
	if !v.Exists() || v.Type == gjson.Null {
		return r, nil
	}
	if !v.IsObject() {
		return r, errorf(CodeInvalidRequest, "/route", "route must be an object {provider, base_url, api_mode}")
	}
	var err error
	v.ForEach(func(k, val gjson.Result) bool {
		var dst *string
		switch k.Str {
		case "provider":
			dst = &r.Provider
		case "base_url":
			dst = &r.BaseURL
		case "api_mode":
			dst = &r.APIMode
		default:
			err = errorf(CodeInvalidRequest, pointer("/route", k.Str), "unknown route key %q; allowed keys: provider, base_url, api_mode", k.Str)
			return false
		}
		if val.Type != gjson.String && val.Type != gjson.Null {
			err = errorf(CodeInvalidRequest, pointer("/route", k.Str), "route %s must be a string", k.Str)
			return false
		}
		*dst = val.Str
		return true
	})
	return r, err
}

// nativeItemKey returns the key a compaction item is recorded under: a Responses
// item's id, else the FNV-1a hash of what the provider signed or encrypted (an
// Anthropic block has no id). The key names an item in one session; it is not a
// security boundary (the provider verifies its own signature).
func nativeItemKey(item gjson.Result) string {
	if id := fieldOf(item, "id"); id.Type == gjson.String && id.Str != "" {
		return id.Str
	}
	of := item.Raw
	for _, k := range []string{"signature", "encrypted_content", "content"} {
		if v := fieldOf(item, k); v.Type == gjson.String && v.Str != "" {
			of = v.Str
			break
		}
	}
	return fmt.Sprintf("fnv64:%016x", uint64(fnv64a(fnvOffset64).string(of)))
}

// modelBase is a model name after its last "/", lower case (openai/gpt-5.6 is gpt-5.6).
func modelBase(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	return name[strings.LastIndexByte(name, '/')+1:]
}

// openAICompactionModel reports whether model is of the gpt-5.6 family, the one
// the OpenAI route accepts context_management for (others fail, some by stalling).
func openAICompactionModel(model string) bool {
	m := modelBase(model)
	return m == "gpt-5.6" || strings.HasPrefix(m, "gpt-5.6-")
}

// anthropicCompactionModels are the model prefixes Anthropic documents compaction
// for (platform.claude.com, compaction-on-demand: supportedModels, 2026-12).
var anthropicCompactionModels = []string{"claude-opus-4-6", "claude-sonnet-4-6", "claude-opus-4-7",
	"claude-opus-4-8", "claude-opus-5", "claude-sonnet-5", "claude-haiku-5-5", "claude-mythos", "claude-fable"}

func anthropicCompactionModel(model string) bool {
	m := modelBase(model)
	for _, p := range anthropicCompactionModels {
		if strings.HasPrefix(m, p) {
			return true
		}
	}
	return false
}

// NativeDecision is what the next request carries (native.policy's result).
type NativeDecision struct {
	Route     string `json:"route"`
	Mechanism string `json:"mechanism"`
	// Reason is a stable code: sent, not_enabled, model_not_eligible,
	// route_not_eligible, not_responses_api, rejected, window_too_small, armed,
	// compact_now, pending, app_server_native, app_server_hermes, app_server_off.
	Reason string `json:"reason"`
	// Body holds the fields to set on the request body; Remove the ones to delete:
	// on the OpenAI routes, context_management when it is not to be sent (it must
	// never reach a model or route that does not take it). Anthropic's
	// context_management is the host's too (other edits): native.prepare merges the
	// compaction edit into it rather than setting or removing the field.
	Body   map[string]any `json:"body"`
	Remove []string       `json:"remove"`
	// Betas are the anthropic-beta header values the request needs.
	Betas []string `json:"betas"`
	// CompactNow asks the host to start native compaction now: an Anthropic
	// compaction request (CompactionRequest holds its body fields) or
	// thread/compact/start on the app-server.
	CompactNow        bool             `json:"compact_now"`
	CompactionRequest map[string]any   `json:"compaction_request"`
	AppServer         *AppServerPlan   `json:"app_server"`
	DropIssuers       []string         `json:"drop_issuers"`
	Local             NativeLocal      `json:"local"`
	CompactThreshold  int              `json:"compact_threshold"`
	Notice            *AutoraiseNotice `json:"notice"`
	Session           NativeSession    `json:"session"`
}

// AppServerPlan is the decision on a Codex app-server route.
type AppServerPlan struct {
	Mode string `json:"mode"`
	// Initiator is who starts compaction: app_server, host, or none.
	Initiator  string `json:"initiator"`
	CompactNow bool   `json:"compact_now"`
}

// NativeLocal is what the local compressor does beside the native mechanism.
type NativeLocal struct {
	// Armed is true where the local compressor stays the fallback.
	Armed bool `json:"armed"`
	// Rewrite is false where the local transcript must not be rewritten (the
	// app-server owns the thread: its compaction boundary is recorded instead).
	Rewrite         bool `json:"rewrite"`
	ThresholdTokens int  `json:"threshold_tokens"`
}

// AutoraiseNotice is the one-time notice of the Codex gpt-5.5 autoraise.
type AutoraiseNotice struct {
	Kind  string  `json:"kind"`
	Model string  `json:"model"`
	From  float64 `json:"from"`
	To    float64 `json:"to"`
	// Show is true when the host has not shown this notice (for this model and
	// threshold) in the session.
	Show bool `json:"show"`
}

// NativePolicy decides what the next request on route carries. tokens is the
// prompt's current size (0 when unknown) and manual a user's request to compact now.
func NativePolicy(cfg Config, route NativeRoute, s NativeSession, tokens int, manual bool) NativeDecision {
	thr := ResolveThreshold(cfg)
	key := route.Key()
	s.Route = key
	d := NativeDecision{Route: key, Mechanism: MechanismNone, Body: map[string]any{}, Remove: []string{},
		Betas: []string{}, DropIssuers: []string{},
		Local: NativeLocal{Armed: true, Rewrite: true, ThresholdTokens: thr.ThresholdTokens}}
	for _, issuer := range s.Issuers {
		if issuer != key && !slices.Contains(d.DropIssuers, issuer) {
			d.DropIssuers = append(d.DropIssuers, issuer)
		}
	}
	slices.Sort(d.DropIssuers)
	nc := cfg.Compression.Native
	trigger := thr.ThresholdTokens - nativeHeadroom
	switch key {
	case RouteOpenAI, RouteCodex:
		d.Mechanism, d.Reason = MechanismOpenAICompaction, "sent"
		n := min(nc.CodexResponsesThreshold, trigger)
		switch {
		case !nc.CodexResponsesNative:
			d.Reason = "not_enabled"
		case !openAICompactionModel(cfg.Model.Name):
			d.Reason = "model_not_eligible"
		case route.APIMode == "chat_completions":
			d.Reason = "not_responses_api"
		case s.disabled(MechanismOpenAICompaction):
			d.Reason = "rejected"
		case n <= 0:
			d.Reason = "window_too_small"
		default:
			d.CompactThreshold = n
			d.Body["context_management"] = []any{map[string]any{"type": "compaction", "compact_threshold": n}}
		}
		if d.Reason != "sent" {
			d.Remove = append(d.Remove, "context_management")
		}
	case RouteAnthropic:
		d.anthropic(cfg, &s, trigger, tokens, manual)
	case RouteCodexAppServer:
		d.appServer(nc.CodexAppServerAuto, &s, thr.ThresholdTokens, tokens, manual)
	default:
		d.Reason = "route_not_eligible"
		if !nc.CodexResponsesNative && nc.AnthropicNative == AnthropicNativeOff {
			d.Reason = "not_enabled"
		}
	}
	if thr.Autoraised {
		before := cfg
		before.Compression.CodexGPT55Autoraise = false
		shown := modelBase(cfg.Model.Name) + "@" + strconv.Itoa(thr.ThresholdTokens)
		d.Notice = &AutoraiseNotice{Kind: "codex_autoraise", Model: modelBase(cfg.Model.Name),
			From: ResolveThreshold(before).Fraction, To: thr.Fraction,
			Show: nc.CodexAutoraiseNotice && s.NoticeShown != shown}
		if d.Notice.Show {
			s.NoticeShown = shown
		}
	}
	d.Session = s
	return d
}

// anthropic decides the Anthropic route: a compact_20260112 edit with a token
// trigger, or an on-demand compaction request when the prompt reaches it.
func (d *NativeDecision) anthropic(cfg Config, s *NativeSession, trigger, tokens int, manual bool) {
	nc := cfg.Compression.Native
	d.Mechanism = MechanismAnthropicCompact
	if nc.AnthropicNative == AnthropicNativeOnDemand {
		d.Mechanism = MechanismAnthropicOnDemand
	}
	switch {
	case nc.AnthropicNative == AnthropicNativeOff:
		d.Mechanism, d.Reason = MechanismNone, "not_enabled"
		return
	case !anthropicCompactionModel(cfg.Model.Name):
		d.Reason = "model_not_eligible"
		return
	case s.disabled(disabledAnthropic):
		d.Reason = "rejected"
		return
	}
	if nc.AnthropicNative == AnthropicNativeThreshold {
		if trigger < anthropicMinTrigger {
			d.Reason = "window_too_small"
			return
		}
		edit := map[string]any{"type": "compact_20260112", "trigger": map[string]any{"type": "input_tokens", "value": trigger}}
		if nc.AnthropicCompactInstructions != "" {
			edit["instructions"] = nc.AnthropicCompactInstructions
		}
		d.Reason, d.CompactThreshold = "sent", trigger
		d.Body["context_management"] = map[string]any{"edits": []any{edit}}
		d.Betas = append(d.Betas, betaCompactThreshold)
		return
	}
	d.Betas = append(d.Betas, betaCompactOnDemand)
	d.Reason, d.CompactThreshold = "armed", max(trigger, 0)
	if manual || tokens > 0 && tokens >= trigger {
		req := map[string]any{"type": "summarize"}
		if nc.AnthropicCompactInstructions != "" {
			req["instructions"] = nc.AnthropicCompactInstructions
		}
		d.Reason, d.CompactNow = "compact_now", true
		d.CompactionRequest = map[string]any{"compaction": req}
	}
}

// appServer decides a Codex app-server route: who starts the thread's compaction.
func (d *NativeDecision) appServer(mode string, s *NativeSession, threshold, tokens int, manual bool) {
	d.Mechanism, d.Local.Rewrite = MechanismAppServer, false
	plan := &AppServerPlan{Mode: mode}
	switch mode {
	case AppServerHermes:
		plan.Initiator, d.Reason = "host", "app_server_hermes"
		plan.CompactNow = tokens > 0 && tokens >= threshold
	case AppServerOff:
		plan.Initiator, d.Reason = "none", "app_server_off"
	default:
		plan.Initiator, d.Reason = "app_server", "app_server_native"
	}
	if manual {
		plan.CompactNow = true
	}
	switch {
	case plan.CompactNow && s.AppServer.Pending:
		plan.CompactNow, d.Reason = false, "pending"
	case plan.CompactNow:
		d.Reason = "compact_now"
	}
	d.CompactNow, d.AppServer = plan.CompactNow, plan
}

func opNativePolicy(req opRequest) ([]byte, error) {
	cfg, route, s, err := nativeParams(req)
	if err != nil {
		return nil, err
	}
	tokens, manual, err := nativeAsk(req)
	if err != nil {
		return nil, err
	}
	return marshal(NativePolicy(cfg, route, s, tokens, manual))
}

// nativeAsk reads a request's tokens (the prompt's current size) and manual (a
// user's request to compact now).
func nativeAsk(req opRequest) (tokens int, manual bool, err error) {
	if v := req.Field("tokens"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num < 0 || v.Num != float64(int64(v.Num)) || v.Num > maxContextLength*10 {
			return 0, false, errorf(CodeInvalidRequest, "/tokens", "tokens must be a non-negative integer, got %s", v.Raw)
		}
		tokens = int(v.Num)
	}
	if v := req.Field("manual"); v.Exists() && v.Type != gjson.Null {
		if !v.IsBool() {
			return 0, false, errorf(CodeInvalidRequest, "/manual", "manual must be true or false")
		}
		manual = v.Bool()
	}
	return tokens, manual, nil
}

// nativeParams reads the config, route and session every native op takes.
func nativeParams(req opRequest) (Config, NativeRoute, NativeSession, error) {
	cfg, err := parseConfig(req.Field("config"), "/config")
	if err != nil {
		return cfg, NativeRoute{}, NativeSession{}, err
	}
	route, err := readRoute(req.Field("route"))
	if err != nil {
		return cfg, route, NativeSession{}, err
	}
	s, err := readNativeSession(req.Field("session"), "/session")
	return cfg, route, s, err
}
