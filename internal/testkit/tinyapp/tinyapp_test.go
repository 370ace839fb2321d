package tinyapp

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// get asks the app on socket for /healthz and returns its body.
func get(socket string) (string, error) { return testutil.UnixGet(socket, "/healthz") }

// start runs the built app with env and waits for its socket.
func start(t *testing.T, bin string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "app.sock")
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"UNITLET_APP_SOCKET=" + socket}, env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			return cmd, socket
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket at %s", socket)
		}
	}
}

func TestApp(t *testing.T) {
	bin, err := Build(t.TempDir())
	if err != nil {
		t.Fatal(err) // hack/deps.sh installs gcc
	}
	for name, tc := range map[string]struct {
		env  []string
		want string
	}{
		"the bench's answer":    {want: "ok\n"},
		"the samples' greeting": {env: []string{"GREETING_HOST=shop", "UNITLET_GENERATION=7"}, want: "hello from shop generation 7\n"},
	} {
		t.Run(name, func(t *testing.T) {
			_, socket := start(t, bin, tc.env...)
			if got, err := get(socket); err != nil || got != tc.want {
				t.Errorf("answer = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	t.Run("outlives a client that leaves unanswered", func(t *testing.T) {
		cmd, socket := start(t, bin)
		for range 20 { // a probe's connect and close, as the socket readiness check does
			c, err := net.Dial("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.Close()
		}
		if got, err := get(socket); err != nil || got != "ok\n" {
			t.Errorf("answer after the probes = %q, %v (process: %v)", got, err, cmd.ProcessState)
		}
	})
	t.Run("serves the socket it was handed", func(t *testing.T) {
		socket := filepath.Join(t.TempDir(), "handed.sock")
		l, err := net.Listen("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false) // the app serves it on
		f, err := l.(*net.UnixListener).File()
		if err != nil {
			t.Fatal(err)
		}
		// LISTEN_PID is the app's own: the shell's, which execs it.
		cmd := exec.Command("sh", "-c", "LISTEN_PID=$$ exec "+bin)
		cmd.Env, cmd.ExtraFiles = []string{"LISTEN_FDS=1", "UNITLET_APP_SOCKET=" + socket + ".unused"}, []*os.File{f}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		_ = l.Close()
		if got, err := get(socket); err != nil || got != "ok\n" {
			t.Errorf("answer on the handed socket = %q, %v", got, err)
		}
		if _, err := os.Stat(socket + ".unused"); err == nil {
			t.Error("it bound UNITLET_APP_SOCKET beside the handed socket")
		}
	})
	t.Run("holds /hold, answering others meanwhile", func(t *testing.T) {
		_, socket := start(t, bin, "HOLD_SECONDS=2")
		began := time.Now()
		held := make(chan error, 1)
		go func() {
			got, err := testutil.UnixGet(socket, "/hold")
			if err == nil && got != "ok\n" {
				err = fmt.Errorf("answer %q", got)
			}
			held <- err
		}()
		time.Sleep(100 * time.Millisecond)
		if got, err := get(socket); err != nil || got != "ok\n" || time.Since(began) > time.Second {
			t.Errorf("answer beside a held one = %q, %v after %s; want \"ok\\n\" at once", got, err, time.Since(began))
		}
		if err := <-held; err != nil || time.Since(began) < 2*time.Second {
			t.Errorf("held answer: %v after %s; want \"ok\\n\" after 2 s", err, time.Since(began))
		}
	})
	t.Run("drains on SIGTERM, then exits 0", func(t *testing.T) {
		cmd, socket := start(t, bin, "DRAIN_SECONDS=1")
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if got, err := get(socket); err != nil || got != "ok\n" {
			t.Errorf("answer while draining = %q, %v", got, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("after the drain: %v; want exit 0", err)
		}
	})
}
