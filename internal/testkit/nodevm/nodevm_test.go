package nodevm

import (
	"bytes"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestUnreached: only ssh's own failures before the session are tried
// again; a script's exit, even 255, and a session cut mid-way are not.
func TestUnreached(t *testing.T) {
	for name, tc := range map[string]struct {
		code   int
		stderr string
		want   bool
	}{
		"port closed":         {255, "ssh: connect to host 127.0.0.1 port 2222: Connection refused", true},
		"connect timed out":   {255, "ssh: connect to host 127.0.0.1 port 2222: Connection timed out", true},
		"banner late":         {255, "Connection timed out during banner exchange\r\nConnection to 127.0.0.1 port 2222 timed out", true},
		"banner cut":          {255, "kex_exchange_identification: read: Connection reset by peer", true},
		"the script's 255":    {255, "curl: (28) Connection timed out after 5001 milliseconds", false},
		"the session cut":     {255, "Timeout, server 127.0.0.1 not responding.", false},
		"the script's own":    {1, "ssh: connect to host 127.0.0.1 port 2222: Connection refused", false},
		"the script, nothing": {255, "", false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := unreached(tc.code, tc.stderr); got != tc.want {
				t.Errorf("unreached(%d, %q) = %v, want %v", tc.code, tc.stderr, got, tc.want)
			}
		})
	}
}

// TestUnreachedByRealSSH: what this machine's ssh prints for a closed
// port is read as unreached.
func TestUnreachedByRealSSH(t *testing.T) {
	port, err := testutil.FreeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=2", "-p", strconv.Itoa(port), "root@127.0.0.1", "true")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("ssh to a closed port: %v", err)
	}
	if stderr := strings.TrimSpace(errb.String()); !unreached(exit.ExitCode(), stderr) {
		t.Errorf("ssh to a closed port: exit %d, %q: not read as unreached", exit.ExitCode(), stderr)
	}
}
