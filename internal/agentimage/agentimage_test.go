package agentimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The tarball reads back as one OCI image whose files are the binary,
// executable, at /unitlet, run as its entrypoint, and the helper and the
// cluster side's binary beside it; the same binaries give the same digest.
func TestImageTarball(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "unitlet")
	want := map[string][]byte{"unitlet": []byte("#!/not/really/an/elf\n"), "unitlet-shim": []byte("#!/not/the/helper\n"),
		"unitlet-cluster": []byte("#!/not/the/cluster/side\n")}
	for name, b := range want {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	beside, err := ReadCompanions(filepath.Join(dir, "unitlet-shim"), filepath.Join(dir, "unitlet-cluster"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	d1, err := WriteFile(bin, beside, Path, "unitlet.dev/unitlet:test", out)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/unitlet"}, cfg.Config.Entrypoint); diff != "" || cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("entrypoint (-want,+got):\n%s; platform %s/%s", diff, cfg.OS, cfg.Architecture)
	}
	tr := tar.NewReader(mutate.Extract(img))
	var files []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		got, _ := io.ReadAll(tr)
		if !bytes.Equal(got, want[h.Name]) || h.Mode&0o111 == 0 {
			t.Errorf("/%s: mode %o, content %q", h.Name, h.Mode, got)
		}
	}
	if diff := cmp.Diff([]string{"unitlet", "unitlet-shim", "unitlet-cluster"}, files); diff != "" {
		t.Errorf("files (-want,+got):\n%s", diff)
	}
	d2, err := WriteFile(bin, beside, Path, "unitlet.dev/unitlet:test", out)
	if err != nil || d1 != d2 {
		t.Errorf("same binary, digests %s and %s (%v)", d1, d2, err)
	}
}
