package cgroups

import (
	"context"
	"fmt"
)

// Disabled is the Manager of a node with no delegated hierarchy: every
// call refuses with ErrNoDelegation (wrapping why), and a kill is never
// proven through it, so nobody believes in a limit or a proof that does
// not exist.
func Disabled(why error) Manager { return disabled{why: why} }

type disabled struct{ why error }

func (d disabled) err() error {
	if d.why == nil {
		return ErrNoDelegation
	}
	return fmt.Errorf("%w: %w", ErrNoDelegation, d.why)
}

func (disabled) Mode() Mode                                     { return ModeNone }
func (disabled) Parent() string                                 { return "" }
func (d disabled) EnsureParent(Tier) error                      { return d.err() }
func (d disabled) CreateGeneration(int64, Tier) (string, error) { return "", d.err() }
func (d disabled) CreateRole(string) (string, error)            { return "", d.err() }
func (d disabled) RaiseParent(Tier) error                       { return d.err() }
func (d disabled) RestoreParent(Tier) error                     { return d.err() }
func (d disabled) Place(int, string) error                      { return d.err() }
func (d disabled) Populated(string) (bool, error)               { return false, d.err() }
func (d disabled) Pids(string) ([]int, error)                   { return nil, d.err() }
func (d disabled) Limits(string) (Limits, error)                { return Limits{}, d.err() }
func (d disabled) Stats(string) (Stats, error)                  { return Stats{}, d.err() }
func (d disabled) RemoveChild(string) error                     { return d.err() }
func (d disabled) Remove() error                                { return d.err() }

func (d disabled) KillAndEmpty(_ context.Context, child string) Proof {
	return Proof{Child: child, Reason: ReasonNoDelegation, Err: d.err()}
}

func (d disabled) WatchEmpty(context.Context, string) (<-chan struct{}, error) {
	return nil, d.err()
}

func (d disabled) OnEmpty(context.Context, string, func()) error { return d.err() }
