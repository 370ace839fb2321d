package agentimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// The release archive is one OCI layout whose index.json names the image
// and points at an index listing linux/amd64 and linux/arm64, each image
// holding its own platform's binary; the digest returned is that index's,
// and the same binaries give the same archive.
func TestOCIArchiveIndex(t *testing.T) {
	dir := t.TempDir()
	bins := map[string][]byte{"amd64": []byte("amd64 binary\n"), "arm64": []byte("arm64 binary\n")}
	var pbs []PlatformBinary
	for _, arch := range []string{"amd64", "arm64"} {
		file := filepath.Join(dir, "unitlet-"+arch)
		if err := os.WriteFile(file, bins[arch], 0o755); err != nil {
			t.Fatal(err)
		}
		pb, err := ParsePlatformBinary("linux/" + arch + "=" + file)
		if err != nil {
			t.Fatal(err)
		}
		pbs = append(pbs, pb)
	}
	idx, err := BuildIndex(pbs, Path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "unitlet-image.oci.tar")
	digest, err := WriteOCIArchive(idx, "unitlet.dev/unitlet:v0.0.0-test", out)
	if err != nil {
		t.Fatal(err)
	}

	lp := untar(t, out, filepath.Join(dir, "layout"))
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topm.Manifests) != 1 {
		t.Fatalf("index.json: %d entries, want 1", len(topm.Manifests))
	}
	entry := topm.Manifests[0]
	wantAnn := map[string]string{AnnotationContainerdName: "unitlet.dev/unitlet:v0.0.0-test", AnnotationRefName: "v0.0.0-test"}
	if diff := cmp.Diff(wantAnn, entry.Annotations); diff != "" || entry.Digest != digest {
		t.Errorf("index.json entry: digest %s (returned %s), annotations (-want,+got):\n%s", entry.Digest, digest, diff)
	}
	inner, err := top.ImageIndex(entry.Digest)
	if err != nil {
		t.Fatal(err)
	}
	got := platformsAndFiles(t, inner)
	want := map[string]map[string]string{
		"linux/amd64": {"unitlet": "amd64 binary\n"},
		"linux/arm64": {"unitlet": "arm64 binary\n"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("platform -> files (-want,+got):\n%s", diff)
	}

	first, _ := os.ReadFile(out)
	if _, err := WriteOCIArchive(idx, "unitlet.dev/unitlet:v0.0.0-test", out); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(out)
	if !bytes.Equal(first, second) {
		t.Error("the same index gave two different archives")
	}
}

func TestParsePlatformBinaryRejects(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(file, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, arg := range map[string]string{
		"no file":        "linux/amd64",
		"empty file":     "linux/amd64=",
		"no platform":    "=" + file,
		"missing binary": "linux/arm64=" + file + ".absent",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParsePlatformBinary(arg); err == nil {
				t.Errorf("ParsePlatformBinary(%q) = nil error", arg)
			}
		})
	}
	if _, err := BuildIndex(nil, Path); err == nil {
		t.Error("BuildIndex of no binaries: nil error")
	}
}

// platformsAndFiles maps each of idx's platforms (from the index and,
// checked equal, from the image's config) to its image's files' contents.
func platformsAndFiles(t *testing.T, idx v1.ImageIndex) map[string]map[string]string {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if d.Platform == nil || cfg.Platform().String() != d.Platform.String() {
			t.Errorf("index says %v, config says %v", d.Platform, cfg.Platform())
			continue
		}
		files := map[string]string{}
		got[d.Platform.String()] = files
		tr := tar.NewReader(mutate.Extract(img))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			files[h.Name] = string(b)
		}
	}
	return got
}

// untar unpacks an OCI archive into dir and opens it as a layout.
func untar(t *testing.T, archive, dir string) layout.Path {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, _ := io.ReadAll(tr)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	return lp
}
