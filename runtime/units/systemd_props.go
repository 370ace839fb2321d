package units

import (
	"errors"
	"math"
	"path/filepath"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// infinity is systemd's "no limit" for MemoryMax, TasksMax and
// CPUQuotaPerSecUSec.
const infinity = uint64(math.MaxUint64)

// cpuQuotaUSecPerCore is CPUQuotaPerSecUSec for one full core.
const cpuQuotaUSecPerCore = 1_000_000

// tierProps turns a tier into systemd properties. A zero field is left out
// for a new unit and set to infinity with reset, so restoring a slice
// clears a raised value the tier does not have.
func tierProps(t cgroups.Tier, reset bool) []sddbus.Property {
	var props []sddbus.Property
	add := func(name string, v int64, scale uint64) {
		switch {
		case v > 0:
			props = append(props, sddbus.Property{Name: name, Value: godbus.MakeVariant(uint64(v) * scale)})
		case reset:
			props = append(props, sddbus.Property{Name: name, Value: godbus.MakeVariant(infinity)})
		}
	}
	add("MemoryMax", t.MemoryBytes, 1)
	add("TasksMax", t.Pids, 1)
	add("CPUQuotaPerSecUSec", t.CPUMillis, cpuQuotaUSecPerCore/1000)
	return props
}

// serviceProps are the transient service's properties: the trampoline as
// ExecStart, Type=exec (the start job succeeds only once the trampoline
// was exec'd, so a failed job proves it never ran), the whole cgroup
// killed on stop.
func (b *Systemd) serviceProps(spec Spec) ([]sddbus.Property, error) {
	if b.cfg.Exe == "" || !filepath.IsAbs(b.cfg.Exe) {
		return nil, errors.New("units: the unitlet binary path must be absolute")
	}
	inst := spec.Slot.Instance()
	launchFile := filepath.Join(inst.PrivateDir(), spec.Slot.LaunchFile())
	props := []sddbus.Property{
		sddbus.PropDescription("unitlet " + spec.Slot.UnitName()),
		sddbus.PropExecStart(append([]string{b.cfg.Exe, "exec", "--launch", launchFile,
			"--exec-record", filepath.Join(inst.ExitDir(), record.Name(spec.Slot, record.ExecSuffix))}, logFlags(spec.Slot)...), false),
		// The exit record in the direct backend's format, from systemd's
		// $SERVICE_RESULT, $EXIT_CODE and $EXIT_STATUS.
		execStopPostPrivileged([]string{b.cfg.Exe, "exit-record", "--dir", inst.ExitDir(), "--name", record.Name(spec.Slot, record.ExitSuffix)}),
		sddbus.PropType("exec"),
		sddbus.PropSlice(inst.SliceName()),
		{Name: "KillMode", Value: godbus.MakeVariant("control-group")},
		// The sandbox (read-only system, private /tmp, /dev and /proc, IPC
		// namespace, system call filter, no capabilities) is the
		// trampoline's, the same on every backend; it needs CAP_SYS_ADMIN
		// and mounts to build it, so the unit restricts only what the
		// trampoline never needs (docs/security.md).
		{Name: "NoNewPrivileges", Value: godbus.MakeVariant(true)},
	}
	props = append(props, hardening...)
	if spec.Grace > 0 {
		props = append(props, sddbus.Property{Name: "TimeoutStopUSec", Value: godbus.MakeVariant(uint64(spec.Grace.Microseconds()))})
	}
	if spec.Delegate {
		props = append(props, sddbus.Property{Name: "Delegate", Value: godbus.MakeVariant(true)})
	}
	return append(props, tierProps(spec.Tier, false)...), nil
}

// hardening are systemd's own sandbox options that leave the trampoline
// what it needs (mounts, mknod on its private /dev, a cgroup program):
// systemd-analyze security reads these, the trampoline's own sandbox it
// cannot see.
var hardening = []sddbus.Property{
	{Name: "ProtectKernelModules", Value: godbus.MakeVariant(true)},
	{Name: "ProtectKernelLogs", Value: godbus.MakeVariant(true)},
	{Name: "ProtectHostname", Value: godbus.MakeVariant(true)},
	{Name: "LockPersonality", Value: godbus.MakeVariant(true)},
	{Name: "RestrictRealtime", Value: godbus.MakeVariant(true)},
	{Name: "SystemCallArchitectures", Value: godbus.MakeVariant([]string{"native"})},
}

// execCommandEx is one entry of systemd's Exec*Ex properties (a(sasas)).
type execCommandEx struct {
	Path  string
	Argv  []string
	Flags []string
}

// execStopPostPrivileged is ExecStopPost with the "+" prefix: it runs as
// root outside the unit's sandbox, so it can write the agent-owned exit
// dir even when the app runs as a user of its own.
func execStopPostPrivileged(argv []string) sddbus.Property {
	return sddbus.Property{Name: "ExecStopPostEx", Value: godbus.MakeVariant([]execCommandEx{{Path: argv[0], Argv: argv, Flags: []string{"privileged"}}})}
}

// logFlags wire the trampoline's output. A service's app writes into its
// log FIFO, which it holds open itself: nothing between it and the agent
// can break when the agent restarts, unlike a socket connection the agent
// held (the direct backend's shim holds that one instead). A run keeps
// its sockets: its streams go to and come from its caller, and end with
// it.
func logFlags(p layout.Slot) []string {
	if f := p.LogFIFO(); f != "" {
		return []string{"--log-fifo", f}
	}
	return []string{"--log-socket", p.LogSocket(), "--err-socket", p.ErrLogSocket(), "--in-socket", p.InSocket()}
}
