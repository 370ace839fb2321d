// Package tinyapp builds the smallest app an Instance can run (c/app.c): a
// static, single-threaded HTTP server on $UNITLET_APP_SOCKET that answers
// "ok" (or, when asked, the samples' greeting, a drain on SIGTERM, or a
// request held for seconds). Its own cost is near nothing, so what a start
// measures is the start: the bench and the systemd batch run it, and the
// node VM's suites install it in the guest for the steps that start many
// apps at once or answer many requests.
package tinyapp

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

//go:embed c/app.c
var source []byte

// Build compiles app.c, static, into dir and returns the binary's path.
// dir must be where the app's sandbox sees it (not /tmp, /var/tmp or
// /dev/shm, which are its own).
func Build(dir string) (string, error) {
	src := filepath.Join(dir, "app.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "app")
	if b, err := exec.Command("cc", "-static", "-Os", "-o", out, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the tiny app (cc, from hack/deps.sh): %w\n%s", err, b)
	}
	return out, nil
}
