package agentimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Archive is what an OCI archive written by WriteOCIArchive holds, read
// back the way a runtime would: the name and digest index.json gives, and
// each platform's files.
type Archive struct {
	// Name is the containerd name annotation (the image's tag).
	Name string
	// Digest is the index's digest: what install.yaml pins.
	Digest v1.Hash
	// Files maps "os/arch" to its image's files (path → contents).
	Files map[string]map[string][]byte
}

// ReadOCIArchive unpacks archive into scratch (a directory) and reads it.
// A platform whose image config disagrees with the index is an error: a
// runtime would run the wrong binary.
func ReadOCIArchive(archive, scratch string) (*Archive, error) {
	if err := untar(archive, scratch); err != nil {
		return nil, fmt.Errorf("unpack %s: %w", archive, err)
	}
	top, err := layout.Path(scratch).ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("%s: index.json: %w", archive, err)
	}
	topm, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(topm.Manifests) != 1 {
		return nil, fmt.Errorf("%s: index.json has %d entries, want 1", archive, len(topm.Manifests))
	}
	entry := topm.Manifests[0]
	inner, err := top.ImageIndex(entry.Digest)
	if err != nil {
		return nil, fmt.Errorf("%s: the image index %s: %w", archive, entry.Digest, err)
	}
	files, err := platformFiles(inner)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	return &Archive{Name: entry.Annotations[AnnotationContainerdName], Digest: entry.Digest, Files: files}, nil
}

// platformFiles maps each of idx's platforms to its image's files.
func platformFiles(idx v1.ImageIndex) (map[string]map[string][]byte, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	got := map[string]map[string][]byte{}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		if d.Platform == nil || cfg.Platform().String() != d.Platform.String() {
			return nil, fmt.Errorf("the index says %v, the image's config %v", d.Platform, cfg.Platform())
		}
		files, err := extract(img)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Platform, err)
		}
		got[d.Platform.String()] = files
	}
	return got, nil
}

func extract(img v1.Image) (map[string][]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[h.Name] = b
	}
}

// untar unpacks a tar of regular files and directories into dir, refusing
// names that would leave it.
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves the archive", h.Name)
		}
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
}
