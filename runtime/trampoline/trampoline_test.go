package trampoline

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/logs"
)

// The test binary doubles as `unitlet exec`: with this variable set it
// runs Main instead of the tests, so the tests exercise a real exec
// without depending on main.go.
const asTrampoline = "UNITLET_TEST_RUN_TRAMPOLINE"

func TestMain(m *testing.M) {
	if os.Getenv(asTrampoline) == "1" || (len(os.Args) > 1 && os.Args[1] == InnerFlag) {
		os.Exit(Main(os.Args[1:], os.Stderr))
	}
	os.Exit(m.Run())
}

// runExec runs `unitlet exec args...` and returns its exit code and stderr.
func runExec(t *testing.T, args ...string) (int, string) {
	t.Helper()
	return runExecWith(t, nil, args...)
}

// runExecWith is runExec with extra descriptors inherited (fds 3, 4, …,
// not close-on-exec), as a careless parent would leave them.
func runExecWith(t *testing.T, extra []*os.File, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{asTrampoline + "=1"}
	cmd.ExtraFiles = extra
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	}
	t.Fatal(err)
	return 0, ""
}

func writeLaunch(t *testing.T, f launch.File) string {
	t.Helper()
	dir := t.TempDir()
	if err := launch.Write(dir, "launch.gen.1.json", f); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "launch.gen.1.json")
}

