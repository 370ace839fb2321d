package node

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/unitlet/unitlet/runtime/control"
	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/logs"
	"github.com/unitlet/unitlet/runtime/prepare"
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

// errUnmapped is logged for a running unit no slot maps back to.
var errUnmapped = errors.New("unit not adopted")

func (n *Node) refs(sts []units.Status) []Ref {
	var out []Ref
	for _, st := range sts {
		if st.Slot == nil {
			// Left running, and said loudly: an agent from before the
			// shortened names moved (run dir _h/, unit and cgroup "_"
			// and a 128-bit id) named a long-named Instance's units in a
			// way no Instance maps back to.
			if !st.Gone() {
				n.cfg.Log.Error(errUnmapped, "a running unit maps to no Instance's slot: left running, stop it by hand", "unit", st.Unit, "cgroup", st.Cgroup)
				continue
			}
			n.cfg.Log.Info("unit maps to no slot", "unit", st.Unit, "cgroup", st.Cgroup)
			continue
		}
		ref := refOf(*st.Slot)
		out = append(out, ref)
		if !st.Gone() {
			n.adopt(ref, *st.Slot)
		}
	}
	return out
}

// adopt watches a running slot this Node did not start (an agent
// restart), so its end reaches Events too, and binds its log socket anew
// and opens its log FIFO again: the listener died with the agent that
// bound it, and the app's output (held open by its shim, or waiting in
// the FIFO the app holds) flows again once something listens.
func (n *Node) adopt(ref Ref, p layout.Slot) {
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
	lf, lerr := launch.Read(p.Instance().PrivateDir(), p.LaunchFile())
	if l, err := n.relisten(in, p, lf.Host); err != nil {
		n.cfg.Log.Info("adopted slot's output is not collected", "unit", p.UnitName(), "err", err.Error())
	} else {
		n.mu.Lock()
		s.logs = l
		n.mu.Unlock()
	}
	if p.Role() == layout.RoleApp {
		// The control socket its env names died with the last agent.
		srv, err := n.relistenControl(in, p, lf, lerr)
		if err != nil {
			n.cfg.Log.Info("adopted generation has no control socket", "unit", p.UnitName(), "err", err.Error())
		} else {
			n.mu.Lock()
			s.control = srv
			n.mu.Unlock()
		}
	}
	n.watch(ctx, ref, p)
}

// relistenControl binds an adopted generation's control socket again, as
// its launch file's identity (lf, read with lerr).
func (n *Node) relistenControl(in *instance, p layout.Slot, lf launch.File, lerr error) (*control.Server, error) {
	if lerr != nil {
		return nil, lerr
	}
	return prepare.ListenControl(prepare.Request{
		Instance: p.Instance(), Host: lf.Host, Generation: p.Generation(), SocketGID: n.cfg.SocketGID, App: lf.Identity,
		Fence: in.fence.For(p.Generation()), State: n.stateFunc(in, p.Generation()), Logger: n.cfg.Log,
	}, p)
}

// relisten binds an adopted slot's log socket again (cmd has none).
func (n *Node) relisten(in *instance, p layout.Slot, host string) (*logs.Listener, error) {
	if p.Role() == layout.RoleCommand {
		return nil, nil
	}
	li := p.Instance()
	f, err := n.logFile(li, in)
	if err != nil {
		return nil, err
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

func refOf(p layout.Slot) Ref {
	inst := p.Instance()
	return Ref{InstanceRef: InstanceRef{inst.Namespace(), inst.Name()}, Role: p.Role(), Generation: p.Generation(), Sidecar: p.SidecarName(), Command: p.CommandName()}
}
