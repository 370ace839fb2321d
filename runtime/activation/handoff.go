package activation

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/instancefs"
)

// Server hands each pending generation its listening socket, once, to the
// trampoline of the unit it was offered for: a root caller whose cgroup
// is one that unit is placed in (see peer.go).
type Server struct {
	l   *net.UnixListener
	log logr.Logger

	mu      sync.Mutex
	pending map[string]offer
}

// offer is a socket waiting for its unit's trampoline: cgroups are where
// the unit's processes may be placed (layout.Slot.Placements).
type offer struct {
	f       *os.File
	cgroups []string
}

// maxKey bounds a request line.
const maxKey = 1024

// Serve binds the hand-off socket at path (0600, root's) and serves it
// until Close. path's dir must be root's alone (the run root): the mode
// is set there after the bind, so no process-wide umask is changed
// while other goroutines create files.
func Serve(path string, log logr.Logger) (*Server, error) {
	f, err := instancefs.BindStaged(filepath.Dir(path), filepath.Dir(path), filepath.Base(path), -1, -1, 0o600, Backlog)
	if err != nil {
		return nil, fmt.Errorf("activation: %w", err)
	}
	fl, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("activation: %w", err)
	}
	s := &Server{l: fl.(*net.UnixListener), log: log, pending: map[string]offer{}}
	go s.loop()
	return s, nil
}

// Offer makes f (a dup of it) the socket handed to the caller naming key
// from one of cgroups, replacing an earlier offer.
func (s *Server) Offer(key string, f *os.File, cgroups []string) error {
	if len(cgroups) == 0 {
		return fmt.Errorf("activation: offer %s: no cgroup its caller may be in", key)
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("activation: dup: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.pending[key]; old.f != nil {
		old.f.Close()
	}
	s.pending[key] = offer{f: os.NewFile(uintptr(fd), key), cgroups: append([]string(nil), cgroups...)}
	return nil
}

// Withdraw drops key's offer, if not taken.
func (s *Server) Withdraw(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.pending[key]; o.f != nil {
		o.f.Close()
		delete(s.pending, key)
	}
}

// Close stops serving and drops every offer.
func (s *Server) Close() error {
	err := s.l.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, o := range s.pending {
		o.f.Close()
		delete(s.pending, k)
	}
	return err
}

func (s *Server) loop() {
	for {
		c, err := s.l.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error(err, "activation hand-off accept")
			}
			return
		}
		go s.serve(c)
	}
}

// serve answers one request: "KEY\n" in, the socket (SCM_RIGHTS) with
// "ok\n" or an error line out. Only uid 0 is served (the trampoline asks
// before it drops to the app's user), and only from a cgroup KEY's unit
// is placed in: another unit's trampoline, root too, gets nothing. A
// refused caller leaves the offer in place for the right one.
func (s *Server) serve(c *net.UnixConn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	reply := func(msg string, f *os.File) {
		var oob []byte
		if f != nil {
			oob = unix.UnixRights(int(f.Fd()))
		}
		if _, _, err := c.WriteMsgUnix([]byte(msg+"\n"), oob, nil); err != nil {
			s.log.Info("activation hand-off reply", "err", err.Error())
		}
	}
	line, err := bufio.NewReader(&limitedConn{c}).ReadString('\n')
	if err != nil {
		return
	}
	key := strings.TrimSuffix(line, "\n")
	s.mu.Lock()
	o := s.pending[key]
	s.mu.Unlock()
	if o.f == nil {
		reply("no socket offered for "+key, nil)
		return
	}
	if err := checkPeer(c, o.cgroups); err != nil {
		s.log.Info("activation hand-off refused", "key", key, "err", err.Error())
		reply("refused: "+err.Error(), nil)
		return
	}
	s.mu.Lock()
	if s.pending[key].f != o.f {
		s.mu.Unlock()
		reply("no socket offered for "+key, nil) // taken or replaced meanwhile
		return
	}
	delete(s.pending, key)
	s.mu.Unlock()
	defer o.f.Close()
	reply("ok", o.f)
}

// limitedConn bounds what a caller may send.
type limitedConn struct{ c *net.UnixConn }

func (r *limitedConn) Read(p []byte) (int, error) {
	if len(p) > maxKey {
		p = p[:maxKey]
	}
	return r.c.Read(p)
}

// Fetch asks the hand-off socket at path for key's socket and returns its
// descriptor (close-on-exec); the trampoline's side.
func Fetch(path, key string) (int, error) {
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(s)
	if err := unix.Connect(s, &unix.SockaddrUnix{Name: path}); err != nil {
		return -1, fmt.Errorf("connect %s: %w", path, err)
	}
	if _, err := unix.Write(s, []byte(key+"\n")); err != nil {
		return -1, fmt.Errorf("ask %s: %w", path, err)
	}
	buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(s, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("answer from %s: %w", path, err)
	}
	msg := strings.TrimSpace(string(buf[:n]))
	if msg != "ok" {
		return -1, fmt.Errorf("%s: %s", path, msg)
	}
	cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(cmsgs) != 1 {
		return -1, fmt.Errorf("%s: no descriptor in the answer (%v)", path, err)
	}
	fds, err := unix.ParseUnixRights(&cmsgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("%s: no descriptor in the answer (%v)", path, err)
	}
	return fds[0], nil
}
