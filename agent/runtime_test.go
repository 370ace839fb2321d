package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr/testr"
)

func TestShimBinary(t *testing.T) {
	withShim, bare := t.TempDir(), t.TempDir()
	for _, p := range []string{filepath.Join(withShim, "unitlet"), filepath.Join(withShim, ShimName), filepath.Join(bare, "unitlet")} {
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]struct {
		asked, self string
		want        string
		wantErr     bool
	}{
		"beside the agent":             {self: filepath.Join(withShim, "unitlet"), want: filepath.Join(withShim, ShimName)},
		"none beside: the agent's own": {self: filepath.Join(bare, "unitlet"), want: filepath.Join(bare, "unitlet")},
		"asked for":                    {asked: filepath.Join(withShim, ShimName), self: filepath.Join(bare, "unitlet"), want: filepath.Join(withShim, ShimName)},
		"asked for, missing":           {asked: filepath.Join(bare, ShimName), self: filepath.Join(withShim, "unitlet"), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := shimBinary(tc.asked, tc.self, testr.New(t))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("shimBinary = %q, want %q", got, tc.want)
			}
		})
	}
}
