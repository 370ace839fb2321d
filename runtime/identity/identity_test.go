package identity

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func etc(t *testing.T) Users {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("passwd", "root:x:0:0:root:/root:/bin/sh\n# a comment\ntoor:x:0:0::/:/bin/sh\nwww-data:x:33:33::/var/www:/usr/sbin/nologin\n"+
		"app:x:1000:1000::/home/app:/bin/sh\nwheel:x:1001:0::/:/bin/sh\nsock:x:1002:999::/:/bin/sh\nsquat:x:5001:100::/:/bin/sh\n")
	write("group", "root:x:0:app\nwww-data:x:33:\nunitlet:x:999:www-data,app\napp:x:1000:\nvideo:x:44:app\ndisk:x:6:app\ninst:x:5002:app\nusers:x:100:\n")
	return Users{Dir: dir}
}

func TestResolve(t *testing.T) {
	rng := Range{First: 5000, Size: 3}
	app := func(groups ...string) Grant { return Grant{User: "app", Groups: groups} }
	cases := map[string]struct {
		user    string
		grant   Grant
		want    Credential
		wantErr error
		why     string // a piece of the error's text
	}{
		"no user: an allocated uid of its own": {want: Credential{UID: 5000, GID: 5000, Groups: []int{5000}}},
		"no user, whatever the grant":          {grant: app("video"), want: Credential{UID: 5000, GID: 5000, Groups: []int{5000}}},
		"a user without a grant":               {user: "app", wantErr: ErrNotGranted},
		"a grant of another user":              {user: "app", grant: Grant{User: "www-data"}, wantErr: ErrNotGranted},
		"an unknown user is not granted first": {user: "ghost", wantErr: ErrNotGranted},
		"a granted user the node lacks":        {user: "ghost", grant: Grant{User: "ghost"}, wantErr: ErrUnknownUser},
		"granted: its primary group only": {user: "app", grant: app(),
			want: Credential{UID: 1000, GID: 1000, Groups: []int{1000}, User: "app"}},
		"granted groups kept, the others dropped": {user: "app", grant: app("disk", "video"),
			want: Credential{UID: 1000, GID: 1000, Groups: []int{1000, 44, 6}, User: "app"}},
		"a granted group the node lacks allows nothing": {user: "app", grant: app("video", "nosuch"),
			want: Credential{UID: 1000, GID: 1000, Groups: []int{1000, 44}, User: "app"}},
		"a granted group the user is not in is not added": {user: "www-data", grant: Grant{User: "www-data", Groups: []string{"video"}},
			want: Credential{UID: 33, GID: 33, Groups: []int{33}, User: "www-data"}},
		"root without a root grant":      {user: "root", grant: Grant{User: "root"}, wantErr: ErrRootRefused},
		"another name for uid 0 refused": {user: "toor", grant: Grant{User: "toor"}, wantErr: ErrRootRefused},
		"root granted keeps gid 0": {user: "root", grant: Grant{User: "root", Root: true},
			want: Credential{UID: 0, GID: 0, Groups: []int{0}, User: "root"}},
		"gid 0 listed is refused": {user: "app", grant: app("root"), wantErr: ErrNeverGranted, why: "gid 0"},
		"gid 0 listed by a root grant is refused": {user: "root", grant: Grant{User: "root", Root: true, Groups: []string{"root"}},
			wantErr: ErrNeverGranted, why: "gid 0"},
		"primary gid 0 of a user not root":   {user: "wheel", grant: Grant{User: "wheel"}, wantErr: ErrNeverGranted, why: "primary group 0"},
		"the socket group listed":            {user: "app", grant: app("unitlet"), wantErr: ErrNeverGranted, why: "--socket-group"},
		"the socket group as primary":        {user: "sock", grant: Grant{User: "sock"}, wantErr: ErrNeverGranted, why: "--socket-group"},
		"a uid of the reserved range":        {user: "squat", grant: Grant{User: "squat"}, wantErr: ErrNeverGranted, why: "--app-ids 5000-5002"},
		"a gid of the reserved range listed": {user: "app", grant: app("inst"), wantErr: ErrNeverGranted, why: "--app-ids"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &Store{Dir: filepath.Join(t.TempDir(), "ids"), Range: rng, Users: etc(t), SocketGID: 999}
			got, err := s.Resolve("ns", "web", tc.user, tc.grant)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.why) {
				t.Errorf("err %q does not say %q", err, tc.why)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("credential (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestAllocationIsStableAcrossRestartsAndReleased(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ids")
	rng := Range{First: 5000, Size: 2}
	s := &Store{Dir: dir, Range: rng}
	uid := func(s *Store, ns, name string) int {
		t.Helper()
		c, err := s.Resolve(ns, name, "", Grant{})
		if err != nil {
			t.Fatal(err)
		}
		return c.UID
	}
	a, b := uid(s, "ns", "a"), uid(s, "ns", "b")
	if a == b {
		t.Fatalf("two Instances share uid %d", a)
	}
	if _, err := s.Resolve("ns", "c", "", Grant{}); !errors.Is(err, ErrRangeFull) {
		t.Fatalf("third Instance in a range of two: err = %v, want ErrRangeFull", err)
	}
	// A new agent reads the claims back: same uids.
	s2 := &Store{Dir: dir, Range: rng}
	if got := uid(s2, "ns", "b"); got != b {
		t.Errorf("after a restart ns/b has uid %d, want %d", got, b)
	}
	if err := s2.Release("ns", "a"); err != nil {
		t.Fatal(err)
	}
	if got := uid(s2, "ns", "c"); got != a {
		t.Errorf("ns/c got %d, want the released %d", got, a)
	}
	if got := uid(&Store{Dir: dir, Range: rng}, "ns", "c"); got != a {
		t.Errorf("ns/c after another restart: %d, want %d", got, a)
	}
}

func TestParseRange(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    Range
		wantErr bool
	}{
		"range":    {in: "100000-165535", want: Range{First: 100000, Size: 65536}},
		"one uid":  {in: "7-7", want: Range{First: 7, Size: 1}},
		"reversed": {in: "9-7", wantErr: true},
		"zero":     {in: "0-10", wantErr: true},
		"garbage":  {in: "lots", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRange(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestUnwrittenClaimsAreFree: a claim created but never written (a crash
// or a full disk between the two) gave its uid to no one; it must not
// keep it, and a failed write must not leave one behind.
func TestUnwrittenClaimsAreFree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ids")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "5000"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Store{Dir: dir, Range: Range{First: 5000, Size: 1}}
	c, err := s.Resolve("ns", "a", "", Grant{})
	if err != nil {
		t.Fatalf("the only uid's claim is empty, yet: %v", err)
	}
	if c.UID != 5000 {
		t.Errorf("uid %d, want 5000", c.UID)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "5000")); err != nil || string(b) != "ns/a\n" {
		t.Errorf("claim holds %q, %v", b, err)
	}
}
