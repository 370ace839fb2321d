package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/instancefs"
)

const tokenKey = "UNITLET_ADMIN_TOKEN"

// instance is one instance's data dir with its env file, and a control
// server for generation gen reading its token from that file.
type instance struct {
	dataDir string
	srv     *Server
}

func writeToken(t *testing.T, dataDir, token string) {
	t.Helper()
	if err := instancefs.WriteEnv(dataDir, "instance.env", map[string]string{tokenKey: token}); err != nil {
		t.Fatal(err)
	}
}

func startInstance(t *testing.T, name, token string, gen int64, fence Fence) instance {
	t.Helper()
	dataDir := t.TempDir()
	writeToken(t, dataDir, token)
	dir := t.TempDir()
	srv, err := Listen(dir, filepath.Join(dir, "app.sock.control"), -1, -1, Config{
		Identity: Identity{Namespace: "ns", Name: name, Host: name + ".example.com", Generation: gen},
		Token: func() (string, error) {
			env, err := instancefs.ReadEnv(dataDir, "instance.env")
			return env[tokenKey], err
		},
		Fence:         fence,
		State:         func() string { return "Running" },
		Dir:           dataDir,
		SchedulesFile: "schedules.json",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return instance{dataDir: dataDir, srv: srv}
}

func do(t *testing.T, sock, method, path, auth, body string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://control"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestControlRefusesWithoutTheInstanceToken(t *testing.T) {
	var fence ServingFence
	fence.Serve(1)
	a := startInstance(t, "a", "token-of-a", 1, fence.For(1))
	startInstance(t, "b", "token-of-b", 1, fence.For(1)) // another instance
	tests := map[string]string{
		"no token":             "",
		"wrong token":          "Bearer not-the-token",
		"other instance token": "Bearer token-of-b",
		"token as basic auth":  "Basic token-of-a",
		"token prefix":         "Bearer token-of",
	}
	for name, auth := range tests {
		t.Run(name, func(t *testing.T) {
			for _, r := range []struct{ method, path string }{{"GET", "/v1/instance"}, {"PUT", "/v1/schedules"}} {
				code, _ := do(t, a.srv.Path(), r.method, r.path, auth, `{"timers":[]}`)
				if code != http.StatusUnauthorized {
					t.Errorf("%s %s: got %d, want 401", r.method, r.path, code)
				}
			}
			if _, err := os.Stat(filepath.Join(a.dataDir, "schedules.json")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("schedules written without the token: %v", err)
			}
		})
	}
}

func TestControlEmptyTokenAdmitsNoOne(t *testing.T) {
	a := startInstance(t, "a", "", 1, nil)
	if code, _ := do(t, a.srv.Path(), "GET", "/v1/instance", "Bearer ", ""); code != http.StatusUnauthorized {
		t.Fatalf("got %d, want 401", code)
	}
}

func TestControlTokenRereadPerRequest(t *testing.T) {
	a := startInstance(t, "a", "old-token", 1, nil)
	if code, _ := do(t, a.srv.Path(), "GET", "/v1/instance", "Bearer old-token", ""); code != http.StatusOK {
		t.Fatalf("old token before rotation: %d", code)
	}
	writeToken(t, a.dataDir, "new-token")
	if code, _ := do(t, a.srv.Path(), "GET", "/v1/instance", "Bearer old-token", ""); code != http.StatusUnauthorized {
		t.Errorf("old token after rotation: got %d, want 401", code)
	}
	if code, _ := do(t, a.srv.Path(), "GET", "/v1/instance", "Bearer new-token", ""); code != http.StatusOK {
		t.Errorf("new token after rotation: got %d, want 200", code)
	}
}

func TestControlGetInstance(t *testing.T) {
	a := startInstance(t, "a", "tok", 4, nil)
	code, body := do(t, a.srv.Path(), "GET", "/v1/instance", "Bearer tok", "")
	if code != http.StatusOK {
		t.Fatalf("got %d %s", code, body)
	}
	var got InstanceReply
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := InstanceReply{Identity: Identity{Namespace: "ns", Name: "a", Host: "a.example.com", Generation: 4}, State: "Running"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

func TestRetiringGenerationWriteIs409(t *testing.T) {
	var fence ServingFence
	fence.Serve(1)
	dataDir := t.TempDir()
	writeToken(t, dataDir, "tok")
	servers := map[int64]*Server{}
	for _, gen := range []int64{1, 2} {
		dir := t.TempDir()
		srv, err := Listen(dir, filepath.Join(dir, "app.sock.control"), -1, -1, Config{
			Identity: Identity{Namespace: "ns", Name: "a", Generation: gen},
			Token: func() (string, error) {
				env, err := instancefs.ReadEnv(dataDir, "instance.env")
				return env[tokenKey], err
			},
			Fence: fence.For(gen),
			Dir:   dataDir, SchedulesFile: "schedules.json",
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		servers[gen] = srv
	}
	fence.Serve(2) // the swap: g2 serves, g1 retires
	code, body := do(t, servers[1].Path(), "PUT", "/v1/schedules", "Bearer tok", `{"from":"g1"}`)
	if code != http.StatusConflict || !strings.Contains(body, "retiring") {
		t.Fatalf("retiring g1 write: got %d %s, want 409 with a reason", code, body)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "schedules.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("retiring generation's write landed: %v", err)
	}
	if code, body := do(t, servers[2].Path(), "PUT", "/v1/schedules", "Bearer tok", `{"from":"g2"}`); code != http.StatusNoContent {
		t.Fatalf("serving g2 write: got %d %s", code, body)
	}
	got, err := instancefs.ReadFile(dataDir, "schedules.json")
	if err != nil || string(got) != `{"from":"g2"}` {
		t.Fatalf("stored %q, %v", got, err)
	}
}

func TestSchedulesBadBody(t *testing.T) {
	var fence ServingFence
	fence.Serve(1)
	a := startInstance(t, "a", "tok", 1, fence.For(1))
	tests := map[string]struct {
		body string
		want int
	}{
		"not json": {"timers: []", http.StatusBadRequest},
		"too big":  {`"` + strings.Repeat("x", MaxBody) + `"`, http.StatusRequestEntityTooLarge},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if code, body := do(t, a.srv.Path(), "PUT", "/v1/schedules", "Bearer tok", tc.body); code != tc.want {
				t.Fatalf("got %d %s, want %d", code, body, tc.want)
			}
		})
	}
}

func TestSchedulesNotWrittenThroughSymlink(t *testing.T) {
	var fence ServingFence
	fence.Serve(1)
	a := startInstance(t, "a", "tok", 1, fence.For(1))
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(a.dataDir, "schedules.json")); err != nil {
		t.Fatal(err)
	}
	if code, body := do(t, a.srv.Path(), "PUT", "/v1/schedules", "Bearer tok", `{}`); code != http.StatusNoContent {
		t.Fatalf("got %d %s", code, body)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Fatalf("file outside written: %q", b)
	}
}

// A symlink the app swaps in over the control socket's path while the
// agent sets the socket up never makes the agent chmod or chown the
// link's target (a file outside the dir).
func TestListenNeverFollowsASwappedLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the chown to the app's user needs it")
	}
	stage, gen := t.TempDir(), t.TempDir()
	target := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(gen, "app.sock.control")
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = os.Symlink(target, path+".swap")
		for !done.Load() { // swap each socket that shows for a link
			if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
				_ = os.Rename(path+".swap", path)
				_ = os.Symlink(target, path+".swap")
			}
		}
	}()
	for range 2000 {
		if srv, err := Listen(stage, path, 4242, 4242, Config{Token: func() (string, error) { return "", nil }}); err == nil {
			srv.Close()
		}
	}
	done.Store(true)
	wg.Wait()
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o600 || st.Uid != 0 || st.Gid != 0 {
		t.Fatalf("the link's target became mode %o owner %d:%d, want 600 and 0:0", st.Mode&0o7777, st.Uid, st.Gid)
	}
}

// The socket gets its owner and mode, at its path.
func TestListenSetsOwnerAndMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the chown to the app's user needs it")
	}
	stage, gen := t.TempDir(), t.TempDir()
	path := filepath.Join(gen, "app.sock.control")
	srv, err := Listen(stage, path, 4242, 4243, Config{Token: func() (string, error) { return "", nil }})
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	got := []uint32{st.Mode & unix.S_IFMT, st.Mode & 0o7777, st.Uid, st.Gid}
	if d := cmp.Diff([]uint32{unix.S_IFSOCK, 0o660, 4242, 4243}, got); d != "" {
		t.Errorf("type, mode, owner (-want,+got):\n%s", d)
	}
	if ents, _ := os.ReadDir(stage); len(ents) != 0 {
		t.Errorf("left in the stage: %v", ents)
	}
	srv.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close: %v, want the socket gone", err)
	}
}
