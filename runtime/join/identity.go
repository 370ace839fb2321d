package join

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/boot"
)

// Files the identity is read from: machine-id below the node's /etc (in
// the DaemonSet's container, the host's, mounted elsewhere; the image has
// none), boot_id from the kernel, which a container shares with its host.
const (
	MachineIDFile = "machine-id"
	BootIDFile    = boot.DefaultSource
)

// Identity is who the node is, as its Enrollment reports it.
type Identity struct {
	MachineID string
	BootID    string
	// Platform is GOOS-GOARCH of the running agent.
	Platform string
	// Kernel is uname's release.
	Kernel string
}

// ReadIdentity reads the node's identity, its machine ID from hostEtc
// ("" is /etc) and its boot ID from bootIDFile ("" is BootIDFile: the
// agent's --boot-id-file, so the Enrollment reports the boot the agent
// tells reboots by). A part it cannot read is left empty and named in the
// error; the rest is still returned.
func ReadIdentity(hostEtc, bootIDFile string) (Identity, error) {
	if hostEtc == "" {
		hostEtc = "/etc"
	}
	id := Identity{Platform: runtime.GOOS + "-" + runtime.GOARCH}
	var errs []string
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err.Error())
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	id.MachineID = read(filepath.Join(hostEtc, MachineIDFile))
	if bootIDFile == "" {
		bootIDFile = BootIDFile
	}
	id.BootID = read(bootIDFile)
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		errs = append(errs, "uname: "+err.Error())
	} else {
		id.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if len(errs) > 0 {
		return id, fmt.Errorf("node identity: %s", strings.Join(errs, "; "))
	}
	return id, nil
}
