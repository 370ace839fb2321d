package control

import (
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