// logSocket starts a real log listener writing to a rotated file in a
// short temp dir (sun_path) and returns the socket and file paths.
func logSocket(t *testing.T, maxBytes int64) (string, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ultramp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	file, err := logs.OpenRotating(filepath.Join(dir, "app.log"), maxBytes, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	l, err := logs.Listen(filepath.Join(dir, "g1.sock"), logs.Options{
		Labels: logs.Labels{Namespace: "ns", Name: "web", Host: "shop.example.com", Role: layout.RoleApp, Generation: 1},
		File:   file,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Path(), file.Path()
}

// loggedLines waits for n lines across the current and rotated files and
// returns their text, oldest first.
func loggedLines(t *testing.T, file string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var lines []string
		for _, p := range []string{file + ".3", file + ".2", file + ".1", file} {
			b, _ := os.ReadFile(p)
			for _, rec := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
				if parts := strings.SplitN(rec, " ", 3); len(parts) == 3 {
					lines = append(lines, parts[2])
				}
			}
		}
		if len(lines) >= n || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestExecOutputArrivesInRotatedLogFile(t *testing.T) {
	sock, file := logSocket(t, 128) // small: the output spans three files
	lf := writeLaunch(t, launch.File{
		Schema: launch.Schema, Host: "shop.example.com",
		Argv: []string{"/bin/sh", "-c", "echo hello; echo err >&2; echo \"$GREETING\"; echo line-four-of-output; echo line-five-of-output"},
		Env:  []string{"GREETING=from the launch file"},
	})
	code, stderr := runExec(t, "--launch", lf, "--log-socket", sock)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := loggedLines(t, file, 5)
	want := []string{"hello", "err", "from the launch file", "line-four-of-output", "line-five-of-output"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("logged (-want,+got):\n%s", d)
	}
	if _, err := os.Stat(file + ".1"); err != nil {
		t.Errorf("no rotation happened: %v", err)
	}
}

func TestExecWithExactlyTheLaunchEnv(t *testing.T) {
	sock, file := logSocket(t, 1<<20)
	lf := writeLaunch(t, launch.File{Schema: launch.Schema, Argv: []string{"/usr/bin/env"}, Env: []string{"A=1", "B=two words"}})
	if code, stderr := runExec(t, "--launch", lf, "--log-socket", sock); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if d := cmp.Diff([]string{"A=1", "B=two words"}, loggedLines(t, file, 2)); d != "" {
		t.Errorf("env (-want,+got):\n%s", d)
	}
}

// sandboxed runs script through the trampoline as id with writable as
// the only writable path, and returns its output lines.
func sandboxed(t *testing.T, id launch.Identity, writable, script string, lines int) []string {
	t.Helper()
	// make test and CI run as root, so these run there; the skip only
	// lets a developer without root run the rest of the package (the
	// convention of layouttest.New).
	if os.Geteuid() != 0 {
		t.Skip("not root: the sandbox and the drop need root")
	}
	sock, file := logSocket(t, 1<<20)
	lf := writeLaunch(t, launch.File{
		Schema: launch.Schema, Argv: []string{"/bin/sh", "-c", script},
		Env: []string{"W=" + writable}, WorkingDir: writable, Identity: id, Writable: []string{writable},
	})
	if code, _ := runExec(t, "--launch", lf, "--log-socket", sock); code != 0 {
		t.Fatalf("exit %d: %q", code, loggedLines(t, file, 1)) // its stderr went to the log
	}
	return loggedLines(t, file, lines)
}

// ownedDir is a fresh dir below a root-owned one, given to uid.
func ownedDir(t *testing.T, uid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ulsandbox")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	w := filepath.Join(dir, "data")
	if err := os.Mkdir(w, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(w, uid, uid); err != nil {
		t.Fatal(err)
	}
	return w
}

// The checks both identities share: no capability in any set, no new
// privileges, the writable dir writable, /tmp a private one.
const sandboxChecks = `
grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status | tr -s '\t ' ' '
touch "$W/file" && echo wrote-own-dir
test -e /tmp/` + tmpMarker + ` && echo shared-tmp || echo private-tmp
touch /tmp/scratch && echo wrote-tmp
`

const tmpMarker = "unitlet-sandbox-marker"

func TestSandboxAllocatedIdentity(t *testing.T) {
	uid := 1879048192 + 77
	w := ownedDir(t, uid)
	if err := os.WriteFile(filepath.Join(os.TempDir(), tmpMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(os.TempDir(), tmpMarker)) })
	got := sandboxed(t, launch.Identity{UID: uid, GID: uid, Groups: []int{uid}}, w, "id -u; id -g; id -G; pwd"+sandboxChecks, 13)
	n := "1879048269"
	want := []string{n, n, n, w,
		"CapInh: 0000000000000000", "CapPrm: 0000000000000000", "CapEff: 0000000000000000",
		"CapBnd: 0000000000000000", "CapAmb: 0000000000000000", "NoNewPrivs: 1",
		"wrote-own-dir", "private-tmp", "wrote-tmp"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

// An allowed root keeps uid 0 but no capability, and the system stays
// read-only to it: the mount, not the file mode, refuses the write.
func TestSandboxRootIsReadOnlyAndPowerless(t *testing.T) {
	w := ownedDir(t, 0)
	// A root-owned system dir (/tmp would be the private one); should the
	// sandbox fail, the file is removed again.
	probe := "/etc/.unitlet-sandbox-probe"
	t.Cleanup(func() { os.Remove(probe) })
	got := sandboxed(t, launch.Identity{}, w, "id -u\n"+
		`touch `+probe+` 2>&1 | grep -o 'Read-only file system' || echo writable`+"\n"+
		`cat /proc/1/environ >/dev/null 2>&1 && echo read-pid-1 || echo denied-pid-1`+sandboxChecks, 12)
	want := []string{"0", "Read-only file system", "denied-pid-1",
		"CapInh: 0000000000000000", "CapPrm: 0000000000000000", "CapEff: 0000000000000000",
		"CapBnd: 0000000000000000", "CapAmb: 0000000000000000", "NoNewPrivs: 1",
		"wrote-own-dir", "private-tmp", "wrote-tmp"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

func TestCmdStderrToItsOwnSocket(t *testing.T) {
	outSock, outFile := logSocket(t, 1<<20)
	errSock, errFile := logSocket(t, 1<<20)
	lf := writeLaunch(t, launch.File{Schema: launch.Schema, Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2"}})
	if code, stderr := runExec(t, "--launch", lf, "--log-socket", outSock, "--err-socket", errSock); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := loggedLines(t, outFile, 1); !cmp.Equal([]string{"out"}, got) {
		t.Errorf("stdout socket got %q", got)
	}
	if got := loggedLines(t, errFile, 1); !cmp.Equal([]string{"err"}, got) {
		t.Errorf("stderr socket got %q", got)
	}
}

// markerArgv leaves a marker file if it is ever exec'd.
func markerArgv(marker string) []string { return []string{"/bin/sh", "-c", "touch " + marker} }

func TestBadLaunchFileExecsNothing(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	encoded, err := launch.Encode(launch.File{Schema: launch.Schema, Argv: markerArgv(marker)})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		content  string // "" with missing: no file at all
		missing  bool
		wantCode int
	}{
		"missing file":   {missing: true, wantCode: ExitLaunchFile},
		"unknown schema": {content: strings.Replace(string(encoded), launch.Schema, "unitlet.dev/launch/v9", 1), wantCode: ExitLaunchFile},
		"not json":       {content: "argv=/bin/sh", wantCode: ExitLaunchFile},
		"unknown field":  {content: strings.Replace(string(encoded), `"argv"`, `"privileged": true, "argv"`, 1), wantCode: ExitLaunchFile},
		"relative argv0": {content: strings.Replace(string(encoded), `"/bin/sh"`, `"sh"`, 1), wantCode: ExitLaunchFile},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "launch.gen.1.json")
			if !tc.missing {
				if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			code, stderr := runExec(t, "--launch", path)
			assertRefused(t, code, tc.wantCode, stderr, marker)
		})
	}
}

func TestLaunchFileSymlinkRefused(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	outside := writeLaunch(t, launch.File{Schema: launch.Schema, Argv: markerArgv(marker)})
	dir := t.TempDir()
	link := filepath.Join(dir, "launch.gen.1.json")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	code, stderr := runExec(t, "--launch", link)
	assertRefused(t, code, ExitLaunchFile, stderr, marker)
	if !strings.Contains(stderr, "symlink") {
		t.Errorf("reason does not name the symlink: %q", stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := map[string][]string{
		"no launch flag":  {},
		"unknown flag":    {"--launch", "x", "--privileged"},
		"extra argument":  {"--launch", "x", "extra"},
		"socket and fifo": {"--launch", "x", "--log-socket", "a.sock", "--log-fifo", "a.fifo"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			code, stderr := runExec(t, args...)
			assertRefused(t, code, ExitUsage, stderr, "")
		})
	}
}

func TestUnreachableLogSocketExecsNothing(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	lf := writeLaunch(t, launch.File{Schema: launch.Schema, Argv: markerArgv(marker)})
	code, stderr := runExec(t, "--launch", lf, "--log-socket", filepath.Join(t.TempDir(), "none.sock"))
	assertRefused(t, code, ExitSetup, stderr, marker)
}

// The systemd backend's stdout: a FIFO the app holds open for reading
// too, so output written while no agent reads waits in the pipe.
func TestExecOutputIntoFIFO(t *testing.T) {
	dir := t.TempDir()
	file, err := logs.OpenRotating(filepath.Join(dir, "app.log"), 1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	fifo := filepath.Join(dir, "g1.fifo")
	if err := logs.MakeFIFO(fifo); err != nil {
		t.Fatal(err)
	}
	// No listener yet: the app's lines must wait, not fail. (The pipe
	// keeps them while anyone holds it open: here this holder, in a node
	// the running app itself.)
	holder, err := logs.OpenFIFO(fifo, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(holder) })
	lf := writeLaunch(t, launch.File{Schema: launch.Schema, Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2"}})
	if code, stderr := runExec(t, "--launch", lf, "--log-fifo", fifo); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	l, err := logs.Listen(filepath.Join(dir, "g1.sock"), logs.Options{
		Labels: logs.Labels{Namespace: "ns", Name: "web", Role: layout.RoleApp, Generation: 1},
		File:   file, FIFO: fifo,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if d := cmp.Diff([]string{"out", "err"}, loggedLines(t, file.Path(), 2)); d != "" {
		t.Errorf("logged (-want,+got):\n%s", d)
	}
}

func TestLogFIFONotAPipeExecsNothing(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	lf := writeLaunch(t, launch.File{Schema: launch.Schema, Argv: markerArgv(marker)})
	regular := filepath.Join(t.TempDir(), "g1.fifo")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr := runExec(t, "--launch", lf, "--log-fifo", regular)
	assertRefused(t, code, ExitSetup, stderr, marker)
	if !strings.Contains(stderr, "not a named pipe") {
		t.Errorf("reason does not say what is wrong: %q", stderr)
	}
}

func assertRefused(t *testing.T, code, wantCode int, stderr, marker string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("exit %d, want %d (stderr %q)", code, wantCode, stderr)
	}
	if !strings.HasPrefix(stderr, "unitlet exec: ") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr is not one reason line: %q", stderr)
	}
	if marker != "" {
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the program ran: %v", err)
		}
	}
}

// The memory env's entries reach the process as the launch file's do.
func TestExecAddsTheMemoryEnv(t *testing.T) {
	sock, file := logSocket(t, 1<<20)
	mem := filepath.Join(t.TempDir(), "memenv.gen.1")
	if err := launch.WriteMemoryEnv(filepath.Dir(mem), filepath.Base(mem), []string{"UNITLET_INSTANCE_KEY=k3y"}); err != nil {
		t.Fatal(err)
	}
	lf := writeLaunch(t, launch.File{Schema: launch.Schema, Argv: []string{"/usr/bin/env"}, Env: []string{"A=1"}, MemoryEnv: mem})
	if code, stderr := runExec(t, "--launch", lf, "--log-socket", sock); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if d := cmp.Diff([]string{"A=1", "UNITLET_INSTANCE_KEY=k3y"}, loggedLines(t, file, 2)); d != "" {
		t.Errorf("env (-want,+got):\n%s", d)
	}
}
