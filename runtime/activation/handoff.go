package activation

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
)

// Server hands each pending generation its listening socket, once, to a
// root caller that names it.
type Server struct {
	l   *net.UnixListener
	log logr.Logger

	mu      sync.Mutex
	pending map[string]*os.File
}

// maxKey bounds a request line.
const maxKey = 1024

// Serve binds the hand-off socket at path (0600, root's) and serves it
// until Close.
func Serve(path string, log logr.Logger) (*Server, error) {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("activation: remove stale %s: %w", path, err)
	}
	old := unix.Umask(0o177)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("activation: %w", err)
	}
	s := &Server{l: l, log: log, pending: map[string]*os.File{}}
	go s.loop()
	return s, nil
}

// Offer makes f (a dup of it) the socket handed to the caller naming key,
// replacing an earlier offer.
func (s *Server) Offer(key string, f *os.File) error {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("activation: dup: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.pending[key]; old != nil {
		old.Close()
	}
	s.pending[key] = os.NewFile(uintptr(fd), key)
	return nil
}

// Withdraw drops key's offer, if not taken.
func (s *Server) Withdraw(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.pending[key]; f != nil {
		f.Close()
		delete(s.pending, key)
	}
}

// Close stops serving and drops every offer.
func (s *Server) Close() error {
	err := s.l.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, f := range s.pending {
		f.Close()
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
// "ok\n" or an error line out. Only uid 0 is served: the trampoline
// asks before it drops to the app's user.
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
	if uid, err := peerUID(c); err != nil || uid != 0 {
		reply(fmt.Sprintf("refused: caller uid %d is not root (%v)", uid, err), nil)
		return
	}
	line, err := bufio.NewReader(&limitedConn{c}).ReadString('\n')
	if err != nil {
		return
	}
	key := strings.TrimSuffix(line, "\n")
	s.mu.Lock()
	f := s.pending[key]
	delete(s.pending, key)
	s.mu.Unlock()
	if f == nil {
		reply("no socket offered for "+key, nil)
		return
	}
	defer f.Close()
	reply("ok", f)
}

// limitedConn bounds what a caller may send.
type limitedConn struct{ c *net.UnixConn }

func (r *limitedConn) Read(p []byte) (int, error) {
	if len(p) > maxKey {
		p = p[:maxKey]
	}
	return r.c.Read(p)
}

func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
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
