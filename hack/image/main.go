// Command image writes a one-binary container image tarball (`make image`:
// the agent's, and the test cluster's pause image):
// no container engine runs on the machines that build it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/unitlet/unitlet/internal/agentimage"
)

func main() {
	binary := flag.String("binary", "bin/unitlet-static", "static unitlet binary (CGO_ENABLED=0)")
	path := flag.String("path", agentimage.Path, "where the binary sits in the image (its entrypoint)")
	tag := flag.String("tag", "unitlet.dev/unitlet:dev", "the image's name and tag")
	out := flag.String("out", "bin/unitlet-image.tar", "the image tarball to write")
	flag.Parse()
	digest, err := agentimage.WriteFile(*binary, *path, *tag, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("%s %s@%s\n", *out, *tag, digest)
}
