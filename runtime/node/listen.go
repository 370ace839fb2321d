package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/unitlet/unitlet/runtime/activation"
	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/prepare"
	"github.com/unitlet/unitlet/runtime/sockdiag"
)

// listener is an activated Instance's listening socket as the agent
// holds it: what its newest generation was handed.
type listener struct {
	f    *os.File
	path string // its newest name: the newest generation's app socket
}

// activated is the Node's hand-off server and watcher, made on the first
// activated start: a node that hosts none binds nothing for them.
type activated struct {
	srv   *activation.Server
	watch *activation.Watcher
}

func (n *Node) activation() (*activated, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.act != nil {
		return n.act, nil
	}
	srv, err := activation.Serve(n.cfg.Layout.HandoffSocket(), n.cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	w, err := activation.NewWatcher(n.arrived)
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("node: %w", err)
	}
	n.act = &activated{srv: srv, watch: w}
	return n.act, nil
}

// instKey names an Instance in the watcher.
func instKey(inst InstanceRef) string { return inst.Namespace + "/" + inst.Name }

// arrived wakes the Instance's reconciler when a connection reaches the
// socket of an Instance none of whose generations runs here: it sleeps,
// and the connection waits in the queue for the generation it starts.
func (n *Node) arrived(key string) {
	ns, name, _ := strings.Cut(key, "/")
	ref := InstanceRef{Namespace: ns, Name: name}
	n.mu.Lock()
	defer n.mu.Unlock()
	in := n.instances[ref]
	if in == nil {
		return
	}
	for s := range in.slots {
		if s.Role == layout.RoleApp {
			return
		}
	}
	n.send(Ref{InstanceRef: ref}) // never blocks
}

// offerListener gives generation ref its listening socket and offers it
// at the hand-off socket under the slot's unit name. A generation that
// starts beside a running one gets a socket of its own (so the old one's
// can be drained); otherwise it inherits the Instance's socket under its
// own name, so connections queued while nothing ran are its to answer.
func (n *Node) offerListener(ctx context.Context, in *instance, li layout.Instance, p layout.Slot, ref Ref) (*launch.Listen, error) {
	act, err := n.activation()
	if err != nil {
		return nil, err
	}
	sock, err := li.AppSocket(ref.Generation)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.mu.Lock()
	cur := in.listen
	n.mu.Unlock()
	inherit := cur != nil && !n.otherRunning(ctx, in, ref)
	n.cfg.Log.V(1).Info("listening socket", "namespace", ref.Namespace, "name", ref.Name, "generation", ref.Generation, "inherit", inherit)
	if inherit {
		if err := activation.Link(cur.path, sock); err == nil {
			n.mu.Lock()
			cur.path = sock
			n.mu.Unlock()
			return n.offer(act, p, cur.f)
		}
		n.cfg.Log.Info("inherited socket gone, binding a new one", "from", cur.path, "to", sock)
	}
	f, err := activation.Bind(li.RunDir(), sock, n.cfg.SocketGID)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err := n.hold(act, ref.InstanceRef, in, &listener{f: f, path: sock}, time.Now()); err != nil {
		return nil, err
	}
	return n.offer(act, p, f)
}

func (n *Node) offer(act *activated, p layout.Slot, f *os.File) (*launch.Listen, error) {
	cgroups, err := p.Placements()
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err := act.srv.Offer(p.UnitName(), f, cgroups); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return &launch.Listen{Handoff: n.cfg.Layout.HandoffSocket(), Key: p.UnitName()}, nil
}

// hold makes l the Instance's socket, watched for connections (none
// taken to have come since since); the one before is closed here (a
// generation still serving it holds its own).
func (n *Node) hold(act *activated, inst InstanceRef, in *instance, l *listener, since time.Time) error {
	if err := act.watch.Watch(instKey(inst), l.f, since); err != nil {
		l.f.Close()
		return fmt.Errorf("node: %w", err)
	}
	n.mu.Lock()
	old := in.listen
	in.listen = l
	n.mu.Unlock()
	if old != nil {
		old.f.Close()
	}
	return nil
}

// otherRunning reports whether a run slot of in other than ref holds
// processes (an Overlap predecessor).
func (n *Node) otherRunning(ctx context.Context, in *instance, ref Ref) bool {
	n.mu.Lock()
	var others []Ref
	for s := range in.slots {
		if s.Role == layout.RoleApp && s != ref {
			others = append(others, s)
		}
	}
	n.mu.Unlock()
	for _, o := range others {
		p, err := n.procOf(o)
		if err != nil {
			return true
		}
		st, err := n.cfg.Backend.Observe(ctx, p)
		if err != nil {
			return true // unknown: a socket of its own is the safe side
		}
		if pop, err := n.cfg.Backend.Populated(ctx, p, st); err != nil || pop {
			return true
		}
	}
	return false
}

