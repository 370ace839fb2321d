package controllers

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestParking(t *testing.T) {
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	type step struct {
		do   string // park, hold, release, open
		key  types.NamespacedName
		want bool // park's answer
	}
	tests := map[string]struct {
		steps    []step
		wantWoke []types.NamespacedName
	}{
		"set aside while adoption runs, woken once it is over": {
			steps:    []step{{do: "park", key: a, want: true}, {do: "park", key: b, want: true}, {do: "open"}},
			wantWoke: []types.NamespacedName{a, b},
		},
		"after adoption: reconciled at once, nothing to wake": {
			steps: []step{{do: "open"}, {do: "park", key: a, want: false}},
		},
		"held past adoption: woken by its release": {
			steps: []step{{do: "hold", key: a}, {do: "park", key: a, want: true}, {do: "open"},
				{do: "park", key: a, want: true}, {do: "park", key: b, want: false}, {do: "release", key: a}, {do: "park", key: a, want: false}},
			wantWoke: []types.NamespacedName{a},
		},
		"released before adoption is over: woken by open": {
			steps:    []step{{do: "hold", key: a}, {do: "park", key: a, want: true}, {do: "release", key: a}, {do: "open"}},
			wantWoke: []types.NamespacedName{a},
		},
		"released with nothing asked: nothing woken": {
			steps: []step{{do: "hold", key: a}, {do: "open"}, {do: "release", key: a}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var woke []types.NamespacedName
			p := newParking(func(keys []types.NamespacedName) { woke = append(woke, keys...) })
			for i, s := range tc.steps {
				switch s.do {
				case "park":
					if got := p.park(s.key); got != s.want {
						t.Errorf("step %d: park(%s) = %v, want %v", i, s.key.Name, got, s.want)
					}
				case "hold":
					p.hold(s.key)
				case "release":
					p.release(s.key)
				case "open":
					p.open()
				}
			}
			slices.SortFunc(woke, func(x, y types.NamespacedName) int { return strings.Compare(x.Name, y.Name) })
			if diff := cmp.Diff(tc.wantWoke, woke); diff != "" {
				t.Errorf("woken (-want,+got):\n%s", diff)
			}
		})
	}
	var nilParking *parking
	if nilParking.park(a) {
		t.Error("a nil parking set a reconcile aside")
	}
}
