package core

import (
	"fmt"
	"os"
	"testing"
)

func TestZZDump(t *testing.T) {
	dir := os.Getenv("ZZDIR")
	if dir == "" { t.Skip() }
	for _, w := range []int{8000, 16000, 32000, 128000} {
		for j, extra := range []string{`,"output":"refs"`, `,"summarizer":"builtin"`, `,"summarizer":"builtin","config":{"compression":{"protect_last_n":60}}`} {
			reqs, _ := traceRequests(&testing.B{}, w, extra)
			for k, r := range reqs {
				os.WriteFile(fmt.Sprintf("%s/%d-%d-%d.json", dir, j, w, k), Call(r), 0o644)
			}
		}
	}
}
