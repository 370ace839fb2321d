package agent

import (
	"cmp"
	"fmt"
	"os"
	goruntime "runtime"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/controllers"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/internal/nodelease"
	"github.com/unitlet/unitlet/internal/version"
	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/diskspace"
	"github.com/unitlet/unitlet/runtime/join"
	"github.com/unitlet/unitlet/runtime/machine"
)

// Joining's schedule (seed 002): the mode is checked every joinEvery;
// while approved but not armed, the guard preparation runs at most once
// per prepareEvery; the Enrollment's owner (its Node) is checked at most
// once per ownerEvery.
const (
	joinEvery    = 15 * time.Second
	prepareEvery = time.Minute
	ownerEvery   = time.Minute
)

// The capacity's schedule: the node's pods and Node are read at most
// every podsEvery; a change of its Generations is counted after
// generationsDebounce, so a burst of them makes one status write.
const (
	podsEvery           = 30 * time.Second
	generationsDebounce = 3 * time.Second
)

// joining is how Run gates hosting; tests shorten the schedule and count
// the calls to setupHosting.
type joining struct {
	every, prepareEvery       time.Duration
	ownerEvery                time.Duration
	leaseRenew, leaseDuration time.Duration
	clock                     clock.Clock
	setupHosting              func(ctrl.Manager, Options) error
}

func defaultJoining() joining {
	return joining{every: joinEvery, prepareEvery: prepareEvery, ownerEvery: ownerEvery, leaseRenew: nodelease.Renew, leaseDuration: nodelease.Duration,
		clock: clock.RealClock{}, setupHosting: setupHosting}
}

// guardFor is the guard the agent's flags describe.
func guardFor(opts Options) join.Guard {
	return join.Guard{
		CgroupRoot:  opts.CgroupRoot,
		StateRoot:   opts.StateRoot,
		RunRoot:     opts.RunRoot,
		SocketGroup: opts.SocketGroup,
		Groups:      join.GroupDB{Dir: opts.HostEtc},
		// auto means systemd when its bus answers; only an explicit choice
		// makes the bus a precondition.
		Systemd: opts.UnitBackend == BackendSystemd,
		UID:     os.Geteuid(),
	}
}

// setupEnrollment gates hosting. Without --require-enrollment the node
// hosts at once. Otherwise the Enrollment reconciler runs in the manager,
// /hostingz fails with the stage until the node may host, and
// setupHosting runs once, when the node first reaches the hosting mode
// (fatal stops the agent when it cannot).
func setupEnrollment(mgr ctrl.Manager, opts Options, log logr.Logger, j joining, fatal func(error)) error {
	// A direct client: the mode is decided on what the API server says
	// now, apart from the hosting reconcilers' cache.
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("enrollment client: %w", err)
	}
	id, err := join.ReadIdentity(opts.HostEtc, opts.BootIDFile)
	if err != nil {
		log.Error(err, "node identity incomplete; the Enrollment reports what could be read")
	}
	// The Lease says the agent lives, enrolled or not: nodewatch reads a
	// node without one as lost (make run's agent hosts without an
	// Enrollment, beside nodewatch).
	var lease *leaseRenewer
	if opts.LeaseNamespace != "" {
		lease = &leaseRenewer{client: c, namespace: opts.LeaseNamespace, node: opts.NodeName,
			holder: opts.NodeName + "/" + cmp.Or(id.MachineID, "no-machine-id"),
			clock:  j.clock, every: j.leaseRenew, duration: j.leaseDuration, log: log.WithName("lease")}
		if err := mgr.Add(lease); err != nil {
			return err
		}
	}
	if !opts.RequireEnrollment {
		log.Info("enrollment not required: hosting at once, without an approved Enrollment (single dev machine only)")
		opts.Gate = hostgate.Always{}
		metrics.SetMode(metrics.ModeHosting)
		if err := mgr.Add(&probeServer{addr: opts.ProbeAddr, ready: func() error { return nil }, hosting: func() error { return nil }}); err != nil {
			return err
		}
		return j.setupHosting(mgr, opts)
	}
	gate := &hostgate.Switch{}
	opts.Gate = gate
	g := guardFor(opts)
	r := &controllers.EnrollmentReconciler{
		Client: c, NodeName: opts.NodeName, Guard: g,
		Facts: controllers.NodeFacts{Identity: id, AgentVersion: version.Get(),
			CgroupMode: g.CgroupMode(), UnitBackend: opts.UnitBackend},
		Gate:         gate,
		StartHosting: func() error { return j.setupHosting(mgr, opts) },
		Fatal:        fatal,
		Clock:        j.clock,
		Every:        j.every,
		PrepareEvery: j.prepareEvery,
		OwnerEvery:   j.ownerEvery,
		Log:          log.WithName("joining").WithValues("node", opts.NodeName),
		// The data dirs and log files share the state root's file system.
		Disk:             func() (diskspace.Usage, error) { return diskspace.Of(opts.StateRoot) },
		DiskPressureFree: opts.DiskPressurePercent / 100,
		Capacity: &controllers.CapacityReport{
			Machine: func() (machine.Capacity, error) {
				return machine.Read(machine.Sources{CPUs: goruntime.NumCPU, RootLimits: func() (cgroups.Limits, error) {
					return cgroups.RootLimits(cgroups.Config{Root: opts.CgroupRoot})
				}})
			},
			Reserved: opts.Reserved, Cache: mgr.GetCache(), PodsEvery: podsEvery, Debounce: generationsDebounce,
		},
	}
	if err := mgr.Add(&probeServer{addr: opts.ProbeAddr, ready: r.Ready, hosting: r.Hosting}); err != nil {
		return err
	}
	if lease != nil {
		r.Lease = lease.State
	}
	return r.SetupWithManager(mgr)
}
