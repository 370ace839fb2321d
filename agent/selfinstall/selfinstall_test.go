package selfinstall

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInstallReplacesARunningBinary(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "bin", "unitlet")
	if err := Install("/bin/sleep", dst); err != nil {
		t.Fatal(err)
	}
	// The installed copy runs while the next one is installed over it.
	run := exec.Command(dst, "5")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Process.Kill(); _ = run.Wait() }()
	if err := Install("/bin/true", dst); err != nil {
		t.Fatalf("install over a running binary: %v", err)
	}
	if err := exec.Command(dst).Run(); err != nil {
		t.Fatalf("the new copy: %v", err)
	}
	fi, err := os.Stat(dst)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed mode %v, %v", fi.Mode(), err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "bin", "*"))
	hidden, _ := filepath.Glob(filepath.Join(dir, "bin", ".*"))
	if len(left) != 1 || len(hidden) != 0 {
		t.Errorf("files beside the binary: %v %v, want none", left, hidden)
	}
}

func TestInstallRefusesARelativePath(t *testing.T) {
	if err := Install("/bin/true", "bin/unitlet"); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative --to: %v", err)
	}
}

// The helper beside the image's binary goes beside the installed one; an
// image without it installs the binary alone.
func TestInstallWithShim(t *testing.T) {
	tests := map[string]struct {
		shim bool
		want []string
	}{
		"with the helper":    {shim: true, want: []string{"unitlet", ShimName}},
		"without the helper": {want: []string{"unitlet"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			image, host := t.TempDir(), filepath.Join(t.TempDir(), "bin")
			files := map[string]string{"unitlet": "agent\n"}
			if tc.shim {
				files[ShimName] = "helper\n"
			}
			for f, content := range files {
				if err := os.WriteFile(filepath.Join(image, f), []byte(content), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := installWithShim(filepath.Join(image, "unitlet"), filepath.Join(host, "unitlet")); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range []string{"unitlet", ShimName} {
				b, err := os.ReadFile(filepath.Join(host, f))
				if err != nil {
					continue
				}
				if string(b) != files[f] {
					t.Errorf("%s installed as %q, want %q", f, b, files[f])
				}
				got = append(got, f)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("installed (-want,+got):\n%s", diff)
			}
		})
	}
}
