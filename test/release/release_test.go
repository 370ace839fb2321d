// Package release checks a release as a new operator receives it: the
// files `make release` writes (make test cuts one into bin/release-test
// with `make test-release-dist`), each checked against what the others say
// about it — the sums, the digest install.yaml pins, the krew manifest's
// archives — and the binaries run for their version.
package release_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/unitlet/unitlet/internal/agentimage"
	"github.com/unitlet/unitlet/internal/testkit/release"
)

var platforms = []struct{ os, arch string }{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// Every file of the release is in SHA256SUMS with its true sum, and
// nothing else is.
func TestSums(t *testing.T) {
	rel := release.MustFind(t)
	dir, version := rel.Dir, rel.Version
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var listed []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS: malformed line %q", sc.Text())
		}
		if got := fileSum(t, filepath.Join(dir, name)); got != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", name, got, sum)
		}
		listed = append(listed, name)
	}
	want := []string{"install.yaml", "kubectl_complete-unitlet", "plugin.yaml", "unitlet-image-" + version + ".oci.tar"}
	for _, p := range platforms {
		n := "kubectl-unitlet-" + p.os + "-" + p.arch
		want = append(want, n, n+".tar.gz")
	}
	sort.Strings(want)
	sort.Strings(listed)
	if diff := cmp.Diff(want, listed); diff != "" {
		t.Errorf("SHA256SUMS lists (-want,+got):\n%s", diff)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(want)+1 {
		t.Errorf("%d files in the release, SHA256SUMS lists %d (+ itself)", len(entries), len(want))
	}
}

