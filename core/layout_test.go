package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestPhaseFilesStandAlone holds issue 26's layout rule: no file of a compaction
// phase (prune, boundary, sanitize, summary, assemble, fallback, compact) refers to
// a name declared in the cache, simulate, native, recall, session or engine files.
// Run it alone with: go test ./core -run TestPhaseFilesStandAlone
func TestPhaseFilesStandAlone(t *testing.T) {
	phases := []string{"prune.go", "boundary.go", "sanitize.go", "summary.go", "assemble.go", "fallback.go", "compact.go"}
	forbidden := func(name string) bool {
		for _, p := range []string{"cache", "simulate", "native", "recall", "session", "engine"} {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	declaredIn := map[string]string{} // top-level name -> file
	parsed := map[string]*ast.File{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed[f] = af
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declaredIn[d.Name.Name] = f
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declaredIn[s.Name.Name] = f
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declaredIn[n.Name] = f
						}
					}
				}
			}
		}
	}
	var bad []string
	for _, p := range phases {
		af := parsed[p]
		if af == nil {
			t.Fatalf("no phase file %s", p)
		}
		seen := map[string]bool{}
		ast.Inspect(af, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			if f := declaredIn[id.Name]; f != "" && f != p && forbidden(f) && !seen[id.Name] {
				seen[id.Name] = true
				bad = append(bad, p+" uses "+id.Name+" of "+f)
			}
			return true
		})
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d references from phase files to the cache, simulate, native, recall, session or engine files:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}
