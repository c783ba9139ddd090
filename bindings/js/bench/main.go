// Command bench times the native Go core on request envelopes written by
// bindings/js/bench.mjs, so the JS/native ratio compares identical requests.
//
// Usage: go run ./bindings/js/bench DIR
//
// DIR holds <name>.begin.json and, when the summarizer is the host's,
// <name>.finish.json (the exact envelopes the JS binding sent). For each name it
// runs core.Call on begin (then finish) repeatedly for at least -time and prints one
// JSON line {"name", "ns_per_op", "iterations"}.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ctxcompact/ctxcompact/core"
)

func main() {
	minTime := flag.Duration("time", 500*time.Millisecond, "minimum time per trace")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: bench [-time d] DIR")
		os.Exit(2)
	}
	dir := flag.Arg(0)
	begins, err := filepath.Glob(filepath.Join(dir, "*.begin.json"))
	if err != nil || len(begins) == 0 {
		fmt.Fprintf(os.Stderr, "bench: no *.begin.json in %s\n", dir)
		os.Exit(1)
	}
	sort.Strings(begins)
	enc := json.NewEncoder(os.Stdout)
	for _, bf := range begins {
		name := strings.TrimSuffix(filepath.Base(bf), ".begin.json")
		begin := mustRead(bf)
		var finish []byte
		if ff := filepath.Join(dir, name+".finish.json"); exists(ff) {
			finish = mustRead(ff)
		}
		run := func() {
			if out := core.Call(begin); bytes.HasPrefix(out, []byte(`{"error"`)) {
				fmt.Fprintf(os.Stderr, "bench: %s: begin: %s\n", name, out)
				os.Exit(1)
			}
			if finish != nil {
				if out := core.Call(finish); bytes.HasPrefix(out, []byte(`{"error"`)) {
					fmt.Fprintf(os.Stderr, "bench: %s: finish: %s\n", name, out)
					os.Exit(1)
				}
			}
		}
		for i := 0; i < 3; i++ { // warm up
			run()
		}
		n := 0
		start := time.Now()
		for n < 5 || time.Since(start) < *minTime {
			run()
			n++
		}
		ns := time.Since(start).Nanoseconds() / int64(n)
		_ = enc.Encode(map[string]any{"name": name, "ns_per_op": ns, "iterations": n})
	}
}

func mustRead(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	return b
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
