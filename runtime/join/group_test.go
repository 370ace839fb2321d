package join

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// groupDB is a node's /etc with a few groups, 998 taken.
func groupDB(t *testing.T) GroupDB {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("group", "root:x:0:\nwww-data:x:33:\nsystemd-journal:x:999:\nsshd:x:998:\n", 0o644)
	write("gshadow", "root:*::\nwww-data:*::\n", 0o640)
	return GroupDB{Dir: dir}
}

func TestResolveGroup(t *testing.T) {
	db := groupDB(t)
	tests := map[string]struct {
		spec    string
		want    int
		wantErr string
	}{
		"a name":         {spec: "www-data", want: 33},
		"a numeric gid":  {spec: "4242", want: 4242},
		"an unknown one": {spec: "unitlet", want: -1, wantErr: "pass --socket-group=<gid>"},
		"a negative gid": {spec: "-3", want: -1, wantErr: "negative"},
		"none":           {spec: "", want: -1, wantErr: "no socket group"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := db.Resolve(tc.spec)
			if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Resolve(%q) = %d, %v; want %d, error with %q", tc.spec, got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := (GroupDB{Dir: t.TempDir()}).Resolve("unitlet"); err == nil || !strings.Contains(err.Error(), "group database") {
		t.Errorf("no group file: %v", err)
	}
}

// Ensure adds a missing group as a system group (the highest free gid),
// to group and gshadow, keeping their modes; an existing group and a gid
// are left alone.
func TestEnsureGroup(t *testing.T) {
	db := groupDB(t)
	for spec, want := range map[string]int{"www-data": 33, "4242": 4242} {
		if gid, err := db.Ensure(spec); err != nil || gid != want {
			t.Errorf("Ensure(%q) = %d, %v; want %d", spec, gid, err, want)
		}
	}
	gid, err := db.Ensure("unitlet")
	if err != nil || gid != 997 {
		t.Fatalf("Ensure(unitlet) = %d, %v; want 997", gid, err)
	}
	if again, err := db.Ensure("unitlet"); err != nil || again != gid {
		t.Errorf("Ensure again = %d, %v", again, err)
	}
	for file, want := range map[string]string{
		"group":   "root:x:0:\nwww-data:x:33:\nsystemd-journal:x:999:\nsshd:x:998:\nunitlet:x:997:\n",
		"gshadow": "root:*::\nwww-data:*::\nunitlet:!::\n",
	} {
		b, _ := os.ReadFile(filepath.Join(db.Dir, file))
		if diff := cmp.Diff(want, string(b)); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", file, diff)
		}
	}
	if fi, _ := os.Stat(filepath.Join(db.Dir, "gshadow")); fi.Mode().Perm() != 0o640 {
		t.Errorf("gshadow mode %v", fi.Mode())
	}
}

// Another process that holds the database's lock (as groupadd would) is
// waited for.
func TestEnsureGroupWaitsForTheLock(t *testing.T) {
	db := groupDB(t)
	holder := exec.Command("python3", "-c", `import fcntl, sys, time
f = open(sys.argv[1], "w"); fcntl.lockf(f, fcntl.LOCK_EX); print("locked", flush=True); time.sleep(1)`,
		filepath.Join(db.Dir, ".pwd.lock"))
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Wait() }()
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := db.Ensure("unitlet"); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Errorf("Ensure returned after %s while another process held the lock", waited)
	}
}
