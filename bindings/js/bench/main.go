// Command bench times the native Go core on request envelopes written by
// bindings/js/bench.mjs, so the JS/native ratio compares identical requests.
//
// Usage: go run ./bindings/js/bench DIR
//
// DIR holds <name>.begin.json and, when the summarizer is the host's,
// <name>.finish.json (the exact envelopes the JS binding sent). For each name it
// runs core.Call on begin (then finish) repeatedly for at least -time and prints one
// JSON line {"name", "ns_per_op" (the median iteration), "iterations"}.
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
		// The median of per-iteration samples, like bench.mjs: robust on a shared machine.
		var samples []int64
		start := time.Now()
		for len(samples) < 7 || time.Since(start) < *minTime {
			t := time.Now()
			run()
			samples = append(samples, time.Since(t).Nanoseconds())
		}
		sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
		ns := samples[len(samples)/2]
		_ = enc.Encode(map[string]any{"name": name, "ns_per_op": ns, "iterations": len(samples)})
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
