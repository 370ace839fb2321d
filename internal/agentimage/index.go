package agentimage

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of index.json's one entry, naming the image: containerd's
// `ctr images import` and `docker load` read the first, the OCI layout
// spec the second (a tag alone).
const (
	AnnotationContainerdName = "io.containerd.image.name"
	AnnotationRefName        = "org.opencontainers.image.ref.name"
)

// PlatformBinary is one platform's static binary for an index, and its
// per-unit helper (none: nil).
type PlatformBinary struct {
	Platform v1.Platform
	Binary   []byte
	Beside   Companions
}

// ParsePlatformBinary reads "os/arch[/variant]=FILE[,SHIM[,CLUSTER]]"
// (hack/image's --platform flag) and the files it names.
func ParsePlatformBinary(s string) (PlatformBinary, error) {
	const want = "os/arch=FILE[,SHIM[,CLUSTER]]"
	plat, files, ok := strings.Cut(s, "=")
	names := strings.Split(files, ",")
	if !ok || len(names) > 3 || slices.Contains(names, "") {
		return PlatformBinary{}, fmt.Errorf("%q: want %s", s, want)
	}
	p, err := v1.ParsePlatform(plat)
	if err != nil || p.OS == "" || p.Architecture == "" {
		return PlatformBinary{}, fmt.Errorf("%q: want %s (platform %q)", s, want, plat)
	}
	pb := PlatformBinary{Platform: *p}
	if pb.Binary, err = os.ReadFile(names[0]); err != nil {
		return PlatformBinary{}, fmt.Errorf("%s binary: %w", plat, err)
	}
	names = append(names, "", "")
	if pb.Beside, err = ReadCompanions(names[1], names[2]); err != nil {
		return PlatformBinary{}, fmt.Errorf("%s %w", plat, err)
	}
	return pb, nil
}

// BuildIndex returns the OCI image index of one image per binary, each
// with its binary at path (its helper beside it) and its platform in the
// index.
func BuildIndex(binaries []PlatformBinary, path string) (v1.ImageIndex, error) {
	if len(binaries) == 0 {
		return nil, fmt.Errorf("an index needs at least one platform's binary")
	}
	adds := make([]mutate.IndexAddendum, 0, len(binaries))
	for _, b := range binaries {
		img, err := BuildFor(b.Binary, path, b.Platform, b.Beside.Files(path)...)
		if err != nil {
			return nil, fmt.Errorf("%s image: %w", b.Platform, err)
		}
		p := b.Platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1, Platform: &p,
		}})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, adds...), nil
}

// WriteOCIArchive writes idx as an OCI image layout in one tar file (out,
// through a temporary file renamed into place), named tag, and returns the
// index's digest: what a manifest pins the image by.
func WriteOCIArchive(idx v1.ImageIndex, tag, out string) (v1.Hash, error) {
	ref, err := name.NewTag(tag)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("tag %q: %w", tag, err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(out), ".oci-layout-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("OCI layout: %w", err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		AnnotationContainerdName: ref.Name(),
		AnnotationRefName:        ref.TagStr(),
	})); err != nil {
		return v1.Hash{}, fmt.Errorf("OCI layout: %w", err)
	}
	if err := tarDir(dir, out+".tmp"); err != nil {
		return v1.Hash{}, err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}

// tarDir writes the files under dir to a tar file, in lexical order with
// no owners or times, so the same index gives the same archive.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Name: rel + "/", Mode: 0o755, Typeflag: tar.TypeDir, Format: tar.FormatPAX})
		}
		return copyFileTo(tw, p, rel)
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return fmt.Errorf("OCI archive %s: %w", out, err)
	}
	return nil
}

func copyFileTo(tw *tar.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: st.Size(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
