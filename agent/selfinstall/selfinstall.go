// Package selfinstall copies the running binary, and the per-unit helper
// beside it, to a host path: the DaemonSet's init container runs it, so
// the image needs no shell. Host systemd runs "<helper> exec" from that
// directory, and units may be running the previous copies, so each new one
// is written beside its old one and renamed over it: a running binary is
// never truncated.
package selfinstall

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/unitlet/unitlet/runtime/instancefs"
)

// ShimName is the per-unit helper's file name (cmd/unitlet-shim), beside
// the agent's binary in its image and where it is installed.
const ShimName = "unitlet-shim"

// ClusterName is the cluster side's binary (cmd/unitlet-cluster), beside
// the agent's in its image, where its Deployments run it; never
// installed on the host.
const ClusterName = "unitlet-cluster"

// Main is "unitlet install --to PATH": the helper first (when it lies
// beside this binary), so an agent started from PATH finds it.
func Main(args []string) int {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	to := fs.String("to", "", "absolute path the binary is installed at")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	self, err := os.Executable()
	if err == nil {
		err = installWithShim(self, *to)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "unitlet install:", err)
		return 1
	}
	return 0
}

// installWithShim installs self at to, and the helper beside self (if
// there is one) beside to.
func installWithShim(self, to string) error {
	shim := filepath.Join(filepath.Dir(self), ShimName)
	switch _, err := os.Stat(shim); {
	case err == nil:
		dst := filepath.Join(filepath.Dir(to), ShimName)
		if err := Install(shim, dst); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "unitlet install: installed", dst)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := Install(self, to); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "unitlet install: installed", to)
	return nil
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
