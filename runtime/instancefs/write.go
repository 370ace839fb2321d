package instancefs

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// WriteAtomic replaces dir/name with data and mode: a temp file in the
// same directory is written and fsynced, renamed over name, and the
// directory fsynced, so a reader sees the old or the new file, never a
// torn one, even across a crash. A symlink at name is replaced, not
// followed, so nothing outside dir is written.
func WriteAtomic(dir, name string, data []byte, mode os.FileMode) error {
	d, err := OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return WriteAtomicBeneath(d, name, data, mode)
}

// WriteAtomicVolatile is WriteAtomic without the fsyncs: readers and a
// crash of the writing process still see the old or the new file, but a
// power loss may lose both. For facts that a power loss makes moot anyway
// (the pid of a process that cannot outlive the machine).
func WriteAtomicVolatile(dir, name string, data []byte, mode os.FileMode) error {
	d, err := OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return writeAtomic(d, name, data, mode, false)
}

// WriteAtomicBeneath is WriteAtomic in an already open directory.
func WriteAtomicBeneath(d *os.File, name string, data []byte, mode os.FileMode) error {
	return writeAtomic(d, name, data, mode, true)
}

func writeAtomic(d *os.File, name string, data []byte, mode os.FileMode, durable bool) error {
	parent, base, err := openParent(d, name)
	if err != nil {
		return err
	}
	if parent != d {
		defer parent.Close()
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + base + ".tmp-" + hex.EncodeToString(rnd[:])
	f, err := OpenBeneath(parent, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, mode)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			_ = unix.Unlinkat(int(parent.Fd()), tmp, 0)
		}
	}()
	// The umask may have narrowed the mode at create; set it exactly.
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := unix.Renameat(int(parent.Fd()), tmp, int(parent.Fd()), base); err != nil {
		return &os.PathError{Op: "rename", Path: filepath.Join(d.Name(), name), Err: err}
	}
	ok = true
	if !durable {
		return nil
	}
	if err := parent.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", parent.Name(), err)
	}
	return nil
}
