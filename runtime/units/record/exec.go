package record

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/unitlet/unitlet/runtime/instancefs"
)

// ExecSuffix names the exec-failure record, <prefix>exec: the trampoline
// creates it empty (as root, before it drops privileges), close-on-exec,
// and writes into it only when the exec of the app failed. Empty means
// the app was exec'd (or the trampoline never got that far).
const ExecSuffix = "exec"

// ExecFailure is why the app's command could not be executed.
type ExecFailure struct {
	Schema string `json:"schema"`
	// Path is argv[0]; Error the exec's error ("no such file or directory").
	Path  string `json:"path"`
	Error string `json:"error"`
	// Why, when known, says what the node and the app's sandbox disagree
	// on (the path exists on the node, not inside the sandbox).
	Why string    `json:"why,omitempty"`
	At  time.Time `json:"at"`
}

// String is the failure in one line: "exec PATH: ERROR (WHY)".
func (e ExecFailure) String() string {
	s := fmt.Sprintf("exec %s: %s", e.Path, e.Error)
	if e.Why != "" {
		s += " (" + e.Why + ")"
	}
	return s
}

// ReadExec reads dir/name: nil when it is missing or empty (no exec
// failed).
func ReadExec(dir, name string) (*ExecFailure, error) {
	b, err := instancefs.ReadFileLimit(dir, name, maxRecord)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("record: read %s: %w", name, err)
	case len(b) == 0:
		return nil, nil
	}
	var e ExecFailure
	if err := Read(dir, name, &e); err != nil {
		return nil, err
	}
	return &e, nil
}
