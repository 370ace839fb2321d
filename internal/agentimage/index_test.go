package agentimage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The release archive is one OCI layout whose index.json names the image
// and points at an index listing linux/amd64 and linux/arm64, each image
// holding its own platform's binary and helper; the digest returned is that index's,
// and the same binaries give the same archive.
func TestOCIArchiveIndex(t *testing.T) {
	dir := t.TempDir()
	bins := map[string][]byte{"amd64": []byte("amd64 binary\n"), "arm64": []byte("arm64 binary\n")}
	var pbs []PlatformBinary
	for _, arch := range []string{"amd64", "arm64"} {
		file, shim, side := filepath.Join(dir, "unitlet-"+arch), filepath.Join(dir, "unitlet-shim-"+arch), filepath.Join(dir, "unitlet-cluster-"+arch)
		for path, b := range map[string][]byte{file: bins[arch], shim: []byte(arch + " helper\n"), side: []byte(arch + " cluster side\n")} {
			if err := os.WriteFile(path, b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		pb, err := ParsePlatformBinary("linux/" + arch + "=" + file + "," + shim + "," + side)
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

	got, err := ReadOCIArchive(out, filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "unitlet.dev/unitlet:v0.0.0-test" || got.Digest != digest {
		t.Errorf("index.json entry: %s %s, want unitlet.dev/unitlet:v0.0.0-test %s", got.Name, got.Digest, digest)
	}
	want := map[string]map[string][]byte{
		"linux/amd64": {"unitlet": []byte("amd64 binary\n"), "unitlet-shim": []byte("amd64 helper\n"), "unitlet-cluster": []byte("amd64 cluster side\n")},
		"linux/arm64": {"unitlet": []byte("arm64 binary\n"), "unitlet-shim": []byte("arm64 helper\n"), "unitlet-cluster": []byte("arm64 cluster side\n")},
	}
	if diff := cmp.Diff(want, got.Files); diff != "" {
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
		"no file":         "linux/amd64",
		"empty file":      "linux/amd64=",
		"no platform":     "=" + file,
		"missing binary":  "linux/arm64=" + file + ".absent",
		"empty helper":    "linux/amd64=" + file + ",",
		"missing helper":  "linux/amd64=" + file + "," + file + ".absent",
		"empty cluster":   "linux/amd64=" + file + "," + file + ",",
		"missing cluster": "linux/amd64=" + file + "," + file + "," + file + ".absent",
		"a fourth file":   "linux/amd64=" + file + "," + file + "," + file + "," + file,
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
