package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestProbeWait(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		handedOff bool
		since     time.Duration
		want      time.Duration
	}{
		"just started":                {handedOff: true, want: minProbeWait},
		"40 ms in":                    {handedOff: true, since: 40 * time.Millisecond, want: 20 * time.Millisecond},
		"2 s in":                      {handedOff: true, since: 2 * time.Second, want: 250 * time.Millisecond},
		"started before this process": {want: 250 * time.Millisecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start.Add(tc.since))
			r := &GenerationReconciler{ProbeInterval: 250 * time.Millisecond, Clock: clk}
			uid := types.UID("g1")
			if tc.handedOff {
				r.handedOff.Store(uid, handoff{at: start})
			}
			if got := r.probeWait(uid); got != tc.want {
				t.Errorf("probeWait = %s, want %s", got, tc.want)
			}
		})
	}
}