// The image archive holds one index with linux/amd64 and linux/arm64,
// each with a static binary and its per-unit helper for its own machine; install.yaml pins every
// image to that index's digest; the amd64 binary reports the version.
func TestImageAndInstaller(t *testing.T) {
	rel := release.MustFind(t)
	dir, version := rel.Dir, rel.Version
	arch, err := agentimage.ReadOCIArchive(rel.Image, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if want := "unitlet.dev/unitlet:" + version; arch.Name != want {
		t.Errorf("image name %q, want %q", arch.Name, want)
	}
	machines := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}
	var got []string
	for plat, files := range arch.Files {
		got = append(got, plat)
		for _, path := range []string{agentimage.Path, agentimage.ShimPath(agentimage.Path), agentimage.ClusterPath(agentimage.Path)} {
			if m := elfMachine(t, files[strings.TrimPrefix(path, "/")]); m != machines[plat] {
				t.Errorf("%s: the image's %s is for %v", plat, path, m)
			}
		}
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, got); diff != "" {
		t.Errorf("platforms (-want,+got):\n%s", diff)
	}
	amd64 := filepath.Join(t.TempDir(), "unitlet")
	if err := os.WriteFile(amd64, arch.Files["linux/amd64"][strings.TrimPrefix(agentimage.Path, "/")], 0o755); err != nil {
		t.Fatal(err)
	}
	if out := run(t, amd64, "version"); !strings.Contains(out, version) {
		t.Errorf("`unitlet version` from the image: %q, want %s", out, version)
	}
	side := filepath.Join(filepath.Dir(amd64), "unitlet-cluster")
	if err := os.WriteFile(side, arch.Files["linux/amd64"][strings.TrimPrefix(agentimage.ClusterPath(agentimage.Path), "/")], 0o755); err != nil {
		t.Fatal(err)
	}
	if out := run(t, side, "version"); !strings.Contains(out, version) {
		t.Errorf("`unitlet-cluster version` from the image: %q, want %s", out, version)
	}

	install, err := os.ReadFile(filepath.Join(dir, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+image:\s*(\S+)`).FindAllSubmatch(install, -1) {
		images[string(m[1])] = true
	}
	if want := map[string]bool{"unitlet.dev/unitlet@" + arch.Digest.String(): true}; !cmp.Equal(want, images) {
		t.Errorf("install.yaml's images %v, want only the archive's index %v", images, want)
	}
}

// The plugin binaries are for the platforms their names say; the linux
// amd64 one prints the release's version.
func TestPluginBinaries(t *testing.T) {
	rel := release.MustFind(t)
	dir, version := rel.Dir, rel.Version
	for _, p := range platforms {
		file := filepath.Join(dir, "kubectl-unitlet-"+p.os+"-"+p.arch)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := binaryPlatform(t, b); got != p.os+"/"+p.arch {
			t.Errorf("%s is a %s binary", filepath.Base(file), got)
		}
	}
	out := run(t, filepath.Join(dir, "kubectl-unitlet-linux-amd64"), "version")
	if !strings.Contains(out, version) {
		t.Errorf("`kubectl unitlet version`: %q, want %s", out, version)
	}
}

// The krew manifest names the release's version and, per platform, the
// sha256 of its archive, which holds the binary, its completion helper
// and the LICENSE.
func TestKrewManifest(t *testing.T) {
	rel := release.MustFind(t)
	dir, version := rel.Dir, rel.Version
	b, err := os.ReadFile(filepath.Join(dir, "plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var plugin struct {
		Kind string
		Spec struct {
			Version     string
			Description string
			Platforms   []struct {
				Selector struct{ MatchLabels map[string]string } `json:"selector"`
				URI      string
				Sha256   string
				Bin      string
			}
		}
	}
	if err := yaml.Unmarshal(b, &plugin); err != nil {
		t.Fatal(err)
	}
	if plugin.Kind != "Plugin" || plugin.Spec.Version != version {
		t.Errorf("plugin.yaml: kind %q version %q, want Plugin %s", plugin.Kind, plugin.Spec.Version, version)
	}
	if !strings.Contains(plugin.Spec.Description, "$PATH") {
		t.Errorf("plugin.yaml's description was expanded by the shell: %q", plugin.Spec.Description)
	}
	if len(plugin.Spec.Platforms) != len(platforms) {
		t.Fatalf("plugin.yaml: %d platforms, want %d", len(plugin.Spec.Platforms), len(platforms))
	}
	for i, p := range platforms {
		got := plugin.Spec.Platforms[i]
		name := "kubectl-unitlet-" + p.os + "-" + p.arch + ".tar.gz"
		if got.Selector.MatchLabels["os"] != p.os || got.Selector.MatchLabels["arch"] != p.arch || !strings.HasSuffix(got.URI, "/"+version+"/"+name) || got.Bin != "kubectl-unitlet" {
			t.Errorf("platform %d: %+v, want %s/%s at .../%s/%s", i, got, p.os, p.arch, version, name)
		}
		if sum := fileSum(t, filepath.Join(dir, name)); got.Sha256 != sum {
			t.Errorf("%s: sha256 %s, plugin.yaml says %s", name, sum, got.Sha256)
		}
		if diff := cmp.Diff([]string{"LICENSE", "kubectl-unitlet", "kubectl_complete-unitlet"}, tarNames(t, filepath.Join(dir, name))); diff != "" {
			t.Errorf("%s holds (-want,+got):\n%s", name, diff)
		}
	}
}

func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
	return string(out)
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func elfMachine(t *testing.T, b []byte) elf.Machine {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not an ELF binary: %v", err)
	}
	return f.Machine
}

// binaryPlatform says which os/arch an executable is for.
func binaryPlatform(t *testing.T, b []byte) string {
	t.Helper()
	if f, err := elf.NewFile(bytes.NewReader(b)); err == nil {
		return "linux/" + map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[f.Machine]
	}
	f, err := macho.NewFile(bytes.NewReader(b))
	if err != nil {
		return "unknown"
	}
	return "darwin/" + map[macho.Cpu]string{macho.CpuAmd64: "amd64", macho.CpuArm64: "arm64"}[f.Cpu]
}

func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(fmt.Errorf("%s: %w", path, err))
		}
		names = append(names, h.Name)
	}
	sort.Strings(names)
	return names
}
