package wasm_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/wasm"
	"github.com/ctxcompact/ctxcompact/wasm/internal/abigen"
)

// TestABIOpsAndCodesCurrent fails when abi.json's ops or error codes differ from the
// core's, which happens whenever an op is added.
func TestABIOpsAndCodesCurrent(t *testing.T) {
	want, err := abigen.Render(wasm.ABI)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wasm.ABI, want) {
		t.Fatalf("%s is stale: its ops or error codes differ from core.Ops() and core.ErrorCodes; run `%s` and commit it", abigen.Path, abigen.Command)
	}
}

func TestABIDescriptionShape(t *testing.T) {
	var d struct {
		ABIVersion int              `json:"abi_version"`
		Exports    map[string]any   `json:"exports"`
		Ops        []string         `json:"ops"`
		ErrorCodes []core.ErrorCode `json:"error_codes"`
		MaxRequest int              `json:"max_request_bytes"`
	}
	if err := json.Unmarshal(wasm.ABI, &d); err != nil {
		t.Fatal(err)
	}
	if d.ABIVersion != wasm.ABIVersion {
		t.Errorf("abi.json abi_version %d, wasm.ABIVersion %d", d.ABIVersion, wasm.ABIVersion)
	}
	if d.MaxRequest != core.MaxRequestBytes {
		t.Errorf("abi.json max_request_bytes %d, core.MaxRequestBytes %d", d.MaxRequest, core.MaxRequestBytes)
	}
	for _, name := range []string{"_initialize", "memory", "ctxc_abi_version", "ctxc_alloc", "ctxc_free", "ctxc_call", "ctxc_result_len"} {
		if _, ok := d.Exports[name]; !ok {
			t.Errorf("abi.json does not describe export %q", name)
		}
	}
	if !slices.Contains(d.Ops, "info") {
		t.Errorf("abi.json ops %v lack info", d.Ops)
	}
}

func TestRenderIsIdempotent(t *testing.T) {
	once, err := abigen.Render(wasm.ABI)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := abigen.Render(once)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(once, twice) {
		t.Error("rendering twice changes the file")
	}
	if _, err := abigen.Render([]byte(`{"ops": []}`)); err == nil {
		t.Error("Render accepted a file without error_codes")
	}
}
