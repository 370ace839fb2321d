package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/unitlet/unitlet/agent/selfinstall"
)

// handOverEnv, when set, makes the test binary hand "relay" over as
// unitlet would: exec replaces the process, so it runs in a child.
const handOverEnv = "UNITLET_TEST_HAND_OVER"

// TestHandOver: `unitlet relay ARGS` runs unitlet-cluster beside the
// binary as `unitlet-cluster relay ARGS`, in the same process; without
// one, it says what to run and exits 2.
func TestHandOver(t *testing.T) {
	if os.Getenv(handOverEnv) != "" {
		os.Exit(handOver("relay")([]string{"--listen", ":8443"}))
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := func() (string, int) {
		cmd := exec.Command(self, "-test.run=^TestHandOver$")
		cmd.Env = append(os.Environ(), handOverEnv+"=1")
		out, err := cmd.CombinedOutput()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out)), code
	}

	side := filepath.Join(filepath.Dir(self), selfinstall.ClusterName)
	_ = os.Remove(side)
	if out, code := child(); code != 2 || !strings.Contains(out, "in its own binary unitlet-cluster") {
		t.Errorf("without unitlet-cluster: exit %d, %q; want 2 and what to run", code, out)
	}

	// The stand-in prints how it was called.
	if err := os.WriteFile(side, []byte("#!/bin/sh\necho \"$0 $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(side) })
	if out, code := child(); code != 0 || out != side+" relay --listen :8443" {
		t.Errorf("with unitlet-cluster beside: exit %d, %q; want 0, %q", code, out, side+" relay --listen :8443")
	}
}
