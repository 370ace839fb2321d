package dbusconn

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// busDaemon starts a private dbus-daemon and returns its address.
func busDaemon(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Fatalf("dbus-daemon: %v", err)
	}
	sock := filepath.Join(t.TempDir(), "bus")
	cmd := exec.Command("dbus-daemon", "--session", "--nofork", "--nopidfile", "--address=unix:path="+sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return "unix:path=" + sock
		}
		if i == 500 {
			t.Fatal("dbus-daemon never listened")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Connections outlive the context they were dialled under: godbus closes
// one made WithContext when that context ends, and go-systemd's
// NewSystemConnectionContext makes its pair so.
func TestConnectionsOutliveTheirContext(t *testing.T) {
	addr := busDaemon(t)
	for name, open := range map[string]func(context.Context) (alive func() error, err error){
		"Dial": func(ctx context.Context) (func() error, error) {
			c, err := Dial(ctx, addr)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { c.Close() })
			return func() error {
				var id string
				return c.BusObject().Call("org.freedesktop.DBus.GetId", 0).Store(&id)
			}, nil
		},
		"Systemd": func(ctx context.Context) (func() error, error) {
			c, err := Systemd(ctx, addr)
			if err != nil {
				return nil, err
			}
			t.Cleanup(c.Close)
			return func() error {
				if !c.Connected() {
					return errors.New("the pair is closed")
				}
				return nil
			}, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			alive, err := open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			time.Sleep(50 * time.Millisecond)
			if err := alive(); err != nil {
				t.Fatalf("after the dial's context ended: %v", err)
			}
		})
	}
}

// A bus that never answers holds the caller only until its context ends.
func TestDialBoundedByContext(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "silent")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts and says nothing
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for name, dial := range map[string]func(context.Context) error{
		"Dial":    func(ctx context.Context) error { _, err := Dial(ctx, "unix:path="+sock); return err },
		"Systemd": func(ctx context.Context) error { _, err := Systemd(ctx, "unix:path="+sock); return err },
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- dial(ctx) }()
			select {
			case err := <-done:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err = %v, want the context's deadline", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the dial outlived its context")
			}
		})
	}
}
