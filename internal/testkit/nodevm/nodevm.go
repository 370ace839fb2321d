// Package nodevm boots the production-shaped test node that
// hack/node-vm.sh builds: Debian 12 with systemd as PID 1 and pure cgroup
// v2, under QEMU, reached over ssh through a forwarded loopback port.
// From inside, the machine's loopback is GuestHostAddr.
package nodevm

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
	"syscall"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// GuestHostAddr is how the guest reaches this machine's 127.0.0.1 (QEMU's
// user-mode network); nothing else outside the guest is reachable.
const GuestHostAddr = "10.0.2.2"

// Hostname is the guest's hostname (hack/node-vm.sh sets it), so the name
// of the node it runs as.
const Hostname = "unitlet-node"

// Options configure a boot.
type Options struct {
	// Dir holds the image (base.img, vmlinuz, initrd.img, id_ed25519);
	// "" is bin/.node-vm of the checkout.
	Dir string
	// Forward lists guest TCP ports reachable from this machine's loopback
	// (HostPort names where).
	Forward []int
	// MemoryMiB is the guest's memory; 0 is 2048.
	MemoryMiB int
	// BootLimit bounds the wait for ssh; 0 is 4 minutes (software
	// emulation on a busy machine).
	BootLimit time.Duration
	// Reboots lets the guest reboot in place (Reboot): QEMU resets the
	// machine and keeps running, same disk, same forwarded ports. Without
	// it a reboot powers the guest off (QEMU exits), so a guest that
	// reboots unasked fails its test at once.
	Reboots bool
}

// VM is a booted node. Close powers it off and removes its overlay.
type VM struct {
	key, work string
	ssh       int
	ports     map[int]int
	cmd       *exec.Cmd
	exited    chan struct{}
	reboots   bool
	bootLimit time.Duration
	// sockDir holds QEMU's QMP socket and the shared ssh connection's
	// (ssh.go), once sharing.
	sockDir string
	sharing bool
	// booted is how long the guest took from power-on (or the start of
	// its restore) to answering ssh; restored says it was restored
	// (HowBooted says both).
	booted   time.Duration
	restored bool
}

// DefaultDir is where hack/node-vm.sh keeps the image.
func DefaultDir() string { return filepath.Join(testenv.RepoRoot(), "bin", ".node-vm") }

// ErrNoImage: the image has not been built.
var ErrNoImage = errors.New("nodevm: no node image (run `make node-vm-image`, which runs hack/node-vm.sh image)")

// BootAsync is Boot in the background: an emulated guest takes tens of
// seconds to boot, and the caller starts what it needs meanwhile. The
// function returned waits for the boot and returns what Boot did, each
// time it is called.
func BootAsync(ctx context.Context, o Options) func() (*VM, error) {
	var (
		vm   *VM
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		vm, err = Boot(ctx, o)
	}()
	return func() (*VM, error) {
		<-done
		return vm, err
	}
}

// Boot starts a guest on a fresh copy-on-write overlay of the image and
// waits until ssh answers: it restores the image's booted snapshot when
// there is one (snapshot.go), and otherwise boots and saves one.
func Boot(ctx context.Context, o Options) (*VM, error) {
	if o.Dir == "" {
		o.Dir = DefaultDir()
	}
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 2048
	}
	if o.BootLimit == 0 {
		o.BootLimit = 4 * time.Minute
	}
	for _, f := range []string{"base.img", "vmlinuz", "initrd.img", "id_ed25519"} {
		if _, err := os.Stat(filepath.Join(o.Dir, f)); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoImage, err)
		}
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, fmt.Errorf("nodevm: %w: install qemu-system-x86 (hack/deps.sh does)", err)
	}
	version, err := qemuVersion(ctx, qemu)
	if err != nil {
		return nil, err
	}
	snap, err := snapshotFor(o.Dir, version, machineArgs(o))
	if err != nil {
		return nil, err
	}
	sweep(filepath.Join(o.Dir, "boot-*-*"))
	sweep(filepath.Join(os.TempDir(), "nodevm-*-*"))
	snap.sweepOthers()
	if snap.ready() {
		v, err := boot(ctx, o, qemu, snap, true)
		if !errors.Is(err, errRestore) || ctx.Err() != nil {
			return v, err
		}
		// A snapshot QEMU cannot load is of no use to the next boot.
		_ = os.RemoveAll(snap.dir)
	}
	return boot(ctx, o, qemu, snap, false)
}

