package core

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/stretchr/testify/require"
)

// response decodes a response envelope.
func response(t *testing.T, out []byte) (result map[string]any, err *Error) {
	t.Helper()
	var env struct {
		Result map[string]any `json:"result"`
		Error  *Error         `json:"error"`
	}
	require.NoError(t, json.Unmarshal(out, &env), "%s", out)
	return env.Result, env.Error
}

// TestInvalidUTF8IsInvalidJSON: a string that is not UTF-8 would be written back out
// as it came, and the output would not be JSON text (issue 13). Every op refuses it
// with invalid_json at the string's path; validate lists it as a problem.
func TestInvalidUTF8IsInvalidJSON(t *testing.T) {
	bad := "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"caf\xe9 au lait\"}]}"
	ok := `{"role":"system","content":"be brief"}`
	msgs := "[" + ok + "," + bad + "]"
	for _, op := range []string{"compact.begin", "prune", "sanitize", "tokens.count", "cache.apply", "hygiene.check"} {
		_, e := response(t, Call([]byte(`{"op":"`+op+`","force":true,"messages":`+msgs+`}`)))
		require.NotNil(t, e, op)
		require.Equal(t, CodeInvalidJSON, e.Code, op)
		require.Equal(t, "/messages/1/content/0/text", e.Path, op)
		require.Contains(t, e.Message, "invalid UTF-8", op)
	}
	// In a key, in a top-level field, in the op itself.
	for req, path := range map[string]string{
		"{\"op\":\"prune\",\"messages\":[{\"role\":\"user\",\"c\xffntent\":\"x\"}]}": "/messages/0/c\uFFFDntent",
		"{\"op\":\"prune\",\"system\":\"\xc3\",\"messages\":[]}":                     "/system",
		"{\"op\":\"pr\xf0une\",\"messages\":[]}":                                     "/op",
	} {
		_, e := response(t, Call([]byte(req)))
		require.NotNil(t, e, req)
		require.Equal(t, CodeInvalidJSON, e.Code, req)
		require.Equal(t, path, e.Path, req)
	}

	// validate: a problem per bad string, and the other problems as usual.
	twice := "[" + bad + ",{\"role\":\"bogus\",\"content\":\"\xff\xfe\"}]"
	res, e := response(t, Call([]byte(`{"op":"validate","messages":`+twice+`}`)))
	require.Nil(t, e)
	require.Equal(t, false, res["ok"])
	var codes, paths []string
	for _, p := range res["problems"].([]any) {
		codes = append(codes, p.(map[string]any)["code"].(string))
		paths = append(paths, p.(map[string]any)["path"].(string))
	}
	require.Equal(t, []string{ProblemInvalidUTF8, ProblemInvalidUTF8, ProblemInvalidMessage}, codes)
	require.Equal(t, []string{"/messages/0/content/0/text", "/messages/1/content", "/messages/1/role"}, paths)
	// The same through Dispatch, where the op is not in the request.
	res, e = response(t, Dispatch("validate", []byte(`{"messages":`+msgs+`}`)))
	require.Nil(t, e)
	require.Equal(t, false, res["ok"])
	// A request invalid for another reason as well is still invalid_json.
	_, e = response(t, Call([]byte(`{"op":"validate","messages":`+twice+`,}`)))
	require.NotNil(t, e)
	require.Equal(t, CodeInvalidJSON, e.Code)

	// Valid UTF-8, U+FFFD itself and escaped lone surrogates (valid JSON text) pass.
	res, e = response(t, Call([]byte(`{"op":"validate","messages":[{"role":"user","content":"caf`+"\u00e9 \uFFFD"+` \ud800"}]}`)))
	require.Nil(t, e)
	require.Equal(t, true, res["ok"])
}

// TestInvalidJSONSaysWhere: a syntax error names the value it is in and the byte.
func TestInvalidJSONSaysWhere(t *testing.T) {
	for req, want := range map[string]struct {
		path string
		at   string
	}{
		``:     {"", "empty"},
		"  \n": {"", "empty"},
		`{"op":"prune","messages":[{"role":"user","content":"a\qb"}]}`: {"/messages/0/content", "byte 53"},
		`{"op":"prune","messages":[{"role":"user" "content":"x"}]}`:    {"/messages/0/role", "byte 41"},
		`{"op":"prune","messages":[1,2,tru]}`:                          {"/messages/2", "byte 30"},
		`{"op":"prune","messages":[]`:                                  {"/messages", "ends inside an object"},
		`{"op":"prune"} x`:                                             {"", "text after"},
	} {
		_, e := response(t, Call([]byte(req)))
		require.NotNil(t, e, req)
		require.Equal(t, CodeInvalidJSON, e.Code, req)
		require.Equal(t, want.path, e.Path, req)
		require.Contains(t, e.Message, want.at, req)
	}
}

// TestInvalidJSONDeepNesting: the locator stops at the nesting limit, so a hostile
// depth costs a walk, not its square (100,000 brackets took 14 s natively and
// trapped the module), and the path it spells is bounded.
func TestInvalidJSONDeepNesting(t *testing.T) {
	for _, req := range []string{strings.Repeat("[", 100_000), `{"op":"prune","messages":` + strings.Repeat("[", 100_000) + "1" + strings.Repeat("]", 99_999)} {
		_, e := response(t, Call([]byte(req)))
		require.NotNil(t, e)
		require.Contains(t, []ErrorCode{CodeInvalidJSON, CodeInputTooLarge}, e.Code)
		require.LessOrEqual(t, len(e.Path), 2*MaxNestingDepth+len("/messages"))
	}
	path, at, what := jsonraw.LocateInvalid(strings.Repeat("[", 100_000), MaxNestingDepth)
	require.Equal(t, MaxNestingDepth, at)
	require.Equal(t, strings.Repeat("/0", MaxNestingDepth), path)
	require.Contains(t, what, "nested more than")
}
