package prepare

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/control"
	"github.com/unitlet/unitlet/runtime/instancefs"
	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/logs"
)

const nobody = 65534 // uid of nobody and gid of nogroup on Debian

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: prepare chowns directories and sockets")
	}
}

type fixture struct {
	inst  layout.Instance
	file  *logs.RotatingFile
	fence *control.ServingFence
}

// The run root is short (sun_path): directly in the temp dir.
func newFixture(t testing.TB) fixture { return newFixtureAt(t, os.TempDir()) }

// newFixtureAt is newFixture with the run root in runParent.
func newFixtureAt(t testing.TB, runParent string) fixture {
	t.Helper()
	needRoot(t)
	runRoot, err := os.MkdirTemp(runParent, "ulrun")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runRoot) })
	l := layout.Layout{StateRoot: t.TempDir(), RunRoot: runRoot, CgroupRoot: "unitlet-test"}
	inst, err := l.Instance("ns", "web")
	if err != nil {
		t.Fatal(err)
	}
	file, err := logs.OpenRotating(inst.LogFile(), 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	fence := &control.ServingFence{}
	fence.Serve(1)
	return fixture{inst: inst, file: file, fence: fence}
}

func (f fixture) request(role layout.Role, gen int64) Request {
	return Request{
		Instance: f.inst, Host: "shop.example.com", Role: role, Generation: gen,
		SocketGID: nobody, App: launch.Identity{UID: nobody, GID: nobody},
		SpecEnv: map[string]string{"A": "spec", "B": "spec", "UNITLET_GENERATION": "spoofed"},
		RefEnv:  map[string]string{"B": "refs", "C": "refs"},
		Fence:   f.fence.For(gen), LogFile: f.file,
	}
}

func prepareOK(t testing.TB, req Request) *Result {
	t.Helper()
	res, err := Prepare(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })
	return res
}

func TestPrepareRunRole(t *testing.T) {
	f := newFixture(t)
	res := prepareOK(t, f.request(layout.RoleApp, 1))
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0].Error(), "UNITLET_GENERATION from layer spec ignored") {
		t.Fatalf("warnings: %v, want one for the spoofed UNITLET_GENERATION", res.Warnings)
	}
	genDir, _ := f.inst.GenDir(1)
	type owned struct {
		Mode     os.FileMode
		UID, GID uint32
	}
	got := map[string]owned{}
	for _, p := range []string{f.inst.PrivateDir(), f.inst.DataDir(), f.inst.RunDir(), f.inst.LogDir(), genDir, f.inst.EnvFile()} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		got[p] = owned{os.FileMode(st.Mode & 0o7777), st.Uid, st.Gid}
	}
	want := map[string]owned{
		f.inst.PrivateDir(): {0o700, 0, 0},
		f.inst.DataDir():    {0o700, nobody, nobody},
		f.inst.RunDir():     {0o2711, 0, nobody},
		f.inst.LogDir():     {0o700, 0, nobody}, // group inherited from the setgid run dir; mode gives it nothing
		genDir:              {0o2750, nobody, nobody},
		f.inst.EnvFile():    {0o600, 0, 0},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("owners and modes (-want,+got):\n%s", d)
	}

	token := res.Env[EnvAdminToken]
	if b, err := hex.DecodeString(token); err != nil || len(b) != 32 {
		t.Fatalf("admin token %d chars, want 64 hex", len(token))
	}
	app, _ := f.inst.AppSocket(1)
	wantEnv := map[string]string{
		"A": "spec", "B": "refs", "C": "refs",
		EnvAdminToken: token, EnvGeneration: "1", EnvAppSocket: app, EnvControlSocket: app + ".control",
		EnvNamespace: "ns", EnvName: "web", EnvHost: "shop.example.com", EnvRole: "run", EnvDataDir: f.inst.DataDir(),
	}
	if d := cmp.Diff(wantEnv, res.Env); d != "" {
		t.Errorf("env (-want,+got):\n%s", d)
	}
	wantLayers := map[string]Layer{"A": LayerSpec, "B": LayerRefs, "C": LayerRefs}
	for k := range wantEnv {
		if strings.HasPrefix(k, "UNITLET_") {
			wantLayers[k] = LayerPlatform
		}
	}
	if d := cmp.Diff(wantLayers, res.Layers); d != "" {
		t.Errorf("layers (-want,+got):\n%s", d)
	}

	var names []string
	for _, s := range res.Timings.Steps {
		names = append(names, s.Name)
	}
	if d := cmp.Diff([]string{StepDirs, StepAdminToken, StepEnv, StepExitRecords, StepAppSocket, StepControlSocket, StepLogs}, names); d != "" {
		t.Errorf("steps (-want,+got):\n%s", d)
	}
	if kv := res.Timings.KeysAndValues(); len(kv) != 2*len(names)+2 {
		t.Errorf("KeysAndValues has %d entries", len(kv))
	}

	// The listeners are live: the control socket answers with the token,
	// and a line written to the log socket reaches the file.
	if code := controlGet(t, res.Control.Path(), token); code != http.StatusOK {
		t.Errorf("control GET: %d", code)
	}
	c, err := net.Dial("unix", res.Logs.Path())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hello from g1\n"))
	c.Close()
	waitFor(t, func() bool {
		b, _ := os.ReadFile(f.file.Path())
		return bytes.Contains(b, []byte("g1 hello from g1"))
	})
}

