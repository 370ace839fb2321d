package trampoline

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/units/record"
)

// recordFDMin keeps the record's descriptor clear of the app's (0-2 and
// the socket moved to 3 just before the exec).
const recordFDMin = 10

// execRecord is the exec-failure record (record.ExecSuffix) open for
// writing: created empty by root before the privileges go, in the
// agent's exit dir, close-on-exec, so a successful exec closes it
// unwritten and a failed one is told apart from the app's own exit 127.
// Without --exec-record its fd is -1 and nothing is written.
type execRecord struct {
	fd     int
	onNode bool // argv[0] exists in the node's view, before the sandbox
}

func openExecRecord(path string) (*execRecord, error) {
	if path == "" {
		return &execRecord{fd: -1}, nil
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("exec record %s: %w", path, err)
	}
	defer unix.Close(fd)
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, recordFDMin)
	if err != nil {
		return nil, fmt.Errorf("exec record %s: %w", path, err)
	}
	return &execRecord{fd: high}, nil
}

// noteNode looks at path as the node sees it, before the sandbox hides
// any of it.
func (r *execRecord) noteNode(path string) {
	var st unix.Stat_t
	r.onNode = unix.Stat(path, &st) == nil
}

// failed records that the exec of path failed with err and returns the
// exit code a shell would give, and the error with the why.
func (r *execRecord) failed(path string, err error) (int, error) {
	e := record.ExecFailure{Schema: record.Schema, Path: path, Error: err.Error(),
		Why: execWhy(path, r.onNode, err), At: time.Now()}
	if r.fd >= 0 {
		if b, jerr := json.Marshal(e); jerr == nil {
			_, _ = unix.Write(r.fd, append(b, '\n'))
		}
	}
	code := ExitCannotExec
	if errors.Is(err, unix.ENOENT) {
		code = ExitNotFound
	}
	return code, errors.New(e.String())
}

// execWhy says why path could not be executed when the sandbox, not the
// node, is the cause; "" when the error says it all.
func execWhy(path string, onNode bool, err error) string {
	if !errors.Is(err, unix.ENOENT) {
		return ""
	}
	switch {
	case under(filepath.Clean(path), privateTmp):
		return "/tmp is private to each app: put the binary in the data dir or a system path"
	case under(filepath.Clean(path), homes):
		return "home directories are hidden from apps: put the binary in the data dir or a system path"
	case onNode:
		return "it exists on the node but not inside the app's sandbox"
	}
	return ""
}

// Flags of the user-namespace child (inner) that carry the record.
const (
	innerRecordFD = "--exec-record-fd="
	innerOnNode   = "--on-node"
)

// passTo hands the record to the user-namespace child: its fd (inherited
// as cmd's next extra file) and what the node showed. It returns the
// child's flags.
func (r *execRecord) passTo(cmd *exec.Cmd) []string {
	var flags []string
	if r.fd >= 0 {
		cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(r.fd), "exec-record"))
		flags = append(flags, innerRecordFD+strconv.Itoa(2+len(cmd.ExtraFiles)))
	}
	if r.onNode {
		flags = append(flags, innerOnNode)
	}
	return flags
}

// innerRecord reads passTo's flags before "--" in args and returns the
// rest.
func innerRecord(args []string) (*execRecord, []string, error) {
	r := &execRecord{fd: -1}
	for len(args) > 0 && args[0] != "--" {
		switch a := args[0]; {
		case a == innerOnNode:
			r.onNode = true
		case strings.HasPrefix(a, innerRecordFD):
			fd, err := strconv.Atoi(strings.TrimPrefix(a, innerRecordFD))
			if err != nil || fd < 3 {
				return nil, nil, fmt.Errorf("bad %s", a)
			}
			r.fd = fd
		default:
			return nil, nil, fmt.Errorf("unknown flag %s", a)
		}
		args = args[1:]
	}
	return r, args, nil
}
