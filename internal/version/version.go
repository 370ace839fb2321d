// Package version is the one place the build's version lives: the agent,
// nodewatch and the kubectl plugin all report it. It imports nothing of the
// project so that every binary can carry it.
package version

import (
	"runtime/debug"
)

// Version is stamped at build time (`make build` passes
// -ldflags "-X github.com/unitlet/unitlet/internal/version.Version=$(git describe --tags --always --dirty)").
// Empty means an unstamped build (go build, go run, go install): Get falls
// back to what the Go toolchain recorded.
var Version = ""

// Unknown is reported when neither a stamp nor a VCS revision is known.
const Unknown = "dev"

// Get returns the stamped version, else the VCS revision the toolchain
// recorded (12 hex digits, "-dirty" when the tree had changes), else the
// module version (`go install ...@vX.Y.Z`), else "dev".
func Get() string {
	info, _ := debug.ReadBuildInfo()
	return resolve(Version, info)
}

// resolve is Get's decision, apart from reading the running binary.
func resolve(stamped string, info *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if info == nil {
		return Unknown
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "-dirty"
		}
		return rev
	}
	// "(devel)" is what a build inside the module's own tree records.
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	return Unknown
}
