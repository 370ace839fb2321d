package nodevm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A boot under TCG costs ~25 s and ~30 CPU-seconds alone, and a minute
// or more beside the other lane's guest. The first boot of an image (per
// machine shape) therefore saves the booted guest, its memory and
// devices as QEMU's migration stream beside its disk at that moment;
// later boots restore it (~3 s, ~2 CPU-s). A restored guest is that
// same booted Debian, paused and resumed: its clock is set on resume,
// and QEMU's vmgenid device tells its kernel to reseed its random
// generator, so no two restores share keys. A Reboot is always a real
// boot.

// snapshot is where a booted guest is kept: its migration stream
// (state) and its disk (disk.qcow2, over base.img), in
// booted-<image>-<shape> beside the image.
type snapshot struct{ dir, image string }

func (s snapshot) state() string { return filepath.Join(s.dir, "state") }
func (s snapshot) disk() string  { return filepath.Join(s.dir, "disk.qcow2") }

// ready says whether the snapshot is complete: it is renamed into place
// only once whole.
func (s snapshot) ready() bool {
	_, err := os.Stat(s.disk())
	return err == nil
}

// snapshotFor is the snapshot of the image in dir booted by QEMU (whose
// --version is qemuVersion) with machine: a new image, kernel command
// line, machine shape or QEMU is a new snapshot.
func snapshotFor(dir, qemuVersion string, machine []string) (snapshot, error) {
	stamp, err := os.ReadFile(filepath.Join(dir, "base.img.stamp"))
	if err != nil {
		return snapshot{}, fmt.Errorf("%w: %v", ErrNoImage, err)
	}
	image := sha256.Sum256(stamp)
	shape := sha256.Sum256([]byte(strings.Join(append([]string{qemuVersion, kernelArgs}, machine...), "\x00")))
	s := snapshot{image: hex.EncodeToString(image[:6])}
	s.dir = filepath.Join(dir, "booted-"+s.image+"-"+hex.EncodeToString(shape[:6]))
	return s, nil
}

// qemuVersion is QEMU's first --version line.
func qemuVersion(ctx context.Context, qemu string) (string, error) {
	out, err := exec.CommandContext(ctx, qemu, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("nodevm: %s --version: %w", qemu, err)
	}
	return firstLine(string(out)), nil
}

// sweepOthers removes the snapshots of other images beside s (those of
// other shapes of its image stay) and the half-made ones of processes
// that are gone.
func (s snapshot) sweepOthers() {
	keep := "booted-" + s.image + "-"
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(s.dir), "booted-*"))
	for _, m := range matches {
		base := filepath.Base(m)
		if strings.HasSuffix(base, ".lock") {
			continue
		}
		if i := strings.LastIndex(base, ".tmp-"); i >= 0 {
			if pid, err := strconv.Atoi(base[i+len(".tmp-"):]); err == nil && syscall.Kill(pid, 0) == syscall.ESRCH {
				_ = os.RemoveAll(m)
			}
			continue
		}
		if !strings.HasPrefix(base, keep) {
			_ = os.RemoveAll(m)
			_ = os.Remove(m + ".lock")
		}
	}
}

// save writes the booted guest v into s, unless another boot is saving
// it: the guest is paused while QEMU writes its state and its disk is
// copied, then resumed. The snapshot appears whole or not at all.
func (v *VM) save(ctx context.Context, q *qmp, s snapshot) (err error) {
	lock, err := os.OpenFile(s.dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil // another boot saves it
	}
	if s.ready() {
		return nil
	}
	tmp := fmt.Sprintf("%s.tmp-%d", s.dir, os.Getpid())
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // nothing once renamed
	if err := q.do("stop", nil, nil); err != nil {
		return err
	}
	defer func() {
		if cerr := q.do("cont", nil, nil); err == nil {
			err = cerr
		}
	}()
	uri := "exec:cat >" + shellQuote(filepath.Join(tmp, "state"))
	if err := q.do("migrate", map[string]any{"uri": uri}, nil); err != nil {
		return err
	}
	if err := q.migrated(ctx); err != nil {
		return err
	}
	// A completed migration has flushed the disk and let go of it until
	// cont: the copy is the disk as the saved memory knows it.
	disk := filepath.Join(tmp, "disk.qcow2")
	if err := copyFile(filepath.Join(v.work, "disk.qcow2"), disk); err != nil {
		return err
	}
	// Its backing file named relative to itself: the checkout may move.
	if out, err := exec.CommandContext(ctx, "qemu-img", "rebase", "-u", "-F", "raw", "-b", "../base.img", disk).CombinedOutput(); err != nil {
		return fmt.Errorf("nodevm: rebase the snapshot's disk: %s: %w", out, err)
	}
	return os.Rename(tmp, s.dir)
}

// restore has QEMU (started with -incoming from s) load the saved guest
// and resumes it.
func restore(ctx context.Context, q *qmp) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := q.migrated(ctx); err != nil {
		return err
	}
	return q.do("cont", nil, nil)
}

// setClock sets the guest's clock to this machine's: a restored guest
// resumes at the moment it was saved, a saved one lost its pause.
func (v *VM) setClock(ctx context.Context) error {
	now := time.Now()
	_, err := v.Run(ctx, fmt.Sprintf("date -u -s @%d.%09d >/dev/null", now.Unix(), now.Nanosecond()))
	return err
}

// errRestore marks a restore that failed: the snapshot is dropped and
// the guest booted instead.
var errRestore = errors.New("nodevm: restore")

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
