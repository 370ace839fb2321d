package layout

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Layout holds the three roots every instance path is derived from. The
// roots must be real paths (no symlink in any component): instancefs
// refuses to resolve through one.
type Layout struct {
	StateRoot  string // e.g. /var/lib/unitlet: data dirs, rotated logs
	RunRoot    string // e.g. /run/unitlet: sockets, exit records
	CgroupRoot string // e.g. unitlet: relative to each hierarchy's mount
}

// ErrBadName is returned for a namespace or name that is not a DNS-1123
// label (namespace) or subdomain (name): only those can be turned into
// paths and unit names without ambiguity.
var ErrBadName = errors.New("invalid instance namespace or name")

// ErrRunRootTooLong is returned when even the shortened run dir leaves no
// room for the longest socket name within sun_path.
var ErrRunRootTooLong = errors.New("run root too long for unix socket paths")

// SunPathMax is the longest unix socket path that can be bound: sun_path
// is 108 bytes and we keep one for the terminating NUL.
const SunPathMax = 107

// longestSocketSuffix is the longest name a socket gets beneath the run
// dir: the log socket of a sidecar whose name is SidecarNameMax long
// ("/logs/sc.<32>.sock", 46 bytes), longer than a generation's control
// socket with a 20-digit generation number
// ("/g18446744073709551615/app.sock.control", 39). Deciding the run dir by
// the worst case keeps it the same for every slot of an instance.
const longestSocketSuffix = len("/logs/"+sidecarLogSocketPrefix) + SidecarNameMax + len(".sock")

// shortDir holds run dirs whose natural path would not fit sun_path. It
// holds a '_', which no namespace (a DNS label) does, so no natural run
// dir <run>/<ns>/<name> is ever one of them.
const shortDir = "_h"

// Instance is one Instance's place on the node. Build it with
// Layout.Instance; the zero value is not usable.
type Instance struct {
	layout    Layout
	namespace string
	name      string
	runDir    string
}

// Instance validates namespace and name and returns the instance's paths.
func (l Layout) Instance(namespace, name string) (Instance, error) {
	if !isDNSLabel(namespace) {
		return Instance{}, fmt.Errorf("%w: namespace %q", ErrBadName, namespace)
	}
	if !isDNSSubdomain(name) {
		return Instance{}, fmt.Errorf("%w: name %q", ErrBadName, name)
	}
	if !filepath.IsAbs(l.StateRoot) || !filepath.IsAbs(l.RunRoot) {
		return Instance{}, fmt.Errorf("state root %q and run root %q must be absolute", l.StateRoot, l.RunRoot)
	}
	i := Instance{layout: l, namespace: namespace, name: name}
	i.runDir = filepath.Join(l.RunRoot, namespace, name)
	if len(i.runDir)+longestSocketSuffix > SunPathMax {
		i.runDir = filepath.Join(l.RunRoot, shortDir, i.ShortID())
		if len(i.runDir)+longestSocketSuffix > SunPathMax {
			return Instance{}, fmt.Errorf("%w: %q", ErrRunRootTooLong, l.RunRoot)
		}
	}
	return i, nil
}

// Namespace and Name are the instance's identity.
func (i Instance) Namespace() string { return i.namespace }
func (i Instance) Name() string      { return i.name }

// ShortID is a stable id of (namespace, name), used where the natural
// name is too long (sun_path, unit names, cgroup names): 128 bits of a
// SHA-256, in 26 lower-case base32 digits. The NUL separator cannot occur
// in either part, so no two instances share an input, and 128 bits leave
// a crafted collision out of reach (64 did not: 2^32 tries find one).
// Every shortened form also sits where no natural name can (see
// shortDir, unitStem, InstanceCgroup).
func (i Instance) ShortID() string { return shortID(i.namespace, i.name) }

func shortID(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "\x00" + name))
	return shortIDEncoding.EncodeToString(sum[:16])
}

// shortIDEncoding spells an id with [a-z2-7] only: valid in a path, a
// unit name and a cgroup name alike.
var shortIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// DataDir is <state>/instances/<ns>/<name>: the app's own files, owned
// by the Instance's user, mode 0700. The tenant writes in it, so anything
// the agent does beneath it goes through instancefs, and nothing the agent
// trusts lives there.
func (i Instance) DataDir() string {
	return filepath.Join(i.layout.StateRoot, "instances", i.namespace, i.name)
}

