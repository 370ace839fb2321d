//go:build !linux

package evloop

import (
	"net"
	"syscall"
)

// Loop is unavailable off Linux.
type Loop struct{}

// New fails off Linux: callers wait in goroutines of their own.
func New() (*Loop, error) { return nil, ErrUnsupported }

// Add is never reached off Linux (New fails).
func (l *Loop) Add(int, func(*Reg)) (*Reg, error) { return nil, ErrUnsupported }

func (l *Loop) rearm(*Reg) error { return ErrUnsupported }
func (l *Loop) remove(*Reg)      {}

// OnAccept is never reached off Linux (New fails).
func (l *Loop) OnAccept(syscall.Conn, func(net.Conn)) (*Reg, error) { return nil, ErrUnsupported }
