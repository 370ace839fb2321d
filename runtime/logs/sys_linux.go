package logs

import "golang.org/x/sys/unix"

// growPipe asks for a FIFOSize pipe buffer; best effort: the default
// 64 KiB still works, only fills sooner.
func growPipe(fd int) {
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, FIFOSize)
}
