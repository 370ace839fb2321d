package join

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/instancefs"
)

// Prepare creates what the guard checks and the agent may make itself:
// the state and run roots (RootMode, without following a symlink) and the
// delegated cgroup root in each hierarchy, and the socket group when it
// is a name the node does not know yet. It changes nothing that exists:
// a root with the wrong owner or mode is the administrator's to fix, and
// the check keeps saying so.
func (g Guard) Prepare() error {
	var errs []error
	for _, dir := range []string{g.StateRoot, g.RunRoot} {
		if err := createRoot(dir); err != nil {
			errs = append(errs, fmt.Errorf("create %s: %w", dir, err))
		}
	}
	if g.SocketGroup != "" { // none configured: the check says so
		if _, err := g.Groups.Ensure(g.SocketGroup); err != nil {
			errs = append(errs, err)
		}
	}
	_, dirs, err := g.cgroupDirs()
	if err != nil {
		errs = append(errs, err)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			errs = append(errs, fmt.Errorf("create cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// createRoot makes a missing root with RootMode whatever the umask; an
// existing one is left as it is.
func createRoot(dir string) error {
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return err
	}
	d, err := instancefs.MkdirAll(dir, RootMode)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Fchmod(int(d.Fd()), RootMode)
}
