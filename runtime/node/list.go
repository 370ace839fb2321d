package node

import (
	"context"
	"fmt"
	"os"

	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/logs"
	"github.com/unitlet/unitlet/runtime/units"
)

// List returns every slot the backend knows that maps back to a Ref, and
// adopts those still running.
func (n *Node) List(ctx context.Context) ([]Ref, error) {
	sts, err := n.cfg.Backend.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("node: list: %w", err)
	}
	return n.refs(sts), nil
}

// ListInstance is List for inst's slots alone, at the cost of that one
// Instance whatever else the node runs.
func (n *Node) ListInstance(ctx context.Context, inst InstanceRef) ([]Ref, error) {
	li, err := n.layoutOf(inst)
	if err != nil {
		return nil, err
	}
	sts, err := n.cfg.Backend.ListInstance(ctx, li)
	if err != nil {
		return nil, fmt.Errorf("node: list %s/%s: %w", inst.Namespace, inst.Name, err)
	}
	return n.refs(sts), nil
}

func (n *Node) refs(sts []units.Status) []Ref {
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
	return out
}

// adopt watches a running slot this Node did not start (an agent
// restart), so its end reaches Events too, and binds its log socket anew
// and opens its log FIFO again: the listener died with the agent that
// bound it, and the app's output (held open by its shim, or waiting in
// the FIFO the app holds) flows again once something listens.
func (n *Node) adopt(ref Ref, p layout.Proc) {
	in := n.instanceOf(ref.InstanceRef)
	n.mu.Lock()
	if _, ok := in.slots[ref]; ok {
		n.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(n.life)
	s := &slot{watch: cancel}
	in.slots[ref] = s
	n.mu.Unlock()
	if l, err := n.relisten(in, p); err != nil {
		n.cfg.Log.Info("adopted slot's output is not collected", "unit", p.UnitName(), "err", err.Error())
	} else {
		n.mu.Lock()
		s.logs = l
		n.mu.Unlock()
	}
	n.watch(ctx, ref, p)
}

// relisten binds an adopted slot's log socket again (cmd has none).
func (n *Node) relisten(in *instance, p layout.Proc) (*logs.Listener, error) {
	if p.Role() == layout.RoleCmd {
		return nil, nil
	}
	li := p.Instance()
	f, err := n.logFile(li, in)
	if err != nil {
		return nil, err
	}
	host := ""
	if lf, err := launch.Read(li.PrivateDir(), p.LaunchFile()); err == nil {
		host = lf.Host
	}
	_ = os.Remove(p.LogSocket()) // the dead agent's socket file
	return logs.Listen(p.LogSocket(), logs.Options{
		Labels: logs.Labels{Namespace: li.Namespace(), Name: li.Name(), Host: host, Role: p.Role(), Generation: p.Generation(), Sidecar: p.SidecarName()},
		File:   f, Logger: n.cfg.Log,
		// The same pipe the app still writes into: what it wrote while
		// no agent read is read now.
		FIFO: p.LogFIFO(),
	})
}

func refOf(p layout.Proc) Ref {
	inst := p.Instance()
	return Ref{InstanceRef: InstanceRef{inst.Namespace(), inst.Name()}, Role: p.Role(), Generation: p.Generation(), Sidecar: p.SidecarName()}
}
