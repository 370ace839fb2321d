package cgroups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sync"

	"github.com/go-logr/logr"

	"github.com/unitlet/unitlet/runtime/layout"
)

// DefaultRoot is the cgroup (relative to each hierarchy's mount point)
// that holds every instance parent when the agent drives cgroupfs itself.
const DefaultRoot = "unitlet"

// Config says where an agent's cgroups live.
type Config struct {
	// MountRoot is where cgroup file systems are mounted ("" is
	// DefaultMountRoot).
	MountRoot string
	// Root is the cgroup, relative to each hierarchy, that holds the
	// instance parents ("" is DefaultRoot).
	Root string
	Log  logr.Logger
}

func (c Config) root() string {
	if c.Root == "" {
		return DefaultRoot
	}
	return c.Root
}

// Manager contains one instance: its parent cgroup and the children below.
// Child names are g<n> (layout.GenerationCgroup), role-seed
// (layout.RoleCgroup), role-sidecar-<name> (layout.SidecarCgroup) or
// role-cmd-<name> (layout.RunCgroup); the parent itself never holds a
// process.
type Manager interface {
	// Mode is the cgroup arrangement this manager drives.
	Mode() Mode
	// Parent is the instance parent, relative to each hierarchy.
	Parent() string
	// EnsureParent creates the parent if needed with tier as its floor.
	// A parent a swap raised stays raised until RestoreParent, also when
	// another manager (an agent before a restart) raised it: while a
	// generation child holds processes, EnsureParent only raises.
	EnsureParent(tier Tier) error
	// CreateGeneration creates g<n> with the tier's limits. It is always
	// fresh: an existing g<n> is ErrChildExists, generation 0 is refused.
	CreateGeneration(n int64, tier Tier) (child string, err error)
	// CreateRole creates a role child (role-seed, role-sidecar-<name>, as
	// layout.Slot.Cgroup names it) with no limit of its own, fresh.
	CreateRole(child string) (string, error)
	// RaiseParent sets the parent to the overlap limit before a successor
	// starts.
	RaiseParent(overlap Tier) error
	// RestoreParent lowers the parent to floor (the serving generation's
	// tier, which the caller knows even after an agent restart) once at
	// most one
	// generation child holds processes (*PopulatedError otherwise).
	RestoreParent(floor Tier) error
	// Place moves pid (and its threads) into child in every hierarchy. A
	// shim places itself with os.Getpid() before it execs anything.
	Place(pid int, child string) error
	// KillAndEmpty kills every process in child (and nowhere else) and
	// waits until it is empty, bounded by ctx. An absent child is proven
	// empty. The child stays; remove it (RemoveChild) before its name is
	// used again: the kernel kills whatever is started into a cgroup that
	// was killed with cgroup.kill (CLONE_INTO_CGROUP).
	KillAndEmpty(ctx context.Context, child string) Proof
	// WatchEmpty returns a channel closed once child is seen empty.
	WatchEmpty(ctx context.Context, child string) (<-chan struct{}, error)
	// OnEmpty calls fn once child is seen empty (see WatchEmpty), as a
	// callback rather than a goroutine waiting on a channel.
	OnEmpty(ctx context.Context, child string, fn func()) error
	// Populated says whether child holds a process: where the kernel
	// keeps a populated flag (cgroup2's cgroup.events), one small read
	// rather than a walk of every hierarchy's process lists.
	Populated(child string) (bool, error)
	// Pids lists the processes in child (all hierarchies).
	Pids(child string) ([]int, error)
	// Limits reads child's limits back from its files ("" is the parent).
	Limits(child string) (Limits, error)
	// Stats reads child's usage now ("" is the parent): working set,
	// CPU time, OOM kills and memory limit. An absent child is ErrNoChild.
	Stats(child string) (Stats, error)
	// RemoveChild removes an empty child; an absent one is fine.
	RemoveChild(child string) error
	// Remove removes the parent and its (empty) children.
	Remove() error
}

// Errors a caller branches on.
var (
	ErrChildExists  = errors.New("cgroups: child already exists (children are never reused)")
	ErrNoChild      = errors.New("cgroups: no such child")
	ErrNotAChild    = errors.New("cgroups: not a child name (g<n>, role-seed, role-sidecar-<name>)")
	ErrParentAbsent = errors.New("cgroups: instance parent does not exist")
)

// PopulatedError refuses RestoreParent while more than one generation
// child still holds processes.
type PopulatedError struct {
	// Children are the populated generation children (their units, on
	// the systemd backend).
	Children []string
}

func (e *PopulatedError) Error() string {
	return fmt.Sprintf("cgroups: %d generation children still populated: %v", len(e.Children), e.Children)
}

// New opens the manager of instance (namespace, name) under cfg. It
// detects the mode from cfg.MountRoot and creates nothing; with no cgroup
// file system it returns an error that wraps ErrNoDelegation.
func New(cfg Config, namespace, name string) (Manager, error) {
	// Once per process and mount root: per call it read the node's
	// whole mount table (v1) and kept a copy of its hierarchies for each
	// of a node's thousand Instances.
	mode, h, err := detectOnce(cfg.MountRoot)
	if err != nil {
		return nil, err
	}
	return newInstance(cfg, mode, newDriver(mode, h), layout.InstanceCgroup(cfg.root(), namespace, name)), nil
}

