// Package agentimage builds the agent's container image (and the test
// cluster's pause image) without a container engine: one layer holding a
// static binary (the agent's: /unitlet), written as an image tarball (the `docker save` layout:
// manifest.json, config, layer) that `ctr images import`, `docker load` and
// kind read; no registry is needed to get it onto a node. The layer's bytes depend on
// the binary alone (no timestamps), so the same binary gives the same image.
package agentimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Path is where the agent's binary sits in its image; the DaemonSet runs
// it.
const Path = "/unitlet"

// Build returns the linux/amd64 image of binary at path (absolute), run as
// its entrypoint.
func Build(binary []byte, path string) (v1.Image, error) {
	return BuildFor(binary, path, v1.Platform{OS: "linux", Architecture: "amd64"})
}

// BuildFor returns the image of binary, built for platform, at path
// (absolute), run as its entrypoint.
func BuildFor(binary []byte, path string, platform v1.Platform) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Name: path[1:], Mode: 0o755, Size: int64(len(binary)), Typeflag: tar.TypeReg, Format: tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = platform.OS, platform.Architecture, platform.Variant
	cfg.Config.Entrypoint = []string{path}
	cfg.Config.User = "0"
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/unitlet/unitlet"}
	return mutate.ConfigFile(img, cfg)
}

// WriteFile builds the image of the binary at binaryPath, placed at path,
// and writes it to out under tag, through a temporary file renamed into
// place.
func WriteFile(binaryPath, path, tag, out string) (v1.Hash, error) {
	bin, err := os.ReadFile(binaryPath)
	if err != nil {
		return v1.Hash{}, err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("tag %q: %w", tag, err)
	}
	if !strings.HasPrefix(path, "/") || len(path) < 2 {
		return v1.Hash{}, fmt.Errorf("path %q: want an absolute file path", path)
	}
	img, err := Build(bin, path)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := tarball.WriteToFile(out+".tmp", ref, img); err != nil {
		return v1.Hash{}, err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}
