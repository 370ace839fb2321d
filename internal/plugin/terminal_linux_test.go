package plugin

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY is a pseudo-terminal: the master the test types and reads on,
// the slave the plugin has as stdin and stdout.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	setSize(t, slave, 80, 24)
	return master, slave
}

func setSize(t *testing.T, f *os.File, cols, rows uint16) {
	t.Helper()
	if err := unix.IoctlSetWinsize(int(f.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows}); err != nil {
		t.Fatal(err)
	}
}

func canonical(t *testing.T, f *os.File) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio.Lflag&unix.ICANON != 0
}

// run -it from a terminal: the request asks for a tty (and no stderr of
// its own), the terminal is raw while the command runs and as it was
// after, the command sees its size and then a resize (SIGWINCH), and the
// plugin exits with the command's code.
func TestRunOnTerminal(t *testing.T) {
	master, slave := openPTY(t)
	if !canonical(t, slave) {
		t.Fatal("a new terminal is not in canonical mode")
	}
	f := newFakeAPI(t)
	done := make(chan pluginResult, 1)
	go func() { done <- f.runPlugin(t.Context(), slave, slave, "exec", "-it", "shop-a", "--", "tty-sizes") }()

	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(master)
		for sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("terminal printed %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("terminal printed no %q", want)
		}
	}
	expect("size 80x24")
	if canonical(t, slave) {
		t.Error("the terminal is not raw while the command runs")
	}
	setSize(t, slave, 100, 40)
	if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	expect("size 100x40")

	var res pluginResult
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not end")
	}
	if res.code != 7 {
		t.Errorf("exit code %d, want the command's 7; stderr %s", res.code, res.stderr)
	}
	if !canonical(t, slave) {
		t.Error("the terminal was not restored")
	}
	for _, r := range f.requests() {
		if strings.HasSuffix(r.Path, "/run") && !r.WebSocket && r.Query != "command=tty-sizes&stdin=true&stdout=true&tty=true" {
			t.Errorf("run query %q", r.Query)
		}
	}
	checkOnlyAPIServer(t, f, res)
}
