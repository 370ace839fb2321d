// Package selfinstall copies the running binary to a host path: the
// DaemonSet's init container runs it, so the image needs no shell. Host
// systemd runs "<binary> exec" from that path, and units may be running
// the previous copy, so the new one is written beside it and renamed over
// it: a running binary is never truncated.
package selfinstall

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Main is "unitlet install --to PATH".
func Main(args []string) int {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	to := fs.String("to", "", "absolute path the binary is installed at")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	self, err := os.Executable()
	if err == nil {
		err = Install(self, *to)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "unitlet install:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "unitlet install: installed", *to)
	return 0
}

// Install copies src to dst (0755), creating dst's directory, through a
// temporary file in that directory synced before the rename.
func Install(src, dst string) error {
	if !filepath.IsAbs(dst) {
		return fmt.Errorf("--to %q: want an absolute path", dst)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".new-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, in)
	err = errors.Join(err, tmp.Chmod(0o755), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("install %s: %w", dst, err)
	}
	return nil
}
