// Package hostgate is what the hosting reconcilers consult before
// starting new work: whether this node may host now. The joining logic
// sets it; the reconcilers only read it. Work already running is never
// killed by a flip of the gate.
package hostgate

import "sync/atomic"

// Gate says whether new work may start.
type Gate interface {
	Accepting() bool
}

// Always accepts: a node run with --require-enrollment=false.
type Always struct{}

// Accepting is always true.
func (Always) Accepting() bool { return true }

// Switch is a Gate that the joining logic turns on and off.
type Switch struct{ on atomic.Bool }

// Accepting reports the switch's state.
func (s *Switch) Accepting() bool { return s.on.Load() }

// Set turns the switch on or off and reports whether it changed.
func (s *Switch) Set(on bool) bool { return s.on.Swap(on) != on }
