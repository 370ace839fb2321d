package nodevm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A new ssh connection costs the emulated guest about a second of CPU
// (the key exchange, sshd's re-exec), and a suite runs hundreds of
// commands; a session on one shared connection (OpenSSH's ControlMaster)
// costs a fifth of that (docs/reports/benchmarks.md). Commands share one;
// the probes that wait for the guest to come or go make their own.
const (
	shared = true
	fresh  = false
)

// connectTimeout bounds ssh's wait for the guest's sshd to answer
// (QEMU accepts the TCP connection itself, so what is bounded is the
// banner). A guest booting beside its apps can take seconds to fork
// sshd's session; a client that gives up sooner leaves that half-made
// session running in the guest and tries again.
const connectTimeout = 30 * time.Second

// maxSessions lets that many commands at once share the connection
// (sshd's default is 10); more would be refused, not queued.
const maxSessions = 64

// SSHCommand is the command line that reaches the guest as root, on a
// connection of its own.
func (v *VM) SSHCommand() []string { return v.sshArgs(fresh) }

func (v *VM) sshArgs(share bool) []string {
	args := []string{"ssh", "-i", v.key, "-p", strconv.Itoa(v.ssh),
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "BatchMode=yes", "-o", "ConnectTimeout=" + strconv.Itoa(int(connectTimeout/time.Second)), "-o", "ServerAliveInterval=5"}
	if share && v.sharing {
		// The first command starts the connection, which then stays in
		// the background (ControlPersist) until unshare or the guest
		// goes; a stale socket is replaced.
		args = append(args, "-o", "ControlMaster=auto", "-o", "ControlPersist=yes",
			"-o", "ControlPath="+v.controlPath())
	}
	return append(args, "root@127.0.0.1")
}

// controlPath is short whatever the checkout's path: a unix socket's
// path has a limit of about 100 bytes.
func (v *VM) controlPath() string { return filepath.Join(v.sockDir, "ctl") }

// share prepares the shared connection: sshd allows maxSessions on it.
func (v *VM) share(ctx context.Context) error {
	conf := fmt.Sprintf("printf 'MaxSessions %d\\n' >/etc/ssh/sshd_config.d/nodevm.conf && systemctl reload ssh", maxSessions)
	if _, err := v.Run(ctx, conf); err != nil { // not shared yet: a connection of its own
		return err
	}
	v.sharing = true
	return nil
}

// unshare ends the shared connection, if there is one; the next command
// starts another.
func (v *VM) unshare() {
	if !v.sharing {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = exec.CommandContext(ctx, "ssh", "-o", "ControlPath="+v.controlPath(), "-O", "exit", "root@127.0.0.1").Run()
}

// errUnreached marks an ssh that did not reach the guest's shell.
var errUnreached = errors.New("ssh did not reach the guest")

// unreachedMarks are ssh's own messages for a connection that failed
// before authentication, so before anything ran in the guest: "ssh:
// connect to host 127.0.0.1 port N: Connection refused" (or timed out),
// and sshd's banner late or cut ("Connection timed out during banner
// exchange", "kex_exchange_identification: ...").
var unreachedMarks = []string{"ssh: connect to host ", "during banner exchange", "kex_exchange_identification"}

// unreached says whether an ssh that exited with code and stderr never
// reached the guest's shell: exit 255 is ssh's own, or the script's.
func unreached(code int, stderr string) bool {
	if code != 255 {
		return false
	}
	for _, m := range unreachedMarks {
		if strings.Contains(stderr, m) {
			return true
		}
	}
	return false
}

// runOnce is one ssh, on the shared connection or a fresh one.
func (v *VM) runOnce(ctx context.Context, script string, stdin []byte, share bool) (string, error) {
	args := append(v.sshArgs(share), "bash", "-ec", shellQuote(script))
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		stderr := strings.TrimSpace(errb.String())
		var exit *exec.ExitError
		if errors.As(err, &exit) && unreached(exit.ExitCode(), stderr) {
			err = fmt.Errorf("%w: %w", errUnreached, err)
		}
		return out.String(), fmt.Errorf("nodevm: %q: %w: %s", firstLine(script), err, stderr)
	}
	return out.String(), nil
}
