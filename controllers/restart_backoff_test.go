package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestRestartBackoff(t *testing.T) {
	// step: the clock moves by after, then the sidecar is found dead;
	// want is the wait it gets (0: it restarts now).
	type step struct {
		after time.Duration
		want  time.Duration
	}
	tests := map[string]struct {
		steps []step
	}{
		"the first death restarts at once": {
			steps: []step{{0, 0}},
		},
		"a second death soon after waits out the initial backoff": {
			steps: []step{{0, 0}, {3 * time.Second, 7 * time.Second}, {7 * time.Second, 0}},
		},
		"the backoff doubles up to its cap": {
			steps: []step{
				{0, 0},
				{10 * time.Second, 0}, // 10 s since the first restart: may go
				{time.Second, 19 * time.Second},
				{19 * time.Second, 0},
				{0, 40 * time.Second},
				{40 * time.Second, 0},
				{0, 60 * time.Second}, // capped
			},
		},
		"a sidecar that ran long enough starts over": {
			steps: []step{{0, 0}, {10 * time.Second, 0}, {2*time.Minute + time.Second, 0}, {time.Second, 9 * time.Second}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			b := newRestartBackoff(10*time.Second, time.Minute, clk)
			var got, want []time.Duration
			for _, s := range tc.steps {
				clk.Step(s.after)
				w := b.wait("default/app/cache")
				if w == 0 {
					b.restarted("default/app/cache")
				}
				got, want = append(got, w), append(want, s.want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("waits (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRestartBackoffForget(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	b := newRestartBackoff(10*time.Second, time.Minute, clk)
	for _, key := range []string{"default/app/cache", "default/app/log", "default/apple/cache"} {
		b.restarted(key)
	}
	b.forget("default/app/")
	got := map[string]time.Duration{}
	for _, key := range []string{"default/app/cache", "default/app/log", "default/apple/cache"} {
		got[key] = b.wait(key)
	}
	want := map[string]time.Duration{"default/app/cache": 0, "default/app/log": 0, "default/apple/cache": 10 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits after forgetting default/app (-want,+got):\n%s", diff)
	}
}
