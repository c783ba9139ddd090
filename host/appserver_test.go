package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ctxcompact/ctxcompact/core"
)

// The Codex app-server route (issue 16): the host talks to `codex app-server`, a
// JSON-RPC 2.0 peer over stdio (newline-delimited), and never rewrites the local
// transcript; the native session records who started each compaction and where it
// fell. The peer here is this test binary re-executed with fakeAppServerEnv set
// (TestMain), speaking the app server's shapes: thread/start, turn/start (one
// agent message and a thread/tokenUsage/updated per turn, and a compaction of its
// own once its usage reaches fakeAutoCompactEnv), thread/compact/start (answered
// {} at once, then item/started and item/completed of a contextCompaction item
// and turn/completed), and test/received, which lists the requests it got.

const (
	fakeAppServerEnv   = "CTXCOMPACT_TEST_FAKE_APP_SERVER"
	fakeTurnTokensEnv  = "CTXCOMPACT_TEST_FAKE_TURN_TOKENS"  // input tokens each turn adds
	fakeAutoCompactEnv = "CTXCOMPACT_TEST_FAKE_AUTO_COMPACT" // the peer compacts by itself at this usage; 0 never
	fakeAfterTokens    = 2000                                // the usage after a compaction
	fakeThreadID       = "thr_fake"
)

