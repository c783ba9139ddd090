package core

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// pendingEnvelopes returns a compact.begin envelope (32K window, force, refs as the
// bindings send it) and, for the same request, compact.finish envelopes with a host
// summary and with a summarizer error, for every shared trace that needs a summary.
func pendingEnvelopes(t *testing.T) (names []string, begins, finishes, failures map[string][]byte) {
	traces := loadTraces(t)
	begins, finishes, failures = map[string][]byte{}, map[string][]byte{}, map[string][]byte{}
	for name, msgs := range traces {
		params := `,"config":{"model":{"context_length":32000}},"force":true,"output":"refs","messages":` + string(msgs) + `}`
		begin := []byte(`{"op":"compact.begin"` + params)
		state := gjson.GetBytes(Call(begin), "result.state").Str
		dropPending()
		if state == "" {
			continue
		}
		names = append(names, name)
		begins[name] = begin
		finishes[name] = []byte(`{"op":"compact.finish","state":"` + state + `","summary":"## Goal\nsummary of ` + name + `"` + params)
		failures[name] = []byte(`{"op":"compact.finish","state":"` + state + `","error":{"code":"timeout","message":"no answer"}` + params)
	}
	sort.Strings(names)
	require.NotEmpty(t, names)
	return names, begins, finishes, failures
}

func pendingCount() int {
	pending.Lock()
	defer pending.Unlock()
	return len(pending.entries)
}

// TestFinishReusesBegin: a finish after its begin on the same instance takes the
// kept compaction, and answers byte for byte what a finish that reads everything
// again answers.
func TestFinishReusesBegin(t *testing.T) {
	names, begins, finishes, failures := pendingEnvelopes(t)
	for _, name := range names {
		for kind, finish := range map[string][]byte{"summary": finishes[name], "error": failures[name]} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				dropPending()
				cold := Call(finish)
				require.True(t, gjson.GetBytes(cold, "result.done").Bool(), "%.300s", cold)

				Call(begins[name])
				require.Equal(t, 1, pendingCount())
				require.Equal(t, string(cold), string(Call(finish)))
				require.Equal(t, 0, pendingCount(), "an entry is used once")
				require.Equal(t, string(cold), string(Call(finish)), "a second finish reads everything again")
			})
		}
	}
}

// TestPendingOwnsItsRequest: the caller may reuse its begin buffer at once; what
// finish takes does not change with it.
func TestPendingOwnsItsRequest(t *testing.T) {
	names, begins, finishes, _ := pendingEnvelopes(t)
	name := names[0]
	// Without refs, so the answer holds the kept messages' bytes.
	begin := strings.Replace(string(begins[name]), `,"output":"refs"`, ``, 1)
	finish := strings.Replace(string(finishes[name]), `,"output":"refs"`, ``, 1)
	dropPending()
	want := string(Call([]byte(finish)))

	buf := []byte(begin)
	Call(buf)
	for i := range buf {
		buf[i] = ' '
	}
	require.Equal(t, 1, pendingCount())
	require.Equal(t, want, string(Call([]byte(finish))))
	require.Equal(t, 0, pendingCount(), "finish took the kept compaction")
}

