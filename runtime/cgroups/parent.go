package cgroups

import (
	"fmt"

	"github.com/unitlet/unitlet/runtime/layout"
)

// The instance parent's limit is the Instance's tier, raised while two
// generations overlap. A raise lives in the parent's own files, not only
// in this manager's memory: an agent restarted during an overlap opens a
// new manager, which reads it back there.

func (m *instance) EnsureParent(tier Tier) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready && m.floor == tier && m.d.exists(m.parent) {
		return nil
	}
	for _, dir := range []string{m.cfg.root(), m.parent} {
		if err := m.d.create(dir); err != nil {
			return fmt.Errorf("create %s: %w", dir, classify(err))
		}
		if err := m.d.enable(dir); err != nil {
			return fmt.Errorf("enable controllers in %s: %w", dir, classify(err))
		}
	}
	m.floor = tier
	if m.raised != nil {
		m.ready = true
		return nil // a swap raised it; RestoreParent lowers it
	}
	target, err := m.kept(tier)
	if err != nil {
		return err
	}
	if err := m.d.set(m.parent, target, true); err != nil {
		return fmt.Errorf("set %s to tier: %w", m.parent, classify(err))
	}
	m.ready, m.atFloor = true, target == tier
	if !m.atFloor {
		m.raised = &target
		m.cfg.Log.Info("instance parent kept above its tier while a generation runs", "parent", m.parent, "tier", tier, "kept", target)
		return nil
	}
	m.cfg.Log.V(1).Info("instance parent ready", "parent", m.parent, "mode", m.mode.String(), "tier", tier)
	return nil
}

// kept is what EnsureParent sets the parent to: tier, or, while a
// generation child holds processes, the higher of tier and what the
// parent holds now, field by field. That parent may hold an overlap's
// raise made by an earlier manager (an agent restarted before or after
// the successor started): lowering it would squeeze the running
// generations. Only RestoreParent lowers, once one generation runs.
func (m *instance) kept(tier Tier) (Tier, error) {
	busy, err := m.populatedGenerations()
	if err != nil || len(busy) == 0 {
		return tier, err
	}
	l, err := m.d.limits(m.parent)
	if err != nil {
		return Tier{}, fmt.Errorf("read limits of %s: %w", m.parent, classify(err))
	}
	return higher(tier, tierOf(l)), nil
}

func (m *instance) RaiseParent(overlap Tier) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.limitable(overlap); err != nil {
		return err
	}
	if err := m.d.set(m.parent, overlap, true); err != nil {
		return fmt.Errorf("raise %s: %w", m.parent, classify(err))
	}
	m.raised, m.atFloor = &overlap, false
	m.cfg.Log.Info("instance parent raised for overlap", "parent", m.parent, "overlap", overlap)
	return nil
}

func (m *instance) RestoreParent(floor Tier) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.atFloor && m.floor == floor && m.d.exists(m.parent) {
		return nil // already there: a settled Instance asks on every reconcile
	}
	if err := m.limitable(floor); err != nil {
		return err
	}
	busy, err := m.populatedGenerations()
	if err != nil {
		return err
	}
	if len(busy) > 1 {
		return &PopulatedError{Children: busy}
	}
	if err := m.d.set(m.parent, floor, true); err != nil {
		return fmt.Errorf("restore %s: %w", m.parent, classify(err))
	}
	m.floor, m.raised, m.atFloor = floor, nil, true
	m.cfg.Log.Info("instance parent restored to tier", "parent", m.parent, "tier", m.floor)
	return nil
}

// populatedGenerations names the generation children that hold processes.
func (m *instance) populatedGenerations() ([]string, error) {
	names, err := m.d.children(m.parent)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", m.parent, classify(err))
	}
	var busy []string
	for _, c := range names {
		if _, ok := layout.ParseGenerationCgroup(c); !ok {
			continue
		}
		pop, err := m.d.populated(m.rel(c))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", c, classify(err))
		}
		if pop {
			busy = append(busy, c)
		}
	}
	return busy, nil
}

// limitable refuses a limit the parent cannot hold: no parent, or a
// controller the tier needs is not there. A caller must never believe a
// raise happened that did not.
func (m *instance) limitable(t Tier) error {
	if !m.d.exists(m.parent) {
		return fmt.Errorf("%w: %s: %w", ErrNoDelegation, m.parent, ErrParentAbsent)
	}
	if miss := t.missing(m.d.controllers(m.parent)); len(miss) > 0 {
		return fmt.Errorf("%w: controllers %v are not available to %s", ErrNoDelegation, miss, m.parent)
	}
	return nil
}