func controlGet(t *testing.T, sock, token string) int {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://control/v1/instance", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
	}
}

func TestAdminTokenMintedOnce(t *testing.T) {
	f := newFixture(t)
	first := prepareOK(t, f.request(layout.RoleSeed, 0))
	first.Close()
	second := prepareOK(t, f.request(layout.RoleApp, 1))
	if first.Env[EnvAdminToken] != second.Env[EnvAdminToken] {
		t.Fatal("token minted again")
	}
	env, err := instancefs.ReadEnv(f.inst.PrivateDir(), layout.EnvFileName)
	if err != nil || env[EnvAdminToken] != second.Env[EnvAdminToken] {
		t.Fatalf("env file token differs: %v", err)
	}
	for _, w := range second.Warnings {
		if strings.Contains(w.Error(), env[EnvAdminToken]) {
			t.Error("token appears in a warning")
		}
	}
}

// Seed and sidecars get no app or control socket; a sidecar gets no
// admin token either (the seed, which sets the app up, does).
func TestSeedAndSidecarGetNoControlOrAppSocket(t *testing.T) {
	f := newFixture(t)
	for _, role := range []layout.Role{layout.RoleSeed, layout.RoleSidecar} {
		req := f.request(role, 0)
		if role == layout.RoleSidecar {
			req.Name = "side"
		}
		res := prepareOK(t, req)
		if res.Control != nil || res.Logs == nil {
			t.Errorf("%s: control %v, logs %v", role, res.Control, res.Logs)
		}
		for _, k := range []string{EnvAppSocket, EnvControlSocket, EnvGeneration} {
			if _, ok := res.Env[k]; ok {
				t.Errorf("%s: env has %s", role, k)
			}
		}
		if _, ok := res.Env[EnvAdminToken]; ok != (role == layout.RoleSeed) {
			t.Errorf("%s: admin token in env %v, want %v", role, ok, role == layout.RoleSeed)
		}
	}
}

