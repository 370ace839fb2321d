package controllers

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

func TestFailedNote(t *testing.T) {
	full := fmt.Errorf("prepare generation 2: write launch file: %w", errors.New("no space left on device"))
	tests := map[string]struct {
		noted note
		err   error
		want  note
	}{
		"success keeps the note": {
			noted: note{reason: v1.ReasonSwapping, reconciling: true, msg: "m"},
			want:  note{reason: v1.ReasonSwapping, reconciling: true, msg: "m"},
		},
		"a failure with nothing noted says what failed": {
			err:  full,
			want: note{reason: v1.ReasonReconcileFailed, reconciling: true, msg: "retrying: " + full.Error()},
		},
		"a failure after a note keeps the note": {
			noted: note{reason: v1.ReasonRootNotAllowed, stalled: true, msg: "m"}, err: full,
			want: note{reason: v1.ReasonRootNotAllowed, stalled: true, msg: "m"},
		},
		"a conflict is a stale read, not news": {
			err: apierrors.NewConflict(schema.GroupResource{Resource: "instances"}, "x", errors.New("modified")),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := failedNote(tc.noted, tc.err)
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(note{})); d != "" {
				t.Errorf("note (-want,+got):\n%s", d)
			}
		})
	}
}
