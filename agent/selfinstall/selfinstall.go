// Package selfinstall copies the running binary to a host path: the
// DaemonSet's init container runs it, so the image needs no shell. Host
// systemd runs "<binary> exec" from that path, and units may be running
// the previous copy, so the new one is written beside it and renamed over
// it: a running binary is never truncated.
package selfinstall

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/unitlet/unitlet/runtime/instancefs"
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

// Install copies src to dst (0755) with instancefs' atomic write (temp
// file, fsync, rename, directory fsync), creating dst's directory without
// following a symlink on the way.
func Install(src, dst string) error {
	if !filepath.IsAbs(dst) {
		return fmt.Errorf("--to %q: want an absolute path", dst)
	}
	bin, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	d, err := instancefs.MkdirAll(filepath.Dir(dst), 0o755)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := instancefs.WriteAtomicBeneath(d, filepath.Base(dst), bin, 0o755); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	return nil
}
