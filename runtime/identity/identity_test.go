package identity

import (
	"errors"
	"os"
	"path/filepath"
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
	write("passwd", "root:x:0:0:root:/root:/bin/sh\n# a comment\ntoor:x:0:0::/:/bin/sh\nwww-data:x:33:33::/var/www:/usr/sbin/nologin\napp:x:1000:1000::/home/app:/bin/sh\n")
	write("group", "root:x:0:\nwww-data:x:33:\nunitlet:x:999:www-data,app\napp:x:1000:\nvideo:x:44:app\n")
	return Users{Dir: dir}
}

func TestResolve(t *testing.T) {
	rng := Range{First: 5000, Size: 3}
	cases := map[string]struct {
		user      string
		allowRoot bool
		want      Credential
		wantErr   error
	}{
		"no user: an allocated uid of its own": {want: Credential{UID: 5000, GID: 5000, Groups: []int{5000}}},
		"a node user with its groups":          {user: "app", want: Credential{UID: 1000, GID: 1000, Groups: []int{1000, 999, 44}, User: "app"}},
		"root refused":                         {user: "root", wantErr: ErrRootRefused},
		"another name for uid 0 refused":       {user: "toor", wantErr: ErrRootRefused},
		"root when allowed":                    {user: "root", allowRoot: true, want: Credential{UID: 0, GID: 0, Groups: []int{0}, User: "root"}},
		"unknown user":                         {user: "nobody", wantErr: ErrUnknownUser},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &Store{Dir: filepath.Join(t.TempDir(), "ids"), Range: rng, Users: etc(t)}
			got, err := s.Resolve("ns", "web", tc.user, tc.allowRoot)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
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
		c, err := s.Resolve(ns, name, "", false)
		if err != nil {
			t.Fatal(err)
		}
		return c.UID
	}
	a, b := uid(s, "ns", "a"), uid(s, "ns", "b")
	if a == b {
		t.Fatalf("two Instances share uid %d", a)
	}
	if _, err := s.Resolve("ns", "c", "", false); !errors.Is(err, ErrRangeFull) {
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
	c, err := s.Resolve("ns", "a", "", false)
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
