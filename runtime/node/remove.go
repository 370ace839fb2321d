package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PopulatedError names the slots that keep Remove from running.
type PopulatedError struct {
	Units []string
}

func (e *PopulatedError) Error() string {
	return fmt.Sprintf("node: instance still has populated slots: %s", strings.Join(e.Units, ", "))
}

// Is makes errors.Is(err, ErrPopulated) true.
func (e *PopulatedError) Is(target error) bool { return target == ErrPopulated }

// Remove deletes the Instance's parent cgroup and directories. It refuses
// with a *PopulatedError while any of its slots still runs: nothing here
// kills, that is Retire's job with its proof.
func (n *Node) Remove(ctx context.Context, inst InstanceRef) error {
	li, err := n.layoutOf(inst)
	if err != nil {
		return err
	}
	in := n.instanceOf(inst)
	in.starting.Lock()
	defer in.starting.Unlock()

	sts, err := n.cfg.Backend.ListInstance(ctx, li)
	if err != nil {
		return fmt.Errorf("node: remove %s/%s: %w", inst.Namespace, inst.Name, err)
	}
	var busy []string
	for _, st := range sts {
		pop := !st.Gone()
		if st.Slot != nil {
			if p, err := n.cfg.Backend.Populated(ctx, *st.Slot, st); err == nil {
				pop = pop || p
			}
		}
		if pop {
			busy = append(busy, st.Unit)
		}
	}
	if len(busy) > 0 {
		return &PopulatedError{Units: busy}
	}

	if err := n.cfg.Backend.RemoveParent(ctx, li); err != nil {
		return fmt.Errorf("node: remove parent of %s/%s: %w", inst.Namespace, inst.Name, err)
	}
	// Let go of everything held for the instance before its sockets go.
	n.unlisten(inst, in)
	n.mu.Lock()
	delete(n.instances, inst)
	n.mu.Unlock()
	var errs []error
	for _, s := range in.slots {
		errs = append(errs, s.close())
	}
	if in.log != nil {
		errs = append(errs, in.log.Close())
	}
	// RemoveAll unlinks symlinks rather than following them, so a tenant's
	// link in the data dir cannot point it elsewhere.
	removed := true
	for _, dir := range []string{li.DataDir(), li.PrivateDir(), li.RunDir(), filepath.Dir(li.LogFile())} {
		if err := os.RemoveAll(dir); err != nil {
			removed = false
			errs = append(errs, fmt.Errorf("node: remove %s: %w", dir, err))
		}
	}
	// The uid goes back only with the files it owned: a later Instance
	// given it must find nothing of this one.
	if removed {
		if err := n.ids.Release(inst.Namespace, inst.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
