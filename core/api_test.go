package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// apiConversation is a conversation over a small window: a system prompt, a long
// tool output to prune, a middle to summarize, and a message whose bytes encoding/json
// would change (spaces, an HTML character).
func apiConversation() []json.RawMessage {
	msgs := []json.RawMessage{
		json.RawMessage(`{"role":"system","content":"You are a coding agent."}`),
		json.RawMessage(`{"role":"user","content":"Fix the failing test in src/app.py"}`),
	}
	for i := range 12 {
		msgs = append(msgs,
			json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":"step %d","tool_calls":[{"id":"c%d","type":"function","function":{"name":"read","arguments":"{\"path\":\"src/f%d.py\"}"}}]}`, i, i, i)),
			json.RawMessage(fmt.Sprintf(`{"role":"tool","tool_call_id":"c%d","content":%q}`, i, strings.Repeat("line of output ", 120))))
	}
	msgs = append(msgs, json.RawMessage(`{ "role": "user", "content": "Does a <b> tag & the rest still parse?" }`))
	return msgs
}

var apiConfig = json.RawMessage(`{"model":{"context_length":4000}}`)

// opResult runs op through Call with messages and the extra fields, as the ABI does.
func opResult(t *testing.T, op string, msgs []json.RawMessage, extra string) json.RawMessage {
	t.Helper()
	env := `{"op":"` + op + `","messages":[` + string(joinRaw(msgs)) + `]` + extra + `}`
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	require.NoError(t, json.Unmarshal(Call([]byte(env)), &resp))
	require.Nil(t, resp.Error)
	return resp.Result
}

// array writes msgs as one JSON array, as the typed functions take them.
func array(msgs []json.RawMessage) json.RawMessage {
	return json.RawMessage("[" + string(joinRaw(msgs)) + "]")
}

func joinRaw(msgs []json.RawMessage) []byte {
	var b []byte
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
	}
	return b
}

// TestCompactIsTheOps: Compact with the builtin summary is compact.begin's result,
// and unchanged messages come back in the caller's bytes.
func TestCompactIsTheOps(t *testing.T) {
	msgs := apiConversation()
	res, err := Compact(array(msgs), CompactOptions{Config: apiConfig})
	require.NoError(t, err)
	require.True(t, res.Done)
	require.Equal(t, ReasonCompacted, res.Report.Reason)
	require.Equal(t, SummarizerBuiltin, res.Report.Summarizer)
	want := opResult(t, "compact.begin", msgs, `,"config":`+string(apiConfig)+`,"summarizer":"builtin"`)
	got, err := json.Marshal(res)
	require.NoError(t, err)
	var a, b any
	require.NoError(t, json.Unmarshal(want, &a))
	require.NoError(t, json.Unmarshal(got, &b))
	require.Equal(t, a, b)
	require.Equal(t, string(msgs[len(msgs)-1]), string(res.Messages[len(res.Messages)-1]), "the last message is returned byte for byte")
}

// TestCompactSummarize: the summarizer's text is the summary; its failures fall back
// with their code.
func TestCompactSummarize(t *testing.T) {
	msgs := apiConversation()
	var asked SummaryRequest
	res, err := Compact(array(msgs), CompactOptions{Config: apiConfig, Summarize: func(r SummaryRequest) (string, error) {
		asked = r
		return "## Goal\nFix the failing test in src/app.py.", nil
	}})
	require.NoError(t, err)
	require.Equal(t, SummarizerHost, res.Report.Summarizer)
	require.False(t, res.Report.FallbackUsed)
	require.Greater(t, asked.MaxTokens, 0)
	require.Contains(t, string(res.Messages[res.Report.HeadEnd]), "Fix the failing test in src/app.py.")

	for _, c := range []struct {
		err  error
		code FallbackCode
	}{
		{errors.New("HTTP 500"), FallbackError},
		{&SummarizeError{Code: FallbackTimeout, Err: errors.New("no answer in 2s")}, FallbackTimeout},
		{nil, FallbackEmpty},
	} {
		res, err := Compact(array(msgs), CompactOptions{Config: apiConfig, Summarize: func(SummaryRequest) (string, error) { return "", c.err }})
		require.NoError(t, err)
		require.True(t, res.Report.FallbackUsed, c.code)
		require.Equal(t, c.code, res.Report.FallbackCode)
	}
}

// TestTypedOpsAreTheOps: Prune, Sanitize and Validate return what their ops return.
func TestTypedOpsAreTheOps(t *testing.T) {
	msgs := apiConversation()
	same := func(want json.RawMessage, got any) {
		t.Helper()
		g, err := json.Marshal(got)
		require.NoError(t, err)
		var a, b any
		require.NoError(t, json.Unmarshal(want, &a))
		require.NoError(t, json.Unmarshal(g, &b))
		require.Equal(t, a, b)
	}
	pruned, err := Prune(array(msgs), PruneOptions{Config: apiConfig})
	require.NoError(t, err)
	require.NotEmpty(t, pruned.Pruned)
	same(opResult(t, "prune", msgs, `,"config":`+string(apiConfig)), pruned)
	refs, err := Prune(array(msgs), PruneOptions{Config: apiConfig, Output: OutputRefs})
	require.NoError(t, err)
	same(opResult(t, "prune", msgs, `,"config":`+string(apiConfig)+`,"output":"refs"`), refs)
	require.Equal(t, "0", string(refs.Messages[0]), "an unchanged message is its index")

	broken := append([]json.RawMessage{}, msgs[:3]...) // a call without its result
	broken = append(broken, json.RawMessage(`{"role":"tool","tool_call_id":"ghost","content":"?"}`))
	san, err := Sanitize(array(broken), SanitizeOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"c0"}, san.Stubbed)
	require.Equal(t, []int{3}, san.Removed)
	same(opResult(t, "sanitize", broken, ""), san)

	val, err := Validate(array(broken), ValidateOptions{Format: FormatOpenAI})
	require.NoError(t, err)
	require.False(t, val.OK)
	same(opResult(t, "validate", broken, `,"format":"openai"`), val)
}

// TestTypedErrors: bad input is the op's *Error, with its code and path.
func TestTypedErrors(t *testing.T) {
	_, err := Compact(json.RawMessage(`[{"role":"wizard","content":"hi"}]`), CompactOptions{})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeInvalidMessages, e.Code)
	require.Equal(t, "/messages/0/role", e.Path)

	_, err = Validate(json.RawMessage(`[{"role":"user","content":"hi"}]`), ValidateOptions{Format: "gemini-x"})
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeInvalidRequest, e.Code)
	require.Equal(t, "/format", e.Path)

	_, err = Prune(nil, PruneOptions{})
	require.ErrorAs(t, err, &e)
	require.Equal(t, "/messages", e.Path, "no messages are refused at their path")
	_, err = Prune(json.RawMessage(`[{"role":"user","content":"hi"},]`), PruneOptions{})
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeInvalidJSON, e.Code, "messages that are not JSON are refused as such")
}

// TestFormatAliases: each alias names its format, and compacts the same.
func TestFormatAliases(t *testing.T) {
	for alias, f := range map[string]Format{"openai-chat": FormatOpenAI, "anthropic-messages": FormatAnthropic} {
		got, ok := ParseFormat(alias)
		require.True(t, ok)
		require.Equal(t, f, got)
	}
	_, ok := ParseFormat("gemini-x")
	require.False(t, ok)
	msgs := apiConversation()
	a, err := Compact(array(msgs), CompactOptions{Config: apiConfig, Format: "openai-chat"})
	require.NoError(t, err)
	b, err := Compact(array(msgs), CompactOptions{Config: apiConfig, Format: FormatOpenAI})
	require.NoError(t, err)
	require.Equal(t, a, b)
}
