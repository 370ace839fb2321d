package systemdboot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"github.com/google/go-cmp/cmp"
)

func readTrim(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// startSleep starts a transient /bin/sleep unit and waits for its job.
func startSleep(ctx context.Context, c *sddbus.Conn, unit string, extra ...sddbus.Property) (string, error) {
	props := append([]sddbus.Property{
		sddbus.PropExecStart([]string{"/bin/sleep", "1000"}, false),
		{Name: "KillMode", Value: godbus.MakeVariant("control-group")},
	}, extra...)
	done := make(chan string, 1)
	if _, err := c.StartTransientUnitContext(ctx, unit, "fail", props, done); err != nil {
		return "", err
	}
	select {
	case r := <-done:
		return r, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func stopUnit(ctx context.Context, c *sddbus.Conn, unit string) (string, error) {
	done := make(chan string, 1)
	if _, err := c.StopUnitContext(ctx, unit, "replace", done); err != nil {
		return "", err
	}
	select {
	case r := <-done:
		return r, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func TestTransientUnitLimitsLandOnHostCgroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := Boot(t)
	c, err := s.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	const unit = "systemdboot-test-sleep.service"
	const memMax, tasksMax = uint64(64 << 20), uint64(17)
	res, err := startSleep(ctx, c, unit,
		sddbus.Property{Name: "MemoryMax", Value: godbus.MakeVariant(memMax)},
		sddbus.Property{Name: "TasksMax", Value: godbus.MakeVariant(tasksMax)},
	)
	if err != nil || res != "done" {
		t.Fatalf("start %s: result %q, err %v", unit, res, err)
	}

	props, err := c.GetUnitTypePropertiesContext(ctx, unit, "Service")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{"MemoryMax": props["MemoryMax"], "TasksMax": props["TasksMax"]}
	want := map[string]any{"MemoryMax": memMax, "TasksMax": tasksMax}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unit properties (-want,+got):\n%s", diff)
	}
	cg, _ := props["ControlGroup"].(string)
	if cg == "" {
		t.Fatalf("unit has no ControlGroup: %v", props["ControlGroup"])
	}
	files := map[string]string{
		"memory.limit_in_bytes": readTrim(t, filepath.Join(s.HostCgroup("memory", cg), "memory.limit_in_bytes")),
		"pids.max":              readTrim(t, filepath.Join(s.HostCgroup("pids", cg), "pids.max")),
	}
	wantFiles := map[string]string{
		"memory.limit_in_bytes": fmt.Sprint(memMax),
		"pids.max":              fmt.Sprint(tasksMax),
	}
	if diff := cmp.Diff(wantFiles, files); diff != "" {
		t.Errorf("host cgroup files of %s (-want,+got):\n%s", cg, diff)
	}
	// The start job is done once the service is forked; its process was
	// once seen in the unit's v1 memory cgroup only a moment later (a
	// fresh-clone CI run), so look for a while before calling it absent.
	procsFile := filepath.Join(s.HostCgroup("memory", cg), "cgroup.procs")
	for deadline := time.Now().Add(5 * time.Second); readTrim(t, procsFile) == ""; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the unit's cgroup holds no process while it runs")
			break
		}
	}

	if res, err := stopUnit(ctx, c, unit); err != nil || res != "done" {
		t.Fatalf("stop %s: result %q, err %v", unit, res, err)
	}
	st, err := c.ListUnitsByNamesContext(ctx, []string{unit})
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].ActiveState != "inactive" {
		t.Errorf("after stop: %+v, want one unit, inactive", st)
	}
}

func TestCloseLeavesNothingBehind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := map[string]string{
		"nr_open":  readTrim(t, "/proc/sys/fs/nr_open"),
		"file-max": readTrim(t, "/proc/sys/fs/file-max"),
	}
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c, err := s.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := startSleep(ctx, c, "systemdboot-test-left.service",
		sddbus.Property{Name: "PrivateTmp", Value: godbus.MakeVariant(true)}); err != nil || res != "done" {
		t.Fatalf("start: %q %v", res, err)
	}
	c.Close()
	pid := s.PID()
	paths := s.CgroupPaths()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for h, p := range paths {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s cgroup %s still there after Close (stat err %v)", h, p, err)
		}
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("PID 1 of the namespace (%d) still exists after Close", pid)
	}
	for _, pattern := range []string{"/tmp/systemd-private-*-systemdboot-test-left.service-*", "/var/tmp/systemd-private-*-systemdboot-test-left.service-*"} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			t.Errorf("the unit's private tmp is on the machine: %v", m)
		}
	}
	after := map[string]string{
		"nr_open":  readTrim(t, "/proc/sys/fs/nr_open"),
		"file-max": readTrim(t, "/proc/sys/fs/file-max"),
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the machine's sysctls changed (-want,+got):\n%s", diff)
	}
}

func TestWritableDirStaysWritable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("/var/lib", "systemdboot-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := BootWith(t, Options{Writable: []string{dir}})
	c, err := s.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	target := filepath.Join(dir, "written")
	done := make(chan string, 1)
	props := []sddbus.Property{
		sddbus.PropExecStart([]string{"/bin/sh", "-c", "echo ok > " + target + "; echo ok > /systemdboot-must-fail || exit 0; exit 3"}, false),
		sddbus.PropType("oneshot"),
	}
	if _, err := c.StartTransientUnitContext(ctx, "systemdboot-test-write.service", "fail", props, done); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r != "done" {
		t.Fatalf("oneshot result %q, want done (the root must be read-only inside)", r)
	}
	if diff := cmp.Diff("ok", readTrim(t, target)); diff != "" {
		t.Errorf("file written inside (-want,+got):\n%s", diff)
	}
	if _, err := os.Stat("/systemdboot-must-fail"); err == nil {
		_ = os.Remove("/systemdboot-must-fail")
		t.Errorf("a unit wrote to the machine's root")
	}
}

func TestSweepRemovesOnlyDeadCreators(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates cgroups")
	}
	dead := fmt.Sprintf("%s%d-1", namePrefix, deadPID(t))
	live := fmt.Sprintf("%s%d-sweeptest", namePrefix, os.Getpid())
	mem := filepath.Join(cgroupRoot, "memory")
	for _, n := range []string{dead, live} {
		if err := os.MkdirAll(filepath.Join(mem, n, "child"), 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(mem, n)
		t.Cleanup(func() { _ = removeTree(p, time.Now().Add(time.Second)) })
	}
	if err := Sweep(); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, n := range []string{dead, live} {
		_, err := os.Stat(filepath.Join(mem, n))
		got[n] = err == nil
	}
	if diff := cmp.Diff(map[string]bool{dead: false, live: true}, got); diff != "" {
		t.Errorf("present after Sweep (-want,+got):\n%s", diff)
	}
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}

func TestWritableUnderTmpIsRefused(t *testing.T) {
	for name, dir := range map[string]string{"tmp": "/tmp/x", "var tmp": "/var/tmp", "relative": "x"} {
		t.Run(name, func(t *testing.T) {
			s, err := Start(context.Background(), Options{Writable: []string{dir}})
			if err == nil {
				_ = s.Close()
				t.Fatalf("Start with writable %q succeeded", dir)
			}
		})
	}
}
