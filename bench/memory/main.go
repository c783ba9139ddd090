// Command memory measures the peak memory of one large compaction in each runtime:
// the Go host (wazero), Node (bindings/js) and Python (bindings/python, wasmtime),
// each in a child process of its own, whose peak resident set (getrusage maxrss)
// this command reads when the child exits. The input is generated here, the same
// bytes on every run: n short chat messages (one word each, 36 bytes a message on
// average), 1,400,000 of them by default (50 MB).
//
//	go run ./bench/memory                             # every runtime, both cases, 50 MB
//	go run ./bench/memory -messages 1600000 -runtimes go   # the 58 MB input, Go only
//
// Two cases: "compact" (Compactor.compact with the builtin summarizer, forced) and
// "lossless" (a lossless ContextEngine's compress into a fresh recall store file).
// Each child prints what it computed, so that runs can be compared for identical
// results: the output messages' count and SHA-256 (over the messages as that
// runtime serializes them), the archived count, and the process's resident set
// after the call and after its garbage collector ran (what the process keeps).
//
// Node needs the npm dev dependencies (npm ci) for the lossless case; Python the test
// venv (bash bindings/python/test.sh --venv-only), whose interpreter runs the source
// tree. Timings are printed too, never asserted: ./build.sh bench-memory runs this.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	child := flag.String("child", "", "internal: run one case in this process (compact or lossless)")
	messages := flag.Int("messages", 1_400_000, "messages in the generated input")
	runtimes := flag.String("runtimes", "go,node,python", "runtimes to measure, comma-separated")
	cases := flag.String("cases", "compact,lossless", "cases to run, comma-separated")
	input := flag.String("input", "", "internal: the input file (the child's)")
	store := flag.String("store", "", "internal: the recall store file (the child's)")
	write := flag.String("write", "", "write the generated input to this file and stop")
	flag.Parse()
	if *write != "" {
		if err := os.WriteFile(*write, generate(*messages), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench/memory:", err)
			os.Exit(1)
		}
		return
	}
	if *child != "" {
		if err := runGoChild(*child, *input, *store); err != nil {
			fmt.Fprintln(os.Stderr, "bench/memory:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*messages, split(*runtimes), split(*cases)); err != nil {
		fmt.Fprintln(os.Stderr, "bench/memory:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// report is what a child prints on its last line of stdout.
type report struct {
	Messages     int     `json:"messages"`
	SHA256       string  `json:"sha256"`
	Archived     int     `json:"archived"`
	RSSAfterMB   float64 `json:"rss_after_mb"`
	RSSAfterGCMB float64 `json:"rss_after_gc_mb"`
	RSSBeforeMB  float64 `json:"rss_before_mb"`
	InstanceMB   float64 `json:"instance_mb"`
	Seconds      float64 `json:"seconds"`
}

func run(n int, runtimes, cases []string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "ctxcompact-bench-memory-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "input.json")
	data := generate(n)
	if err := os.WriteFile(in, data, 0o600); err != nil {
		return err
	}
	fmt.Printf("input: %d messages, %.1f MB (%d bytes); %s\n", n, float64(len(data))/1e6, len(data), time.Now().UTC().Format(time.RFC3339))
	data = nil
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("%-9s %-7s %9s %9s %9s %11s %11s %8s %9s %s\n", "case", "runtime", "before", "peak", "after",
		"after GC", "instances", "seconds", "archived", "output")
	for _, c := range cases {
		for _, rt := range runtimes {
			storePath := filepath.Join(dir, fmt.Sprintf("%s-%s.db", c, rt))
			var cmd *exec.Cmd
			switch rt {
			case "go":
				cmd = exec.Command(self, "-child", c, "-input", in, "-store", storePath)
			case "node":
				cmd = exec.Command("node", "--expose-gc", filepath.Join(root, "bench/memory/child.mjs"), c, in, storePath)
			case "python":
				py := filepath.Join(root, "bindings/python/build/venv/bin/python")
				if os.Getenv("CTXCOMPACT_PY_VENV") != "" {
					py = filepath.Join(os.Getenv("CTXCOMPACT_PY_VENV"), "bin/python")
				}
				cmd = exec.Command(py, filepath.Join(root, "bench/memory/child.py"), c, in, storePath)
				cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "bindings/python/src"))
			default:
				return fmt.Errorf("unknown runtime %q (go, node, python)", rt)
			}
			cmd.Dir = root
			var out bytes.Buffer
			cmd.Stdout = &out
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Printf("%-9s %-7s failed: %v\n", c, rt, err)
				continue
			}
			peak := float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024 // KiB on Linux
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			var r report
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
				return fmt.Errorf("%s %s: reading the child's report %q: %w", c, rt, lines[len(lines)-1], err)
			}
			fmt.Printf("%-9s %-7s %9.0f %9.0f %9.0f %11.0f %11.0f %8.1f %9d %d messages, sha256 %.16s\n",
				c, rt, r.RSSBeforeMB, peak, r.RSSAfterMB, r.RSSAfterGCMB, r.InstanceMB, r.Seconds, r.Archived, r.Messages, r.SHA256)
			_ = os.Remove(storePath)
		}
	}
	fmt.Println("MiB. before: the child's resident set with the module loaded, before it reads the input;",
		"peak: its maxrss (getrusage); after: its resident set after the call, and after a full GC;",
		"instances: the linear memory of the instances its pool kept")
	return nil
}

// repoRoot is the directory holding go.mod, from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run from inside the repository (no go.mod above the working directory)")
		}
		dir = parent
	}
}