// withdraw drops a slot's offer not taken (its start failed or it ended).
func (n *Node) withdraw(p layout.Slot) {
	n.mu.Lock()
	act := n.act
	n.mu.Unlock()
	if act != nil {
		act.srv.Withdraw(p.UnitName())
	}
}

// Activity is what the agent sees of an activated Instance's socket.
type Activity struct {
	// Held: the agent holds the Instance's socket (false after an agent
	// restart until a start or Listen binds it again).
	Held bool
	// Last is when a connection last reached it, to within
	// activation.Granularity (or when the agent began holding it).
	Last time.Time
	// Busy: a connection waits in its queue or is open now (or the look
	// failed: busy is the side that keeps the app running).
	Busy bool
}

// Activity says when a connection last reached an activated Instance's
// socket, and whether one is queued or open now.
func (n *Node) Activity(inst InstanceRef) Activity {
	n.mu.Lock()
	act := n.act
	var path string
	if in := n.instances[inst]; in != nil && in.listen != nil {
		path = in.listen.path
	}
	n.mu.Unlock()
	if act == nil || path == "" {
		return Activity{}
	}
	last, ok := act.watch.Last(instKey(inst))
	a := Activity{Held: ok, Last: last, Busy: true}
	if f, err := sockdiag.FileOf(path); err == nil {
		if seen, err := sockdiag.Look(f); err == nil {
			a.Busy = seen[f].Queued > 0 || seen[f].Open > 0
		}
	}
	return a
}

// Listen makes sure the agent holds an activated Instance's socket while
// none of its generations runs (after an agent restart, say), binding it
// anew where the stable socket leads when nothing listens there. It never
// takes the path from a listener that answers.
func (n *Node) Listen(ctx context.Context, inst InstanceRef) error {
	li, err := n.layoutOf(inst)
	if err != nil {
		return err
	}
	in := n.instanceOf(inst)
	n.mu.Lock()
	held := in.listen != nil
	n.mu.Unlock()
	if held {
		return nil
	}
	act, err := n.activation()
	if err != nil {
		return err
	}
	stable := li.StableSocket()
	target, err := os.Readlink(stable)
	if errors.Is(err, fs.ErrNotExist) {
		// Nothing leads anywhere: the node rebooted (/run is empty) or
		// the link was lost. The agent binds a socket of its own and
		// leads the stable socket to it.
		return n.listenAnew(act, inst, li, in)
	}
	if err != nil {
		return fmt.Errorf("node: listen: %w", err)
	}
	path := filepath.Join(filepath.Dir(stable), target)
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	c, err := d.DialContext(dctx, "unix", path)
	cancel()
	if err == nil {
		c.Close()
		return fmt.Errorf("node: listen: %s answers: a generation still serves it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("node: listen: %w", err)
	}
	f, err := activation.Bind(li.RunDir(), path, n.cfg.SocketGID)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.cfg.Log.Info("holding the socket anew", "namespace", inst.Namespace, "name", inst.Name, "path", path)
	// No connection is known to have come: only one from now on wakes it.
	return n.hold(act, inst, in, &listener{f: f, path: path}, time.Time{})
}

// listenAnew binds an asleep Instance's socket at its idle path in a run
// dir made as a start makes it, and leads the stable socket there.
func (n *Node) listenAnew(act *activated, inst InstanceRef, li layout.Instance, in *instance) error {
	if err := prepare.EnsureRunDir(li, n.cfg.SocketGID); err != nil {
		return fmt.Errorf("node: listen: %w", err)
	}
	path := li.IdleSocket()
	f, err := activation.Bind(li.RunDir(), path, n.cfg.SocketGID)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if err := flipSymlink(li.StableSocket(), filepath.Base(path)); err != nil {
		f.Close()
		return err
	}
	n.cfg.Log.Info("holding the socket anew; the stable socket led nowhere", "namespace", inst.Namespace, "name", inst.Name, "path", path)
	return n.hold(act, inst, in, &listener{f: f, path: path}, time.Time{})
}

// unlisten lets go of an Instance's socket (it is being removed).
func (n *Node) unlisten(inst InstanceRef, in *instance) {
	n.mu.Lock()
	act, l := n.act, in.listen
	in.listen = nil
	n.mu.Unlock()
	if act != nil {
		act.watch.Unwatch(instKey(inst))
	}
	if l != nil {
		l.f.Close()
	}
}
