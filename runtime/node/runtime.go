package node

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"

	"github.com/unitlet/unitlet/runtime/control"
	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/logs"
	"github.com/unitlet/unitlet/runtime/prepare"
	"github.com/unitlet/unitlet/runtime/units"
)

// Config is what a Node is composed from.
type Config struct {
	Layout layout.Layout
	// Backend runs the units; Node.Close closes it.
	Backend units.Backend
	// CgroupMount is the cgroup mount root ("" is the host's default); it
	// must be the one the backend was given.
	CgroupMount string
	// SocketGID owns the run dirs and sockets (-1: leave them root's).
	SocketGID int
	// Users is the node's user database, for a template's user; IDs the
	// uids allocated to Instances without one (zero: identity.DefaultRange).
	Users identity.Users
	IDs   identity.Range
	Log   logr.Logger
	// LogMaxBytes and LogKeep rotate each instance's log file.
	LogMaxBytes int64
	LogKeep     int
	// LogDropped, when set, is told of each line of an Instance's output
	// its log file could not take (logs.DropReason's reason).
	LogDropped func(inst InstanceRef, reason string)
}

// PlatformTasks is what a tier's pids limit is raised by for the
// platform's own processes in a unit (units.PlatformTasks): the node is
// the reconcilers' one way into the runtime.
const PlatformTasks = units.PlatformTasks

// Defaults for the log rotation when Config leaves them zero.
const (
	DefaultLogMaxBytes = 8 << 20 // the agent's --instance-log-max-size default too
	DefaultLogKeep     = 3
)

// Errors a caller branches on.
var (
	// ErrPopulated refuses Remove while a slot of the instance still
	// holds processes.
	ErrPopulated = errors.New("node: instance still has populated slots")
	// ErrNoAppSocket refuses a Promote to a generation whose app has not
	// bound its socket.
	ErrNoAppSocket = errors.New("node: generation has no app socket")
	// ErrNotAGeneration refuses Probe and Promote of a role slot.
	ErrNotAGeneration = errors.New("node: not a generation slot")
	// ErrMetadataNotGranted refuses a start that asks for the cloud
	// metadata service without a grant that allows it.
	ErrMetadataNotGranted = errors.New("the cloud metadata service is not granted")
)

// Node is the Runtime of one node.
type Node struct {
	cfg    Config
	events chan Ref
	// pending holds the slots seen empty that Events has not delivered
	// yet, each once (see send).
	pending pendingRefs
	// life bounds the event watchers; Close ends it.
	life   context.Context
	cancel context.CancelFunc

	ids *identity.Store

	mu        sync.Mutex
	instances map[InstanceRef]*instance
	act       *activated // nil until the first activated start
}

// instance is what the Node holds for one Instance between calls.
type instance struct {
	// starting serialises Start for the instance, so two reconciles
	// never prepare the same slot at once.
	starting sync.Mutex
	log      *logs.RotatingFile
	fence    control.ServingFence
	slots    map[Ref]*slot
	// listen is the socket an activated Instance's generations are handed.
	listen *listener
}

// slot is one started slot: its listeners stay open while it runs. It
// keeps them alone, not prepare's whole Result (the merged env and its
// layers: ~3 MiB of heap per thousand slots, never read again).
type slot struct {
	logs    *logs.Listener
	control *control.Server
	watch   context.CancelFunc
}

// slotOf is the slot of a start prepared as pr.
func slotOf(pr *prepare.Result, watch context.CancelFunc) *slot {
	return &slot{logs: pr.Logs, control: pr.Control, watch: watch}
}

// close lets go of the slot's watch and listeners.
func (s *slot) close() error {
	if s.watch != nil {
		s.watch()
	}
	var errs []error
	if s.control != nil {
		errs = append(errs, s.control.Close())
	}
	if s.logs != nil {
		errs = append(errs, s.logs.Close())
	}
	return errors.Join(errs...)
}

var _ Runtime = (*Node)(nil)

