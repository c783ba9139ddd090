package main

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
)

// replayBackground is the replay of a context engine that prepares each
// compaction in the background (--summarizer-latency N, docs/STEERING.md): when
// the engine's should_compress says prepare_compaction, it sends the summarizer
// the context as it is (a compress event with prepare), whose answer lands N
// requests later (the event's end, run then on the context it was sent); at the
// trigger, the engine's compress splices the prepared compaction into the grown
// context when one has landed, and the request waits (for the one in flight, or
// a blocking compaction) when none has. The summary is the built-in one, written
// from the context the summarizer was sent.
type replayBackground struct {
	latency int
	call    caller
	state   []byte
	// landed: the state holds a prepared compaction. sent is the context of the
	// one in flight, at request at (-1: none), asked its summary request's size;
	// kept that of the landed one.
	landed      bool
	sent        string
	at          int
	asked, kept int
	// ready counts the compactions a landed preparation was spliced into, waited
	// those whose request waited (for one in flight, or a blocking compaction);
	// held the requests sent above the trigger while a summary was on its way.
	ready, waited, held int
}

func newReplayBackground(latency int, cfg []byte, call caller) (*replayBackground, error) {
	res, err := opResult(call, "engine.start", append(append([]byte(`{"config":`), bytes.TrimSpace(cfg)...), '}'))
	if err != nil {
		return nil, err
	}
	return &replayBackground{latency: latency, call: call, state: []byte(res.Get("state").Raw), at: -1}, nil
}

// prepare runs before request turn below the trigger: the preparation in flight
// lands once its latency has passed, and a new one is sent when the engine says
// so and none is in flight.
func (bg *replayBackground) prepare(live []*replayMsg, tokens, turn int, cfg []byte) error {
	if err := bg.landDue(turn); err != nil || bg.at >= 0 {
		return err
	}
	should, err := opResult(bg.call, "session.run", append(append([]byte(`{"event":"should_compress","state":`), bg.state...),
		[]byte(`,"prompt_tokens":`+strconv.Itoa(tokens)+`}`)...))
	if err != nil {
		return err
	}
	if should.Get("result.prepare_compaction").Bool() {
		bg.send(live, turn, cfg)
	}
	return nil
}

// send sends the summarizer the context live at request turn.
func (bg *replayBackground) send(live []*replayMsg, turn int, cfg []byte) {
	bg.sent, bg.at = replayArray(live), turn
	bg.asked = replaySummaryRequestTokens(bg.sent, cfg, bg.call)
}

// landDue lands the preparation in flight once its latency has passed by
// request turn.
func (bg *replayBackground) landDue(turn int) error {
	if bg.at >= 0 && turn-bg.at >= bg.latency {
		return bg.land()
	}
	return nil
}

// replayHoldShare is the share of the window up to which a request at the
// trigger goes out as it is while a prepared summary is on its way
// (docs/STEERING.md): the rest of the window is the answer's room.
const replayHoldShare = 0.95

// hold reports whether the request at turn, at the trigger with tokens, goes out
// as it is, the compaction waiting for its summary: when none has landed, the
// request is within replayHoldShare of the window, and a preparation is in
// flight (one is sent now when none is). Once it lands, the next request
// splices it.
func (bg *replayBackground) hold(live []*replayMsg, tokens, turn, window int, cfg []byte) (bool, error) {
	if err := bg.landDue(turn); err != nil {
		return false, err
	}
	if bg.landed || float64(tokens) > replayHoldShare*float64(window) {
		return false, nil
	}
	if bg.at < 0 {
		bg.send(live, turn, cfg)
	}
	bg.held++
	return true, nil
}

// land ends the preparation in flight: the engine keeps it.
func (bg *replayBackground) land() error {
	res, err := bg.run(`"prepare":true,"summarizer":"builtin"`, bg.sent)
	bg.at, bg.sent = -1, ""
	if err != nil {
		return err
	}
	if res.Get("prepared").IsObject() {
		bg.landed, bg.kept = true, bg.asked
	}
	return nil
}

