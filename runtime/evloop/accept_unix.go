//go:build unix

package evloop

import (
	"errors"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// AcceptQueued accepts, without waiting, every connection queued on the
// non-blocking listener rc and hands each to fn. An error is running out
// of descriptors: what is still queued stays for a later call.
func AcceptQueued(rc syscall.RawConn, fn func(net.Conn)) error {
	var fds []int
	var aerr error
	cerr := rc.Control(func(fd uintptr) {
		for {
			nfd, err := acceptCloexec(int(fd))
			switch {
			case err == nil:
				fds = append(fds, nfd)
			case errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
			case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.ENOMEM):
				aerr = err
				return
			default: // EAGAIN: the queue is empty; EBADF/EINVAL: closed
				return
			}
		}
	})
	for _, nfd := range fds {
		f := os.NewFile(uintptr(nfd), "conn")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			continue
		}
		fn(c)
	}
	if cerr != nil {
		return nil // the listener is closed: nothing more will come
	}
	return aerr
}
