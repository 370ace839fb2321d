// Package sockdiag reads the kernel's own account of unix sockets
// (NETLINK_SOCK_DIAG, unix_diag) to say whether a listening socket is
// drained: nothing waits in its accept queue and no connection it
// accepted is still open. The kernel copies a listener's path to every
// socket it accepts, so its accepted connections are found by the file
// the listener is bound to (UNIX_DIAG_VFS), whatever path the app used.
//
// Hand-written over x/sys/unix: the Go netlink libraries' unix_diag dump
// requests no VFS attribute, which is what ties a connection to its
// listener.
package sockdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// unix_diag constants (linux/unix_diag.h), not in x/sys/unix.
const (
	showVFS   = 0x02 // UDIAG_SHOW_VFS
	showRQLen = 0x10 // UDIAG_SHOW_RQLEN

	attrVFS   = 1 // UNIX_DIAG_VFS
	attrRQLen = 4 // UNIX_DIAG_RQLEN

	stateEstablished = 1  // TCP_ESTABLISHED: connected (accepted) sockets
	stateListen      = 10 // TCP_LISTEN

	reqLen = 24 // sizeof(struct unix_diag_req)
	msgLen = 16 // sizeof(struct unix_diag_msg)
)

// ErrInconsistent: the kernel says the dump was interrupted by a change;
// what it returned proves nothing.
var ErrInconsistent = errors.New("sockdiag: dump interrupted, look again")

// File is the socket file a listener is bound to, as stat(2) names it.
type File struct{ Dev, Ino uint64 }

// FileOf stats the socket file at path.
func FileOf(path string) (File, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return File{}, fmt.Errorf("sockdiag: %w", &os.PathError{Op: "stat", Path: path, Err: err})
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return File{}, fmt.Errorf("sockdiag: %s is not a socket", path)
	}
	return File{Dev: st.Dev, Ino: st.Ino}, nil
}

// State is one listener's state in a dump.
type State struct {
	// Listening: the listening socket itself was in the dump.
	Listening bool
	// Queued is how many connections wait in its accept queue.
	Queued int
	// Open is how many connections it accepted are not yet closed by the
	// side that accepted them.
	Open int
}

// Drained: the listener is there, nothing waits and nothing it accepted
// is open.
func (s State) Drained() bool { return s.Listening && s.Queued == 0 && s.Open == 0 }

func (s State) String() string {
	if !s.Listening {
		return fmt.Sprintf("listener not seen, %d open", s.Open)
	}
	return fmt.Sprintf("%d queued, %d open", s.Queued, s.Open)
}

// Look dumps the unix sockets of the caller's network namespace once and
// returns the state of each listener in files.
func Look(files ...File) (map[File]State, error) {
	want := make(map[File]State, len(files))
	for _, f := range files {
		want[f] = State{}
	}
	err := dump(func(state uint8, vfs *File, rqueue uint32) {
		if vfs == nil {
			return
		}
		s, ok := want[*vfs]
		if !ok {
			return
		}
		switch state {
		case stateListen:
			s.Listening, s.Queued = true, int(rqueue)
		case stateEstablished:
			s.Open++
		}
		want[*vfs] = s
	})
	if err != nil {
		return nil, err
	}
	return want, nil
}

// dump runs one SOCK_DIAG_BY_FAMILY dump of listening and connected unix
// sockets and calls each for every socket, with its file (nil: not bound
// to a path) and its receive queue length (a listener's accept queue).
func dump(each func(state uint8, vfs *File, rqueue uint32)) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return fmt.Errorf("sockdiag: netlink socket: %w", err)
	}
	defer unix.Close(fd)
	req := make([]byte, unix.NLMSG_HDRLEN+reqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], 1) // sequence
	body := req[unix.NLMSG_HDRLEN:]
	body[0] = unix.AF_UNIX
	ne.PutUint32(body[4:], 1<<stateEstablished|1<<stateListen)
	ne.PutUint32(body[12:], showVFS|showRQLen)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("sockdiag: send: %w", err)
	}
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("sockdiag: receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("sockdiag: parse: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				if m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
					return ErrInconsistent
				}
				return nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := int32(ne.Uint32(m.Data)); errno != 0 {
						return fmt.Errorf("sockdiag: dump: %w", syscall.Errno(-errno))
					}
				}
				return nil
			}
			if m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
				return ErrInconsistent
			}
			if len(m.Data) < msgLen || m.Data[0] != unix.AF_UNIX {
				continue
			}
			vfs, rqueue := attrs(m.Data[msgLen:])
			each(m.Data[2], vfs, rqueue)
		}
	}
}

// attrs reads the VFS and RQLEN attributes of one unix_diag_msg.
func attrs(b []byte) (vfs *File, rqueue uint32) {
	ne := binary.NativeEndian
	for len(b) >= unix.SizeofRtAttr {
		l, typ := int(ne.Uint16(b[0:])), ne.Uint16(b[2:])
		if l < unix.SizeofRtAttr || l > len(b) {
			break
		}
		v := b[unix.SizeofRtAttr:l]
		switch {
		case typ == attrVFS && len(v) >= 8:
			// struct unix_diag_vfs: inode, then the kernel's dev_t
			// (major<<20 | minor), re-encoded as stat(2) gives it.
			kdev := ne.Uint32(v[4:])
			vfs = &File{Ino: uint64(ne.Uint32(v[0:])), Dev: unix.Mkdev(kdev>>20, kdev&0xfffff)}
		case typ == attrRQLen && len(v) >= 4:
			rqueue = ne.Uint32(v[0:])
		}
		b = b[min(len(b), (l+unix.RTA_ALIGNTO-1)&^(unix.RTA_ALIGNTO-1)):]
	}
	return vfs, rqueue
}