func newDriver(mode Mode, h hierarchies) driver {
	if mode == ModeV2 {
		return &v2Driver{mount: h[""]}
	}
	return newV1Driver(h)
}

// driver is one mode's file work on a cgroup given relative to each
// hierarchy. Tests wrap it to inject what a real cgroup cannot show on
// demand (a kill that never empties).
type driver interface {
	// create makes rel in every hierarchy; it does not fail if it exists.
	create(rel string) error
	// enable lets children of rel use the limiting controllers (v2).
	enable(rel string) error
	controllers(rel string) controllerSet
	set(rel string, t Tier, reset bool) error
	limits(rel string) (Limits, error)
	stats(rel string) (Stats, error)
	place(rel string, pid int) error
	// killOnce signals every process below rel once.
	killOnce(rel string) error
	// pids lists every process below rel (all hierarchies).
	pids(rel string) ([]int, error)
	// populated is a cheap emptiness check for the wait loop.
	populated(rel string) (bool, error)
	exists(rel string) bool
	// children lists the cgroup directories directly below rel.
	children(rel string) ([]string, error)
	remove(rel string) error
	// eventsFile is rel's cgroup.events in a cgroup2 hierarchy, or "".
	eventsFile(rel string) string
}

type instance struct {
	cfg    Config
	mode   Mode
	d      driver
	parent string

	mu     sync.Mutex
	floor  Tier
	raised *Tier
	// ready: an EnsureParent made the parent and gave it floor; another
	// with the same tier need not write it all again.
	ready bool
	// atFloor: this manager last set the parent to floor (not raised).
	atFloor bool
}

func newInstance(cfg Config, mode Mode, d driver, parent string) *instance {
	return &instance{cfg: cfg, mode: mode, d: d, parent: parent}
}

func (m *instance) Mode() Mode     { return m.mode }
func (m *instance) Parent() string { return m.parent }

func (m *instance) rel(child string) string { return path.Join(m.parent, child) }

// checkChild accepts only the child names layout derives.
func checkChild(child string) error {
	if _, ok := layout.ParseGenerationCgroup(child); ok {
		return nil
	}
	if layout.IsRoleCgroup(child) {
		return nil
	}
	return fmt.Errorf("%w: %q", ErrNotAChild, child)
}

func (m *instance) CreateGeneration(n int64, tier Tier) (string, error) {
	child, err := layout.GenerationCgroup(n)
	if err != nil {
		return "", err
	}
	if err := m.createChild(child); err != nil {
		return "", err
	}
	if err := m.d.set(m.rel(child), tier, false); err != nil {
		_ = m.d.remove(m.rel(child))
		return "", fmt.Errorf("set %s to tier: %w", child, classify(err))
	}
	return child, nil
}

func (m *instance) CreateRole(child string) (string, error) {
	if !layout.IsRoleCgroup(child) {
		return "", fmt.Errorf("%w: %q is not a role child", ErrNotAChild, child)
	}
	return child, m.createChild(child)
}

// createChild makes a fresh child: one that exists may have been killed
// with cgroup.kill, and the kernel then kills whatever is started into it.
func (m *instance) createChild(child string) error {
	if !m.d.exists(m.parent) {
		return fmt.Errorf("%s: %w", m.parent, ErrParentAbsent)
	}
	rel := m.rel(child)
	if m.d.exists(rel) {
		return fmt.Errorf("%s: %w", rel, ErrChildExists)
	}
	if err := m.d.create(rel); err != nil {
		_ = m.d.remove(rel)
		return fmt.Errorf("create %s: %w", rel, classify(err))
	}
	return nil
}

func (m *instance) Place(pid int, child string) error {
	if err := checkChild(child); err != nil {
		return err
	}
	rel := m.rel(child)
	if !m.d.exists(rel) {
		return fmt.Errorf("%s: %w", rel, ErrNoChild)
	}
	if err := m.d.place(rel, pid); err != nil {
		return fmt.Errorf("place %d in %s: %w", pid, rel, classify(err))
	}
	return nil
}

func (m *instance) Populated(child string) (bool, error) {
	if err := checkChild(child); err != nil {
		return false, err
	}
	pop, err := m.d.populated(m.rel(child))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // an absent child holds nothing, as Pids says
	}
	return pop, err
}

func (m *instance) Pids(child string) ([]int, error) {
	if err := checkChild(child); err != nil {
		return nil, err
	}
	return m.d.pids(m.rel(child))
}

func (m *instance) Limits(child string) (Limits, error) {
	if child != "" {
		if err := checkChild(child); err != nil {
			return Limits{}, err
		}
	}
	return m.d.limits(m.rel(child))
}

func (m *instance) RemoveChild(child string) error {
	if err := checkChild(child); err != nil {
		return err
	}
	return m.d.remove(m.rel(child))
}

func (m *instance) Remove() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ready = false
	return m.d.remove(m.parent)
}

// classify keeps err and marks a permission failure so errors.Is finds
// os.ErrPermission for EPERM, EACCES and EROFS alike.
func classify(err error) error {
	if err == nil || errors.Is(err, os.ErrPermission) || !isROFS(err) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, os.ErrPermission)
}
