package tokens

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
)

// TestFirstExactCount prints what the first exact count costs in a fresh wasm
// instance: the module's compile time, instantiation, the first count with each
// encoding (it builds the rank map from the embedded table) and the next one.
//
//	go test ./bench/tokens -run FirstExactCount -v
func TestFirstExactCount(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the wasm module; skipped with -short")
	}
	path := os.Getenv("CTXCOMPACT_WASM")
	if path == "" {
		path = filepath.Join(t.TempDir(), "ctxcompact.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false",
			"-ldflags=-s -w -buildid=", "-o", path, "./wasm/guest")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building the module: %v\n%s", err, out)
		}
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	start := time.Now()
	compiled, err := rt.CompileModule(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("module: %d bytes, compile %v", len(bin), time.Since(start).Round(time.Millisecond))
	for _, enc := range []string{"rough", "o200k_base", "cl100k_base"} {
		start = time.Now()
		mod, err := rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mod.ExportedFunction("_initialize").Call(ctx); err != nil {
			t.Fatal(err)
		}
		inst := time.Since(start)
		in := &instance{mod: mod, alloc: mod.ExportedFunction("ctxc_alloc"), call_: mod.ExportedFunction("ctxc_call"),
			resLen: mod.ExportedFunction("ctxc_result_len"), free_: mod.ExportedFunction("ctxc_free")}
		env := func(text string) []byte {
			return []byte(`{"op":"tokens.count","encoding":"` + enc + `","messages":[{"role":"user","content":"` + text + `"}]}`)
		}
		start = time.Now()
		first := in.call(t, env("Hello, world! 你好"))
		firstD := time.Since(start)
		start = time.Now()
		in.call(t, env("Hello again, world! 你好"))
		next := time.Since(start)
		want := gjson.GetBytes(core.Call(env("Hello, world! 你好")), "result.total").Int()
		if got := gjson.GetBytes(first, "result.total").Int(); got <= 0 || got != want {
			t.Errorf("%s: wasm total %d, native %d: %s", enc, got, want, first)
		}
		t.Logf("%-12s instantiate %8v  first count %8v  next count %8v", enc, inst.Round(100*time.Microsecond),
			firstD.Round(100*time.Microsecond), next.Round(10*time.Microsecond))
		mod.Close(ctx)
	}
}
