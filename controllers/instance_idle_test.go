package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/unitlet/unitlet/runtime/node"
)

func TestDecideSleep(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	asleep := &metav1.Time{Time: now.Add(-time.Hour)}
	for name, tc := range map[string]struct {
		idle        time.Duration
		sleeping    *metav1.Time
		serving     bool
		activity    node.Activity
		want        sleepDecision
		wantRecheck time.Duration
	}{
		"never idles without idleAfter": {
			serving: true, activity: node.Activity{Held: true, Last: now.Add(-time.Hour)}, want: stayAwake,
		},
		"quiet for less than idleAfter: look again when it could be": {
			idle: 5 * time.Minute, serving: true, activity: node.Activity{Held: true, Last: now.Add(-2 * time.Minute)},
			want: stayAwake, wantRecheck: 3 * time.Minute,
		},
		"quiet for idleAfter: sleeps": {
			idle: 5 * time.Minute, serving: true, activity: node.Activity{Held: true, Last: now.Add(-5 * time.Minute)}, want: fallAsleep,
		},
		"a connection open for long keeps it awake": {
			idle: 5 * time.Minute, serving: true, activity: node.Activity{Held: true, Last: now.Add(-time.Hour), Busy: true},
			want: stayAwake, wantRecheck: 5 * time.Minute,
		},
		"not serving yet: never sleeps mid-swap": {
			idle: time.Minute, activity: node.Activity{Held: true, Last: now.Add(-time.Hour)}, want: stayAwake,
		},
		"socket not held (agent restarted): stays awake": {
			idle: time.Minute, serving: true, want: stayAwake,
		},
		"asleep, no connection since": {
			idle: time.Minute, sleeping: asleep, activity: node.Activity{Held: true, Last: now.Add(-2 * time.Hour)}, want: staySleeping,
		},
		"asleep, socket held anew after a restart": {
			idle: time.Minute, sleeping: asleep, activity: node.Activity{Held: true}, want: staySleeping,
		},
		"asleep, a connection came": {
			idle: time.Minute, sleeping: asleep, activity: node.Activity{Held: true, Last: now.Add(-time.Second)}, want: wake,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, recheck := decideSleep(tc.idle, now, tc.sleeping, tc.serving, tc.activity)
			if got != tc.want || recheck != tc.wantRecheck {
				t.Errorf("decideSleep = %v, %s; want %v, %s", got, recheck, tc.want, tc.wantRecheck)
			}
		})
	}
}
