package core

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// TestInvalidArgumentsNameNoArgument: arguments that are not valid JSON give no
// string argument, however they are written (issue 13: `{"0":"\00"}` was read as
// 0="" by one path and differently by the other, so a prune placeholder could name
// path="" for a call that had no readable path).
func TestInvalidArgumentsNameNoArgument(t *testing.T) {
	for _, args := range []string{
		`{"0":"\00"}`,
		`{"path":"a\qb"}`,
		`{"path":"src/app.py","n":tru}`,
		"{\"path\":\"tab\there\"}",
		`{"path":"src/app.py","x":[1,{"c":"\x"}]}`,
		`{"path":"src/app.py"`,
	} {
		raw, _ := json.Marshal(args)
		small := toolCall{args: gjson.Result{Type: gjson.String, Raw: string(raw)}}
		require.Empty(t, small.stringArgs(nil), "arguments %s", args)
		// The same arguments past bigArgs, where the walker's refusal leads to a
		// search of the raw text.
		big := strings.Replace(args, `{`, `{"pad":"`+strings.Repeat("x", bigArgs)+`\u0041",`, 1)
		raw, _ = json.Marshal(big)
		large := toolCall{args: gjson.Result{Type: gjson.String, Raw: string(raw)}}
		require.Empty(t, large.stringArgs([]string{"path", "0"}), "big arguments %.40s...", big)
	}
	// Valid arguments that use every escape still read whole.
	raw, _ := json.Marshal(`{"path":"a\"b\\c\/d\u00e9\n","n":1}`)
	valid := toolCall{args: gjson.Result{Type: gjson.String, Raw: string(raw)}}
	got := valid.stringArgs(nil)
	require.Len(t, got, 1)
	require.Equal(t, "a\"b\\c/d\u00e9\n", got[0].value())
}