// machineArgs are QEMU's arguments that shape the machine, so its saved
// state: a snapshot is only restored into the same shape.
func machineArgs(o Options) []string {
	return []string{"-accel", "tcg,thread=multi", "-cpu", "max",
		"-m", strconv.Itoa(o.MemoryMiB), "-smp", "2", "-device", "vmgenid"}
}

// boot starts QEMU on a new overlay and waits for ssh: restoring snap, or
// booting the image and saving snap.
func boot(ctx context.Context, o Options, qemu string, snap snapshot, restoring bool) (*VM, error) {
	work, err := os.MkdirTemp(o.Dir, fmt.Sprintf("boot-%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	v := &VM{key: filepath.Join(o.Dir, "id_ed25519"), work: work, ports: map[int]int{}, exited: make(chan struct{}),
		reboots: o.Reboots, bootLimit: o.BootLimit}
	fail := func(err error) (*VM, error) { v.Close(); return nil, err }
	// QMP's and ssh's sockets: a unix socket's path has a limit of about
	// 100 bytes, whatever the checkout's depth.
	if v.sockDir, err = os.MkdirTemp("", fmt.Sprintf("nodevm-%d-", os.Getpid())); err != nil {
		return fail(err)
	}
	backing, format := filepath.Join(o.Dir, "base.img"), "raw"
	if restoring {
		backing, format = snap.disk(), "qcow2"
	}
	disk := filepath.Join(work, "disk.qcow2")
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", format,
		"-b", backing, disk).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("nodevm: overlay: %s: %w", out, err))
	}
	if v.ssh, err = testutil.FreeTCPPort(); err != nil {
		return fail(err)
	}
	nic := "user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:" + strconv.Itoa(v.ssh) + "-:22"
	for _, g := range o.Forward {
		h, err := testutil.FreeTCPPort()
		if err != nil {
			return fail(err)
		}
		v.ports[g] = h
		nic += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", h, g)
	}
	qmpPath := filepath.Join(v.sockDir, "qmp")
	args := append(machineArgs(o), "-display", "none", "-qmp", "unix:"+qmpPath+",server=on,wait=off")
	if !o.Reboots {
		args = append(args, "-no-reboot")
	}
	args = append(args,
		"-serial", "file:"+v.ConsolePath(),
		"-kernel", filepath.Join(o.Dir, "vmlinuz"), "-initrd", filepath.Join(o.Dir, "initrd.img"),
		"-append", kernelArgs,
		"-drive", "file="+disk+",format=qcow2,if=virtio", "-nic", nic)
	if restoring {
		args = append(args, "-incoming", "exec:cat "+shellQuote(snap.state()))
	}
	v.cmd = exec.Command(qemu, args...)
	// The guest dies with the test process, whatever ends it.
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var qout bytes.Buffer
	v.cmd.Stdout, v.cmd.Stderr = &qout, &qout
	start := time.Now()
	if err := v.cmd.Start(); err != nil {
		return fail(fmt.Errorf("nodevm: start qemu: %w", err))
	}
	go func() { _ = v.cmd.Wait(); close(v.exited) }()
	q, err := dialQMP(ctx, qmpPath, v.exited)
	if err == nil && restoring {
		err = restore(ctx, q)
	}
	if err != nil {
		if restoring {
			err = fmt.Errorf("%w: %w: %s", errRestore, err, qout.String())
		}
		return fail(err)
	}
	defer q.Close()

	deadline := time.Now().Add(o.BootLimit)
	for {
		if _, err := v.runOnce(ctx, "test -d /sys/fs/cgroup", nil, fresh); err == nil {
			v.booted, v.restored = time.Since(start), restoring
			if !restoring {
				if err := v.save(ctx, q, snap); err != nil {
					return fail(fmt.Errorf("nodevm: save the booted guest: %w", err))
				}
			}
			if err := v.setClock(ctx); err != nil {
				return fail(err)
			}
			if err := v.share(ctx); err != nil {
				return fail(err)
			}
			if err := v.checkClock(ctx); err != nil {
				return fail(err)
			}
			return v, nil
		}
		select {
		case <-v.exited:
			return fail(fmt.Errorf("nodevm: qemu exited during boot: %s\nconsole:\n%s", qout.String(), v.ConsoleTail(30)))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("nodevm: no ssh after %s; console:\n%s", o.BootLimit, v.ConsoleTail(30)))
		}
	}
}

