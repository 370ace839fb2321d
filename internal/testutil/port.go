package testutil

import (
	"net"
	"testing"
)

// FreePort is a loopback address whose port was free a moment ago, for a
// process under test to listen on.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
