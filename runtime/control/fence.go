package control

import (
	"errors"
	"fmt"
	"sync"
)

// ErrNotServing is returned by a fence for a generation that does not
// serve (it is retiring, or not yet promoted); the server answers 409.
var ErrNotServing = errors.New("generation does not serve")

// Fence runs write only while the generation it was made for is the one
// that serves, and refuses with an error wrapping ErrNotServing otherwise.
// Holding the decision and the write under one lock means a swap cannot
// slip in between them.
type Fence func(write func() error) error

// ServingFence records which generation of an instance serves; one per
// instance, shared by its generations' control servers.
type ServingFence struct {
	mu      sync.Mutex
	serving int64 // 0: none
}

// Serve makes generation n the serving one (0: none serves).
func (f *ServingFence) Serve(n int64) {
	f.mu.Lock()
	f.serving = n
	f.mu.Unlock()
}

// Serving is the generation that serves now.
func (f *ServingFence) Serving() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.serving
}

// For returns the Fence of generation n.
func (f *ServingFence) For(n int64) Fence {
	return func(write func() error) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.serving != n {
			return fmt.Errorf("%w: generation %d is retiring or not yet serving (generation %d serves)", ErrNotServing, n, f.serving)
		}
		return write()
	}
}
