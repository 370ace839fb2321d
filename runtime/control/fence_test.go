package control

import (
	"errors"
	"testing"
)

func TestServingFence(t *testing.T) {
	var f ServingFence
	wrote := 0
	write := func() error { wrote++; return nil }
	if err := f.For(1)(write); !errors.Is(err, ErrNotServing) {
		t.Fatalf("before any generation serves: %v", err)
	}
	f.Serve(1)
	if err := f.For(1)(write); err != nil {
		t.Fatalf("serving g1: %v", err)
	}
	f.Serve(2)
	if err := f.For(1)(write); !errors.Is(err, ErrNotServing) {
		t.Fatalf("retired g1: %v", err)
	}
	if wrote != 1 {
		t.Errorf("%d writes ran, want 1", wrote)
	}
}
