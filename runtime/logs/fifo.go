package logs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/evloop"
)

// FIFOSize is the pipe buffer a log FIFO asks for: what an app may write
// while no agent reads (an agent restart) before its writes block.
const FIFOSize = 1 << 20

// ErrNotFIFO: the path names something other than a named pipe.
var ErrNotFIFO = errors.New("not a named pipe")

// MakeFIFO creates the named pipe at path (mode 0600) unless one is
// there already: an app still writing into it after an agent restart
// holds the same pipe, so it must be reused, never replaced.
func MakeFIFO(path string) error {
	err := unix.Mkfifo(path, 0o600)
	if err == nil || !errors.Is(err, unix.EEXIST) {
		return err
	}
	fd, err := OpenFIFO(path, true)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// OpenFIFO opens the named pipe at path for reading and writing, refusing
// a symlink or anything but a pipe. Opened so, it never blocks at open
// and is never without a reader: an app whose output it is cannot die of
// SIGPIPE while no agent reads, and the agent never sees end of file when
// an app exits. The fd is close-on-exec; nonblock is for a reader on Go's
// poller, a writer's fd (an app's stdout) stays blocking.
func OpenFIFO(path string, nonblock bool) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", path, ErrNotFIFO)
	}
	if !nonblock {
		if err := unix.SetNonblock(fd, false); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	growPipe(fd)
	return fd, nil
}

// readFIFO serves the pipe at path (made if absent) until Close: from the
// process's event loop, a reader starting only while the pipe has
// something to read (a quiet app's pipe costs no goroutine), else from a
// goroutine of its own.
func (l *Listener) readFIFO(path string) error {
	if err := MakeFIFO(path); err != nil {
		return fmt.Errorf("log fifo: %w", err)
	}
	fd, err := OpenFIFO(path, true)
	if err != nil {
		return fmt.Errorf("log fifo: %w", err)
	}
	if loop, err := evloop.Shared(); err == nil {
		l.fifoLines = &splitter{max: l.opts.MaxLine, emit: l.emit}
		if l.fifoReg, err = loop.Add(fd, func(r *evloop.Reg) { l.fifoReady(r, fd) }); err == nil {
			l.fifoFD = fd
			return nil
		}
	}
	// Non-blocking: os.NewFile puts it on the poller, and Close ends a
	// read in progress.
	f := os.NewFile(uintptr(fd), path)
	l.fifo = f
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		splitLines(f, l.opts.MaxLine, l.emit)
	}()
	return nil
}

// fifoReady reads what the pipe holds in a goroutine (writing the lines
// may wait on the disk; the loop must not), then waits on the loop again.
// Close removes the registration before it waits on wg, so the count is
// taken before any wait.
func (l *Listener) fifoReady(r *evloop.Reg, fd int) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		readAvailable(fd, l.fifoLines)
		_ = r.Rearm()
	}()
}

// closeFIFO stops reading the pipe, waits for a read in progress (with
// the listener's other readers) and emits what is left of a last line.
func (l *Listener) closeFIFO(wait func()) {
	switch {
	case l.fifoReg != nil:
		l.fifoReg.Remove()
		wait()
		unix.Close(l.fifoFD)
		l.fifoLines.end()
	case l.fifo != nil:
		l.fifo.Close()
		wait()
	default:
		wait()
	}
}
