package version

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	cases := map[string]struct {
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		"the stamp wins over the revision": {
			stamped: "v1.2.3", info: &debug.BuildInfo{Settings: vcs("d5d71de0123456789abcdef", "false")}, want: "v1.2.3",
		},
		"a clean checkout's revision, shortened": {
			info: &debug.BuildInfo{Settings: vcs("d5d71de0123456789abcdef", "false")}, want: "d5d71de01234",
		},
		"a changed tree's revision is marked dirty": {
			info: &debug.BuildInfo{Settings: vcs("d5d71de0123456789abcdef", "true")}, want: "d5d71de01234-dirty",
		},
		"go install of a tagged module": {
			info: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, want: "v0.4.0",
		},
		"a build without VCS information": {
			info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, want: "dev",
		},
		"no build information at all": {want: "dev"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resolve(tc.stamped, tc.info)); diff != "" {
				t.Errorf("version (-want,+got):\n%s", diff)
			}
		})
	}
}
