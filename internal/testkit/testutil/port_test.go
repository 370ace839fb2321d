package testutil

import (
	"net"
	"testing"
)

func TestFreePortCanBeListenedOn(t *testing.T) {
	addr := FreePort(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	_ = l.Close()
}

func TestTail(t *testing.T) {
	tests := map[string]struct {
		in   string
		n    int
		want string
	}{
		"shorter":          {"a\nb", 5, "a\nb"},
		"cut":              {"a\nb\nc\n", 2, "b\nc"},
		"trailing newline": {"a\n", 1, "a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Tail(tc.in, tc.n); got != tc.want {
				t.Errorf("Tail(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
}
