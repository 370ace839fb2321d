package trampoline

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/activation"
	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout/layouttest"
)

// fdScript prints what the exec'd program holds beyond 0-2, and the
// activation variables it got ($$ is its pid: the trampoline's).
const fdScript = `for fd in 3 4 5 6; do
  if [ -e /proc/$$/fd/$fd ]; then echo "fd$fd $(readlink /proc/$$/fd/$fd | cut -d: -f1)"; else echo "fd$fd none"; fi
done
echo "LISTEN_FDS=$LISTEN_FDS LISTEN_FDNAMES=$LISTEN_FDNAMES pid-match=$([ "$LISTEN_PID" = "$$" ] && echo yes || echo no)"`

// TestAppGetsNothingInherited: descriptors the trampoline inherited do
// not reach the app.
func TestAppGetsNothingInherited(t *testing.T) {
	sock, file := logSocket(t, 1<<20)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	lf := writeLaunch(t, launch.File{Schema: launch.Schema, Argv: []string{"/bin/sh", "-c", fdScript}})
	if code, stderr := runExecWith(t, []*os.File{r, w}, "--launch", lf, "--log-socket", sock); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := []string{"fd3 none", "fd4 none", "fd5 none", "fd6 none", "LISTEN_FDS= LISTEN_FDNAMES= pid-match=no"}
	if d := cmp.Diff(want, loggedLines(t, file, len(want))); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

// TestActivatedAppGetsItsSocketAtFD3: the socket offered at the hand-off
// socket is the app's fd 3 with LISTEN_FDS=1, LISTEN_PID its own pid and
// LISTEN_FDNAMES=app, and nothing inherited beside it.
func TestActivatedAppGetsItsSocketAtFD3(t *testing.T) {
	// make test and CI run as root, so this runs there; the skip only lets
	// a developer without root run the rest of the package (the
	// convention of sandboxed and layouttest.New).
	if os.Geteuid() != 0 {
		t.Skip("not root: the hand-off serves uid 0 only")
	}
	sock, file := logSocket(t, 1<<20)
	dir, err := os.MkdirTemp("", "ulact")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := activation.Bind(dir, filepath.Join(dir, "app.sock"), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv, err := activation.Serve(filepath.Join(dir, "activation.sock"), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Offer("unit-g1", l, []string{layouttest.OwnCgroup(t)}); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	lf := writeLaunch(t, launch.File{Schema: launch.Schema, Argv: []string{"/bin/sh", "-c", fdScript},
		Env:    []string{"LISTEN_FDS=7"}, // the platform's value wins
		Listen: &launch.Listen{Handoff: filepath.Join(dir, "activation.sock"), Key: "unit-g1"}})
	if code, stderr := runExecWith(t, []*os.File{r, w}, "--launch", lf, "--log-socket", sock); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := []string{"fd3 socket", "fd4 none", "fd5 none", "fd6 none", "LISTEN_FDS=1 LISTEN_FDNAMES=app pid-match=yes"}
	if d := cmp.Diff(want, loggedLines(t, file, len(want))); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}
