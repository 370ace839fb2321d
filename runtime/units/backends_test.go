package units

import (
	"os"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/layout"
)

// testBackend is one backend under the shared behavioural tables: the
// systemd one against a systemd booted for the test, the direct one on
// the host's cgroups.
type testBackend struct {
	name string
	lay  layout.Layout
	// new returns a fresh backend, as a restarted agent would make.
	new func(t testing.TB, budget time.Duration) Backend
	// afterStart runs f between a start's answer and its first look.
	afterStart func(b Backend, f func())
	// afterSend runs f once a start is sent (the job queued, the shim
	// handed its job), before its answer.
	afterSend func(b Backend, f func())
	// trampoline points the backend at another trampoline binary.
	trampoline func(b Backend, path string)
	proofs     func(b Backend) *proofs
	// cgroupDirs are the host directories of a unit's cgroup.
	cgroupDirs func(cg string) []string
	// hostDir is cg in one hierarchy of the host ("memory", "pids", "cpu").
	hostDir func(hierarchy, cg string) string
	// writer is the exit record's By.
	writer string
}

func backends(t *testing.T) []testBackend {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: real cgroups and a real systemd")
	}
	sd := newSDEnv(t)
	d := newDEnv(t)
	return []testBackend{
		{
			name: "systemd", lay: sd.lay, writer: "systemd",
			new:        func(t testing.TB, budget time.Duration) Backend { return sd.backend(t, budget) },
			afterStart: func(b Backend, f func()) { b.(*Systemd).afterJob = f },
			afterSend:  func(b Backend, f func()) { b.(*Systemd).afterSend = f },
			trampoline: func(b Backend, path string) { b.(*Systemd).cfg.Exe = path },
			proofs:     func(b Backend) *proofs { return b.(*Systemd).proofs },
			cgroupDirs: func(cg string) []string {
				return []string{sd.sys.HostCgroup("memory", cg), sd.sys.HostCgroup("systemd", cg)}
			},
			hostDir: sd.sys.HostCgroup,
		},
		{
			name: "direct", lay: d.lay, writer: "shim",
			new:        func(t testing.TB, budget time.Duration) Backend { return d.backend(t, budget) },
			afterStart: func(b Backend, f func()) { b.(*Direct).afterStart = f },
			afterSend:  func(b Backend, f func()) { b.(*Direct).afterShim = func(int) { f() } },
			trampoline: func(b Backend, path string) { b.(*Direct).trampoline = path },
			proofs:     func(b Backend) *proofs { return b.(*Direct).proofs },
			cgroupDirs: func(cg string) []string {
				return []string{hostCgroup("memory", cg), hostCgroup("systemd", cg), hostCgroup("pids", cg)}
			},
			hostDir: hostCgroup,
		},
	}
}

// eachCase runs run for every case of tests on every backend, as subtests
// <backend>/<case>. i numbers the cases from 1 within a backend, so each
// can name units of its own.
func eachCase[C any](t *testing.T, tests map[string]C, run func(t *testing.T, be testBackend, i int, name string)) {
	t.Helper()
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			i := 0
			for name := range tests {
				i++
				t.Run(name, func(t *testing.T) { run(t, be, i, name) })
			}
		})
	}
}
