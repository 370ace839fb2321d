// Package diskspace reads how much room a node's file system has left,
// as an unprivileged writer (an app, the log writer) sees it.
package diskspace

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Usage is a file system's size and what is free of it, in bytes.
type Usage struct {
	// Free is what an unprivileged writer may still use (f_bavail):
	// the blocks reserved for root are not the apps'.
	Free, Total uint64
}

// Of is the usage of the file system holding path.
func Of(path string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Usage{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return Usage{Free: st.Bavail * bs, Total: st.Blocks * bs}, nil
}
