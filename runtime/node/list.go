package node

import (
	"context"
	"fmt"

	"github.com/unitlet/unitlet/runtime/layout"
)

// List returns every slot the backend knows that maps back to a Ref.
func (n *Node) List(ctx context.Context) ([]Ref, error) {
	sts, err := n.cfg.Backend.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("node: list: %w", err)
	}
	var out []Ref
	for _, st := range sts {
		if st.Proc == nil {
			n.cfg.Log.Info("unit maps to no slot", "unit", st.Unit, "cgroup", st.Cgroup)
			continue
		}
		ref := refOf(*st.Proc)
		out = append(out, ref)
		if !st.Gone() {
			n.adopt(ref, *st.Proc)
		}
	}
	return out, nil
}

// adopt watches a running slot this Node did not start (an agent
// restart), so its end reaches Events too. It holds no listeners: those
// died with the agent that bound them.
func (n *Node) adopt(ref Ref, p layout.Proc) {
	in := n.instanceOf(ref.InstanceRef)
	n.mu.Lock()
	if _, ok := in.slots[ref]; ok {
		n.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(n.life)
	in.slots[ref] = &slot{watch: cancel}
	n.mu.Unlock()
	n.watch(ctx, ref, p)
}

func refOf(p layout.Proc) Ref {
	inst := p.Instance()
	return Ref{InstanceRef: InstanceRef{inst.Namespace(), inst.Name()}, Role: p.Role(), Generation: p.Generation()}
}
