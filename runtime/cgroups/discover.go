package cgroups

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/unitlet/unitlet/runtime/layout"
)

// Discovered is an instance parent found on the file system.
type Discovered struct {
	Parent   string // relative to each hierarchy, like Manager.Parent
	Name     string // the parent's own name (layout.CgroupPrefix...)
	Children []DiscoveredChild
}

// DiscoveredChild is one child of a discovered parent.
type DiscoveredChild struct {
	Name       string
	Generation int64 // n of g<n>; 0 for a role or unknown child
	Pids       []int
}

// Discover lists the instance parents below cfg's root, their children
// and the processes in them, from the file system alone: what an agent
// re-adopts after a restart.
func Discover(cfg Config) ([]Discovered, error) {
	d, names, err := rootChildren(cfg)
	if err != nil {
		return nil, err
	}
	var out []Discovered
	for _, name := range names {
		if !strings.HasPrefix(name, layout.CgroupPrefix) {
			continue
		}
		found, err := discoverParent(d, cfg, name)
		if err != nil {
			return nil, err
		}
		out = append(out, found)
	}
	return out, nil
}

// DiscoverParent is Discover for the one instance parent called name
// (the last element of layout.InstanceCgroup): the work of one Instance
// costs no look at the others. A parent that does not exist has no
// children.
func DiscoverParent(cfg Config, name string) (Discovered, error) {
	mode, h, err := detectOnce(cfg.MountRoot)
	if err != nil {
		return Discovered{}, err
	}
	return discoverParent(newDriver(mode, h), cfg, name)
}

func discoverParent(d driver, cfg Config, name string) (Discovered, error) {
	parent := path.Join(cfg.root(), name)
	found := Discovered{Parent: parent, Name: name}
	kids, err := d.children(parent)
	if err != nil {
		return found, fmt.Errorf("list %s: %w", parent, err)
	}
	for _, k := range kids {
		pids, err := d.pids(path.Join(parent, k))
		if err != nil {
			return found, fmt.Errorf("pids of %s/%s: %w", parent, k, err)
		}
		n, _ := layout.ParseGenerationCgroup(k)
		found.Children = append(found.Children, DiscoveredChild{Name: k, Generation: n, Pids: pids})
	}
	return found, nil
}

// SweepStale kills and removes every cgroup directly below cfg's root
// whose name starts with prefix and that keep (nil: keep none) does not
// claim: leftovers of earlier test runs, or, at agent start-up, parents
// of instances this node no longer runs. Root "." is the mount root
// itself. A subtree whose kill is not proven is kept, and its Proof is
// returned with the others.
func SweepStale(ctx context.Context, cfg Config, prefix string, keep func(name string) bool) ([]Proof, error) {
	if prefix == "" {
		return nil, fmt.Errorf("cgroups: refusing to sweep with an empty prefix")
	}
	d, names, err := rootChildren(cfg)
	if err != nil {
		return nil, err
	}
	var proofs []Proof
	var errs []error
	for _, name := range names {
		if !strings.HasPrefix(name, prefix) || (keep != nil && keep(name)) {
			continue
		}
		rel := path.Join(cfg.root(), name)
		p := killAndEmpty(ctx, d, rel, cfg.Log)
		proofs = append(proofs, p)
		if !p.Proven {
			continue
		}
		if err := d.remove(rel); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", rel, err))
			continue
		}
		cfg.Log.Info("swept stale cgroup", "cgroup", rel)
	}
	if len(errs) > 0 {
		return proofs, fmt.Errorf("cgroups: sweep: %v", errs)
	}
	return proofs, nil
}

// rootChildren opens the driver for cfg's mount and lists the cgroups
// directly below cfg's root.
func rootChildren(cfg Config) (driver, []string, error) {
	mode, h, err := detect(cfg.MountRoot)
	if err != nil {
		return nil, nil, err
	}
	d := newDriver(mode, h)
	names, err := d.children(cfg.root())
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", cfg.root(), err)
	}
	return d, names, nil
}