// TestPendingMisses: a finish whose request differs from begin's in any field but
// state, summary and error does not take the entry, and is answered as before.
func TestPendingMisses(t *testing.T) {
	names, begins, finishes, _ := pendingEnvelopes(t)
	name := names[0]
	finish := string(finishes[name])

	changed := map[string]string{
		// Another window: a state mismatch, reported as without the entry.
		"config":   strings.Replace(finish, `"context_length":32000`, `"context_length":32001`, 1),
		"output":   strings.Replace(finish, `,"output":"refs"`, ``, 1),
		"added":    strings.Replace(finish, `,"force":true`, `,"force":true,"prompt_tokens":0`, 1),
		"spacing":  strings.Replace(finish, `"config":{"model":{`, `"config":{"model": {`, 1),
		"state":    strings.Replace(finish, `"state":"ccs1.`, `"state":"ccs1.0`, 1),
		"builtin":  strings.Replace(finish, `"state":`, `"summarizer":"builtin","state":`, 1),
		"messages": finish[:len(finish)-2] + `,{"role":"user","content":"one more"}]}`,
	}
	for what, env := range changed {
		t.Run(what, func(t *testing.T) {
			require.NotEqual(t, finish, env, "the replacement must change the request")
			dropPending()
			want := string(Call([]byte(env)))
			Call(begins[name])
			require.Equal(t, want, string(Call([]byte(env))))
			require.Equal(t, 1, pendingCount(), "the begun compaction stays for its own finish")
		})
	}
	require.Contains(t, func() string { dropPending(); return string(Call([]byte(changed["config"]))) }(), `"code":"invalid_state"`)
}

// TestPendingBounds: at most pendingMaxEntries compactions are kept, the oldest
// going first, and a request over pendingMaxRequest is not kept.
func TestPendingBounds(t *testing.T) {
	names, begins, finishes, _ := pendingEnvelopes(t)
	require.Greater(t, len(names), pendingMaxEntries)
	dropPending()
	for _, name := range names[:pendingMaxEntries+1] {
		Call(begins[name])
	}
	require.Equal(t, pendingMaxEntries, pendingCount())
	pending.Lock()
	oldest := pending.entries[0].state
	pending.Unlock()
	require.Contains(t, string(finishes[names[1]]), oldest, "the first begun was evicted")

	dropPending()
	big := strings.Replace(string(begins[names[0]]), `"force":true`, `"force":true,"pad":"`+strings.Repeat("x", pendingMaxRequest)+`"`, 1)
	res := Call([]byte(big))
	require.Equal(t, 0, pendingCount(), "%.200s", res)
}

