package tinyapp

import (
	"context"
	"fmt"
	"os"
	"strconv"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// GuestPath is where Install puts the app on a node: outside the
// directories an app's sandbox has of its own (/tmp and the like), and
// executable by every app's uid.
const GuestPath = "/usr/local/libexec/unitlet-test/tinyapp"

// guest is a node the app can be written onto (nodevm.VM).
type guest interface {
	WriteFile(ctx context.Context, path string, data []byte, mode os.FileMode) error
}

// Install builds the app on this machine (the guest has no compiler; the
// binary is static) and writes it to GuestPath on g.
func Install(ctx context.Context, g guest) error {
	dir, err := os.MkdirTemp("", "tinyapp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := Build(dir)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	if err := g.WriteFile(ctx, GuestPath, data, 0o755); err != nil {
		return fmt.Errorf("install the tiny app at %s: %w", GuestPath, err)
	}
	return nil
}

// Serves makes an Instance's template run the app installed by Install,
// answering "hello from host generation N" and draining drainSeconds on
// SIGTERM (0: none). The sample apps' interpreter takes seconds to start
// in an emulated guest; a step about the platform need not wait on it.
func Serves(host string, drainSeconds int) func(*v1.Instance) {
	return func(i *v1.Instance) {
		t := &i.Spec.Template
		t.Command, t.Args = []string{GuestPath}, nil
		t.Env = testutil.SetEnv(t.Env, "GREETING_HOST", host)
		if drainSeconds > 0 {
			t.Env = testutil.SetEnv(t.Env, "DRAIN_SECONDS", strconv.Itoa(drainSeconds))
		}
	}
}
