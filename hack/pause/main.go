// Command pause is the sandbox ("pause") image's process for the test
// cluster's containerd: no registry is reachable, so the image is built
// here (`make image` writes bin/pause-image.tar). It holds the pod's
// namespaces open, reaps the children it inherits and exits on SIGTERM or
// SIGINT, as the upstream pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
