// Package hostgate is what the hosting reconcilers consult before
// starting new work: whether this node may host now, and whether its
// administrator allows Instances to run as root. The joining logic sets
// it; the reconcilers only read it. Work already running is never killed
// by a flip of the gate.
package hostgate

import "sync/atomic"

// Gate says whether new work may start, and whether as root.
type Gate interface {
	Accepting() bool
	AllowsRoot() bool
}

// Always accepts: a node run with --require-enrollment=false. With no
// Enrollment there is no administrator's word, so root is never allowed.
type Always struct{}

// Accepting is always true.
func (Always) Accepting() bool { return true }

// AllowsRoot is always false.
func (Always) AllowsRoot() bool { return false }

// Switch is a Gate that the joining logic turns on and off.
type Switch struct{ on, root atomic.Bool }

// Accepting reports the switch's state.
func (s *Switch) Accepting() bool { return s.on.Load() }

// AllowsRoot reports the Enrollment's spec.allowRoot as last read.
func (s *Switch) AllowsRoot() bool { return s.root.Load() }

// Set turns the switch on or off and reports whether it changed.
func (s *Switch) Set(on bool) bool { return s.on.Swap(on) != on }

// SetRoot records whether root is allowed and reports whether it changed.
func (s *Switch) SetRoot(allowed bool) bool { return s.root.Swap(allowed) != allowed }
