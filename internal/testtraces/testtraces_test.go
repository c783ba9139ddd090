package testtraces

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTB records how a helper ended the test. Its Fatalf and Skipf panic with
// ended, as the real ones stop the goroutine.
type fakeTB struct {
	testing.TB
	how, msg string
}

type ended struct{}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatal(args ...any) {
	f.how, f.msg = "fatal", fmt.Sprint(args...)
	panic(ended{})
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.how, f.msg = "fatal", fmt.Sprintf(format, args...)
	panic(ended{})
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.how, f.msg = "skip", fmt.Sprintf(format, args...)
	panic(ended{})
}
func (f *fakeTB) Logf(format string, args ...any) { f.how, f.msg = "log", fmt.Sprintf(format, args...) }

// run calls fn with a fake TB and returns how it ended ("" when it returned).
func run(fn func(tb testing.TB)) (tb *fakeTB) {
	tb = &fakeTB{}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(ended); !ok {
				panic(r)
			}
		}
	}()
	fn(tb)
	return tb
}

func TestMissingDirFailsInCISkipsOtherwise(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-shared", "traces")
	for _, tc := range []struct {
		ci, want string
	}{
		{"true", "fatal"}, {"1", "fatal"}, {"yes", "fatal"},
		{"", "skip"}, {"0", "skip"}, {"false", "skip"},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			got := run(func(tb testing.TB) { requireAt(tb, missing) })
			if got.how != tc.want {
				t.Fatalf("CI=%q: %s (%q), want %s", tc.ci, got.how, got.msg, tc.want)
			}
			if !strings.Contains(got.msg, missing) {
				t.Errorf("message %q does not name %s", got.msg, missing)
			}
		})
	}
}

func TestAvailableFailsInCILogsOtherwise(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "traces")
	t.Setenv("CI", "true")
	if got := run(func(tb testing.TB) { availableAt(tb, missing) }); got.how != "fatal" || !strings.Contains(got.msg, missing) {
		t.Fatalf("CI=true: %s (%q), want fatal naming %s", got.how, got.msg, missing)
	}
	t.Setenv("CI", "")
	var ok bool
	got := run(func(tb testing.TB) { ok = availableAt(tb, missing) })
	if got.how != "log" || ok || !strings.Contains(got.msg, missing) {
		t.Fatalf("CI unset: %s (%q) ok=%v, want a log naming %s and false", got.how, got.msg, ok, missing)
	}
	if got := run(func(tb testing.TB) { ok = availableAt(tb, t.TempDir()) }); got.how != "" || !ok {
		t.Fatalf("existing dir: %s (%q) ok=%v", got.how, got.msg, ok)
	}
}

func TestUnsetCISkips(t *testing.T) {
	t.Setenv("CI", "")
	os.Unsetenv("CI") // t.Setenv restores the old value afterwards
	if InCI() {
		t.Fatal("InCI with CI unset")
	}
	missing := filepath.Join(t.TempDir(), "traces")
	if got := run(func(tb testing.TB) { requireAt(tb, missing) }); got.how != "skip" {
		t.Fatalf("%s (%q), want skip", got.how, got.msg)
	}
}

func TestPresentDirPasses(t *testing.T) {
	t.Setenv("CI", "true")
	dir := t.TempDir()
	if got := run(func(tb testing.TB) { requireAt(tb, dir) }); got.how != "" {
		t.Fatalf("%s (%q) for an existing directory", got.how, got.msg)
	}
	// A file where the directory should be is missing too.
	file := filepath.Join(dir, "traces")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run(func(tb testing.TB) { requireAt(tb, file) }); got.how != "fatal" {
		t.Fatalf("%s (%q) for a file, want fatal", got.how, got.msg)
	}
}

func TestDirIsBesideTheModuleRoot(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	root := filepath.Dir(filepath.Dir(wd)) // internal/testtraces -> the module root
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root guess %s has no go.mod", root)
	}
	if want := filepath.Join(filepath.Dir(root), "shared", "traces"); dir != want {
		t.Fatalf("Dir() = %s, want %s", dir, want)
	}
}
