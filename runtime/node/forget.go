package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/unitlet/unitlet/runtime/instancefs"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// ErrHeld refuses to forget a slot the node still runs or holds.
var ErrHeld = errors.New("node: the slot is not proven gone")

// Forget removes what the node keeps of a slot proven gone: its
// generation dir, launch file, records and log sockets, so a long life of
// generations leaves no pile of files. The Instance's other slots and
// shared files are untouched. It refuses (ErrHeld) while the slot is held
// or its unit still runs: the records are the evidence a proof reads.
func (n *Node) Forget(ctx context.Context, ref Ref) error {
	p, err := n.procOf(ref)
	if err != nil {
		return err
	}
	in := n.instanceOf(ref.InstanceRef)
	n.mu.Lock()
	_, held := in.slots[ref]
	n.mu.Unlock()
	if held {
		return fmt.Errorf("%w: %s is held", ErrHeld, p.UnitName())
	}
	st, err := n.cfg.Backend.Observe(ctx, p)
	if err != nil {
		return fmt.Errorf("node: forget %s: %w", p.UnitName(), err)
	}
	if pop, err := n.cfg.Backend.Populated(ctx, p, st); err != nil || pop || !st.Gone() {
		return fmt.Errorf("%w: %s is %s (%v)", ErrHeld, p.UnitName(), st.ActiveState, err)
	}
	li := p.Instance()
	var errs []error
	for _, suffix := range []string{record.StartSuffix, record.PidSuffix, record.ExitSuffix, record.ExecSuffix} {
		errs = append(errs, removeFile(filepath.Join(li.ExitDir(), record.Name(p, suffix))))
	}
	errs = append(errs, removeFile(filepath.Join(li.RunDir(), p.MemoryEnvFile())))
	for _, sock := range []string{p.LogSocket(), p.ErrLogSocket(), p.InSocket(), p.TerminalSocket(), p.LogFIFO()} {
		if sock != "" {
			errs = append(errs, removeFile(sock))
		}
	}
	if d, err := instancefs.OpenDir(li.PrivateDir()); err == nil {
		if err := instancefs.RemoveBeneath(d, p.LaunchFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		d.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if p.Generation() != 0 {
		errs = append(errs, removeGenDir(li, p))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node: forget %s: %w", p.UnitName(), err)
	}
	return nil
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// removeGenDir removes the generation's own run dir and what its app left
// in it; RemoveAll follows no symlink it meets.
func removeGenDir(li layout.Instance, p layout.Slot) error {
	dir, err := li.GenDir(p.Generation())
	if err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
