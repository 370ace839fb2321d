package trampoline

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// TestExecFailureRecorded: a command that cannot be executed leaves the
// exec error (and, where the sandbox is the cause, why) in the exec
// record, on both paths (the direct exec and a granted root's child in
// its user namespace); a command that is exec'd leaves the record empty.
func TestExecFailureRecorded(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the sandbox and the drop need root")
	}
	const tmpWhy = "/tmp is private to each app: put the binary in the data dir or a system path"
	onNodeTmp, err := os.CreateTemp("/tmp", "unitlet-exec-probe")
	if err != nil {
		t.Fatal(err)
	}
	onNodeTmp.Close()
	t.Cleanup(func() { os.Remove(onNodeTmp.Name()) })
	if err := os.Chmod(onNodeTmp.Name(), 0o755); err != nil {
		t.Fatal(err)
	}
	own := 1879048192 + 91
	type got struct {
		Code             int
		Path, Error, Why string
	}
	tests := map[string]struct {
		argv0  func(w string) string // w: the app's data dir
		userns bool
		want   func(argv0 string) got
	}{
		"missing on the node": {
			argv0: func(string) string { return "/srv/unitlet-no-such-command" },
			want: func(a string) got {
				return got{ExitNotFound, a, "no such file or directory", ""}
			},
		},
		"under /tmp, on the node": {
			argv0: func(string) string { return onNodeTmp.Name() },
			want:  func(a string) got { return got{ExitNotFound, a, "no such file or directory", tmpWhy} },
		},
		"under /tmp, granted root": {
			argv0:  func(string) string { return onNodeTmp.Name() },
			userns: true,
			want:   func(a string) got { return got{ExitNotFound, a, "no such file or directory", tmpWhy} },
		},
		"not executable": {
			argv0: func(w string) string {
				p := filepath.Join(w, "app")
				if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			},
			want: func(a string) got { return got{ExitCannotExec, a, "permission denied", ""} },
		},
		"exec'd": {
			argv0: func(string) string { return "/bin/true" },
			want:  func(string) got { return got{} },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			id, owner, userns := launch.Identity{UID: own, GID: own}, own, (*launch.IDMap)(nil)
			if tc.userns {
				id, owner, userns = launch.Identity{}, own+1, &launch.IDMap{UID: own + 1, GID: own + 1}
			}
			w := ownedDir(t, owner)
			argv0 := tc.argv0(w)
			lf := writeLaunch(t, launch.File{Schema: launch.Schema, Argv: []string{argv0}, Identity: id,
				Writable: []string{w}, UserNamespace: userns})
			dir := t.TempDir()
			code, stderr := runExec(t, "--launch", lf, "--exec-record", filepath.Join(dir, "exit.gen.1.exec"))
			rec, err := record.ReadExec(dir, "exit.gen.1.exec")
			if err != nil {
				t.Fatalf("read the record: %v (stderr %q)", err, stderr)
			}
			g := got{Code: code}
			if rec != nil {
				g.Path, g.Error, g.Why = rec.Path, rec.Error, rec.Why
			}
			if d := cmp.Diff(tc.want(argv0), g); d != "" {
				t.Errorf("exit and record (-want,+got):\n%s\nstderr: %s", d, stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "exit.gen.1.exec")); err != nil {
				t.Errorf("no record at all: %v", err)
			}
		})
	}
}

func TestExecWhy(t *testing.T) {
	tests := map[string]struct {
		path   string
		onNode bool
		err    error
		want   string
	}{
		"missing everywhere":            {path: "/srv/x", err: unix.ENOENT},
		"on the node, not in the app":   {path: "/srv/x", onNode: true, err: unix.ENOENT, want: "it exists on the node but not inside the app's sandbox"},
		"under /tmp":                    {path: "/tmp/x", err: unix.ENOENT, want: "/tmp is private to each app: put the binary in the data dir or a system path"},
		"under /var/tmp, uncleaned":     {path: "/var/tmp/../tmp/x", onNode: true, err: unix.ENOENT, want: "/tmp is private to each app: put the binary in the data dir or a system path"},
		"in a home":                     {path: "/home/ann/bin/x", onNode: true, err: unix.ENOENT, want: "home directories are hidden from apps: put the binary in the data dir or a system path"},
		"not executable says it all":    {path: "/tmp/x", onNode: true, err: unix.EACCES},
		"wrapped not found still reads": {path: "/tmp/x", err: errors.Join(unix.ENOENT), want: "/tmp is private to each app: put the binary in the data dir or a system path"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, execWhy(tc.path, tc.onNode, tc.err)); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}
