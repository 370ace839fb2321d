package unixsock

import (
	"path/filepath"
	"syscall"
	"testing"
)

func TestListenPrivate(t *testing.T) {
	old := syscall.Umask(0) // the loosest umask: the mode must not come from it
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := ListenPrivate(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if got := st.Mode & 0o777; got != 0o600 {
		t.Errorf("mode %o, want 600", got)
	}
	if _, err := ListenPrivate(path); err == nil {
		t.Error("a second bind of the same path succeeded")
	}
}
