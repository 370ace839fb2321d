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
