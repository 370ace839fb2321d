//go:build unix && !linux

package evloop

import "golang.org/x/sys/unix"

// acceptCloexec takes one queued connection, the flag set after (no
// accept4). The node side runs on Linux only; this lets runtime/logs,
// which the kubectl plugin imports, build elsewhere.
func acceptCloexec(fd int) (int, error) {
	nfd, _, err := unix.Accept(fd)
	if err == nil {
		unix.CloseOnExec(nfd)
	}
	return nfd, err
}
