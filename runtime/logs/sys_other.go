//go:build !linux

// The node side runs on Linux only; these let the package build elsewhere
// for what it shares with clients (the kubectl plugin parses its records
// on macOS too).
package logs

import "golang.org/x/sys/unix"

func acceptCloexec(fd int) (int, error) {
	nfd, _, err := unix.Accept(fd)
	if err == nil {
		unix.CloseOnExec(nfd)
	}
	return nfd, err
}

func growPipe(int) {}
