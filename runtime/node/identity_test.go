package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// procUIDs is the Uid: line of /proc/<pid>/status: real, effective,
// saved and file-system uid.
func procUIDs(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("no Uid: in /proc/%d/status", pid)
	return nil
}

// Without a user every Instance runs as a uid of its own, never root: it
// owns its data dir, binds its socket there, and cannot read another
// Instance's data dir. uid 0 is refused unless allowed.
func TestInstancesRunAsUidsOfTheirOwn(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	uids := map[string]int{}
	for _, name := range []string{"ida", "idb"} {
		r := e.appRequest(name, 1)
		e.retireAtEnd(t, r.Ref)
		res := e.node.Start(ctx, r)
		if res.Start.Kind != outcome.Running {
			t.Fatalf("%s: %v (%v)", name, res.Start.Kind, res.Start.Cause)
		}
		waitReady(ctx, t, e.node, r.Ref) // it bound its socket
		ids := procUIDs(t, res.Start.MainPID)
		var uid int
		fmt.Sscan(ids[0], &uid)
		if strings.Join(ids, " ") != strings.Repeat(ids[0]+" ", 3)+ids[0] || !identity.DefaultRange.Contains(uid) {
			t.Errorf("%s runs as uids %v, want one uid of %s", name, ids, identity.DefaultRange)
		}
		li, _ := e.lay.Instance("default", name)
		var st unix.Stat_t
		if err := unix.Stat(li.DataDir(), &st); err != nil || int(st.Uid) != uid || st.Mode&0o777 != 0o700 {
			t.Errorf("%s: data dir uid %d mode %o (%v), want %d 0700", name, st.Uid, st.Mode&0o777, err, uid)
		}
		uids[name] = uid
	}
	if uids["ida"] == uids["idb"] {
		t.Fatalf("two Instances share uid %d", uids["ida"])
	}

	other, _ := e.lay.Instance("default", "idb")
	probe := e.appRequest("ida", 2)
	probe.Command, probe.Args = []string{"/bin/sh", "-c", `touch "$UNITLET_DATA_DIR/mine" && echo wrote-own; ls ` + other.DataDir() + ` 2>&1 | grep -oE 'Permission denied|No such file' | sed 's/.*/cannot-list/'; echo done`}, nil
	e.retireAtEnd(t, probe.Ref)
	if res := e.node.Start(ctx, probe); res.Start.Kind == outcome.NotStarted {
		t.Fatalf("probe: %v", res.Start.Cause)
	}
	li, _ := e.lay.Instance("default", "ida")
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(out, "done"); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(li.LogFile())
		out = string(b)
	}
	// Permission denied, or not there at all where the test's state root
	// is below /dev (a sandbox's /dev is private).
	for _, want := range []string{"wrote-own", "cannot-list", "done"} {
		if !strings.Contains(out, want) {
			t.Errorf("probe output lacks %q:\n%s", want, out)
		}
	}

	root := e.appRequest("ida", 3)
	root.User = "root"
	if res := e.node.Start(ctx, root); res.Start.Kind != outcome.NotStarted || !errors.Is(res.Start.Cause, identity.ErrNotGranted) {
		t.Errorf("user root: %v (%v), want NotStarted with ErrNotGranted", res.Start.Kind, res.Start.Cause)
	}
	// Granted, root is uid 0 in a user namespace whose 0 is ida's own uid.
	root.Grant = identity.Grant{User: "root", Root: true}
	e.retireAtEnd(t, root.Ref)
	if res := e.node.Start(ctx, root); res.Start.Kind == outcome.NotStarted {
		t.Fatalf("granted root: %v", res.Start.Cause)
	}
	g3, _ := li.Generation(3)
	lf, err := launch.Read(li.PrivateDir(), g3.LaunchFile())
	if err != nil {
		t.Fatal(err)
	}
	want := &launch.IDMap{UID: uids["ida"], GID: uids["ida"]}
	if d := cmp.Diff(want, lf.UserNamespace); d != "" || lf.Identity.UID != 0 || lf.Identity.User != "root" {
		t.Errorf("granted root's launch: identity %+v, user namespace (-want,+got):\n%s", lf.Identity, d)
	}
}
