package wasm

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeDescribesModule: the size and sha256 in README.md are those of the
// committed module, so the document cannot go stale when the module is rebuilt.
func TestReadmeDescribesModule(t *testing.T) {
	doc, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(Binary)
	if want := hex.EncodeToString(sum[:]); !strings.Contains(string(doc), "| sha256 | `"+want+"` |") {
		t.Errorf("wasm/README.md does not give the module's sha256 %s: update its size table (./build.sh wasm prints both)", want)
	}
	m := regexp.MustCompile(`\| raw \| ([0-9,]+) \|`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("wasm/README.md has no '| raw | N |' row")
	}
	raw, _ := strconv.Atoi(strings.ReplaceAll(string(m[1]), ",", ""))
	if raw != len(Binary) {
		t.Errorf("wasm/README.md says %d bytes raw; the module is %d", raw, len(Binary))
	}
}
