package shim

import (
	"net"
	"os"
	"time"
)

// logDialTimeout bounds one connect to the agent's log socket.
const logDialTimeout = 200 * time.Millisecond

// forwardLogs copies the app's output from r to the log socket at path.
// The shim, not the app, holds the connection: the app writes into a pipe
// the shim never closes, so an agent that dies (taking the listening end
// with it) cannot break the app's stdout and kill it with SIGPIPE. While
// no agent listens, output is read and dropped so the app never blocks;
// the next write after the agent is back connects again. The returned
// channel is closed once r reached end of file (the app and everything
// that inherited its output are gone).
func forwardLogs(r *os.File, path string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer r.Close()
		var conn net.Conn
		send := func(p []byte) {
			for attempt := 0; attempt < 2; attempt++ {
				if conn == nil {
					c, err := net.DialTimeout("unix", path, logDialTimeout)
					if err != nil {
						return // no agent listening: dropped
					}
					conn = c
				}
				if _, err := conn.Write(p); err == nil {
					return
				}
				conn.Close() // the agent went away: connect again once
				conn = nil
			}
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				send(buf[:n])
			}
			if err != nil {
				if conn != nil {
					conn.Close()
				}
				return
			}
		}
	}()
	return done
}
