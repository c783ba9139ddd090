//go:build !(wasip1 && ctxcompact_hostvocab)

package bpe

import _ "embed"

// The rank tables, compiled in: every build but the WebAssembly module, which gets
// them from its host (vocab_host.go).

//go:embed vocab/o200k_base.bin
var o200kTable string

//go:embed vocab/cl100k_base.bin
var cl100kTable string

func tableOf(name string) (string, error) {
	t, _ := Embedded(name)
	return t, nil
}

// Embedded returns the rank table of an encoding compiled into this build, for a
// host that hands it to the WebAssembly module (host's ctxcompact.vocab_* imports);
// false for an unknown name, and in the module itself.
func Embedded(name string) (string, bool) {
	switch name {
	case O200kBase:
		return o200kTable, true
	case Cl100kBase:
		return cl100kTable, true
	}
	return "", false
}
