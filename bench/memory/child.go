package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/host"
	"github.com/ctxcompact/ctxcompact/recall"
)

// runGoChild runs one case on the Go host and prints its report.
func runGoChild(c, input, storePath string) error {
	ctx := context.Background()
	e, err := host.New(ctx)
	if err != nil {
		return err
	}
	defer e.Close(ctx)
	before := rssMB()
	data, err := os.ReadFile(input)
	if err != nil {
		return err
	}
	start := time.Now()
	var res core.CompactResult
	switch c {
	case "compact":
		res, err = e.Compact(ctx, data, nil, nil, host.CompactOptions{Force: true})
	case "lossless":
		st, oerr := recall.Open(storePath)
		if oerr != nil {
			return oerr
		}
		defer st.Close()
		ce, cerr := host.NewContextEngine(ctx, e, json.RawMessage(`{"context":{"engine":"lossless"}}`),
			host.ContextEngineOptions{Store: st, SessionID: "bench"})
		if cerr != nil {
			return cerr
		}
		res, err = ce.Compress(ctx, data, host.CompressOptions{Force: true})
	default:
		return fmt.Errorf("unknown case %q (compact, lossless)", c)
	}
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	h := sha256.New()
	h.Write([]byte{'['})
	for i, m := range res.Messages {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(m)
	}
	h.Write([]byte{']'})
	r := report{Messages: len(res.Messages), SHA256: hex.EncodeToString(h.Sum(nil)), Archived: len(res.Archived),
		Seconds: secs, RSSAfterMB: rssMB(), RSSBeforeMB: before}
	data, res = nil, core.CompactResult{}
	debug.FreeOSMemory()
	r.RSSAfterGCMB = rssMB()
	return json.NewEncoder(os.Stdout).Encode(r)
}

// rssMB is this process's resident set (VmRSS) in MiB, 0 where /proc is missing.
func rssMB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
