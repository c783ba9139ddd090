// Command native times core.Call natively on request envelopes recorded by
// bindings/python/bench.py (files NNN-K.json: trace NNN, call K), so the Python
// binding and the Go core are measured on the same bytes in one run.
//
//	go run ./bindings/python/bench/native -reps 15 DIR
//
// It prints {"NNN": median milliseconds of all calls of trace NNN, ...} as JSON.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/ctxcompact/ctxcompact/core"
)

func main() {
	reps := flag.Int("reps", 15, "timed repetitions per trace (median reported)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the timed runs to this file")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: native [-reps N] DIR")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(flag.Arg(0), "*.json"))
	if err != nil || len(files) == 0 {
		fmt.Fprintln(os.Stderr, "native: no envelopes in", flag.Arg(0))
		os.Exit(1)
	}
	sort.Strings(files)
	traces := map[string][][]byte{}
	var keys []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		k := strings.SplitN(filepath.Base(f), "-", 2)[0]
		if _, ok := traces[k]; !ok {
			keys = append(keys, k)
		}
		traces[k] = append(traces[k], b)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	out := map[string]float64{}
	for _, k := range keys {
		run := func() {
			for _, env := range traces[k] {
				if r := core.Call(env); len(r) > 8 && string(r[:9]) == `{"error":` {
					fmt.Fprintf(os.Stderr, "native: trace %s: %s\n", k, r)
					os.Exit(1)
				}
			}
		}
		for i := 0; i < 3; i++ {
			run()
		}
		ts := make([]float64, *reps)
		for i := range ts {
			t0 := time.Now()
			run()
			ts[i] = float64(time.Since(t0).Nanoseconds()) / 1e6
		}
		sort.Float64s(ts)
		out[k] = ts[len(ts)/2]
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
