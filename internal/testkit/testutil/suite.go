package testutil

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// AgentBinary is the unitlet binary that `make build` writes.
func AgentBinary() string { return filepath.Join(testenv.RepoRoot(), "bin", "unitlet") }

// ShimBinary is the small helper (unitlet-shim) that `make build` writes
// beside the agent: every unit's trampoline and exit record run it.
func ShimBinary() string { return filepath.Join(testenv.RepoRoot(), "bin", "unitlet-shim") }

// ClusterBinary is the cluster side's binary (unitlet-cluster) that
// `make build` writes.
func ClusterBinary() string { return filepath.Join(testenv.RepoRoot(), "bin", "unitlet-cluster") }

// Preflight is what a suite that runs the agent binary as root checks
// before anything starts; its error names what is missing and how to get
// it, prefixed with suite. It returns AgentBinary.
func Preflight(suite, whyRoot string) (exe string, err error) {
	return preflight(suite, whyRoot, os.Geteuid(), AgentBinary())
}

func preflight(suite, whyRoot string, euid int, exe string) (string, error) {
	if euid != 0 {
		return "", fmt.Errorf("%s: must run as root (%s)", suite, whyRoot)
	}
	if _, err := os.Stat(exe); err != nil {
		return "", fmt.Errorf("%s: %s missing: run `make build` first", suite, exe)
	}
	return exe, nil
}
