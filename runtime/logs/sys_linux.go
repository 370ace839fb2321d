package logs

import "golang.org/x/sys/unix"

// acceptCloexec accepts one queued connection on the listening fd.
func acceptCloexec(fd int) (int, error) {
	nfd, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
	return nfd, err
}

// growPipe asks for a FIFOSize pipe buffer; best effort: the default
// 64 KiB still works, only fills sooner.
func growPipe(fd int) {
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, FIFOSize)
}