// PrivateDir is <state>/private/<ns>/<name>: what the agent keeps for the
// instance (launch files, env file with the admin token, schedules), root's
// alone. A launch file says whom to run as, so the app must never be able
// to write one.
func (i Instance) PrivateDir() string {
	return filepath.Join(i.layout.StateRoot, "private", i.namespace, i.name)
}

// IdentityDir holds the uids allocated to Instances (runtime/identity).
func (l Layout) IdentityDir() string { return filepath.Join(l.StateRoot, "ids") }

// BootRecord is <state>/boot_id: the boot ID the agent last ran under
// (runtime/boot). Beside the state, not in the run root: it must outlive
// the boot it names, or a reboot could not be told.
func (l Layout) BootRecord() string { return filepath.Join(l.StateRoot, "boot_id") }

// BootPending is <state>/boot_pending.json: the generations a reboot took
// that the API does not say gone yet (runtime/boot.Pending). Beside the
// boot record: it must outlive an agent that dies before writing them.
func (l Layout) BootPending() string { return filepath.Join(l.StateRoot, "boot_pending.json") }

// RunDir is <run>/<ns>/<name> (or <run>/_h/<ShortID> when that would not
// leave room for socket names within sun_path): sockets and exit records.
func (i Instance) RunDir() string { return i.runDir }

// GenDir is the directory of generation n's sockets, g<n> in the run dir.
func (i Instance) GenDir(n int64) (string, error) {
	g, err := GenerationCgroup(n) // the same g<n> spelling as the cgroup
	if err != nil {
		return "", err
	}
	return filepath.Join(i.runDir, g), nil
}

// AppSocket is the socket generation n's app binds.
func (i Instance) AppSocket(n int64) (string, error) {
	d, err := i.GenDir(n)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, AppSocketName), nil
}

// AppSocketName is the app socket's file name in a generation dir, and the
// stable symlink's name in the run dir.
const AppSocketName = "app.sock"

// StableSocket is the symlink in the run dir that points at the serving
// generation's app socket; flipping it swaps generations.
func (i Instance) StableSocket() string { return filepath.Join(i.runDir, AppSocketName) }

// IdleSocket is where the agent binds an asleep Instance's socket when
// no generation's is left to hold (a reboot emptied the run dir); the
// stable socket leads to it until a generation inherits it.
func (i Instance) IdleSocket() string { return filepath.Join(i.runDir, "idle.sock") }

// ControlSocket is the control socket that sits next to an app socket.
func ControlSocket(appSocket string) string { return appSocket + ".control" }

// LogDir holds the log sockets; 0700, only the agent and the trampoline
// (before it drops privileges) open it.
func (i Instance) LogDir() string { return filepath.Join(i.runDir, "logs") }

// ExitDir is where exit records are written (agent-owned, not tenant
// writable, so a tenant cannot forge one).
func (i Instance) ExitDir() string { return i.runDir }

// EnvFileName is the instance env file (admin token) beneath PrivateDir.
const EnvFileName = "instance.env"

// SchedulesFileName holds the app's own timers beneath PrivateDir.
const SchedulesFileName = "schedules.json"

// EnvFile is the full path of the instance env file.
func (i Instance) EnvFile() string { return filepath.Join(i.PrivateDir(), EnvFileName) }

// LogFile is the per-instance, size-rotated log file. It lives under the
// state root but outside the tenant-writable data dir.
func (i Instance) LogFile() string {
	return filepath.Join(i.layout.StateRoot, "logs", i.namespace, i.name, "app.log")
}

// Cgroup is the instance parent cgroup (see InstanceCgroup).
func (i Instance) Cgroup() string {
	return InstanceCgroup(i.layout.CgroupRoot, i.namespace, i.name)
}

// isDNSLabel: 1-63 of [a-z0-9-], starting and ending alphanumeric.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isDNSSubdomain: up to 253 bytes of dot-separated DNS labels.
func isDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !isDNSLabel(l) {
			return false
		}
	}
	return true
}

// HandoffSocket is where the agent hands activated generations their
// listening socket (runtime/activation); no namespace (a DNS label) can
// take the name.
func (l Layout) HandoffSocket() string { return filepath.Join(l.RunRoot, "activation.sock") }
