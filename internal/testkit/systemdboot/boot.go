package systemdboot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// systemdBinary is the service manager that is booted.
const systemdBinary = "/lib/systemd/systemd"

// bootTimeout bounds one boot, from the clone to a reachable manager.
const bootTimeout = 15 * time.Second

// teardownTimeout bounds waiting for the namespace to die and its cgroups
// to become removable.
const teardownTimeout = 10 * time.Second

// Options change how a system is booted.
type Options struct {
	// Writable are host directories that stay writable inside the
	// namespace (everything else of / is read-only there), e.g. the
	// directories a test's units write exit records into. They must lie
	// outside /tmp and /var/tmp, which are private tmpfs mounts inside.
	Writable []string
}

// System is one booted systemd.
type System struct {
	name    string
	paths   map[string]string
	dir     string
	unshare *exec.Cmd
	waited  chan struct{}
	pid1    int
	pidfd   int
	log     *bytes.Buffer

	closeOnce sync.Once
	closeErr  error
}

var sweepOnce sync.Once
var bootCount atomic.Uint64

// Boot boots a systemd for the test and removes it when the test ends.
// Any failure fails the test at once.
func Boot(t testing.TB) *System {
	return BootWith(t, Options{})
}

// BootWith is Boot with options.
func BootWith(t testing.TB, opts Options) *System {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("systemdboot needs root: it creates cgroups and namespaces")
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("boot systemd: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("tear down systemd: %v", err)
		}
	})
	return s
}

// Start boots a systemd and returns once its manager answers on the bus.
// The caller must Close it. Leftovers of earlier runs are swept first, once
// per process.
func Start(ctx context.Context, opts Options) (_ *System, err error) {
	for _, d := range opts.Writable {
		if !filepath.IsAbs(d) || underPrivateTmp(d) {
			return nil, fmt.Errorf("systemdboot: writable dir %q must be absolute and outside /tmp and /var/tmp", d)
		}
	}
	sweepOnce.Do(func() { _ = Sweep() })
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	s := &System{name: cgroupName(bootCount.Add(1)), pidfd: -1, waited: make(chan struct{})}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
			if s.log != nil && s.log.Len() > 0 {
				err = fmt.Errorf("%w\nboot output:\n%s", err, s.log.String())
			}
		}
	}()
	if s.dir, err = os.MkdirTemp("", "systemdboot-"); err != nil {
		return nil, err
	}
	units := filepath.Join(s.dir, "units")
	inner := filepath.Join(s.dir, "inner.sh")
	if err := os.Mkdir(units, 0o755); err != nil {
		return nil, err
	}
	if err := writeUnits(units); err != nil {
		return nil, err
	}
	if err := os.WriteFile(inner, []byte(innerScript), 0o755); err != nil {
		return nil, err
	}
	s.paths, err = createCgroups(hs, s.name)
	if err != nil {
		return nil, err
	}
	var procs, mounts []string
	for _, h := range hs {
		procs = append(procs, filepath.Join(s.paths[h.Dir], "cgroup.procs"))
		mounts = append(mounts, h.Dir+":"+h.FSType+":"+h.Options)
	}
	args := append([]string{"-c", outerScript, "systemdboot"}, opts.Writable...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = []string{
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"container=unitlet-systemdboot",
		"SDB_CGROUP_PROCS=" + strings.Join(procs, " "),
		"SDB_HIERARCHIES=" + strings.Join(mounts, " "),
		"SDB_UNITS=" + units,
		"SDB_INNER=" + inner,
	}
	s.log = &bytes.Buffer{}
	cmd.Stdout = &lockedWriter{w: s.log}
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("systemdboot: start unshare: %w", err)
	}
	s.unshare = cmd
	go func() { _ = cmd.Wait(); close(s.waited) }()
	if err := s.findPID1(ctx); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// underPrivateTmp reports whether d is hidden inside the namespace by its
// own /tmp or /var/tmp.
func underPrivateTmp(d string) bool {
	d = filepath.Clean(d)
	for _, t := range []string{"/tmp", "/var/tmp"} {
		if d == t || strings.HasPrefix(d, t+"/") {
			return true
		}
	}
	return false
}

