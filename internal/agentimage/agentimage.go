// Package agentimage builds the agent's container image (and the test
// cluster's pause image) without a container engine: one layer holding a
// static binary (the agent's: /unitlet, with its per-unit helper beside it
// at /unitlet-shim and the cluster side's at /unitlet-cluster), written as an image tarball (the `docker save` layout:
// manifest.json, config, layer) that `ctr images import`, `docker load` and
// kind read; no registry is needed to get it onto a node. The layer's bytes depend on
// the binaries alone (no timestamps), so the same binaries give the same image.
package agentimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	pathpkg "path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/unitlet/unitlet/agent/selfinstall"
)

// Path is where the agent's binary sits in its image; the DaemonSet runs
// it.
const Path = "/unitlet"

// File is one executable in the image's layer, at Path (absolute).
type File struct {
	Path string
	Data []byte
}

// Companions are the binaries beside the agent's in its image: the
// per-unit helper (see ShimPath) and the cluster side's (see
// ClusterPath). An empty one is left out.
type Companions struct{ Shim, Cluster []byte }

// Files are c's Files beside the binary at path.
func (c Companions) Files(path string) []File {
	var files []File
	if len(c.Shim) != 0 {
		files = append(files, File{Path: ShimPath(path), Data: c.Shim})
	}
	if len(c.Cluster) != 0 {
		files = append(files, File{Path: ClusterPath(path), Data: c.Cluster})
	}
	return files
}

// ReadCompanions reads the helper at shim and the cluster side's binary
// at cluster; an empty path is none.
func ReadCompanions(shim, cluster string) (Companions, error) {
	var c Companions
	var err error
	if c.Shim, err = readUnlessEmpty(shim); err != nil {
		return Companions{}, fmt.Errorf("helper: %w", err)
	}
	if c.Cluster, err = readUnlessEmpty(cluster); err != nil {
		return Companions{}, fmt.Errorf("cluster side's binary: %w", err)
	}
	return c, nil
}

func readUnlessEmpty(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	return os.ReadFile(path)
}

// ShimPath is where the per-unit helper sits beside the binary at path:
// `unitlet install` copies it from there to the host beside the agent.
func ShimPath(path string) string { return pathpkg.Join(pathpkg.Dir(path), selfinstall.ShimName) }

// ClusterPath is where the cluster side's binary sits beside the binary
// at path: its Deployments run it, and `unitlet cluster` hands over to it.
func ClusterPath(path string) string {
	return pathpkg.Join(pathpkg.Dir(path), selfinstall.ClusterName)
}

// Build returns the linux/amd64 image of binary at path (absolute), run as
// its entrypoint, with extra files beside it.
func Build(binary []byte, path string, extra ...File) (v1.Image, error) {
	return BuildFor(binary, path, v1.Platform{OS: "linux", Architecture: "amd64"}, extra...)
}

// BuildFor returns the image of binary, built for platform, at path
// (absolute), run as its entrypoint, with extra files beside it.
func BuildFor(binary []byte, path string, platform v1.Platform, extra ...File) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range append([]File{{Path: path, Data: binary}}, extra...) {
		if err := tw.WriteHeader(&tar.Header{
			Name: f.Path[1:], Mode: 0o755, Size: int64(len(f.Data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX,
		}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
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

// WriteFile builds the image of the binary at binaryPath, placed at path
// with its companions beside it, and writes it to out under tag, through
// a temporary file renamed into place.
func WriteFile(binaryPath string, beside Companions, path, tag, out string) (v1.Hash, error) {
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
	img, err := Build(bin, path, beside.Files(path)...)
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
