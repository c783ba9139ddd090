package installtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// root is the checkout (this package is internal/installtest).
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", r, err)
	}
	return r
}

// goCmd runs the go command in dir, offline: modules come from the module cache the
// checkout's own build filled (GOPROXY=off), never from the network.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

const app = `package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/host"
)

func main() {
	ctx := context.Background()
	env := []byte(` + "`" + `{"op":"tokens.count","messages":[{"role":"user","content":"Hello from another module"}]}` + "`" + `)
	native := core.Call(env)
	e, err := host.New(ctx)
	if err != nil {
		panic(err)
	}
	defer e.Close(ctx)
	wasm, err := e.Call(ctx, env)
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(map[string]json.RawMessage{"native": native, "wasm": wasm})
	fmt.Println(string(out))
}
`

// TestReplaceFromAnotherModule is the README's route for using the library before
// it is published: a module of its own, a require of v0.0.0 and a replace directive
// to the checkout, then go mod tidy. The checkout's go.sum seeds the app's, as the
// checksum database is not reachable offline (a user online needs no seed).
func TestReplaceFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds another module; skipped with -short")
	}
	r := root(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(app), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(r, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	goCmd(t, dir, nil, "mod", "init", "example.com/app")
	goCmd(t, dir, nil, "mod", "edit", "-require=github.com/ctxcompact/ctxcompact@v0.0.0",
		"-replace=github.com/ctxcompact/ctxcompact="+r)
	goCmd(t, dir, nil, "mod", "tidy")
	out := goCmd(t, dir, nil, "run", ".")
	var got struct {
		Native, Wasm struct {
			Result struct {
				Total int `json:"total"`
			} `json:"result"`
		}
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil {
		t.Fatalf("app output %q: %v", out, err)
	}
	if got.Native.Result.Total <= 0 || got.Native.Result.Total != got.Wasm.Result.Total {
		t.Fatalf("token totals: native %d, wasm %d (%s)", got.Native.Result.Total, got.Wasm.Result.Total, out)
	}
}

// TestGoInstallFromACheckout: `go install ./cmd/ctxcompact` from the checkout puts a
// working binary in GOBIN.
func TestGoInstallFromACheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI; skipped with -short")
	}
	bin := t.TempDir()
	goCmd(t, root(t), []string{"GOBIN=" + bin}, "install", "./cmd/ctxcompact")
	cmd := exec.Command(filepath.Join(bin, "ctxcompact"), "call")
	cmd.Stdin = strings.NewReader(`{"op":"info"}`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ctxcompact call: %v", err)
	}
	var info struct {
		Result struct {
			Name string `json:"name"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.Result.Name != "ctxcompact" {
		t.Fatalf("ctxcompact call info: %s (%v)", out, err)
	}
}