// New returns a Node over cfg's backend.
func New(cfg Config) (*Node, error) {
	if cfg.Backend == nil {
		return nil, errors.New("node: no backend")
	}
	if _, err := cfg.Layout.Instance("probe", "probe"); err != nil {
		return nil, fmt.Errorf("node: layout: %w", err)
	}
	if cfg.LogMaxBytes <= 0 {
		cfg.LogMaxBytes = DefaultLogMaxBytes
	}
	if cfg.LogKeep <= 0 {
		cfg.LogKeep = DefaultLogKeep
	}
	if cfg.IDs.Size <= 0 {
		cfg.IDs = identity.DefaultRange
	}
	life, cancel := context.WithCancel(context.Background())
	n := &Node{cfg: cfg, events: make(chan Ref), life: life, cancel: cancel,
		pending:   pendingRefs{refs: map[Ref]struct{}{}, wake: make(chan struct{}, 1)},
		ids:       &identity.Store{Dir: cfg.Layout.IdentityDir(), Range: cfg.IDs, Users: cfg.Users, SocketGID: cfg.SocketGID},
		instances: map[InstanceRef]*instance{}}
	go n.deliver()
	return n, nil
}

// appIdentity is who an Instance's processes are on the node, and whether
// they run as uid 0 in a user namespace of their own: a granted root is
// the Instance's own uid to the node, root only to itself.
func (n *Node) appIdentity(inst InstanceRef, user string, g identity.Grant) (identity.Credential, bool, error) {
	cred, err := n.ids.Resolve(inst.Namespace, inst.Name, user, g)
	if err != nil || cred.UID != 0 {
		return cred, false, err
	}
	own, err := n.ids.Resolve(inst.Namespace, inst.Name, "", identity.Grant{})
	own.User = cred.User
	return own, true, err
}

// Identity resolves who inst's processes run as (see identity.Store),
// allocating the Instance's own uid on first use.
func (n *Node) Identity(inst InstanceRef, user string, g identity.Grant) (identity.Credential, error) {
	return n.ids.Resolve(inst.Namespace, inst.Name, user, g)
}

// Shutdown bounds every proof running now or started later by ctx (the
// agent's remaining grace): one cut short is Unproven, never a kill that
// outlives the agent unreported.
func (n *Node) Shutdown(ctx context.Context) { n.cfg.Backend.Shutdown(ctx) }

// Close stops the event watchers, closes every listener and log file the
// Node holds, and closes the backend (its idle shims, its connection).
// The units keep running: a new Node re-adopts them.
func (n *Node) Close() error {
	n.cancel()
	defer n.cfg.Backend.Close()
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for ref, in := range n.instances {
		for _, s := range in.slots {
			errs = append(errs, s.close())
		}
		if in.log != nil {
			errs = append(errs, in.log.Close())
		}
		if in.listen != nil {
			errs = append(errs, in.listen.f.Close())
		}
		delete(n.instances, ref)
	}
	if n.act != nil {
		errs = append(errs, n.act.srv.Close(), n.act.watch.Close())
	}
	return errors.Join(errs...)
}

// Events delivers a slot each time its cgroup is seen empty.
func (n *Node) Events() <-chan Ref { return n.events }

// StableSocket is the Instance's stable app.sock.
func (n *Node) StableSocket(inst InstanceRef) (string, error) {
	li, err := n.layoutOf(inst)
	if err != nil {
		return "", err
	}
	return li.StableSocket(), nil
}

func (n *Node) layoutOf(inst InstanceRef) (layout.Instance, error) {
	li, err := n.cfg.Layout.Instance(inst.Namespace, inst.Name)
	if err != nil {
		return layout.Instance{}, fmt.Errorf("node: %w", err)
	}
	return li, nil
}

func (n *Node) procOf(ref Ref) (layout.Slot, error) {
	li, err := n.layoutOf(ref.InstanceRef)
	if err != nil {
		return layout.Slot{}, err
	}
	named := ref.Sidecar
	if ref.Role == layout.RoleCommand {
		named = ref.Command
	}
	p, err := li.Slot(ref.Role, ref.Generation, named)
	if err != nil {
		return layout.Slot{}, fmt.Errorf("node: %s/%s %s %d %q: %w", ref.Namespace, ref.Name, ref.Role, ref.Generation, named, err)
	}
	return p, nil
}

// instanceOf returns the instance's state, created on first use.
func (n *Node) instanceOf(inst InstanceRef) *instance {
	n.mu.Lock()
	defer n.mu.Unlock()
	in, ok := n.instances[inst]
	if !ok {
		in = &instance{slots: map[Ref]*slot{}}
		n.instances[inst] = in
	}
	return in
}
