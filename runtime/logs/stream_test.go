package logs

import (
	"bytes"
	"net"
	"path/filepath"
	"testing"
)

// A writer that connected, wrote and went away before any accept still
// reaches the caller: Close accepts what is queued before it stops.
func TestStreamCopiesQueuedConnections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.sock")
	a, err := listenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	s := &Stream{acceptor: a, w: &got}
	s.serve = s.copy // no accept loop: every connection stays queued
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("queued")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got.String() != "queued" {
		t.Errorf("copied %q, want the queued writer's bytes", got.String())
	}
}

// A stream copies, as written, what a connected writer sends.
func TestStreamCopies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.sock")
	var got bytes.Buffer
	s, err := ListenStream(path, &got)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("no newline\x00binary")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got.String() != "no newline\x00binary" {
		t.Errorf("copied %q", got.String())
	}
}