func TestCmdRoleTakesGenerationLaunchEnv(t *testing.T) {
	f := newFixture(t)
	run := prepareOK(t, f.request(layout.RoleApp, 2))
	if err := run.WriteLaunch("shop.example.com", []string{"/bin/app", "--listen", "$(UNITLET_APP_SOCKET)", "$$(A)"}, ""); err != nil {
		t.Fatal(err)
	}
	lf, err := launch.Read(f.inst.PrivateDir(), "launch.gen.2.json")
	if err != nil {
		t.Fatal(err)
	}
	app, _ := f.inst.AppSocket(2)
	if d := cmp.Diff([]string{"/bin/app", "--listen", app, "$(A)"}, lf.Argv); d != "" {
		t.Errorf("argv (-want,+got):\n%s", d)
	}
	wantID := launch.Identity{UID: nobody, GID: nobody}
	if d := cmp.Diff(wantID, lf.Identity); d != "" {
		t.Errorf("identity (-want,+got):\n%s", d)
	}
	if d := cmp.Diff([]string{f.inst.DataDir(), f.inst.RunDir()}, lf.Writable); d != "" {
		t.Errorf("writable (-want,+got):\n%s", d)
	}
	// The env file is now unreadable: a cmd must not read it.
	if err := os.WriteFile(f.inst.EnvFile(), []byte("not an env file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	req := f.request(layout.RoleCommand, 2)
	req.Name = "run-1"
	res := prepareOK(t, req)
	want := maps.Clone(run.Env)
	want[EnvRole] = "cmd"
	if d := cmp.Diff(want, res.Env); d != "" {
		t.Errorf("cmd env (-gen,+cmd):\n%s", d)
	}
	for k, l := range res.Layers {
		if l != LayerLaunch && k != EnvRole {
			t.Errorf("layer of %s: %s", k, l)
		}
	}
	if res.Logs != nil || res.Control != nil {
		t.Error("cmd got listeners")
	}
}

func TestEnvFileSymlinkRefused(t *testing.T) {
	f := newFixture(t)
	shadow := filepath.Join(t.TempDir(), "shadow")
	secret := []byte("root:$6$hash:19000:0:99999:7:::\n")
	if err := os.WriteFile(shadow, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(f.inst.PrivateDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shadow, f.inst.EnvFile()); err != nil {
		t.Fatal(err)
	}
	_, err := Prepare(f.request(layout.RoleApp, 1))
	if !errors.Is(err, instancefs.ErrSymlink) {
		t.Fatalf("got %v, want ErrSymlink", err)
	}
	if b, _ := os.ReadFile(shadow); !bytes.Equal(b, secret) {
		t.Fatal("file outside changed")
	}
	assertNoListeners(t, f, 1)
}

// An agent that kept the token in the data dir handed it to the
// generations it started: the token moves to the private dir, the same.
func TestAdminTokenMovedFromTheDataDir(t *testing.T) {
	f := newFixture(t)
	if err := os.MkdirAll(f.inst.DataDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	old := strings.Repeat("ab", 32)
	if err := os.WriteFile(filepath.Join(f.inst.DataDir(), layout.EnvFileName), []byte(EnvAdminToken+"="+old+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := prepareOK(t, f.request(layout.RoleApp, 1))
	if res.Env[EnvAdminToken] != old {
		t.Errorf("token %q, want the old one", res.Env[EnvAdminToken])
	}
	if _, err := os.Lstat(filepath.Join(f.inst.DataDir(), layout.EnvFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old env file is still in the data dir: %v", err)
	}
}

func TestEnvFileTooLarge(t *testing.T) {
	f := newFixture(t)
	if err := os.MkdirAll(f.inst.PrivateDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("K=v\n"), instancefs.DefaultReadLimit/4+1)
	if err := os.WriteFile(f.inst.EnvFile(), big, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(f.request(layout.RoleApp, 1)); !errors.Is(err, instancefs.ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	assertNoListeners(t, f, 1)
}

func TestMalformedEnvFileNamesLine(t *testing.T) {
	f := newFixture(t)
	if err := os.MkdirAll(f.inst.PrivateDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.inst.EnvFile(), []byte("A=1\n# ok\nnot a pair\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Prepare(f.request(layout.RoleApp, 1))
	var le *instancefs.EnvLineError
	if !errors.As(err, &le) || le.Line != 3 {
		t.Fatalf("got %v, want an error naming line 3", err)
	}
}

// assertNoListeners: after a failed prepare no socket of generation gen
// is left bound.
func assertNoListeners(t *testing.T, f fixture, gen int64) {
	t.Helper()
	p, _ := f.inst.Generation(gen)
	app, _ := f.inst.AppSocket(gen)
	for _, s := range []string{p.LogSocket(), layout.ControlSocket(app)} {
		if _, err := os.Lstat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", s, err)
		}
	}
}

// A data dir an agent that ran apps as root made is handed over whole to
// the Instance's user; a link the tenant planted is changed, never what
// it points at.
func TestDataDirHandedOverToTheApp(t *testing.T) {
	f := newFixture(t)
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(f.inst.DataDir(), "db", "wal")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "000001"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.inst.DataDir(), "link")); err != nil {
		t.Fatal(err)
	}
	prepareOK(t, f.request(layout.RoleApp, 1))
	for _, p := range []string{"db", "db/wal", "db/wal/000001", "link"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(f.inst.DataDir(), p), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != nobody || st.Gid != nobody {
			t.Errorf("%s owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, nobody, nobody)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(outside, &st); err != nil || st.Uid != 0 {
		t.Errorf("the link's target was changed: uid %d, %v", st.Uid, err)
	}
}

// The launch file says what the process may not reach and whose user
// namespace it runs in: the metadata service denied unless allowed; a
// granted root as uid 0 mapped to the identity that owns the files.
func TestLaunchFileWorld(t *testing.T) {
	tests := map[string]struct {
		allowMetadata, rootInUserNS bool
		wantDeny                    []string
		wantID                      launch.Identity
		wantUserNS                  *launch.IDMap
	}{
		"default":                     {wantDeny: []string{"169.254.169.254", "fd00:ec2::254"}, wantID: launch.Identity{UID: nobody, GID: nobody}},
		"metadata allowed by a grant": {allowMetadata: true, wantID: launch.Identity{UID: nobody, GID: nobody}},
		"granted root": {rootInUserNS: true, wantDeny: []string{"169.254.169.254", "fd00:ec2::254"},
			wantUserNS: &launch.IDMap{UID: nobody, GID: nobody}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			req := f.request(layout.RoleApp, 1)
			req.AllowMetadata, req.RootInUserNamespace = tc.allowMetadata, tc.rootInUserNS
			res := prepareOK(t, req)
			if err := res.WriteLaunch("shop.example.com", []string{"/bin/app"}, ""); err != nil {
				t.Fatal(err)
			}
			lf, err := launch.Read(f.inst.PrivateDir(), "launch.gen.1.json")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.wantDeny, lf.NetworkDeny); d != "" {
				t.Errorf("networkDeny (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantID, lf.Identity); d != "" {
				t.Errorf("identity (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantUserNS, lf.UserNamespace); d != "" {
				t.Errorf("userNamespace (-want,+got):\n%s", d)
			}
		})
	}
}

func TestInstanceKeyInEveryRole(t *testing.T) {
	f := newFixture(t)
	tests := map[string]struct {
		role layout.Role
		gen  int64
		key  string
		want map[string]Layer
	}{
		"app":             {role: layout.RoleApp, gen: 1, key: "k", want: map[string]Layer{"k": LayerPlatform}},
		"seed":            {role: layout.RoleSeed, key: "k", want: map[string]Layer{"k": LayerPlatform}},
		"sidecar":         {role: layout.RoleSidecar, key: "k", want: map[string]Layer{"k": LayerPlatform}},
		"no key: no var":  {role: layout.RoleApp, gen: 2, want: map[string]Layer{}},
		"no key, sidecar": {role: layout.RoleSidecar, want: map[string]Layer{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := f.request(tc.role, tc.gen)
			if tc.role == layout.RoleSidecar {
				req.Name = "side"
			}
			req.InstanceKey = tc.key
			// A user's forged value is never what the process gets.
			req.RefEnv = map[string]string{EnvInstanceKey: "forged"}
			req.SpecEnv = map[string]string{EnvInstanceKey: "forged"}
			res := prepareOK(t, req)
			got := map[string]Layer{}
			if v, ok := res.Env[EnvInstanceKey]; ok {
				got[v] = res.Layers[EnvInstanceKey]
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("key in env (-want,+got):\n%s", d)
			}
		})
	}
}

// The instance key is in no file on the node's disk: the launch file
// (private dir, on disk) names a memory env file in the run dir (memory)
// that holds it, root's alone; argv never expands it.
func TestInstanceKeyNeverOnDisk(t *testing.T) {
	f := newFixture(t)
	req := f.request(layout.RoleApp, 1)
	req.InstanceKey = "s3cr3t-instance-key"
	res := prepareOK(t, req)
	if err := res.WriteLaunch("shop.example.com", []string{"/bin/app", "--key=$(UNITLET_INSTANCE_KEY)"}, ""); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(f.inst.PrivateDir(), "launch.gen.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), req.InstanceKey) {
		t.Errorf("the launch file holds the key: %s", raw)
	}
	lf, err := launch.Read(f.inst.PrivateDir(), "launch.gen.1.json")
	if err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(f.inst.RunDir(), "memenv.gen.1")
	st, err := os.Stat(mem)
	if err != nil {
		t.Fatal(err)
	}
	full, err := lf.WithMemoryEnv()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{"memoryEnv": lf.MemoryEnv, "mode": st.Mode().Perm(), "argv": lf.Argv,
		"key at exec": full.EnvMap()[EnvInstanceKey], "key in the file's env": lf.EnvMap()[EnvInstanceKey]}
	want := map[string]any{"memoryEnv": mem, "mode": os.FileMode(0o600), "argv": []string{"/bin/app", "--key=$(UNITLET_INSTANCE_KEY)"},
		"key at exec": req.InstanceKey, "key in the file's env": ""}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}
