// Command genabi rewrites the "ops" and "error_codes" of wasm/abi.json from the core.
// Run it from the module root after adding an op or an error code:
//
//	go run ./wasm/internal/genabi          # update the file
//	go run ./wasm/internal/genabi -check   # exit 1 if the file is stale
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/ctxcompact/ctxcompact/wasm/internal/abigen"
)

func main() {
	check := flag.Bool("check", false, "do not write; exit 1 if "+abigen.Path+" is stale")
	flag.Parse()
	if err := run(*check); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(check bool) error {
	src, err := os.ReadFile(abigen.Path)
	if err != nil {
		return fmt.Errorf("ctxcompact: %w (run from the module root)", err)
	}
	out, err := abigen.Render(src)
	if err != nil {
		return err
	}
	switch {
	case bytes.Equal(src, out):
		fmt.Printf("%s is up to date\n", abigen.Path)
		return nil
	case check:
		return fmt.Errorf("ctxcompact: %s is stale: its ops or error codes differ from the core; run `%s`", abigen.Path, abigen.Command)
	}
	if err := os.WriteFile(abigen.Path, out, 0o644); err != nil {
		return err
	}
	fmt.Printf("updated %s\n", abigen.Path)
	return nil
}
