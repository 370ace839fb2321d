package nodevm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Ways to reboot the guest, for Reboot.
const (
	// HardReset resets the machine at once, as a power cut or a watchdog
	// would: no unit is stopped, no file system unmounted, no process
	// asked to end. Only the root file system is synced first (syncfs,
	// not a global sync, which a frozen file system of a test could
	// stall), so what the node had written is on its disk. The reset is
	// deferred two seconds, in a forked session of its own holding none
	// of the ssh session's descriptors, so that session ends first (a
	// trailing `&` over the whole list kept them open, and the reset cut
	// ssh off with status 255).
	HardReset = "sync -f / && setsid -f sh -c 'sleep 2; echo b >/proc/sysrq-trigger' >/dev/null 2>&1 </dev/null"
	// CleanReboot is systemd's own: every unit stopped, then the reset.
	CleanReboot = "systemctl reboot --no-block"
)

// Reboot reboots the guest in place with the script how (HardReset,
// CleanReboot): same QEMU process, same disk, same forwarded ports. It
// waits for ssh to go away and answer again, then proves the reboot: the
// kernel's boot ID changed and the node's machine ID did not (its
// identity stays across a reboot). It returns how long the guest took
// from the moment ssh went away to answering it again.
func (v *VM) Reboot(ctx context.Context, how string) (time.Duration, error) {
	if !v.reboots {
		return 0, errors.New("nodevm: booted without Options.Reboots: a reboot would power the guest off")
	}
	before, err := v.ids(ctx)
	if err != nil {
		return 0, err
	}
	if _, err := v.Run(ctx, how); err != nil {
		return 0, fmt.Errorf("nodevm: reboot: %w", err)
	}
	// The shared connection dies with this boot; the probes below each
	// make their own, so that each answers at once.
	v.unshare()
	gone, err := v.await(ctx, "ssh to go away", time.Minute, func() bool {
		probe, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := v.runOnce(probe, "true", nil, fresh)
		return err != nil
	})
	if err != nil {
		return 0, err
	}
	var after [2]string
	back, err := v.await(ctx, "ssh after the reboot", v.bootLimit, func() bool {
		after, err = v.ids(ctx)
		return err == nil
	})
	if err != nil {
		return 0, err
	}
	switch {
	case after[0] == before[0]:
		return 0, fmt.Errorf("nodevm: ssh answered again under the same boot ID %s: no reboot happened", before[0])
	case after[1] != before[1]:
		return 0, fmt.Errorf("nodevm: the machine ID was %s before the reboot, %s after: the node lost its identity", before[1], after[1])
	}
	return back.Sub(gone), nil
}

// ids is the guest's boot ID and machine ID. A probe that reached sshd
// is let finish (connectTimeout, then the session's own time).
func (v *VM) ids(ctx context.Context) ([2]string, error) {
	probe, cancel := context.WithTimeout(ctx, connectTimeout+30*time.Second)
	defer cancel()
	out, err := v.runOnce(probe, "cat /proc/sys/kernel/random/boot_id /etc/machine-id", nil, fresh)
	f := strings.Fields(out)
	if err != nil || len(f) != 2 {
		return [2]string{}, fmt.Errorf("nodevm: boot and machine ID: %q: %v", out, err)
	}
	return [2]string{f[0], f[1]}, nil
}

// await polls cond until it holds, QEMU exits, ctx ends or limit passes;
// it returns when cond first held.
func (v *VM) await(ctx context.Context, what string, limit time.Duration, cond func() bool) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return time.Now(), nil
		}
		select {
		case <-v.exited:
			return time.Time{}, fmt.Errorf("nodevm: qemu exited waiting for %s; console:\n%s", what, v.ConsoleTail(30))
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("nodevm: no %s after %s; console:\n%s", what, limit, v.ConsoleTail(30))
		}
	}
}
