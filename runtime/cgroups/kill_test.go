package cgroups

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// A generation of 101 real processes (a shell fork tree) is killed and
// proven empty; its sibling generation and the sidecar keep running.
func TestKillGenerationOnly(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, "kill", Tier{Pids: 1024})
	g1, _ := m.CreateGeneration(1, Tier{Pids: 512})
	g2, _ := m.CreateGeneration(2, Tier{Pids: 512})
	sidecar, err := m.CreateRole(sidecarChild(t, "side"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := m.CreateRole(sidecarChild(t, "other"))
	if err != nil {
		t.Fatal(err)
	}
	tree := spawnIn(t, m, g1, treeScript, 101)
	sibling := spawnIn(t, m, g2, "exec sleep 1000", 1)
	side := spawnIn(t, m, sidecar, "exec sleep 1000", 1)
	otherSide := spawnIn(t, m, other, "exec sleep 1000", 1)
	victims, _ := m.Pids(g1)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := m.KillAndEmpty(ctx, g1)
	if !p.Proven || p.Reason != "" || p.Child != g1 {
		t.Fatalf("KillAndEmpty(g1) = %+v, want proven", p)
	}
	if pids, err := m.Pids(g1); err != nil || len(pids) != 0 {
		t.Fatalf("g1 after proof: %v, %v", pids, err)
	}
	for _, pid := range victims {
		if alive(pid) {
			t.Errorf("pid %d of g1 still running", pid)
		}
	}
	_ = tree
	for name, pid := range map[string]int{g2: sibling.pid(), sidecar: side.pid(), other: otherSide.pid()} {
		if !alive(pid) {
			t.Errorf("%s: pid %d was killed", name, pid)
		}
		if pids, _ := m.Pids(name); len(pids) != 1 {
			t.Errorf("%s holds %v, want its one process", name, pids)
		}
	}
	// Each sidecar has a child of its own: killing one leaves the other.
	if p := m.KillAndEmpty(ctx, sidecar); !p.Proven {
		t.Fatalf("KillAndEmpty(%s) = %+v, want proven", sidecar, p)
	}
	if alive(side.pid()) || !alive(otherSide.pid()) {
		t.Errorf("after killing %s: its pid alive %v, %s's pid alive %v (want false, true)", sidecar, alive(side.pid()), other, alive(otherSide.pid()))
	}
	// An absent child is empty: proven at once. Removal is separate.
	if p := m.KillAndEmpty(ctx, "g9"); !p.Proven {
		t.Errorf("absent child: %+v, want proven", p)
	}
	if err := m.RemoveChild(g1); err != nil {
		t.Fatal(err)
	}
	if p := m.KillAndEmpty(ctx, g1); !p.Proven {
		t.Errorf("removed child: %+v, want proven", p)
	}
}

// stubborn wraps a real driver to show what a real cgroup cannot show on
// demand: the kill really runs, but a process keeps being reported (a
// process re-added as fast as it is killed), or a step is refused.
type stubborn struct {
	driver
	phantom int   // reported in every look
	killErr error // returned by every kill
}

func (s stubborn) pids(rel string) ([]int, error) {
	p, err := s.driver.pids(rel)
	return append(p, s.phantom), err
}

func (s stubborn) populated(string) (bool, error) { return true, nil }

func (s stubborn) killOnce(rel string) error {
	if s.killErr != nil {
		return s.killErr
	}
	return s.driver.killOnce(rel)
}

func TestKillThatCannotCompleteIsUnproven(t *testing.T) {
	cfg := testConfig(t)
	tests := map[string]struct {
		killErr  error
		cancel   bool // cancel instead of a deadline
		want     Reason
		wantLeft int
	}{
		"never empty by the deadline": {want: ReasonDeadline, wantLeft: 1},
		"cancelled while populated":   {cancel: true, want: ReasonStillPopulated, wantLeft: 1},
		"kill refused":                {killErr: os.ErrPermission, want: ReasonPermission, wantLeft: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := newManager(t, cfg, "stubborn-"+string(tc.want), Tier{}).(*instance)
			g1, _ := m.CreateGeneration(1, Tier{})
			h := spawnIn(t, m, g1, "exec sleep 1000", 1)
			m.d = stubborn{driver: m.d, phantom: 1 << 30, killErr: tc.killErr}

			// Long enough for the real kill to take the real process out
			// of the cgroup on a loaded machine (50 ms once was not), so
			// only the phantom is left to count.
			const budget = 500 * time.Millisecond
			var ctx context.Context
			var cancel context.CancelFunc
			if tc.cancel {
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(budget, cancel)
			} else {
				ctx, cancel = context.WithTimeout(context.Background(), budget)
			}
			defer cancel()
			p := m.KillAndEmpty(ctx, g1)
			if p.Proven || p.Reason != tc.want || p.Remaining != tc.wantLeft {
				t.Fatalf("KillAndEmpty = %+v, want unproven %s with %d left", p, tc.want, tc.wantLeft)
			}
			var ue *UnprovenError
			if !errors.As(p.AsError(), &ue) || ue.Proof.Reason != tc.want {
				t.Fatalf("AsError() = %v", p.AsError())
			}
			if tc.killErr == nil && alive(h.pid()) {
				t.Errorf("the real process survived the real kill")
			}
		})
	}
}

func TestDisabledRefusesEverything(t *testing.T) {
	m := Disabled(errors.New("no cgroup fs"))
	if err := m.RaiseParent(Tier{MemoryBytes: 1}); !errors.Is(err, ErrNoDelegation) {
		t.Errorf("RaiseParent = %v", err)
	}
	if err := m.RestoreParent(Tier{MemoryBytes: 1}); !errors.Is(err, ErrNoDelegation) {
		t.Errorf("RestoreParent = %v", err)
	}
	if err := m.Place(os.Getpid(), "g1"); !errors.Is(err, ErrNoDelegation) {
		t.Errorf("Place = %v", err)
	}
	if p := m.KillAndEmpty(context.Background(), "g1"); p.Proven || p.Reason != ReasonNoDelegation {
		t.Errorf("KillAndEmpty = %+v, want unproven NoDelegation", p)
	}
}