// compact is the compaction at the trigger, at request turn: a landed
// preparation spliced, or, when none has landed, the one in flight waited for,
// or a blocking compaction. It returns the new live context and the size of the
// summary request it took.
func (bg *replayBackground) compact(live []*replayMsg, turn int, cfg []byte) ([]*replayMsg, int, error) {
	ready := bg.landed
	if !ready && bg.at >= 0 {
		if err := bg.land(); err != nil {
			return nil, 0, err
		}
	}
	arr := replayArray(live)
	res, err := bg.run(`"force":true,"summarizer":"builtin","output":"messages"`, arr)
	if err != nil {
		return nil, 0, err
	}
	asked := bg.kept
	switch {
	case !res.Get("report.prepared").Bool():
		bg.waited++
		asked = replaySummaryRequestTokens(arr, cfg, bg.call)
	case ready:
		bg.ready++
	default:
		bg.waited++
	}
	// One in flight lands after the compaction: the engine discards it.
	bg.landed, bg.at, bg.sent = false, -1, ""
	var out []*replayMsg
	res.Get("messages").ForEach(func(_, m gjson.Result) bool {
		out = append(out, newReplayMsg(m.Raw))
		return true
	})
	return out, asked, nil
}

// run runs a compress event of the engine with fields and the messages arr,
// which the built-in summarizer ends in one step; the engine keeps its state.
func (bg *replayBackground) run(fields, arr string) (gjson.Result, error) {
	p := append([]byte(`{"event":"compress","state":`), bg.state...)
	p = append(append(p, ','), fields...)
	p = append(append(append(p, `,"messages":`...), arr...), '}')
	res, err := opResult(bg.call, "session.run", p)
	if err != nil {
		return gjson.Result{}, err
	}
	if !res.Get("done").Bool() {
		return gjson.Result{}, fmt.Errorf("ctxcompact: a built-in compress asked for %s", res.Get("effect.type").Str)
	}
	bg.state = []byte(res.Get("state").Raw)
	return res.Get("result"), nil
}

// replayBackgroundResult is what --summarizer-latency adds to a trace's result:
// the compactions whose prepared summary was back (ready) and those whose
// request waited, and the same trace compacted blocking, for the cost.
type replayBackgroundResult struct {
	Latency int `json:"summarizer_latency"`
	Ready   int `json:"ready"`
	Waited  int `json:"waited"`
	// Held are the requests sent above the trigger while a summary was on its way.
	Held                int     `json:"held"`
	ReadyShare          float64 `json:"ready_share"`
	BlockingCompactions int     `json:"blocking_compactions"`
	BlockingOverflows   int     `json:"blocking_overflows"`
	BlockingBilled      int64   `json:"blocking_billed"`
	BilledRatio         float64 `json:"billed_vs_blocking"`
	// BlockingSummaryRequestTokens is the blocking replay's summary_request_tokens.
	BlockingSummaryRequestTokens int `json:"blocking_summary_request_tokens"`
}

// replayTraceBackground replays a trace with a background-preparing engine and,
// for comparison, blocking.
func replayTraceBackground(name string, msgs []string, window int, cfg []byte, call caller, uses string, latency int) *replayResult {
	blocking := replayTrace(name, msgs, window, cfg, call, uses, nil)
	bg, err := newReplayBackground(latency, cfg, call)
	if err != nil {
		blocking.Errors++
		blocking.FirstError = err.Error()
		return blocking
	}
	r := replayTrace(name, msgs, window, cfg, call, uses, bg)
	r.Background = &replayBackgroundResult{Latency: latency, Ready: bg.ready, Waited: bg.waited, Held: bg.held,
		BlockingCompactions: blocking.Compactions, BlockingOverflows: blocking.Overflows, BlockingBilled: blocking.Billed,
		BlockingSummaryRequestTokens: blocking.SummaryRequestTokens}
	r.Background.fill(r.Compactions, r.Billed)
	return r
}

// fill computes the shares.
func (b *replayBackgroundResult) fill(compactions int, billed int64) {
	if compactions > 0 {
		b.ReadyShare = float64(b.Ready) / float64(compactions)
	}
	if b.BlockingBilled > 0 {
		b.BilledRatio = float64(billed) / float64(b.BlockingBilled)
	}
}
