package logs

import (
	"net"
	"sync"

	"github.com/unitlet/unitlet/runtime/evloop"
	"github.com/unitlet/unitlet/runtime/unixsock"
)

// acceptor serves every connection to one unix socket in a goroutine of
// its own and keeps them, so a close can cut the open ones and wait for
// what was read to be handed on.
type acceptor struct {
	ln     *net.UnixListener
	reg    *evloop.Reg // the accept wait in the event loop; nil: a goroutine's
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	isCut  bool
	serve  func(net.Conn)
}

// listenUnix binds path, mode 0600: only the agent and the trampoline,
// still root before it drops privileges, connect.
func listenUnix(path string) (*acceptor, error) {
	ln, err := unixsock.ListenPrivate(path)
	if err != nil {
		return nil, err
	}
	return &acceptor{ln: ln, conns: map[net.Conn]struct{}{}}, nil
}

// start accepts until stop, calling serve for each connection (in a
// goroutine of its own), which it closes after serve returns. The wait for
// a connection is the process's event loop's, not a goroutine per socket:
// a node's thousand log sockets are rarely connected to.
func (a *acceptor) start(serve func(net.Conn)) {
	a.serve = serve
	if loop, err := evloop.Shared(); err == nil {
		// Tracked from the loop's callback; stop removes the
		// registration, waiting for a callback in progress, before
		// anyone waits on wg.
		if a.reg, err = loop.OnAccept(a.ln, a.take); err == nil {
			return
		}
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			c, err := a.ln.Accept()
			if err != nil {
				return // closed
			}
			// Served even when stop ran meanwhile: the kernel handed
			// this connection over before the listener closed, so its
			// bytes are the run's as much as a queued one's are.
			a.take(c)
		}
	}()
}

// take serves c in a goroutine of its own.
func (a *acceptor) take(c net.Conn) {
	a.track(c)
	go a.serveOne(c)
}

func (a *acceptor) serveOne(c net.Conn) {
	defer a.wg.Done()
	a.serve(c)
	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
	c.Close()
}

// track counts c as served until serveOne ends. Its caller holds a
// count of its own on wg (the accept loop's, or drain's caller's), or is
// the event loop's callback, which stop waits for, so a Wait begun after
// stop still covers c. A connection tracked after cut
// is cut at once.
func (a *acceptor) track(c net.Conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.conns[c] = struct{}{}
	a.wg.Add(1)
	if a.isCut {
		c.Close()
	}
}

// stop stops accepting (and removes the socket file); it reports false
// when it was stopped already. What is still queued is served first: a
// process that connected, wrote and ended before the accept loop got to
// it left its bytes in a connection only an accept reaches.
func (a *acceptor) stop() (bool, error) {
	if a.reg != nil {
		a.reg.Remove()
	}
	a.drain()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false, nil
	}
	a.closed = true
	return true, a.ln.Close()
}

// drain accepts, without waiting, every connection still queued. Out of
// descriptors, what is left is lost when the listener closes.
func (a *acceptor) drain() {
	rc, err := a.ln.SyscallConn()
	if err != nil {
		return
	}
	_ = evloop.AcceptQueued(rc, a.take)
}

// open is how many connections are being served.
func (a *acceptor) open() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.conns)
}

// cut closes the connections still open.
func (a *acceptor) cut() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.isCut = true
	for c := range a.conns {
		c.Close()
	}
}
