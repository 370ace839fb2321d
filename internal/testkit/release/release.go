// Package release finds the release `make test-release-dist` cuts for the
// suites that check it (test/release) and install it (test/cluster).
package release

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// Release is a release's directory and what its files' names say.
type Release struct {
	Dir     string
	Version string
	// Image is the agent image's OCI archive.
	Image string
}

// Find reads the release make test-release-dist wrote in bin/ (so a
// release cut into dist/ is never overwritten by a test run).
func Find() (Release, error) {
	dir := filepath.Join(testenv.RepoRoot(), "bin", "release-test")
	if _, err := os.Stat(filepath.Join(dir, "SHA256SUMS")); err != nil {
		return Release{}, fmt.Errorf("no release in %s: run `make test-release-dist` first (%w)", dir, err)
	}
	m, _ := filepath.Glob(filepath.Join(dir, "unitlet-image-*.oci.tar"))
	if len(m) != 1 {
		return Release{}, fmt.Errorf("%s: %d image archives, want 1", dir, len(m))
	}
	v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m[0]), "unitlet-image-"), ".oci.tar")
	return Release{Dir: dir, Version: v, Image: m[0]}, nil
}

// MustFind is Find for a test.
func MustFind(t testing.TB) Release {
	t.Helper()
	r, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// File is the path of one of the release's files.
func (r Release) File(name string) string { return filepath.Join(r.Dir, name) }
