package systemdboot

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is where the machine mounts its cgroup hierarchies.
const cgroupRoot = "/sys/fs/cgroup"

// namePrefix starts every cgroup this package creates. The creating
// process's pid follows it, so a sweep removes only the leftovers of
// processes that are gone, never a live run of a parallel test binary.
const namePrefix = "unitlet-systemdboot-"

// hierarchy is one mounted cgroup hierarchy: its directory under
// cgroupRoot and how to mount it again inside the namespace.
type hierarchy struct {
	Dir     string // e.g. "memory", "systemd", "unified"
	FSType  string // "cgroup" or "cgroup2"
	Options string // mount options inside, e.g. "memory", "none,name=systemd"
}

// hierarchies lists the cgroup hierarchies mounted directly beneath
// cgroupRoot, from mountinfo.
func hierarchies() ([]hierarchy, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hs []hierarchy
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		mnt, fstype := pf[4], qf[0]
		if mnt == cgroupRoot && fstype == "cgroup2" {
			return nil, errors.New("systemdboot: a pure cgroup v2 machine is not supported (hybrid layout expected)")
		}
		if filepath.Dir(mnt) != cgroupRoot || (fstype != "cgroup" && fstype != "cgroup2") {
			continue
		}
		h := hierarchy{Dir: filepath.Base(mnt), FSType: fstype}
		if fstype == "cgroup" {
			var opts []string
			for _, o := range strings.Split(qf[2], ",") {
				switch {
				case o == "rw" || o == "ro":
				case strings.HasPrefix(o, "name="):
					opts = append(opts, "none", o)
				default:
					opts = append(opts, o)
				}
			}
			h.Options = strings.Join(opts, ",")
		}
		hs = append(hs, h)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(hs) == 0 {
		return nil, errors.New("systemdboot: no cgroup hierarchy mounted beneath " + cgroupRoot)
	}
	return hs, nil
}

// createCgroups makes name in every hierarchy, copying the cpuset's cpus
// and mems from its parent so that tasks may join it.
func createCgroups(hs []hierarchy, name string) (map[string]string, error) {
	paths := map[string]string{}
	for _, h := range hs {
		p := filepath.Join(cgroupRoot, h.Dir, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			return paths, fmt.Errorf("systemdboot: %w", err)
		}
		paths[h.Dir] = p
		if h.Options != "cpuset" && !strings.Contains(","+h.Options+",", ",cpuset,") {
			continue
		}
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(cgroupRoot, h.Dir, file))
			if err != nil {
				return paths, fmt.Errorf("systemdboot: %w", err)
			}
			if err := os.WriteFile(filepath.Join(p, file), v, 0); err != nil {
				return paths, fmt.Errorf("systemdboot: %w", err)
			}
		}
	}
	return paths, nil
}

// removeTree removes the cgroup at dir and everything beneath it, deepest
// first. A missing dir is already removed. Cgroups emptied by a kill may
// stay busy for a moment while the kernel reaps, so EBUSY is retried until
// deadline.
func removeTree(dir string, deadline time.Time) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		for {
			err := syscall.Rmdir(dirs[i])
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if errors.Is(err, syscall.EBUSY) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return fmt.Errorf("systemdboot: remove cgroup %s: %w", dirs[i], err)
		}
	}
	return nil
}

// removeCgroups removes name from every hierarchy, deepest first.
func removeCgroups(paths map[string]string, deadline time.Time) error {
	var errs []error
	for _, p := range paths {
		errs = append(errs, removeTree(p, deadline))
	}
	return errors.Join(errs...)
}

// Sweep removes cgroups this package left behind in earlier runs whose
// creating process is gone. Cgroups of live processes are kept, so
// parallel test binaries do not sweep each other.
func Sweep() error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		entries, err := os.ReadDir(filepath.Join(cgroupRoot, h.Dir))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			pid, ok := creatorPID(e.Name())
			if !ok || !e.IsDir() || processAlive(pid) {
				continue
			}
			deadline := time.Now().Add(time.Second)
			errs = append(errs, removeTree(filepath.Join(cgroupRoot, h.Dir, e.Name()), deadline))
		}
	}
	return errors.Join(errs...)
}

// cgroupName is the name of the n-th system booted by this process.
func cgroupName(n uint64) string {
	return fmt.Sprintf("%s%d-%d", namePrefix, os.Getpid(), n)
}

// creatorPID reads the creating pid back from a name cgroupName made.
func creatorPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return 0, false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	return pid, err == nil && pid > 0
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
