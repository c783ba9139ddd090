package aptinstall

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stubAptGet is an apt-get that records each call (its arguments and
// DEBIAN_FRONTEND) in $STUB_LOG and fails the first $STUB_LOCKED calls as apt-get
// does when another process holds the lists lock; with $STUB_FAIL set, install
// fails as for an unknown package.
const stubAptGet = `#!/bin/sh
echo "FRONTEND=$DEBIAN_FRONTEND $*" >>"$STUB_LOG"
n=$(wc -l <"$STUB_LOG")
if [ "$n" -le "${STUB_LOCKED:-0}" ]; then
	echo "W: a warning before the error" >&2
	echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2
	echo "E: Unable to lock directory /var/lib/apt/lists/" >&2
	exit 100
fi
case "$*" in *install*) if [ -n "$STUB_FAIL" ]; then echo "E: Unable to locate package $STUB_FAIL" >&2; exit 100; fi ;; esac
exit 0
`

// stubSudo runs its command without -n, so the test passes when not run as root.
const stubSudo = `#!/bin/sh
[ "$1" = -n ] && shift
exec "$@"
`

type run struct {
	out   string
	err   error
	calls []string
}

// runScript runs apt-install.sh chromium with the stubs first on PATH (or, with
// path set, PATH=path alone) and env added.
func runScript(t *testing.T, path string, env ...string) run {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, err := filepath.Abs("apt-install.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"apt-get": stubAptGet, "sudo": stubSudo} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "calls.log")
	if err := os.WriteFile(log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if path == "" {
		path = bin + string(os.PathListSeparator) + os.Getenv("PATH")
	}
	cmd := exec.Command(bash, script, "chromium")
	cmd.Env = append(os.Environ(), "PATH="+path, "STUB_LOG="+log, "CTXCOMPACT_APT_RETRY_INTERVAL=0")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	logged, rerr := os.ReadFile(log)
	if rerr != nil {
		t.Fatal(rerr)
	}
	var calls []string
	for _, l := range strings.Split(strings.TrimSpace(string(logged)), "\n") {
		if l != "" {
			calls = append(calls, l)
		}
	}
	return run{out: string(out), err: err, calls: calls}
}

// A held lock is waited for: update is retried while apt-get says another process
// holds its lock, and every call carries DPkg::Lock::Timeout (install's wait for
// the dpkg frontend lock), non-interactively.
func TestWaitsForTheLock(t *testing.T) {
	r := runScript(t, "", "STUB_LOCKED=3")
	if r.err != nil {
		t.Fatalf("apt-install.sh failed: %v\n%s", r.err, r.out)
	}
	if len(r.calls) != 5 {
		t.Fatalf("want 3 locked updates, an update and an install; apt-get was called %d times:\n%s", len(r.calls), strings.Join(r.calls, "\n"))
	}
	for k, c := range r.calls {
		want := "update"
		if k == 4 {
			want = "install -y chromium"
		}
		if !strings.HasPrefix(c, "FRONTEND=noninteractive -o DPkg::Lock::Timeout=") || !strings.HasSuffix(c, " -qq "+want) {
			t.Errorf("call %d: %q, want noninteractive apt-get -o DPkg::Lock::Timeout=N -qq %s", k+1, c, want)
		}
	}
	if strings.Count(r.out, "waiting for another apt-get or dpkg") != 1 || !strings.Contains(r.out, "(up to 600s): E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242") {
		t.Errorf("the wait is said once, naming the holder:\n%s", r.out)
	}
}

// Past the deadline a held lock fails, with apt-get's own message.
func TestLockHeldPastTheDeadline(t *testing.T) {
	r := runScript(t, "", "STUB_LOCKED=100", "CTXCOMPACT_APT_LOCK_TIMEOUT=0")
	if r.err == nil || len(r.calls) != 1 {
		t.Fatalf("want one failed update; err %v, calls %q\n%s", r.err, r.calls, r.out)
	}
	if !strings.Contains(r.out, "Could not get lock /var/lib/apt/lists/lock") || !strings.Contains(r.out, "apt-install.sh: apt-get update failed") {
		t.Errorf("the failure names the lock and the step:\n%s", r.out)
	}
}

// Any other failure is not retried.
func TestOtherFailuresAreNotRetried(t *testing.T) {
	r := runScript(t, "", "STUB_FAIL=chromium")
	if r.err == nil || len(r.calls) != 2 {
		t.Fatalf("want an update and one failed install; err %v, calls %q\n%s", r.err, r.calls, r.out)
	}
	if !strings.Contains(r.out, "Unable to locate package chromium") || !strings.Contains(r.out, "apt-get install -y chromium failed") {
		t.Errorf("the failure shows apt-get's error and the step:\n%s", r.out)
	}
}

// Without apt-get the script says what to install instead.
func TestNoAptGet(t *testing.T) {
	r := runScript(t, t.TempDir())
	if r.err == nil || len(r.calls) != 0 {
		t.Fatalf("want a failure before any apt-get; err %v, calls %q", r.err, r.calls)
	}
	if !strings.Contains(r.out, "installing chromium needs Debian's apt-get (not found); install chromium yourself first") {
		t.Errorf("the error names the package:\n%s", r.out)
	}
}