// findPID1 waits for unshare's child, the namespace's PID 1, and pins it
// with a pidfd so teardown can never signal a reused pid.
func (s *System) findPID1(ctx context.Context) error {
	p := fmt.Sprintf("/proc/%d/task/%d/children", s.unshare.Process.Pid, s.unshare.Process.Pid)
	for {
		if b, err := os.ReadFile(p); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				pid, err := strconv.Atoi(f[0])
				if err != nil {
					return fmt.Errorf("systemdboot: %s: %w", p, err)
				}
				fd, err := unix.PidfdOpen(pid, 0)
				if err != nil {
					return fmt.Errorf("systemdboot: pidfd of %d: %w", pid, err)
				}
				s.pid1, s.pidfd = pid, fd
				return nil
			}
		}
		if err := s.pause(ctx); err != nil {
			return fmt.Errorf("systemdboot: waiting for the namespace's PID 1: %w", err)
		}
	}
}

// waitReady waits until the manager answers on the namespace's bus and
// reports itself up.
func (s *System) waitReady(ctx context.Context) error {
	var last error
	for {
		if _, err := os.Stat(s.BusSocket()); err == nil {
			last = s.probe(ctx)
			if last == nil {
				return nil
			}
		}
		if err := s.pause(ctx); err != nil {
			return fmt.Errorf("systemdboot: waiting for systemd on %s: %w (last: %v)", s.BusSocket(), err, last)
		}
	}
}

func (s *System) probe(ctx context.Context) error {
	c, err := s.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.SystemStateContext(ctx)
	if err != nil {
		return err
	}
	switch v := strings.Trim(st.Value.String(), `"`); v {
	case "running", "degraded":
		return nil
	default:
		return fmt.Errorf("system state %q", v)
	}
}

// pause waits a little, failing when ctx ends or the namespace died.
func (s *System) pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.waited:
		return fmt.Errorf("unshare exited: %v", s.unshare.ProcessState)
	case <-time.After(2 * time.Millisecond):
		return nil
	}
}

// PID is the host pid of the namespace's PID 1 (systemd).
func (s *System) PID() int { return s.pid1 }

// Root is the namespace's root directory seen from the host.
func (s *System) Root() string { return fmt.Sprintf("/proc/%d/root", s.pid1) }

// BusSocket is the namespace's system bus socket seen from the host.
func (s *System) BusSocket() string {
	return filepath.Join(s.Root(), "run/dbus/system_bus_socket")
}

// CgroupPaths maps each hierarchy's directory name under /sys/fs/cgroup
// ("memory", "pids", "systemd", "unified", ...) to the host path of the
// namespace's cgroup root in it.
func (s *System) CgroupPaths() map[string]string {
	m := make(map[string]string, len(s.paths))
	for k, v := range s.paths {
		m[k] = v
	}
	return m
}

// HostCgroup is the host path of a cgroup as systemd inside names it (a
// unit's ControlGroup property, e.g. "/system.slice/x.service"), in the
// hierarchy dir ("memory", "pids", ...). It is "" for an unknown hierarchy.
func (s *System) HostCgroup(hierarchy, cgroup string) string {
	root, ok := s.paths[hierarchy]
	if !ok {
		return ""
	}
	return filepath.Join(root, filepath.Clean("/"+cgroup))
}

// Close kills the namespace's PID 1 (and so everything in the namespace),
// waits for unshare to exit and removes the cgroups deepest first. It is
// safe to call more than once.
func (s *System) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *System) close() error {
	var errs []error
	if s.pidfd >= 0 {
		if err := unix.PidfdSendSignal(s.pidfd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("systemdboot: kill PID 1: %w", err))
		}
		_ = unix.Close(s.pidfd)
		s.pidfd = -1
	}
	if s.unshare != nil {
		select {
		case <-s.waited:
		case <-time.After(teardownTimeout):
			_ = s.unshare.Process.Kill()
			<-s.waited
		}
	}
	if s.paths != nil {
		errs = append(errs, removeCgroups(s.paths, time.Now().Add(teardownTimeout)))
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

// lockedWriter serialises the writes of stdout and stderr into one buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
