package controllers

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/diskspace"
)

func TestDiskPressureCondition(t *testing.T) {
	const mib = 1 << 20
	tests := map[string]struct {
		usage diskspace.Usage
		err   error
		want  metav1.Condition
	}{
		"plenty free": {
			usage: diskspace.Usage{Free: 50 * mib, Total: 100 * mib},
			want: metav1.Condition{Status: metav1.ConditionFalse, Reason: v1.ReasonEnoughDiskSpace,
				Message: "at least 5% of the state root's file system is free"},
		},
		"exactly at the threshold": {
			usage: diskspace.Usage{Free: 5 * mib, Total: 100 * mib},
			want: metav1.Condition{Status: metav1.ConditionFalse, Reason: v1.ReasonEnoughDiskSpace,
				Message: "at least 5% of the state root's file system is free"},
		},
		"below the threshold": {
			usage: diskspace.Usage{Free: 4096, Total: 100 * mib},
			want: metav1.Condition{Status: metav1.ConditionTrue, Reason: v1.ReasonLowDiskSpace,
				Message: "4096 bytes free of 104857600 on the state root's file system, below 5%: log lines are dropped and new work may fail"},
		},
		"full": {
			usage: diskspace.Usage{Free: 0, Total: 16 * mib},
			want: metav1.Condition{Status: metav1.ConditionTrue, Reason: v1.ReasonLowDiskSpace,
				Message: "0 bytes free of 16777216 on the state root's file system, below 5%: log lines are dropped and new work may fail"},
		},
		"unreadable": {
			err:  errors.New("statfs /var/lib/unitlet: permission denied"),
			want: metav1.Condition{Status: metav1.ConditionUnknown, Reason: v1.ReasonDiskUnreadable, Message: "statfs /var/lib/unitlet: permission denied"},
		},
		"no size": {
			want: metav1.Condition{Status: metav1.ConditionUnknown, Reason: v1.ReasonDiskUnreadable, Message: "the state root's file system reports no size"},
		},
	}
	enr := &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.want.Type, tc.want.ObservedGeneration = v1.ConditionDiskPressure, 3
			got := diskPressureCondition(enr, tc.usage, tc.err, 0.05)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("condition (-want,+got):\n%s", diff)
			}
		})
	}
}
