package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/layout/layouttest"
	"github.com/unitlet/unitlet/runtime/prepare"
	"github.com/unitlet/unitlet/runtime/trampoline"
	"github.com/unitlet/unitlet/runtime/units"
	"github.com/unitlet/unitlet/runtime/units/shim"
)

// TestMain lets the test binary be the unitlet binary (the real "shim"
// and "exec" Mains, as main.go wires them) and the app it runs: "app"
// serves HTTP on its app socket and answers with its generation.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "shim":
			os.Exit(shim.Main(os.Args[2:]))
		case "exec":
			os.Exit(trampoline.Main(os.Args[2:], os.Stderr))
		case trampoline.InnerFlag: // a granted root's app, in its user namespace
			os.Exit(trampoline.Main(os.Args[1:], os.Stderr))
		case "app":
			os.Exit(appMain())
		}
	}
	if os.Geteuid() == 0 {
		layouttest.SweepOld(testPrefix)
	}
	os.Exit(m.Run())
}

// appMain serves "g<n>" on every path until SIGTERM.
func appMain() int {
	sock := os.Getenv(prepare.EnvAppSocket)
	l, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		return 3
	}
	// The generation comes from argv, so an answer proves $(VAR) expansion.
	gen := strings.TrimPrefix(os.Args[len(os.Args)-1], "--gen=")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "g%s", gen)
	})}
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		<-ch
		_ = srv.Close()
	}()
	fmt.Println("app serving", sock)
	_ = srv.Serve(l)
	return 0
}

// testPrefix names every cgroup root and run root these tests create.
const testPrefix = "unitlet-test-node-"

// env is one test's node: its own roots, cgroup root and Direct backend,
// everything removed (processes killed) at the end.
type env struct {
	lay    layout.Layout
	direct *units.Direct
	node   *Node
	exe    string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{exe: layouttest.Exe(t, testPrefix)}
	// Registered first, so it runs after the roots' sweep.
	t.Cleanup(func() {
		if e.node != nil {
			_ = e.node.Close()
		}
	})
	e.lay = layouttest.New(t, testPrefix)
	e.node, e.direct = e.newNode(t)
	return e
}

// newNode is a Node with a Direct backend of its own over the env's roots:
// the env's first one, or a second, as an agent restart would make.
func (e *env) newNode(t testing.TB) (*Node, *units.Direct) {
	t.Helper()
	log := testr.NewWithInterface(t, testr.Options{})
	d, err := units.NewDirect(units.DirectConfig{Layout: e.lay, Exe: e.exe, ProofBudget: 10 * time.Second, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Layout: e.lay, Backend: d, SocketGID: -1, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return n, d
}

// appRequest is generation n of the test app in instance ns/name.
func (e *env) appRequest(name string, n int64) StartRequest {
	return StartRequest{
		Ref: GenerationRef("default", name, n), Host: name + ".example",
		Command: []string{e.exe}, Args: []string{"app", "--gen=$(UNITLET_GENERATION)"},
		SpecEnv: map[string]string{"GREETING": "hi"},
		Tier:    cgroups.Tier{MemoryBytes: 256 << 20, Pids: 64},
		Parent:  cgroups.Tier{MemoryBytes: 256 << 20, Pids: 64},
		Grace:   2 * time.Second,
	}
}

// waitReady probes ref until it answers or ctx ends.
func waitReady(ctx context.Context, t testing.TB, n *Node, ref Ref) {
	t.Helper()
	for {
		err := n.Probe(ctx, ref, Readiness{HTTPPath: "/ready", Timeout: time.Second})
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%v never ready: %v", ref, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// get issues one GET over sock on a fresh connection.
func get(ctx context.Context, sock string) (string, error) {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/", nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b := make([]byte, 64)
	k, _ := resp.Body.Read(b)
	return string(b[:k]), nil
}

// retire retires ref at the end of a test, whatever happened.
func (e *env) retireAtEnd(t testing.TB, ref Ref) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if k := e.node.Retire(ctx, ref, time.Second); !k.Proven {
			t.Errorf("cleanup: %v not proven gone: %v", ref, k.Err())
		}
	})
}
