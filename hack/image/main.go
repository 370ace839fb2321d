// Command image writes a one-binary container image tarball (`make image`:
// the agent's with its per-unit helper and the cluster side's binary
// beside it, and the test cluster's pause image): no container engine runs on the machines that build it.
//
// With --platform (repeated, os/arch=FILE[,SHIM]) it writes instead one OCI
// archive holding an image index, one image per platform (`make release`),
// and prints the index's digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/unitlet/unitlet/internal/agentimage"
)

// platforms collects the repeated --platform flag.
type platforms []string

func (p *platforms) String() string     { return strings.Join(*p, ",") }
func (p *platforms) Set(s string) error { *p = append(*p, s); return nil }

func main() {
	binary := flag.String("binary", "bin/unitlet-static", "static unitlet binary (CGO_ENABLED=0)")
	shim := flag.String("shim", "", "the static per-unit helper (cmd/unitlet-shim) placed beside the binary; empty: none")
	clusterSide := flag.String("cluster", "", "the cluster side's static binary (cmd/unitlet-cluster) placed beside the binary; empty: none")
	path := flag.String("path", agentimage.Path, "where the binary sits in the image (its entrypoint)")
	tag := flag.String("tag", "unitlet.dev/unitlet:dev", "the image's name and tag")
	out := flag.String("out", "bin/unitlet-image.tar", "the image tarball to write")
	var plats platforms
	flag.Var(&plats, "platform", "os/arch=FILE[,SHIM[,CLUSTER]]: one platform's static binary, helper and cluster side's binary; repeated, writes an OCI archive with an image index (--binary, --shim and --cluster are then unused)")
	flag.Parse()
	var digest v1.Hash
	var err error
	if len(plats) == 0 {
		var beside agentimage.Companions
		if beside, err = agentimage.ReadCompanions(*shim, *clusterSide); err == nil {
			digest, err = agentimage.WriteFile(*binary, beside, *path, *tag, *out)
		}
	} else {
		digest, err = writeIndex(plats, *path, *tag, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("%s %s@%s\n", *out, *tag, digest)
}

func writeIndex(plats []string, path, tag, out string) (v1.Hash, error) {
	var bins []agentimage.PlatformBinary
	for _, p := range plats {
		b, err := agentimage.ParsePlatformBinary(p)
		if err != nil {
			return v1.Hash{}, err
		}
		bins = append(bins, b)
	}
	idx, err := agentimage.BuildIndex(bins, path)
	if err != nil {
		return v1.Hash{}, err
	}
	return agentimage.WriteOCIArchive(idx, tag, out)
}
