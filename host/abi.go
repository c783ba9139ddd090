package host

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/ctxcompact/ctxcompact/wasm"
)

// abiExport is one entry of abi.json's "exports": a function with its signature,
// or a memory ("kind": "memory").
type abiExport struct {
	Kind    string   `json:"kind"`
	Params  []string `json:"params"`
	Results []string `json:"results"`
}

// abiDescription is the part of wasm/abi.json a host checks.
type abiDescription struct {
	ABIVersion      uint32               `json:"abi_version"`
	Exports         map[string]abiExport `json:"exports"`
	MaxRequestBytes int                  `json:"max_request_bytes"`
	Ops             []string             `json:"ops"`
	ErrorCodes      []string             `json:"error_codes"`
}

// loadABI parses the embedded wasm/abi.json.
func loadABI() (*abiDescription, error) {
	var d abiDescription
	if err := json.Unmarshal(wasm.ABI, &d); err != nil {
		return nil, fmt.Errorf("ctxcompact: parsing wasm/abi.json: %w", err)
	}
	if d.ABIVersion != wasm.ABIVersion {
		return nil, fmt.Errorf("%w: wasm/abi.json says abi_version %d, package wasm says %d",
			ErrABIMismatch, d.ABIVersion, wasm.ABIVersion)
	}
	return &d, nil
}

// checkModule compares the compiled module's imports and exports with abi.json.
func checkModule(d *abiDescription, m wazero.CompiledModule) error {
	for _, f := range m.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != wasi_snapshot_preview1.ModuleName && !(mod == hostImportModule && hostImports[name]) {
			return fmt.Errorf("%w: the module imports %s.%s; only %s and %s.vocab_size/vocab_read are provided",
				ErrABIMismatch, mod, name, wasi_snapshot_preview1.ModuleName, hostImportModule)
		}
	}
	if n := len(m.ImportedMemories()); n != 0 {
		return fmt.Errorf("%w: the module imports %d memories; it must define its own", ErrABIMismatch, n)
	}
	funcs, mems := m.ExportedFunctions(), m.ExportedMemories()
	names := make([]string, 0, len(d.Exports))
	for name := range d.Exports {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := checkExport(name, d.Exports[name], funcs, mems); err != nil {
			return err
		}
	}
	return nil
}

func checkExport(name string, want abiExport, funcs map[string]api.FunctionDefinition, mems map[string]api.MemoryDefinition) error {
	if want.Kind == "memory" {
		if _, ok := mems[name]; !ok {
			return fmt.Errorf("%w: the module does not export memory %q", ErrABIMismatch, name)
		}
		return nil
	}
	f, ok := funcs[name]
	if !ok {
		return fmt.Errorf("%w: the module does not export function %q", ErrABIMismatch, name)
	}
	params, results := typeNames(f.ParamTypes()), typeNames(f.ResultTypes())
	if !slices.Equal(params, nonNil(want.Params)) || !slices.Equal(results, nonNil(want.Results)) {
		return fmt.Errorf("%w: export %q has signature %v -> %v; wasm/abi.json says %v -> %v",
			ErrABIMismatch, name, params, results, want.Params, want.Results)
	}
	return nil
}

// typeNames spells value types as abi.json does ("i32", "i64", "f32", "f64").
func typeNames(ts []api.ValueType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = api.ValueTypeName(t)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
