package host

import (
	"context"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/wasm"
)

// TestModuleAsksItsHostForTheTables: the module counts exactly with the table its
// host serves, and refuses to count (invalid_config at the encoding, naming why)
// when the host has none or serves another encoding's table: never a wrong count.
func TestModuleAsksItsHostForTheTables(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		serve func(name string) (string, bool) // what the host answers for a name
		want  string                           // "" = counts; else the error message's part
	}{
		{"served", core.Vocabulary, ""},
		{"none", func(string) (string, bool) { return "", false }, "the host gives no o200k_base vocabulary"},
		{"another-table", func(string) (string, bool) { return core.Vocabulary(core.EncodingCl100k) }, "the o200k_base vocabulary is 744101 bytes, want 1597683"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
			defer rt.Close(ctx)
			wasi_snapshot_preview1.MustInstantiate(ctx, rt)
			asked := 0
			err := defineVocabImports(ctx, rt, func(name string) (string, bool) {
				asked++ // vocab_size and vocab_read each ask once per load
				return tc.serve(name)
			})
			if err != nil {
				t.Fatal(err)
			}
			mod, err := rt.InstantiateWithConfig(ctx, wasm.Binary, wazero.NewModuleConfig().WithName("").WithStartFunctions())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := mod.ExportedFunction("_initialize").Call(ctx); err != nil {
				t.Fatal(err)
			}
			call := func(req string) gjson.Result {
				res, err := mod.ExportedFunction("ctxc_alloc").Call(ctx, uint64(len(req)))
				if err != nil || !mod.Memory().WriteString(uint32(res[0]), req) {
					t.Fatal(err)
				}
				out, err := mod.ExportedFunction("ctxc_call").Call(ctx, res[0], uint64(len(req)))
				if err != nil {
					t.Fatal(err)
				}
				n, _ := mod.ExportedFunction("ctxc_result_len").Call(ctx)
				b, _ := mod.Memory().Read(uint32(out[0]), uint32(n[0]))
				return gjson.ParseBytes(b)
			}
			req := `{"op":"tokens.count","encoding":"o200k_base","messages":[{"role":"user","content":"hello world"}]}`
			r := call(req)
			if tc.want == "" {
				if r.Get("result.total").Int() != 9 {
					t.Fatalf("o200k_base count of hello world: %s", r.Raw)
				}
				call(req) // the table is loaded once per instance: one vocab_size, one vocab_read
				if asked != 2 {
					t.Errorf("the host was asked %d times for the table, want twice (its size, then its bytes)", asked)
				}
				return
			}
			if r.Get("error.code").Str != "invalid_request" || r.Get("error.path").Str != "/encoding" || !strings.Contains(r.Get("error.message").Str, tc.want) {
				t.Fatalf("want invalid_request at /encoding with %q, got %s", tc.want, r.Raw)
			}
			// rough still counts: only the exact encoding is unavailable
			if r := call(`{"op":"tokens.count","messages":[{"role":"user","content":"hello world"}]}`); !r.Get("result.total").Exists() {
				t.Errorf("rough count after a refused table: %s", r.Raw)
			}
		})
	}
}
