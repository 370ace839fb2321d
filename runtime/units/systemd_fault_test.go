package units

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/dbusconn"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// busFault breaks a real bus connection on demand: a real systemd gets
// the call and acts on it; only its answer is lost on the way back.
type busFault struct {
	mu sync.Mutex
	// loseStartReply: once a service's StartTransientUnit is written,
	// the connection is cut instead of delivering the reply.
	loseStartReply bool
	// loseSignals: the signal connection drops everything it reads, so
	// no job's completion ever arrives.
	loseSignals bool
	startSent   bool
}

func (f *busFault) set(fn func(f *busFault)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

type faultConn struct {
	net.Conn
	f      *busFault
	signal bool // go-systemd's second connection carries the signals
}

func (c *faultConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if !c.signal && bytes.Contains(p, []byte("StartTransientUnit")) && bytes.Contains(p, []byte(".service")) {
		c.f.set(func(f *busFault) { f.startSent = f.startSent || f.loseStartReply })
	}
	return n, err
}

func (c *faultConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		c.f.mu.Lock()
		cut := !c.signal && c.f.startSent
		drop := c.signal && c.f.loseSignals
		if cut {
			c.f.startSent, c.f.loseStartReply = false, false
		}
		c.f.mu.Unlock()
		switch {
		case cut:
			c.Conn.Close()
			return 0, io.ErrUnexpectedEOF
		case drop && err == nil:
			continue
		}
		return n, err
	}
}

// faultyConnect dials the booted system's bus through faultConns.
func (e *sdEnv) faultyConnect(f *busFault) func(context.Context) (*sddbus.Conn, error) {
	return func(ctx context.Context) (*sddbus.Conn, error) {
		n := 0
		return sddbus.NewConnection(func() (*godbus.Conn, error) {
			n++
			nc, err := net.Dial("unix", e.sys.BusSocket())
			if err != nil {
				return nil, err
			}
			c, err := godbus.NewConn(&faultConn{Conn: nc, f: f, signal: n == 2})
			if err != nil {
				nc.Close()
				return nil, err
			}
			return dbusconn.Handshake(c)
		})
	}
}

func TestSystemdLostAnswers(t *testing.T) {
	env := newSDEnv(t)
	tests := map[string]struct {
		arm  func(f *busFault)
		want outcome.StartKind
	}{
		"the connection cut after the start call: MayHaveRun": {
			arm: func(f *busFault) { f.loseStartReply = true }, want: outcome.MayHaveRun,
		},
		"the job's completion never arrives: QueuedJobMayRun": {
			arm: func(f *busFault) { f.loseSignals = true }, want: outcome.QueuedJobMayRun,
		},
	}
	i := 0
	for name, tc := range tests {
		i++
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			f := &busFault{}
			cfg := env.config(5*time.Second, t)
			cfg.Connect = env.faultyConnect(f)
			b, err := NewSystemd(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Close)
			inst := "lost" + strconv.Itoa(i)
			// Generation 1 starts cleanly, so the slice exists before the fault.
			g1 := env.proc(t, inst, 1, "/bin/sleep", "1000")
			if got := b.Start(ctx, Spec{Slot: g1}); got.Kind != outcome.Running {
				t.Fatalf("start g1: %v (%v)", got.Kind, got.Cause)
			}
			later := env.backend(t, 5*time.Second) // a backend of its own, as after a restart
			t.Cleanup(func() { later.Prove(context.Background(), g1) })

			g2 := env.proc(t, inst, 2, "/bin/sleep", "1000")
			f.set(tc.arm)
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			got := b.Start(sctx, Spec{Slot: g2})
			scancel()
			if diff := cmp.Diff(tc.want.String(), got.Kind.String()); diff != "" {
				t.Fatalf("kind (-want,+got):\n%s\ncause: %v", diff, got.Cause)
			}
			if !outcome.MightHaveRun(got.Err()) {
				t.Errorf("MightHaveRun(%v) = false", got.Err())
			}
			// It did run: the manager got the call. Its start job may still
			// be queued when first looked at, so look until it runs.
			var st Status
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if st, err = later.Observe(ctx, g2); err != nil {
					t.Fatal(err)
				}
				if !st.Gone() || time.Now().After(deadline) {
					break
				}
			}
			if st.Gone() {
				t.Errorf("the unit whose answer was lost never ran: %+v", st)
			}
			if k := later.Prove(ctx, g2); !k.Proven {
				t.Errorf("a later Prove did not resolve it: %v", k.Err())
			}
			if st, err := later.Observe(ctx, g2); err != nil || !st.Gone() {
				t.Errorf("after the proof: %+v %v, want gone", st, err)
			}
			if errors.Is(got.Err(), outcome.ErrExitedBeforeObserved) {
				t.Errorf("a lost answer reads as an exit")
			}
		})
	}
}
