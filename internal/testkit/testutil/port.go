package testutil

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// FreePort is a loopback address whose port was free a moment ago, for a
// process under test to listen on.
func FreePort(t testing.TB) string {
	t.Helper()
	port, err := FreeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// FreeTCPPort is a loopback port that was free a moment ago, for harness
// code that has no test at hand (a VM's forwarded ports, a control
// plane's).
func FreeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Tail is the last n lines of s, for logs quoted in a failure.
func Tail(s string, n int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > n {
		parts = parts[len(parts)-n:]
	}
	return strings.Join(parts, "\n")
}
