package control

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Many generations' sockets hold no goroutine each while no app calls;
// each answers as its own generation; Close drops a connection still open.
func TestSocketsShareOneServer(t *testing.T) {
	startInstance(t, "warm", "tok", 1, nil) // the shared server and the loop started
	before := runtime.NumGoroutine()
	const n = 30
	insts := make([]instance, n)
	for i := range n {
		insts[i] = startInstance(t, "web", "tok", int64(i+1), nil)
	}
	if grown := runtime.NumGoroutine() - before; grown > n/10 {
		t.Errorf("%d goroutines more for %d idle control sockets, want (about) none", grown, n)
	}
	for _, i := range []int{0, n - 1} {
		code, body := do(t, insts[i].srv.Path(), http.MethodGet, "/v1/instance", "Bearer tok", "")
		if want := `"generation":` + strconv.Itoa(i+1) + `,`; code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("generation %d answered %d %s, want 200 with %s", i+1, code, body, want)
		}
	}
	c, err := net.Dial("unix", insts[0].srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(100 * time.Millisecond) // handed to the server
	if err := insts[0].srv.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a connection open at Close read data, want it dropped")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("a connection open at Close is still open")
	}
}

// One generation's app holds at most MaxConns connections open: the next
// is closed at once, another generation's socket still answers, and a
// connection closed makes room.
func TestConnectionsBoundedPerGeneration(t *testing.T) {
	greedy := startInstance(t, "greedy", "tok", 1, nil)
	other := startInstance(t, "other", "tok", 1, nil)
	var open []net.Conn
	t.Cleanup(func() {
		for _, c := range open {
			c.Close()
		}
	})
	// Each one answered once is accepted and tracked; its keep-alive
	// holds it open.
	for range MaxConns {
		c, err := net.Dial("unix", greedy.srv.Path())
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		if code := requestOn(t, c); code != http.StatusOK {
			t.Fatalf("connection %d: %d, want 200", len(open), code)
		}
	}
	over, err := net.Dial("unix", greedy.srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	if code := requestOn(t, over); code != 0 {
		t.Errorf("connection %d over the bound answered %d, want closed", MaxConns+1, code)
	}
	if code, _ := do(t, other.srv.Path(), http.MethodGet, "/v1/instance", "Bearer tok", ""); code != http.StatusOK {
		t.Errorf("another generation's socket: %d, want 200", code)
	}
	open[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("unix", greedy.srv.Path())
		if err != nil {
			t.Fatal(err)
		}
		code := requestOn(t, c)
		c.Close()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no room made by a connection closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requestOn sends one GET /v1/instance on c and returns its status code,
// 0 when c was closed without an answer.
func requestOn(t *testing.T, c net.Conn) int {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("GET /v1/instance HTTP/1.1\r\nHost: control\r\nAuthorization: Bearer tok\r\n\r\n")); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("no answer and not closed")
		}
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
