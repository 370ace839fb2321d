package node

import (
	"context"
	"errors"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
)

// InstanceUsage is what one Instance's generations on this node use now,
// summed over their cgroups; MemoryLimitBytes is the highest generation's
// limit (the tier's; cgroups.Unlimited or Absent when none is set).
type InstanceUsage struct {
	InstanceRef
	cgroups.Stats
	// Generations counts the generation cgroups read.
	Generations int
}

// Usage reads the cgroups of every generation this Node holds (started
// or adopted, not yet retired), one Instance's summed into one entry. It
// asks no API server and no unit manager, so a scrape costs file reads
// alone. A cgroup gone meanwhile is left out.
func (n *Node) Usage(ctx context.Context) []InstanceUsage {
	byInst := map[InstanceRef]*InstanceUsage{}
	var order []InstanceRef
	for _, ref := range n.generationRefs() {
		st, err := n.generationStats(ctx, ref)
		if err != nil {
			if !errors.Is(err, cgroups.ErrNoChild) {
				n.cfg.Log.V(1).Info("usage not read", "namespace", ref.Namespace, "name", ref.Name, "generation", ref.Generation, "err", err.Error())
			}
			continue
		}
		u := byInst[ref.InstanceRef]
		if u == nil {
			u = &InstanceUsage{InstanceRef: ref.InstanceRef, Stats: cgroups.Stats{MemoryLimitBytes: cgroups.Absent}}
			byInst[ref.InstanceRef] = u
			order = append(order, ref.InstanceRef)
		}
		u.add(st)
	}
	out := make([]InstanceUsage, 0, len(order))
	for _, ref := range order {
		out = append(out, *byInst[ref])
	}
	return out
}

// add sums st into u; the limit is the highest set one.
func (u *InstanceUsage) add(st cgroups.Stats) {
	u.Generations++
	u.MemoryWorkingSetBytes += st.MemoryWorkingSetBytes
	u.CPUUsageNanos += st.CPUUsageNanos
	u.OOMKills += st.OOMKills
	u.MemoryLimitBytes = higherLimit(u.MemoryLimitBytes, st.MemoryLimitBytes)
}

// higherLimit: any limit beats Absent, Unlimited beats any number.
func higherLimit(a, b int64) int64 {
	switch {
	case a == cgroups.Unlimited || b == cgroups.Unlimited:
		return cgroups.Unlimited
	case a == cgroups.Absent:
		return b
	case b == cgroups.Absent:
		return a
	}
	return max(a, b)
}

// generationRefs lists the generation slots the Node holds now.
func (n *Node) generationRefs() []Ref {
	n.mu.Lock()
	defer n.mu.Unlock()
	var refs []Ref
	for _, in := range n.instances {
		for ref := range in.slots {
			if ref.Role == layout.RoleApp && ref.Generation > 0 {
				refs = append(refs, ref)
			}
		}
	}
	return refs
}

func (n *Node) generationStats(ctx context.Context, ref Ref) (cgroups.Stats, error) {
	p, err := n.procOf(ref)
	if err != nil {
		return cgroups.Stats{}, err
	}
	return n.cfg.Backend.Stats(ctx, p)
}