// HowBooted says how the guest came up and how long it took to answer
// ssh, for a suite's report.
func (v *VM) HowBooted() string {
	how := "booted"
	if v.restored {
		how = "restored from its snapshot"
	}
	return fmt.Sprintf("%s to ssh in %s", how, v.booted.Round(100*time.Millisecond))
}

// HostPort is the loopback port on this machine that reaches guest port g.
func (v *VM) HostPort(g int) int { return v.ports[g] }

// ConsolePath is the guest's serial console log.
func (v *VM) ConsolePath() string { return filepath.Join(v.work, "console.log") }

// ConsoleTail is the console's last n lines.
func (v *VM) ConsoleTail(n int) string {
	b, _ := os.ReadFile(v.ConsolePath())
	return testutil.Tail(string(b), n)
}

// Run runs a shell script in the guest as root and returns its stdout;
// a non-zero exit is an error that carries stderr.
func (v *VM) Run(ctx context.Context, script string) (string, error) {
	return v.RunInput(ctx, script, nil)
}

// unreachedFor bounds how long Run tries again an ssh that did not reach
// the guest: a guest starting twenty apps at once after a reboot, on an
// emulated CPU, can leave sshd's banner late past ConnectTimeout.
const unreachedFor = time.Minute

// RunInput is Run with stdin. When ssh fails before the session starts
// the script has not run, so it is tried again, until ctx ends or
// unreachedFor passes; any other failure is returned as it is.
func (v *VM) RunInput(ctx context.Context, script string, stdin []byte) (string, error) {
	deadline := time.Now().Add(unreachedFor)
	for {
		out, err := v.runOnce(ctx, script, stdin, shared)
		if !errors.Is(err, errUnreached) || time.Now().After(deadline) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, err
		case <-v.exited:
			return out, err
		case <-time.After(2 * time.Second):
		}
	}
}

// WriteFile writes data to path in the guest with mode, atomically (a
// running binary can be replaced).
func (v *VM) WriteFile(ctx context.Context, path string, data []byte, mode os.FileMode) error {
	q := shellQuote(path)
	_, err := v.RunInput(ctx, fmt.Sprintf("mkdir -p $(dirname %[1]s); cat >%[1]s.tmp; chmod %[2]o %[1]s.tmp; mv -f %[1]s.tmp %[1]s", q, mode), data)
	return err
}

// kernelArgs is the guest kernel's command line. Under TCG the kernel
// finds the emulated TSCs unsynchronized and falls back to the HPET,
// whose every read is a trap into QEMU's device model and a syscall (no
// vDSO): Go's time.Now took 1.9 µs against 0.19 µs on the TSC, and the
// guest's Go programs (kubelet, containerd, the agent) read the clock
// all the time. QEMU derives every vCPU's TSC from one host clock, so
// they are in step: tsc=reliable tells the kernel so.
const kernelArgs = "root=/dev/vda rw console=ttyS0 quiet tsc=reliable"

// checkClock fails a guest that reads its clock from anything but the
// TSC: every suite in it would still pass, only at a cost nobody sees.
func (v *VM) checkClock(ctx context.Context) error {
	out, err := v.Run(ctx, "cat /sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(out); got != "tsc" {
		dmesg, _ := v.Run(ctx, "dmesg | grep -i -E 'tsc|clocksource' | tail -8")
		return fmt.Errorf("nodevm: the guest's clocksource is %q, want tsc (see kernelArgs); dmesg:\n%s", got, dmesg)
	}
	return nil
}

// Close powers the guest off and removes its overlay.
func (v *VM) Close() {
	if v.cmd != nil && v.cmd.Process != nil {
		select {
		case <-v.exited:
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = v.Run(ctx, "systemctl poweroff --no-block")
			cancel()
			v.unshare()
			select {
			case <-v.exited:
			case <-time.After(20 * time.Second):
				_ = v.cmd.Process.Kill()
				<-v.exited
			}
		}
	}
	_ = os.RemoveAll(v.work)
	if v.sockDir != "" {
		_ = os.RemoveAll(v.sockDir)
	}
}

// sweep removes the boots' overlays and socket directories (named
// prefix-PID-...) whose test process is gone (one killed before its
// Close), so they do not pile up.
func sweep(pattern string) {
	matches, _ := filepath.Glob(pattern)
	for _, m := range matches {
		f := strings.SplitN(filepath.Base(m), "-", 3)
		pid, err := strconv.Atoi(f[1])
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(m)
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
