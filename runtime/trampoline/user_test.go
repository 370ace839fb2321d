package trampoline

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLookupUser(t *testing.T) {
	tests := map[string]struct {
		name    string
		want    *credential
		wantErr bool
	}{
		"by name":     {name: "nobody", want: &credential{uid: 65534, gid: 65534, groups: []int{65534}}},
		"by uid":      {name: "65534", want: &credential{uid: 65534, gid: 65534, groups: []int{65534}}},
		"root":        {name: "root", want: &credential{uid: 0, gid: 0, groups: []int{0}}},
		"no such one": {name: "no-such-user-here", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := lookupUser(tc.name)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %+v, want error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(credential{})); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}
