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
	"testing"

	"github.com/google/go-cmp/cmp"
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

func startInstance(t *testing.T, name, token string, gen uint64, fence Fence) instance {
	t.Helper()
	dataDir := t.TempDir()
	writeToken(t, dataDir, token)
	srv, err := Listen(filepath.Join(t.TempDir(), "app.sock.control"), Config{
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
	servers := map[uint64]*Server{}
	for _, gen := range []uint64{1, 2} {
		srv, err := Listen(filepath.Join(t.TempDir(), "app.sock.control"), Config{
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
