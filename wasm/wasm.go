// Package wasm embeds the ctxcompact WebAssembly module, built from ./guest by
// `./build.sh wasm` (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath
// -buildvcs=false -tags ctxcompact_hostvocab -ldflags='-s -w -buildid=' with Go
// 1.26.8). The bytes are committed and byte-reproducible; `./build.sh check`
// rebuilds and compares. The module has no BPE rank tables of its own: its host
// serves them through the ctxcompact.vocab_* imports (abi.json "host_imports").
package wasm

import _ "embed"

// Binary is the module. Do not modify it; hosts compile it once and share it.
//
//go:embed ctxcompact.wasm
var Binary []byte

// ABI is abi.json: the machine-readable description of the module's boundary
// (exports and their signatures, ABI version, ops, error codes). Hosts check the
// compiled module against it on load.
//
//go:embed abi.json
var ABI []byte

// ABIVersion is the boundary version the module exports as ctxc_abi_version.
// It changes only when the boundary changes incompatibly; see abi.json.
const ABIVersion = 2
