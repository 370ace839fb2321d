package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"

	"github.com/unitlet/unitlet/internal/testkit/systemdboot"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// rawForkExec is the floor the agent's start is held against: N apps
// forked and exec'd one after another, each placed in a cgroup of its own
// (every v1 hierarchy the agent uses, or the unified one), then all
// answering on their sockets.
func rawForkExec(ctx context.Context, h *harness, r *results) error {
	root := fmt.Sprintf("unitlet-bench-raw-%d", os.Getpid())
	hier := []string{"/sys/fs/cgroup"}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		hier = []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu"}
	}
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		for i := range cmds {
			for _, hd := range hier {
				_ = os.Remove(filepath.Join(hd, root, strconv.Itoa(i)))
			}
		}
		for _, hd := range hier {
			_ = os.Remove(filepath.Join(hd, root))
		}
	}()
	socks := make([]string, h.o.n)
	t0 := time.Now()
	for i := range h.o.n {
		socks[i] = filepath.Join(h.shm, fmt.Sprintf("raw-%d.sock", i))
		cmd := exec.Command(h.app)
		cmd.Env = []string{"UNITLET_APP_SOCKET=" + socks[i]}
		if err := cmd.Start(); err != nil {
			return err
		}
		cmds = append(cmds, cmd)
		for _, hd := range hier {
			dir := filepath.Join(hd, root, strconv.Itoa(i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
				return err
			}
		}
	}
	started := time.Since(t0)
	if err := allAnswer(ctx, socks); err != nil {
		return err
	}
	r.RawForkExec = &raw{All: time.Since(t0).Seconds(), PerStart: started.Seconds() / float64(h.o.n)}
	return nil
}

// allAnswer waits until every socket accepts a connection.
func allAnswer(ctx context.Context, socks []string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for _, s := range socks {
		if err := testutil.WaitAccepts(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// rawSystemd is N StartTransientUnit calls (one after another, each
// waited for) on a systemd booted in private namespaces, all answering.
func rawSystemd(ctx context.Context, h *harness, r *results) error {
	bctx, cancel := context.WithTimeout(ctx, time.Minute)
	sys, err := systemdboot.Start(bctx, systemdboot.Options{Writable: []string{h.shm}})
	cancel()
	if err != nil {
		return err
	}
	defer sys.Close()
	c, err := sys.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	socks := make([]string, h.o.n)
	t0 := time.Now()
	for i := range h.o.n {
		socks[i] = filepath.Join(h.shm, fmt.Sprintf("sd-%d.sock", i))
		props := []sddbus.Property{
			sddbus.PropExecStart([]string{h.app}, false),
			{Name: "Environment", Value: godbus.MakeVariant([]string{"UNITLET_APP_SOCKET=" + socks[i]})},
		}
		done := make(chan string, 1)
		if _, err := c.StartTransientUnitContext(ctx, fmt.Sprintf("bench-raw-%d.service", i), "fail", props, done); err != nil {
			return err
		}
		if res := <-done; res != "done" {
			return fmt.Errorf("unit %d: job %s", i, res)
		}
	}
	started := time.Since(t0)
	if err := allAnswer(ctx, socks); err != nil {
		return err
	}
	r.RawSystemd = &raw{All: time.Since(t0).Seconds(), PerStart: started.Seconds() / float64(h.o.n)}
	return nil
}
