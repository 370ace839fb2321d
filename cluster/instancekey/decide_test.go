package instancekey

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/unitlet/unitlet/internal/instancekey"
)

func TestDecide(t *testing.T) {
	fpA := instancekey.Fingerprint([]byte("a"))
	secret := func(rotatedFor, previous string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			instancekey.AnnotationFingerprint: fpA, instancekey.AnnotationRotatedFor: rotatedFor}},
			Data: map[string][]byte{instancekey.DataKey: []byte("a")}}
		if previous != "" {
			s.Annotations[instancekey.AnnotationPrevious] = previous
		}
		return s
	}
	tampered := secret("", "")
	tampered.Data[instancekey.DataKey] = []byte("b")
	handMade := &corev1.Secret{Data: map[string][]byte{instancekey.DataKey: []byte("a")}}
	tests := map[string]struct {
		secret           *corev1.Secret
		statusFP, rotate string
		want             plan
	}{
		"new Instance":                         {want: plan{mint: true}},
		"new Instance carrying a rotate value": {rotate: "1", want: plan{mint: true, rotatedFor: "1"}},
		"minted, status not written yet":       {secret: secret("", ""), want: plan{fingerprint: fpA}},
		"settled":                              {secret: secret("", ""), statusFP: fpA, want: plan{fingerprint: fpA}},
		"status says another key":              {secret: secret("", ""), statusFP: "other", want: plan{fingerprint: fpA}},
		"data changed by hand: not followed":   {secret: tampered, statusFP: fpA, want: plan{fingerprint: fpA}},
		"hand-made Secret: its data's":         {secret: handMade, want: plan{fingerprint: fpA}},
		"rotation asked":                       {secret: secret("", ""), statusFP: fpA, rotate: "1", want: plan{mint: true, rotatedFor: "1", previous: fpA}},
		"rotation done":                        {secret: secret("1", "x"), statusFP: fpA, rotate: "1", want: plan{fingerprint: fpA}},
		"second rotation keeps the history":    {secret: secret("1", "x"), statusFP: fpA, rotate: "2", want: plan{mint: true, rotatedFor: "2", previous: "x," + fpA}},
		"annotation removed: no rotation":      {secret: secret("1", ""), statusFP: fpA, want: plan{fingerprint: fpA}},
		"lost, nobody asked":                   {statusFP: fpA, want: plan{lost: true, fingerprint: fpA}},
		"lost, rotation asked":                 {statusFP: fpA, rotate: "1", want: plan{mint: true, rotatedFor: "1", previous: fpA}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := decide(tc.secret, tc.statusFP, tc.rotate)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(plan{})); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
