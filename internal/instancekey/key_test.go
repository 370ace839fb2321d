package instancekey

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheck(t *testing.T) {
	a, b, c := []byte("key-a"), []byte("key-b"), []byte("key-c")
	fa, fb, fc := Fingerprint(a), Fingerprint(b), Fingerprint(c)
	tests := map[string]struct {
		key         []byte
		annotations map[string]string
		want, pred  string
		mismatch    bool
	}{
		"first generation":                    {key: a, want: fa},
		"same key as the predecessor":         {key: a, want: fa, pred: fa},
		"predecessor made before keys":        {key: a, want: fa, pred: ""},
		"data changed under the generation":   {key: b, want: fa, pred: fa, mismatch: true},
		"rotation recorded":                   {key: b, annotations: map[string]string{AnnotationPrevious: fa}, want: fb, pred: fa},
		"two rotations since the predecessor": {key: c, annotations: map[string]string{AnnotationPrevious: fa + "," + fb}, want: fc, pred: fa},
		"new key without a recorded rotation": {key: b, want: fb, pred: fa, mismatch: true},
		"rotation recorded from another key":  {key: c, annotations: map[string]string{AnnotationPrevious: fb}, want: fc, pred: fa, mismatch: true},
		"empty key":                           {key: nil, want: fa, mismatch: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Check(tc.key, tc.annotations, tc.want, tc.pred)
			if diff := cmp.Diff(tc.mismatch, errors.Is(err, ErrMismatch)); diff != "" {
				t.Errorf("mismatch (-want,+got):\n%s (err %v)", diff, err)
			}
			if !tc.mismatch && err != nil {
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
}

func TestWithPrevious(t *testing.T) {
	many := make([]string, MaxPrevious)
	for i := range many {
		many[i] = strings.Repeat(string(rune('a'+i)), 3)
	}
	tests := map[string]struct {
		prev []string
		fp   string
		want string
	}{
		"first":           {fp: "x", want: "x"},
		"appended":        {prev: []string{"x"}, fp: "y", want: "x,y"},
		"once":            {prev: []string{"x", "y"}, fp: "x", want: "y,x"},
		"nothing to add":  {prev: []string{"x"}, fp: "", want: "x"},
		"oldest dropped":  {prev: many, fp: "zz", want: strings.Join(append(many[1:], "zz"), ",")},
		"empties dropped": {prev: []string{"", "x"}, fp: "y", want: "x,y"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, WithPrevious(tc.prev, tc.fp)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestNew(t *testing.T) {
	k1, err := New()
	if err != nil {
		t.Fatal(err)
	}
	k2, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != 64 || string(k1) == string(k2) {
		t.Errorf("keys %q and %q: want two different 64-character keys", k1, k2)
	}
	if got := Previous(map[string]string{AnnotationPrevious: "a,b"}); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("Previous = %v", got)
	}
}
