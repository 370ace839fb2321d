package cgroups

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// DefaultMountRoot is where cgroup file systems are mounted on a host.
const DefaultMountRoot = "/sys/fs/cgroup"

// Mode is how the cgroup file systems below a mount root are arranged.
type Mode int

const (
	// ModeNone: no cgroup file system below the mount root.
	ModeNone Mode = iota
	// ModeV1: only v1 controller hierarchies.
	ModeV1
	// ModeHybrid: v1 controller hierarchies plus cgroup2 at <root>/unified.
	ModeHybrid
	// ModeV2: cgroup2 mounted at the root itself (unified).
	ModeV2
)

func (m Mode) String() string {
	switch m {
	case ModeV1:
		return "v1"
	case ModeHybrid:
		return "hybrid"
	case ModeV2:
		return "v2"
	}
	return "none"
}

// unifiedDir is where a hybrid host mounts its cgroup2 hierarchy.
const unifiedDir = "unified"

// hierarchies maps a v1 subsystem name as the fs manager spells it
// ("memory", "cpu", "name=systemd") to its mount point; "" is the unified
// (cgroup2) mount point on a hybrid or v2 host.
type hierarchies map[string]string

// DetectMode reports how cgroups are mounted below mountRoot ("" is
// DefaultMountRoot). It answers from statfs and the mount table alone, so
// a test in its own mount namespace can point it at its own mount.
func DetectMode(mountRoot string) (Mode, error) {
	m, _, err := detect(mountRoot)
	return m, err
}

// detected holds detect's answers by mount root: the arrangement of a
// node's cgroups does not change under a running process, and a per-call
// detect reads the whole node's mount table (v1) for every Instance that
// lists its units.
var detected sync.Map // mount root → detection

type detection struct {
	mode Mode
	h    hierarchies
}

// detectOnce is detect, remembered after its first success.
func detectOnce(mountRoot string) (Mode, hierarchies, error) {
	if d, ok := detected.Load(mountRoot); ok {
		return d.(detection).mode, d.(detection).h, nil
	}
	mode, h, err := detect(mountRoot)
	if err == nil {
		detected.Store(mountRoot, detection{mode, h})
	}
	return mode, h, err
}

func detect(mountRoot string) (Mode, hierarchies, error) {
	if mountRoot == "" {
		mountRoot = DefaultMountRoot
	}
	mountRoot = filepath.Clean(mountRoot)
	if isCgroup2(mountRoot) {
		return ModeV2, hierarchies{"": mountRoot}, nil
	}
	h, err := v1Mounts(mountRoot)
	if err != nil {
		return ModeNone, nil, err
	}
	if len(h) == 0 {
		return ModeNone, nil, fmt.Errorf("%w: no cgroup file system below %s", ErrNoDelegation, mountRoot)
	}
	if u := filepath.Join(mountRoot, unifiedDir); isCgroup2(u) {
		h[""] = u
		return ModeHybrid, h, nil
	}
	return ModeV1, h, nil
}

func isCgroup2(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// v1Mounts lists the v1 hierarchies mounted directly below mountRoot. The
// library's own lookup keys on /proc/self/cgroup and the fixed root, which
// a test with a private mount cannot use, so the mount table is read here.
func v1Mounts(mountRoot string) (hierarchies, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup"))
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	h := hierarchies{}
	for _, mi := range mounts {
		if filepath.Dir(mi.Mountpoint) != mountRoot {
			continue
		}
		for _, opt := range strings.Split(mi.VFSOptions, ",") {
			if subsystemOption(opt) {
				h[opt] = mi.Mountpoint
			}
		}
	}
	return h, nil
}

// subsystemOption reports whether a cgroup v1 super option names a
// hierarchy (a controller or name=...), not a mount flag.
func subsystemOption(opt string) bool {
	switch {
	case opt == "" || opt == "rw" || opt == "ro" || opt == "noprefix" ||
		opt == "xattr" || opt == "clone_children" || opt == "cpuset_v2_mode" ||
		opt == "none" || opt == "favordynmods":
		return false
	case strings.HasPrefix(opt, "release_agent="):
		return false
	}
	return !strings.Contains(opt, "=") || strings.HasPrefix(opt, "name=")
}

// ErrNoDelegation: there is no cgroup hierarchy this agent may manage, so
// no limit can be set and no kill can be proven through cgroups.
var ErrNoDelegation = errors.New("cgroups: no delegated cgroup hierarchy")

// HierarchyMounts lists the mount point of every hierarchy mounted below
// mountRoot ("" is DefaultMountRoot), each once: the root itself on a v2
// host, one per hierarchy on a v1 or hybrid host. A process of a cgroup
// can be in any of them, so a kill is proven only once the cgroup is seen
// empty below each.
func HierarchyMounts(mountRoot string) ([]string, error) {
	_, h, err := detect(mountRoot)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var mounts []string
	for _, m := range h { // co-mounted controllers share a mount point
		if !seen[m] {
			seen[m] = true
			mounts = append(mounts, m)
		}
	}
	sort.Strings(mounts)
	return mounts, nil
}
