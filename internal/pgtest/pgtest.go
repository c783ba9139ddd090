// Package pgtest gives tests a real PostgreSQL server on a loopback port: the one
// CTXCOMPACT_TEST_PG_URL names (build.sh test starts one for the whole run), or one
// this test process starts with pg-server.sh (Debian's packages, installed when
// missing) and stops when its tests end. Tests take a fresh database each.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// EnvURL names a running server's superuser URL.
const EnvURL = "CTXCOMPACT_TEST_PG_URL"

// Script is pg-server.sh's path.
func Script() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "pg-server.sh")
}

var (
	once    sync.Once
	shared  string
	ownDir  string
	failure error
	seq     atomic.Int64
)

// Main runs the tests (m.Run) and stops a server that a test started.
func Main(m *testing.M) int {
	code := m.Run()
	if ownDir != "" {
		exec.Command("bash", Script(), "stop", ownDir).Run()
	}
	return code
}

// unavailable skips t, or fails it under CI (a suite that did not run is not a pass).
func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("no PostgreSQL server for the test: %v", err)
	}
	t.Skipf("SKIPPED, NOT TESTED: no PostgreSQL server (%v); set %s or install Debian's postgresql", err, EnvURL)
}

// ServerURL is the superuser URL of the shared server (TestMain must call Main when
// the package may start one).
func ServerURL(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if shared = os.Getenv(EnvURL); shared != "" {
			return
		}
		dir, err := os.MkdirTemp("", "ctxc-pg-")
		if err != nil {
			failure = err
			return
		}
		os.Remove(dir) // pg-server.sh makes it
		out, err := exec.Command("bash", Script(), "start", dir).Output()
		if err != nil {
			failure = fmt.Errorf("pg-server.sh start: %v: %s", err, stderrOf(err))
			return
		}
		ownDir, shared = dir, strings.TrimSpace(string(out))
	})
	if failure != nil {
		unavailable(t, failure)
	}
	return shared
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// Database creates a new database on the shared server and returns its URL.
func Database(t testing.TB) string {
	t.Helper()
	return NewDatabase(t, ServerURL(t))
}

// NewDatabase creates a new database on the server at serverURL and returns its URL.
func NewDatabase(t testing.TB, serverURL string) string {
	t.Helper()
	name := fmt.Sprintf("ctxc_go_%d_%d", os.Getpid(), seq.Add(1))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		t.Fatalf("connecting to %s: %v", serverURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// Server is a server of one test's own (to crash and restart it), stopped when the
// test ends.
type Server struct {
	Dir, URL string
	t        testing.TB
}

// Start starts a server of t's own.
func Start(t testing.TB) *Server {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pg")
	if os.Geteuid() == 0 {
		// The server's user (postgres) must reach the data directory.
		for d := filepath.Dir(dir); d != "/" && d != "."; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				os.Chmod(d, fi.Mode().Perm()|0o011)
			}
		}
	}
	out, err := exec.Command("bash", Script(), "start", dir).Output()
	if err != nil {
		unavailable(t, fmt.Errorf("pg-server.sh start: %v: %s", err, stderrOf(err)))
	}
	s := &Server{Dir: dir, URL: strings.TrimSpace(string(out)), t: t}
	t.Cleanup(func() { exec.Command("bash", Script(), "stop", dir).Run() })
	return s
}

func (s *Server) run(what string) {
	s.t.Helper()
	if out, err := exec.Command("bash", Script(), what, s.Dir).CombinedOutput(); err != nil {
		s.t.Fatalf("pg-server.sh %s: %v: %s", what, err, out)
	}
}

// Crash stops the server as a crash does (immediate shutdown: no checkpoint).
func (s *Server) Crash() { s.run("crash") }

// Restart starts it again, on the same port.
func (s *Server) Restart() { s.run("restart") }
