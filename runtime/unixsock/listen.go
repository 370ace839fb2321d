// Package unixsock binds the agent's private unix sockets: the ones only
// the agent and a trampoline still running as root connect to (an app's
// log socket, a run's console).
package unixsock

import (
	"fmt"
	"net"
	"os"
)

// ListenPrivate binds path and makes it mode 0600, whatever the umask: a
// socket's mode is what the kernel checks at connect.
func ListenPrivate(path string) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("make %s private: %w", path, err)
	}
	return ln, nil
}