// rpcMessage is one JSON-RPC 2.0 message, either way.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *int            `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// fakeAppServer is the peer's main: it serves in until EOF and returns the exit
// code, 2 for a message that is not JSON-RPC 2.0 (the test then fails on it).
func fakeAppServer(in io.Reader, out io.Writer) int {
	perTurn, _ := strconv.Atoi(os.Getenv(fakeTurnTokensEnv))
	auto, _ := strconv.Atoi(os.Getenv(fakeAutoCompactEnv))
	w := bufio.NewWriter(out)
	send := func(m rpcMessage) {
		m.JSONRPC = "2.0"
		b, _ := json.Marshal(m)
		w.Write(append(b, '\n'))
	}
	notify := func(method string, params any) {
		b, _ := json.Marshal(params)
		send(rpcMessage{Method: method, Params: b})
	}
	var (
		received  []string
		tokens    int
		turns     int
		compacted int
	)
	usage := func(turnID string) {
		notify("thread/tokenUsage/updated", map[string]any{"threadId": fakeThreadID, "turnId": turnID,
			"tokenUsage": map[string]any{"total": map[string]int{"inputTokens": tokens}}})
	}
	compaction := func(turnID string) {
		compacted++
		item := map[string]string{"type": "contextCompaction", "id": fmt.Sprintf("cc_%d", compacted)}
		notify("item/started", map[string]any{"threadId": fakeThreadID, "turnId": turnID, "item": item})
		tokens = fakeAfterTokens
		notify("item/completed", map[string]any{"threadId": fakeThreadID, "turnId": turnID, "item": item})
		usage(turnID)
	}
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				return 0 // EOF: the client closed stdin
			}
			continue
		}
		var m rpcMessage
		if json.Unmarshal(line, &m) != nil || m.JSONRPC != "2.0" || m.Method == "" {
			fmt.Fprintf(os.Stderr, "fake app-server: not a JSON-RPC 2.0 request: %s", line)
			return 2
		}
		if m.ID == nil { // a notification (initialized): nothing to answer
			continue
		}
		received = append(received, m.Method)
		var p struct {
			ThreadID string `json:"threadId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		result := func(v any) {
			b, _ := json.Marshal(v)
			send(rpcMessage{ID: m.ID, Result: b})
		}
		if m.Method != "initialize" && m.Method != "thread/start" && m.Method != "test/received" && p.ThreadID != fakeThreadID {
			send(rpcMessage{ID: m.ID, Error: &rpcError{Code: -32602, Message: "unknown threadId " + strconv.Quote(p.ThreadID)}})
			w.Flush()
			continue
		}
		switch m.Method {
		case "initialize":
			result(map[string]string{"userAgent": "fake-codex-app-server"})
		case "thread/start":
			result(map[string]any{"thread": map[string]string{"id": fakeThreadID}})
			notify("thread/started", map[string]any{"thread": map[string]string{"id": fakeThreadID}})
		case "turn/start":
			turns++
			turnID := fmt.Sprintf("turn_%d", turns)
			result(map[string]any{"turn": map[string]string{"id": turnID, "status": "inProgress"}})
			notify("turn/started", map[string]any{"threadId": fakeThreadID, "turn": map[string]string{"id": turnID}})
			tokens += perTurn
			notify("item/completed", map[string]any{"threadId": fakeThreadID, "turnId": turnID,
				"item": map[string]string{"type": "agentMessage", "id": fmt.Sprintf("msg_%d", turns), "text": fmt.Sprintf("reply %d", turns)}})
			usage(turnID)
			if auto > 0 && tokens >= auto {
				compaction(turnID)
			}
			notify("turn/completed", map[string]any{"threadId": fakeThreadID, "turn": map[string]string{"id": turnID, "status": "completed"}})
		case "thread/compact/start":
			result(map[string]any{})
			turns++
			turnID := fmt.Sprintf("turn_%d", turns)
			compaction(turnID)
			notify("turn/completed", map[string]any{"threadId": fakeThreadID, "turn": map[string]string{"id": turnID, "status": "completed"}})
		case "test/received":
			result(map[string]any{"methods": received})
		default:
			send(rpcMessage{ID: m.ID, Error: &rpcError{Code: -32601, Message: "method not found: " + m.Method}})
		}
		if err := w.Flush(); err != nil {
			return 1
		}
	}
}

// rpcPeer is the client side: the fake app server as a child process, read with
// blocking pipes.
type rpcPeer struct {
	t      *testing.T
	in     io.WriteCloser
	msgs   chan []byte // every line the peer writes, in order; closed at its EOF
	nextID int
}

// hangGuard fails a test whose peer stops talking; it bounds nothing that passes.
const hangGuard = 2 * time.Minute

// startPeer starts the fake app server with the extra environment env; the test's
// end closes its stdin and requires it to exit 0.
func startPeer(t *testing.T, env ...string) *rpcPeer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), fakeAppServerEnv+"=1"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &rpcPeer{t: t, in: in, msgs: make(chan []byte, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(p.msgs)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				p.msgs <- line
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		in.Close()
		for range p.msgs { // what it still says
		}
		<-done
		if err := cmd.Wait(); err != nil {
			t.Errorf("the fake app server: %v\n%s", err, stderr.Bytes())
		}
	})
	p.send("initialize", map[string]any{"clientInfo": map[string]string{"name": "ctxcompact-test", "version": core.Version}})
	p.response()
	p.write(rpcMessage{Method: "initialized"})
	return p
}

func (p *rpcPeer) write(m rpcMessage) []byte {
	p.t.Helper()
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("writing to the fake app server: %v", err)
	}
	return b
}

// send writes a request and returns it as sent (the host feeds its own
// thread/compact/start to ObserveEvent).
func (p *rpcPeer) send(method string, params any) json.RawMessage {
	p.t.Helper()
	pb, err := json.Marshal(params)
	if err != nil {
		p.t.Fatal(err)
	}
	p.nextID++
	id := p.nextID
	return p.write(rpcMessage{ID: &id, Method: method, Params: pb})
}

// next is the peer's next message.
func (p *rpcPeer) next() (json.RawMessage, rpcMessage) {
	p.t.Helper()
	select {
	case line, ok := <-p.msgs:
		if !ok {
			p.t.Fatal("the fake app server closed its stdout")
		}
		var m rpcMessage
		if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
			p.t.Fatalf("the fake app server wrote %q: %v", line, err)
		}
		return line, m
	case <-time.After(hangGuard):
		p.t.Fatalf("the fake app server said nothing for %v", hangGuard)
	}
	panic("unreachable")
}

// response reads up to the answer to the last request, which must come before
// any notification, and returns its result.
func (p *rpcPeer) response() json.RawMessage {
	p.t.Helper()
	_, m := p.next()
	if m.ID == nil || *m.ID != p.nextID {
		p.t.Fatalf("want the response to request %d first, got %+v", p.nextID, m)
	}
	if m.Error != nil {
		p.t.Fatalf("request %d failed: %+v", p.nextID, *m.Error)
	}
	return m.Result
}

// appServerHost is the host under test: a ContextEngine on the app-server route,
// the local transcript, and the peer's last reported usage.
type appServerHost struct {
	t          *testing.T
	ctx        context.Context
	ce         *ContextEngine
	peer       *rpcPeer
	transcript []json.RawMessage
	tokens     int
	events     int // notifications fed to ObserveEvent
}

// newAppServerHost starts an engine in app-server mode mode and a peer whose
// environment peerEnv makes from the engine's threshold.
func newAppServerHost(t *testing.T, mode string, peerEnv func(threshold int) []string) *appServerHost {
	t.Helper()
	requireOps(t, "native.policy", "native.observe", "engine.start")
	ctx := context.Background()
	cfg := fmt.Sprintf(`{"model":{"name":"gpt-5.3-codex","context_length":32000,"provider":"openai-codex"},
		"compression":{"codex_app_server_auto":%q}}`, mode)
	ce, err := NewContextEngine(ctx, sharedEngine(t), json.RawMessage(cfg), ContextEngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ce.UpdateModel(ctx, core.ModelUpdate{Model: "gpt-5.3-codex", ContextLength: 32000,
		Provider: "openai-codex", APIMode: "codex_app_server"}); err != nil {
		t.Fatal(err)
	}
	h := &appServerHost{t: t, ctx: ctx, ce: ce, peer: startPeer(t, peerEnv(ce.Status().ThresholdTokens)...),
		transcript: []json.RawMessage{json.RawMessage(`{"role":"system","content":"You are a coding agent."}`)}}
	h.peer.send("thread/start", map[string]any{"model": "gpt-5.3-codex"})
	h.peer.response()
	h.until("thread/started")
	return h
}

// perTurn is the usage each turn adds: four turns reach the threshold, three do not.
func perTurn(t *testing.T, threshold int) int {
	n := (threshold + 3) / 4
	if 3*n >= threshold || 4*n < threshold {
		t.Fatalf("no per-turn usage for threshold %d", threshold)
	}
	return n
}

// decide is PrepareRequest with no body (the app server takes none) at the
// peer's last reported usage.
func (h *appServerHost) decide(manual bool) core.NativeDecision {
	h.t.Helper()
	pr, err := h.ce.PrepareRequest(h.ctx, nil, PrepareRequestOptions{Tokens: h.tokens, Manual: manual})
	if err != nil {
		h.t.Fatal(err)
	}
	d := pr.Decision
	if pr.Body != nil || d.Route != "codex_app_server" || d.Mechanism != "app_server" || d.AppServer == nil {
		h.t.Fatalf("decision on the app-server route: body %s, %+v", pr.Body, d)
	}
	if d.Local.Rewrite {
		h.t.Fatalf("local.rewrite is true on the app-server route: the local transcript is never rewritten")
	}
	if d.CompactNow != d.AppServer.CompactNow {
		h.t.Fatalf("compact_now %v, app_server.compact_now %v", d.CompactNow, d.AppServer.CompactNow)
	}
	return d
}

// until reads notifications up to one named method, feeding each to the engine
// (at the transcript's length) and the agent's messages to the transcript.
func (h *appServerHost) until(method string) {
	h.t.Helper()
	for {
		raw, m := h.peer.next()
		if m.ID != nil {
			h.t.Fatalf("an unexpected response while waiting for %s: %s", method, raw)
		}
		var p struct {
			Item struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"item"`
			TokenUsage struct {
				Total struct {
					InputTokens int `json:"inputTokens"`
				} `json:"total"`
			} `json:"tokenUsage"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			h.t.Fatalf("%s: %v", raw, err)
		}
		switch {
		case m.Method == "item/completed" && p.Item.Type == "agentMessage":
			b, _ := json.Marshal(map[string]string{"role": "assistant", "content": p.Item.Text})
			h.transcript = append(h.transcript, b)
		case m.Method == "thread/tokenUsage/updated":
			h.tokens = p.TokenUsage.Total.InputTokens
		}
		if _, err := h.ce.ObserveEvent(h.ctx, raw, len(h.transcript)); err != nil {
			h.t.Fatalf("ObserveEvent(%s): %v", raw, err)
		}
		h.events++
		if m.Method == method {
			return
		}
	}
}

// turn runs one user turn to its turn/completed.
func (h *appServerHost) turn(text string) {
	h.t.Helper()
	b, _ := json.Marshal(map[string]string{"role": "user", "content": text})
	h.transcript = append(h.transcript, b)
	h.peer.send("turn/start", map[string]any{"threadId": fakeThreadID, "input": []map[string]string{{"type": "text", "text": text}}})
	h.peer.response()
	h.until("turn/completed")
}

// compact sends thread/compact/start as the host's own event, checks that the
// session is pending until the item completes, and reads to turn/completed.
func (h *appServerHost) compact() {
	h.t.Helper()
	req := h.peer.send("thread/compact/start", map[string]string{"threadId": fakeThreadID})
	res, err := h.ce.ObserveEvent(h.ctx, req, len(h.transcript))
	if err != nil {
		h.t.Fatal(err)
	}
	if s := h.session(); !s.AppServer.Pending {
		h.t.Fatalf("after the host's thread/compact/start (%+v): session %+v, want pending", res, s)
	}
	// While it is pending, nothing starts another one, not even the user.
	if d := h.decide(true); d.CompactNow || d.Reason != "pending" {
		h.t.Fatalf("a decision while pending: compact_now %v, reason %q", d.CompactNow, d.Reason)
	}
	if got := h.peer.response(); string(bytes.TrimSpace(got)) != "{}" {
		h.t.Fatalf("thread/compact/start answered %s, want {}", got)
	}
	h.untilPending("item/started", true)
	h.untilPending("item/completed", false)
	h.until("turn/completed")
}

// untilPending reads up to method and checks the session's pending flag then.
func (h *appServerHost) untilPending(method string, pending bool) {
	h.t.Helper()
	h.until(method)
	if s := h.session(); s.AppServer.Pending != pending {
		h.t.Fatalf("after %s: session %+v, want pending %v", method, s, pending)
	}
}

// session is the engine's native session, which must exist by now.
func (h *appServerHost) session() *core.NativeSession {
	h.t.Helper()
	s := h.ce.NativeSession()
	if s == nil {
		h.t.Fatal("the engine has no native session")
	}
	return s
}

// received is what the peer was asked, in order.
func (h *appServerHost) received() []string {
	h.t.Helper()
	h.peer.send("test/received", map[string]any{})
	var r struct {
		Methods []string `json:"methods"`
	}
	if err := json.Unmarshal(h.peer.response(), &r); err != nil {
		h.t.Fatal(err)
	}
	return r.Methods
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// transcriptCopy is the transcript's bytes, to show it was not rewritten.
func (h *appServerHost) transcriptCopy() []json.RawMessage {
	out := make([]json.RawMessage, len(h.transcript))
	for i, m := range h.transcript {
		out[i] = bytes.Clone(m)
	}
	return out
}

// TestAppServerHermes: in mode hermes the host's threshold starts the app
// server's compaction, and the session records it at the transcript's length.
func TestAppServerHermes(t *testing.T) {
	h := newAppServerHost(t, "hermes", func(threshold int) []string {
		return []string{fmt.Sprintf("%s=%d", fakeTurnTokensEnv, perTurn(t, threshold))}
	})
	threshold := h.ce.Status().ThresholdTokens
	for i := 1; i <= 4; i++ {
		d := h.decide(false)
		if d.CompactNow || d.AppServer.Mode != "hermes" || d.AppServer.Initiator != "host" || d.Reason != "app_server_hermes" {
			t.Fatalf("turn %d at %d of %d tokens: %+v %+v", i, h.tokens, threshold, d, *d.AppServer)
		}
		h.turn(fmt.Sprintf("step %d", i))
	}
	if h.tokens < threshold {
		t.Fatalf("four turns reported %d tokens, under the threshold %d", h.tokens, threshold)
	}
	d := h.decide(false)
	if !d.CompactNow || d.Reason != "compact_now" || d.AppServer.Initiator != "host" {
		t.Fatalf("at %d of %d tokens: compact_now %v, reason %q, %+v", h.tokens, threshold, d.CompactNow, d.Reason, *d.AppServer)
	}
	before := h.transcriptCopy()
	h.compact()
	if !reflect.DeepEqual(h.transcript, before) {
		t.Fatalf("the compaction changed the local transcript")
	}
	s := h.session()
	if s.AppServer.Compactions != 1 || s.AppServer.Pending || !reflect.DeepEqual(s.AppServer.Boundaries, []int{len(before)}) || s.Route != "codex_app_server" {
		t.Fatalf("session after the compaction: %+v, want 1 compaction at boundary %d", s, len(before))
	}
	if h.tokens != fakeAfterTokens {
		t.Fatalf("usage after the compaction: %d", h.tokens)
	}
	if d := h.decide(false); d.CompactNow {
		t.Fatalf("after the compaction, at %d tokens: compact_now", h.tokens)
	}
	h.turn("step 5")
	if got := h.received(); countOf(got, "thread/compact/start") != 1 || countOf(got, "turn/start") != 5 {
		t.Fatalf("the peer was asked %v", got)
	}
	// The session lives in the engine state, and a restored engine has it.
	back, err := NewContextEngine(h.ctx, sharedEngine(t), nil, ContextEngineOptions{State: h.ce.State()})
	if err != nil {
		t.Fatal(err)
	}
	if got := back.NativeSession(); !reflect.DeepEqual(got, s) {
		t.Fatalf("restored session %+v, want %+v", got, s)
	}
}

// TestAppServerNative: in mode native the host never starts a compaction, past
// the threshold too, and records the one the app server starts by itself.
func TestAppServerNative(t *testing.T) {
	h := newAppServerHost(t, "native", func(threshold int) []string {
		n := perTurn(t, threshold)
		return []string{fmt.Sprintf("%s=%d", fakeTurnTokensEnv, n), fmt.Sprintf("%s=%d", fakeAutoCompactEnv, 5*n)}
	})
	threshold := h.ce.Status().ThresholdTokens
	for i := 1; i <= 5; i++ {
		d := h.decide(false)
		if d.CompactNow || d.AppServer.Mode != "native" || d.AppServer.Initiator != "app_server" || d.Reason != "app_server_native" {
			t.Fatalf("turn %d at %d of %d tokens: %+v %+v", i, h.tokens, threshold, d, *d.AppServer)
		}
		if s := h.session(); s.AppServer.Compactions != 0 {
			t.Fatalf("turn %d: %d compactions already", i, s.AppServer.Compactions)
		}
		h.turn(fmt.Sprintf("step %d", i))
	}
	// The peer compacted during turn 5, after its agent message: 1 system + 5 × 2.
	s := h.session()
	if s.AppServer.Compactions != 1 || s.AppServer.Pending || !reflect.DeepEqual(s.AppServer.Boundaries, []int{11}) {
		t.Fatalf("session after the app server's own compaction: %+v, want 1 at boundary 11", s)
	}
	if len(h.transcript) != 11 {
		t.Fatalf("the transcript has %d messages, want 11", len(h.transcript))
	}
	if got := h.received(); countOf(got, "thread/compact/start") != 0 {
		t.Fatalf("the host started a compaction in mode native: %v", got)
	}
}

// TestAppServerOff: in mode off nothing starts a compaction but the user.
func TestAppServerOff(t *testing.T) {
	h := newAppServerHost(t, "off", func(threshold int) []string {
		return []string{fmt.Sprintf("%s=%d", fakeTurnTokensEnv, perTurn(t, threshold))}
	})
	threshold := h.ce.Status().ThresholdTokens
	for i := 1; i <= 6; i++ {
		h.turn(fmt.Sprintf("step %d", i))
		d := h.decide(false)
		if d.CompactNow || d.AppServer.Mode != "off" || d.AppServer.Initiator != "none" || d.Reason != "app_server_off" {
			t.Fatalf("after turn %d at %d of %d tokens: %+v %+v", i, h.tokens, threshold, d, *d.AppServer)
		}
	}
	if h.tokens < threshold {
		t.Fatalf("six turns reported %d tokens, under the threshold %d", h.tokens, threshold)
	}
	if s := h.session(); s.AppServer.Compactions != 0 || s.AppServer.Pending || len(s.AppServer.Boundaries) != 0 {
		t.Fatalf("session in mode off: %+v", s)
	}
	d := h.decide(true)
	if !d.CompactNow || d.Reason != "compact_now" {
		t.Fatalf("a manual compaction in mode off: compact_now %v, reason %q", d.CompactNow, d.Reason)
	}
	h.compact()
	s := h.session()
	if s.AppServer.Compactions != 1 || !reflect.DeepEqual(s.AppServer.Boundaries, []int{len(h.transcript)}) {
		t.Fatalf("session after the manual compaction: %+v", s)
	}
	if got := h.received(); countOf(got, "thread/compact/start") != 1 || !slices.Equal(got[:2], []string{"initialize", "thread/start"}) {
		t.Fatalf("the peer was asked %v", got)
	}
}

// TestAppServerFakePeer checks the fake peer itself, without the engine: the order
// of what thread/compact/start sends, an unknown thread refused, and what it was
// asked.
func TestAppServerFakePeer(t *testing.T) {
	p := startPeer(t, fakeTurnTokensEnv+"=1000")
	p.send("thread/start", map[string]any{})
	if got := string(p.response()); got != `{"thread":{"id":"thr_fake"}}` {
		t.Fatalf("thread/start: %s", got)
	}
	p.next() // thread/started
	p.send("thread/compact/start", map[string]string{"threadId": "thr_other"})
	if _, m := p.next(); m.Error == nil || m.Error.Code != -32602 {
		t.Fatalf("compacting an unknown thread: %+v", m)
	}
	p.send("thread/compact/start", map[string]string{"threadId": fakeThreadID})
	if got := string(p.response()); got != "{}" {
		t.Fatalf("thread/compact/start: %s", got)
	}
	var got []string
	for {
		_, m := p.next()
		var params struct {
			ThreadID string `json:"threadId"`
			TurnID   string `json:"turnId"`
			Item     struct{ Type, ID string }
		}
		_ = json.Unmarshal(m.Params, &params)
		got = append(got, m.Method+" "+params.Item.Type+" "+params.Item.ID)
		if m.Method == "item/started" && (params.ThreadID != fakeThreadID || params.TurnID == "") {
			t.Fatalf("item/started params %s", m.Params)
		}
		if m.Method == "turn/completed" {
			break
		}
	}
	want := []string{"item/started contextCompaction cc_1", "item/completed contextCompaction cc_1",
		"thread/tokenUsage/updated  ", "turn/completed  "}
	if !slices.Equal(got, want) {
		t.Fatalf("after thread/compact/start the peer sent\n%q, want\n%q", got, want)
	}
	p.send("test/received", map[string]any{})
	if got := string(p.response()); got != `{"methods":["initialize","thread/start","thread/compact/start","thread/compact/start","test/received"]}` {
		t.Fatalf("test/received: %s", got)
	}
}
