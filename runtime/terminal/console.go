package terminal

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/unixsock"
)

// Config is what the agent connects a run's terminal to.
type Config struct {
	// Out gets what the command writes on its terminal: its stdout and
	// stderr, as one stream. Written from one goroutine.
	Out io.Writer
	// In is what is typed on it (nil: nothing). A read from it may block
	// past Close, until In's own end.
	In io.Reader
	// Size is the first size; Resize brings later ones until it closes.
	Size   Size
	Resize <-chan Size
}

// CutAfter bounds how long Close waits for the terminal's last output
// once the run is gone (a process outside the run holding its follower
// end would keep it open).
const CutAfter = 2 * time.Second

// handOffTimeout bounds a connection that does not hand a terminal over.
const handOffTimeout = 10 * time.Second

// Console is the agent's end of one run's terminal: it takes the
// controller the trampoline hands over at its socket and serves it.
type Console struct {
	ln   *net.UnixListener
	cfg  Config
	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu   sync.Mutex
	size Size
	ctl  *os.File      // the controller, once handed over
	fd   int           // its fd, for ioctls (File.Fd would make it blocking)
	out  chan struct{} // closed when the output ended, once handed over
	err  error         // the first error writing Out
}

// Listen binds path (mode 0600: only the agent and the trampoline, still
// root, connect) and serves the terminal handed over there.
func Listen(path string, cfg Config) (*Console, error) {
	ln, err := unixsock.ListenPrivate(path)
	if err != nil {
		return nil, err
	}
	c := &Console{ln: ln, cfg: cfg, done: make(chan struct{}), size: cfg.Size}
	c.wg.Add(2)
	go c.accept()
	go c.resizes()
	return c, nil
}

// accept takes the first terminal handed over; any later connection is
// closed unheard.
func (c *Console) accept() {
	defer c.wg.Done()
	taken := false
	for {
		conn, err := c.ln.AcceptUnix()
		if err != nil {
			return // closed
		}
		if !taken {
			err := c.take(conn)
			taken = err == nil
		}
		conn.Close()
	}
}

// take receives the controller on conn, sets its size, answers and
// starts copying.
func (c *Console) take(conn *net.UnixConn) error {
	_ = conn.SetDeadline(time.Now().Add(handOffTimeout))
	fd, err := receiveFD(conn)
	if err != nil {
		return err
	}
	// Only a terminal's controller answers TIOCGPTN.
	if _, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN); err != nil {
		unix.Close(fd)
		return fmt.Errorf("terminal: what was handed over is no terminal: %w", err)
	}
	// Non-blocking, so that the runtime's poller serves it and Close
	// interrupts a read.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return err
	}
	f := os.NewFile(uintptr(fd), "terminal")
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		f.Close()
		return errors.New("terminal: handed over after the run ended")
	default:
	}
	if err := setSize(fd, c.size); err != nil {
		c.mu.Unlock()
		f.Close()
		return fmt.Errorf("terminal: first size: %w", err)
	}
	c.ctl, c.fd, c.out = f, fd, make(chan struct{})
	c.mu.Unlock()
	go c.copyOut(f)
	if c.cfg.In != nil {
		go func() { _, _ = io.Copy(f, c.cfg.In) }()
	}
	_, err = conn.Write([]byte{ready})
	return err
}

// receiveFD reads the hand-off byte and the one fd sent with it.
func receiveFD(conn *net.UnixConn) (int, error) {
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(b[:], oob)
	if err != nil {
		return -1, fmt.Errorf("terminal: hand-off: %w", err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if rights, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, rights...)
			}
		}
	}
	if n == 1 && b[0] == handOff && len(fds) == 1 {
		return fds[0], nil
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	return -1, fmt.Errorf("terminal: hand-off of %d bytes with %d fds, want one terminal", n, len(fds))
}

// copyOut copies the terminal's output to Out until the terminal ends:
// EIO once no process holds its follower end any more.
func (c *Console) copyOut(f *os.File) {
	defer close(c.out)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			if _, err := c.cfg.Out.Write(buf[:n]); err != nil {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
				return
			}
		}
		if rerr != nil {
			return // EIO: its end; os.ErrClosed: cut by Close
		}
	}
}

// resizes applies each size from Resize, or keeps it for the terminal
// still to come.
func (c *Console) resizes() {
	defer c.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case s, ok := <-c.cfg.Resize:
			if !ok {
				return
			}
			c.mu.Lock()
			c.size = s
			if c.ctl != nil {
				_ = setSize(c.fd, s) // closed only after this loop ended
			}
			c.mu.Unlock()
		}
	}
}

// Close stops taking a terminal, waits (up to CutAfter) for the output
// of the one taken and lets go of it. Call it once the run's processes
// are gone. It returns the first error writing Out (the caller gone), and
// removes the socket file.
func (c *Console) Close() error {
	err := c.ln.Close()
	c.mu.Lock()
	close(c.done)
	ctl, out := c.ctl, c.out
	c.mu.Unlock()
	c.wg.Wait()
	if ctl != nil {
		select {
		case <-out:
		case <-time.After(CutAfter):
		}
		ctl.Close()
		<-out
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return errors.Join(c.err, err)
}
