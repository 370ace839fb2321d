package cgroups

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDetectMode(t *testing.T) {
	want := ModeV1
	switch {
	case isCgroup2(DefaultMountRoot):
		want = ModeV2
	case isCgroup2(DefaultMountRoot + "/unified"):
		want = ModeHybrid
	}
	got, err := DetectMode("")
	if err != nil || got != want {
		t.Fatalf("DetectMode() = %v, %v; want %v", got, err, want)
	}

	// A directory with no cgroup file system below it: nothing to manage.
	got, err = DetectMode(t.TempDir())
	if !errors.Is(err, ErrNoDelegation) || got != ModeNone {
		t.Fatalf("DetectMode(tmp) = %v, %v; want none, ErrNoDelegation", got, err)
	}
	if _, err := New(Config{MountRoot: t.TempDir()}, "ns", "x"); !errors.Is(err, ErrNoDelegation) {
		t.Fatalf("New on no cgroups = %v, want ErrNoDelegation", err)
	}
}

func TestDetectHierarchiesOnThisHost(t *testing.T) {
	mode, h, err := detect("")
	if err != nil {
		t.Fatal(err)
	}
	if mode == ModeV2 {
		if diff := cmp.Diff(hierarchies{"": DefaultMountRoot}, h); diff != "" {
			t.Fatalf("v2 hierarchies (-want,+got):\n%s", diff)
		}
		return
	}
	// v1 / hybrid: the controllers the tier needs are found by name.
	for _, s := range []string{"memory", "pids", "freezer"} {
		if h[s] != DefaultMountRoot+"/"+s {
			t.Errorf("hierarchy %q at %q, want %q", s, h[s], DefaultMountRoot+"/"+s)
		}
	}
	if mode == ModeHybrid && h[""] != DefaultMountRoot+"/unified" {
		t.Errorf("unified at %q", h[""])
	}
}

func TestSubsystemOption(t *testing.T) {
	tests := map[string]struct {
		opt  string
		want bool
	}{
		"controller":    {"memory", true},
		"named":         {"name=systemd", true},
		"read-write":    {"rw", false},
		"release agent": {"release_agent=/x", false},
		"flag":          {"clone_children", false},
		"empty":         {"", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := subsystemOption(tc.opt); got != tc.want {
				t.Fatalf("subsystemOption(%q) = %v, want %v", tc.opt, got, tc.want)
			}
		})
	}
}

func TestHierarchyMounts(t *testing.T) {
	mode, h, err := detect("")
	if err != nil {
		t.Fatal(err)
	}
	got, err := HierarchyMounts("")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, m := range h {
		want[m] = true
	}
	gotSet := map[string]bool{}
	for _, m := range got {
		if gotSet[m] {
			t.Errorf("%s listed twice", m)
		}
		gotSet[m] = true
	}
	if diff := cmp.Diff(want, gotSet); diff != "" {
		t.Errorf("%s host: mount points (-want,+got):\n%s", mode, diff)
	}
	if mode == ModeV2 && (len(got) != 1 || got[0] != DefaultMountRoot) {
		t.Errorf("v2: %v, want [%s]", got, DefaultMountRoot)
	}
	if _, err := HierarchyMounts(t.TempDir()); !errors.Is(err, ErrNoDelegation) {
		t.Errorf("no cgroups below a dir: %v, want ErrNoDelegation", err)
	}
}