// TestPendingConcurrent runs begin and finish of every trace from many goroutines:
// entries are taken whole by one finish, and every answer equals the one computed
// without entries (run with -race).
func TestPendingConcurrent(t *testing.T) {
	names, begins, finishes, _ := pendingEnvelopes(t)
	dropPending()
	want := map[string]string{}
	for _, name := range names {
		want[name] = string(Call(finishes[name]))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 3; k++ {
				for i := range names {
					name := names[(i+g)%len(names)]
					Call(begins[name])
					if got := string(Call(finishes[name])); got != want[name] {
						errs <- fmt.Errorf("%s: finish differs: %.200s", name, got)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestFinishSkipsKeptMessages: a request that ends with a kept compaction's
// messages is read without validating them again, and is answered as the whole
// request read from scratch is: when the rest is not valid JSON, when the op is
// another, when the messages key comes twice, through Dispatch.
func TestFinishSkipsKeptMessages(t *testing.T) {
	names, begins, finishes, _ := pendingEnvelopes(t)
	name := names[0]
	begin, finish := string(begins[name]), string(finishes[name])
	params := begin[len(`{"op":"compact.begin"`):]
	cases := map[string]func() []byte{
		"finish":       func() []byte { return []byte(finish) },
		"invalid rest": func() []byte { return []byte(strings.Replace(finish, `"state":`, `"state"::`, 1)) },
		"deep rest": func() []byte {
			return []byte(strings.Replace(finish, `"summary":`, `"x":`+strings.Repeat("[", MaxNestingDepth+1)+strings.Repeat("]", MaxNestingDepth+1)+`,"summary":`, 1))
		},
		"another op":     func() []byte { return []byte(`{"op":"tokens.count"` + params) },
		"no op":          func() []byte { return []byte(`{"state":"x"` + params) },
		"messages twice": func() []byte { return []byte(strings.Replace(finish, `"state":`, `"messages":[],"state":`, 1)) },
		"not an object":  func() []byte { return []byte(`[` + strings.TrimPrefix(finish, "{")) },
	}
	for what, env := range cases {
		t.Run(what, func(t *testing.T) {
			dropPending()
			want := string(Call(env()))
			Call([]byte(begin))
			require.Equal(t, 1, pendingCount())
			_, _, short := finishRequest("", env())
			require.Equal(t, what == "finish" || what == "messages twice", short, "read without the messages")
			require.Equal(t, want, string(Call(env())))
		})
	}
	t.Run("dispatch", func(t *testing.T) {
		req := []byte(`{"state":` + strings.SplitN(finish, `"state":`, 2)[1])
		dropPending()
		want := string(Dispatch("compact.finish", req))
		Call([]byte(begin))
		require.Equal(t, want, string(Dispatch("compact.finish", req)))
		require.Equal(t, 0, pendingCount())
		Call([]byte(begin))
		require.Contains(t, string(Dispatch("prune", req)), `prune has no parameter`, "another op reads the request itself")
		require.Equal(t, 1, pendingCount(), "and leaves the kept compaction")
	})
}

// TestPendingDefaultSummarizer: begin names the host summarizer, finish leaves it
// out (as the JS binding does), or the other way round: the same request.
func TestPendingDefaultSummarizer(t *testing.T) {
	names, begins, finishes, _ := pendingEnvelopes(t)
	name := names[0]
	withHost := strings.Replace(string(begins[name]), `"compact.begin"`, `"compact.begin","summarizer":"host"`, 1)
	finishHost := strings.Replace(string(finishes[name]), `"compact.finish"`, `"compact.finish","summarizer":"host"`, 1)
	for _, c := range [][2]string{{withHost, string(finishes[name])}, {string(begins[name]), finishHost}} {
		dropPending()
		want := string(Call([]byte(c[1])))
		Call([]byte(c[0]))
		require.Equal(t, 1, pendingCount())
		require.Equal(t, want, string(Call([]byte(c[1]))))
		require.Equal(t, 0, pendingCount(), "finish took the kept compaction")
	}
}

// withTicket adds a ticket to a compact.begin or compact.finish envelope and, when
// short, leaves out its messages (which pendingEnvelopes writes last).
func withTicket(t *testing.T, envelope []byte, ticket string, short bool) []byte {
	s := string(envelope)
	if short {
		k := strings.Index(s, `,"messages":`)
		require.Positive(t, k)
		s = s[:k] + "}"
	}
	return []byte(strings.Replace(s, `,"config":`, `,"ticket":"`+ticket+`","config":`, 1))
}

// TestFinishWithoutMessages: a finish that names its compaction by ticket and
// leaves out the messages answers, on the instance that began it, byte for byte
// what the whole finish answers; anywhere else it fails with invalid_state at
// /messages, and the whole finish still works.
func TestFinishWithoutMessages(t *testing.T) {
	names, begins, finishes, failures := pendingEnvelopes(t)
	for _, name := range names {
		for kind, finish := range map[string][]byte{"summary": finishes[name], "error": failures[name]} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				dropPending()
				want := string(Call(finish))
				require.True(t, gjson.GetBytes([]byte(want), "result.done").Bool(), "%.300s", want)

				Call(withTicket(t, begins[name], "t-1", false))
				short := withTicket(t, finish, "t-1", true)
				require.Less(t, len(short), 1000)
				require.Equal(t, want, string(Call(short)))
				require.Equal(t, 0, pendingCount(), "an entry is used once")

				missed := Call(short) // taken: as on another instance
				require.Equal(t, "invalid_state", gjson.GetBytes(missed, "error.code").Str, "%s", missed)
				require.Equal(t, "/messages", gjson.GetBytes(missed, "error.path").Str)
				require.Equal(t, want, string(Call(withTicket(t, finish, "t-1", false))), "the whole finish, sent after the miss")
			})
		}
	}
}

// TestTicketNamesTheCompaction: a short finish takes only the compaction begun with
// its ticket, state and fields; without a ticket it is refused; a ticket must be a
// short non-empty string.
func TestTicketNamesTheCompaction(t *testing.T) {
	names, begins, finishes, _ := pendingEnvelopes(t)
	name := names[0]
	dropPending()
	want := string(Call(finishes[name]))
	code := func(out []byte) string {
		return gjson.GetBytes(out, "error.code").Str + " " + gjson.GetBytes(out, "error.path").Str
	}

	Call(withTicket(t, begins[name], "a", false))
	require.Equal(t, "invalid_state /messages", code(Call(withTicket(t, finishes[name], "b", true))), "another ticket")
	noTicket := strings.Replace(string(withTicket(t, finishes[name], "a", true)), `"ticket":"a",`, ``, 1)
	require.Equal(t, "invalid_request /ticket", code(Call([]byte(noTicket))))
	require.Equal(t, "invalid_state /messages", code(Call([]byte(strings.Replace(string(withTicket(t, finishes[name], "a", true)), `"force":true`, `"force":false`, 1)))), "other fields")
	require.Equal(t, 1, pendingCount(), "misses leave the entry")
	require.Equal(t, want, string(Call(withTicket(t, finishes[name], "a", true))))

	for _, bad := range []string{`""`, `7`, `null`, `"` + strings.Repeat("x", maxTicketBytes+1) + `"`} {
		out := Call([]byte(strings.Replace(string(begins[name]), `{"op":"compact.begin"`, `{"op":"compact.begin","ticket":`+bad, 1)))
		require.Equal(t, "invalid_request /ticket", code(out), "ticket %.20s", bad)
	}
	dropPending()
}

// TestCallTakingKeepsTheEnvelope: a begin handed over with CallTaking is kept
// without a copy, and its finish answers what Call's does.
func TestCallTakingKeepsTheEnvelope(t *testing.T) {
	names, begins, finishes, _ := pendingEnvelopes(t)
	for _, name := range names[:3] {
		dropPending()
		want := string(Call(finishes[name]))
		begin := append([]byte(nil), begins[name]...)
		require.Equal(t, string(Call(begins[name])), string(CallTaking(begin)))
		require.Equal(t, 2, pendingCount())
		e := pending.entries[1]
		raw := e.params["messages"]
		require.Equal(t, jsonraw.OffsetOf(jsonraw.ViewString(begin), raw), strings.Index(string(begin), `"messages":`)+len(`"messages":`), "kept in place")
		require.Equal(t, want, string(Call(finishes[name])))
		require.Equal(t, want, string(Call(finishes[name])))
		require.Equal(t, 0, pendingCount())
	}
}

// TestValidationCountsArguments: a message's tool calls take the counts and ends of
// their string arguments from the validating pass, equal to counting them again.
func TestValidationCountsArguments(t *testing.T) {
	req := []byte(`{"op":"prune","messages":[{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"a","type":"function","function":{"name":"write","arguments":"{\"path\":\"x.py\",\"text\":\"caf\\u00e9 \\\"q\\\"\"}"}},` +
		`{"id":"b","function":{"arguments":"{}","name":"ls"}}]}]}`)
	var members []jsonraw.Member
	valid, _ := checkJSON(req, &members)
	require.True(t, valid)
	q := newOpRequest(gjson.ParseBytes(req), members)
	msgs, err := parseMessages(q.params.Get("messages"), roughCounter, q.arrays["messages"])
	require.NoError(t, err)
	require.Len(t, msgs[0].calls, 2)
	for _, c := range msgs[0].calls {
		require.Positive(t, c.argsTokens1, "counted while validated: %s", c.args.Raw)
		tokens, chars := roughString(c.args.Raw)
		require.Equal(t, []int{tokens, chars}, []int{c.argsTokens1 - 1, c.argsChars1 - 1})
		require.Equal(t, gjson.Get(c.raw, "function.arguments").Raw, c.args.Raw)
	}
}
