package control

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/unitlet/unitlet/runtime/evloop"
)

// One HTTP server serves every generation's control socket. A server per
// generation held a goroutine in Accept and its own maps and buffers: a
// node's thousand generations, whose apps rarely call, held a thousand.
// Each socket's queue waits in the process's event loop instead; its
// connections are handed to the shared server tagged with their
// generation, whose handler serves them.

// genConn is a connection to one generation's socket.
type genConn struct {
	net.Conn
	s *Server
}

type serverKey struct{}

var shared = sync.OnceValue(func() *connQueue {
	q := &connQueue{wake: make(chan struct{}, 1)}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Context().Value(serverKey{}).(*Server).handler.ServeHTTP(w, r)
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, serverKey{}, c.(*genConn).s)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				c.(*genConn).s.untrack(c)
			}
		},
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
	}
	go func() { _ = srv.Serve(q) }() // for the process's life: Accept never fails
	return q
})

// serve hands s's connections to the shared server as they are queued:
// from the event loop, else from a goroutine of s's own.
func (s *Server) serve() {
	q := shared()
	hand := func(c net.Conn) {
		g := &genConn{Conn: c, s: s}
		if s.track(g) {
			q.push(g)
		}
	}
	if loop, err := evloop.Shared(); err == nil {
		if s.reg, err = loop.OnAccept(s.ln.(*net.UnixListener), hand); err == nil {
			return
		}
	}
	s.acceptDone = make(chan struct{})
	go func() {
		defer close(s.acceptDone)
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return // closed
			}
			hand(c)
		}
	}()
}

// MaxConns bounds one generation's open connections to its control
// socket. Each holds a goroutine and buffers of the one server every
// tenant's app shares: an app that held thousands open would take them
// from all. An app calls now and then, a request at a time; one over the
// bound is closed as soon as it is accepted.
const MaxConns = 16

// track keeps c until it closes, so Close can drop it; false (and c
// closed) once s is closed, or while MaxConns are open.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.conns) >= MaxConns {
		c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// connQueue is the shared server's listener: the connections the
// generations' sockets accepted, in order. push never blocks (it runs on
// the event loop).
type connQueue struct {
	mu    sync.Mutex
	conns []net.Conn
	wake  chan struct{} // one token: something is queued
}

func (q *connQueue) push(c net.Conn) {
	q.mu.Lock()
	q.conns = append(q.conns, c)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	for {
		q.mu.Lock()
		if len(q.conns) > 0 {
			c := q.conns[0]
			q.conns[0] = nil
			q.conns = q.conns[1:]
			q.mu.Unlock()
			return c, nil
		}
		q.mu.Unlock()
		<-q.wake
	}
}

func (q *connQueue) Close() error   { return nil }
func (q *connQueue) Addr() net.Addr { return &net.UnixAddr{Name: "control", Net: "unix"} }
