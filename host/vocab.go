package host

import (
	"context"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/ctxcompact/ctxcompact/core"
)

// The module has no BPE rank tables of its own (2.3 MB it would otherwise carry):
// when it first counts with an exact encoding it asks its host through two
// imports (wasm/abi.json "host_imports"). This host serves the tables the Go core
// has compiled in (core.Vocabulary), so nothing is read from disk.

// hostImportModule is the import module name of the host functions.
const hostImportModule = "ctxcompact"

// hostImports lists the functions of hostImportModule the module may import.
var hostImports = map[string]bool{"vocab_size": true, "vocab_read": true}

// instantiateHostImports defines the ctxcompact module in rt, serving the tables of
// the Go core.
func instantiateHostImports(ctx context.Context, rt wazero.Runtime) error {
	return defineVocabImports(ctx, rt, core.Vocabulary)
}

// defineVocabImports defines the ctxcompact module in rt with tables from serve
// (a name to its table, false when there is none); tests serve others.
func defineVocabImports(ctx context.Context, rt wazero.Runtime, serve func(name string) (string, bool)) error {
	table := func(m api.Module, ptr, n uint32) (string, bool) {
		name, ok := m.Memory().Read(ptr, n)
		if !ok {
			return "", false
		}
		return serve(string(name))
	}
	_, err := rt.NewHostModuleBuilder(hostImportModule).
		NewFunctionBuilder().WithFunc(func(_ context.Context, m api.Module, ptr, n uint32) int32 {
		t, ok := table(m, ptr, n)
		if !ok {
			return -1
		}
		return int32(len(t))
	}).Export("vocab_size").
		NewFunctionBuilder().WithFunc(func(_ context.Context, m api.Module, ptr, n, dst uint32) int32 {
		t, ok := table(m, ptr, n)
		if !ok || !m.Memory().WriteString(dst, t) {
			return -1
		}
		return 0
	}).Export("vocab_read").
		Instantiate(ctx)
	return err
}
