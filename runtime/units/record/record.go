// Package record holds the small files a unit leaves beneath its
// instance's exit dir (layout.Instance.ExitDir), named from the process's
// exit-record prefix (layout.Slot.ExitPrefix):
//
//	<prefix>start  written by the agent before it hands a start off
//	<prefix>pid    written by the shim once the trampoline runs
//	<prefix>exit   written once the main process has ended
//
// Both backends write the exit record in the same format (the direct
// backend's shim, and systemd's ExecStopPost through `unitlet
// exit-record`), so an exit reads the same whoever ran the unit. Every
// record is written atomically; the exit dir is the agent's, not the
// tenant's, so a tenant cannot forge one.
package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/unitlet/unitlet/runtime/instancefs"
	"github.com/unitlet/unitlet/runtime/layout"
)

// Schema names this version of the records; a reader refuses any other.
const Schema = "unitlet.dev/unit-record/v1"

// Suffixes after the process's exit-record prefix.
const (
	StartSuffix = "start"
	PidSuffix   = "pid"
	ExitSuffix  = "exit"
)

// ErrInvalid is wrapped by every decode error.
var ErrInvalid = errors.New("invalid unit record")

// maxRecord bounds a read: records are a few hundred bytes.
const maxRecord = 64 << 10

// Identity names the process slot a record belongs to, so a restarted
// agent can map a record back to its (namespace, name, role, generation)
// without parsing any path.
type Identity struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Role       string `json:"role"`
	Generation int64  `json:"generation,omitempty"`
	Sidecar    string `json:"sidecar,omitempty"` // the sidecar's name, role sidecar only
	Command    string `json:"run,omitempty"`     // the command's name (stored as "run")
}

// IdentityOf is p's identity.
func IdentityOf(p layout.Slot) Identity {
	inst := p.Instance()
	return Identity{Namespace: inst.Namespace(), Name: inst.Name(), Role: string(p.Role()), Generation: p.Generation(), Sidecar: p.SidecarName(), Command: p.CommandName()}
}

// Slot maps the identity back through lay; it fails for anything layout
// refuses.
func (id Identity) Slot(lay layout.Layout) (layout.Slot, error) {
	inst, err := lay.Instance(id.Namespace, id.Name)
	if err != nil {
		return layout.Slot{}, err
	}
	named := id.Sidecar
	if layout.Role(id.Role) == layout.RoleCommand {
		named = id.Command
	}
	return inst.Slot(layout.Role(id.Role), id.Generation, named)
}

// Start is written before a start is handed off: from then on the start
// may have run, whatever happens to the agent.
type Start struct {
	Schema string `json:"schema"`
	Identity
	InvocationID string    `json:"invocationID"`
	Cgroup       string    `json:"cgroup,omitempty"`
	GraceMillis  int64     `json:"graceMillis,omitempty"`
	At           time.Time `json:"at"`
}

// Pid is written by the shim once the trampoline has been exec'd.
type Pid struct {
	Schema       string    `json:"schema"`
	InvocationID string    `json:"invocationID"`
	ShimPID      int       `json:"shimPID"`
	MainPID      int       `json:"mainPID"`
	At           time.Time `json:"at"`
}

// Exit is how the main process ended. Result uses systemd's words
// ($SERVICE_RESULT): "success", "exit-code", "signal", "core-dump", ...
type Exit struct {
	Schema       string    `json:"schema"`
	InvocationID string    `json:"invocationID,omitempty"`
	Result       string    `json:"result"`
	Code         int       `json:"code"`
	Signal       int       `json:"signal"`
	At           time.Time `json:"at"`
	// By names the writer: "shim", "systemd", or "agent" for a kill
	// whose victim could not write it.
	By string `json:"by"`
}

// Results as systemd names them.
const (
	ResultSuccess  = "success"
	ResultExitCode = "exit-code"
	ResultSignal   = "signal"
	ResultCoreDump = "core-dump"
)

// Name is the record's file name for p.
func Name(p layout.Slot, suffix string) string { return p.ExitPrefix() + suffix }

// Write stores v atomically and durably as dir/name, mode 0600: the
// records sit in the run dir, which the socket group (the proxies) may
// read, and only root (agent, shim, ExecStopPost) reads them.
func Write(dir, name string, v any) error { return write(dir, name, v, instancefs.WriteAtomic) }

// WriteVolatile is Write without the fsyncs, for a record that a power
// loss makes moot: a pid record names a process that cannot outlive the
// machine, and with it lost the durable start record still says
// "may have run". It keeps an fsync off the start's path.
func WriteVolatile(dir, name string, v any) error {
	return write(dir, name, v, instancefs.WriteAtomicVolatile)
}

const recordMode = 0o600

func write(dir, name string, v any, put func(dir, name string, data []byte, mode os.FileMode) error) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := put(dir, name, append(b, '\n'), recordMode); err != nil {
		return fmt.Errorf("record: write %s: %w", name, err)
	}
	return nil
}

// Read decodes dir/name into v strictly. A missing record is an error
// that wraps os.ErrNotExist.
func Read(dir, name string, v any) error {
	b, err := instancefs.ReadFileLimit(dir, name, maxRecord)
	if err != nil {
		return fmt.Errorf("record: read %s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalid, name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: %s: trailing data", ErrInvalid, name)
	}
	var s struct{ Schema string }
	_ = json.Unmarshal(b, &s)
	if s.Schema != Schema {
		return fmt.Errorf("%w: %s: schema %q", ErrInvalid, name, s.Schema)
	}
	return nil
}

// Missing reports an error that only says the record is not there.
func Missing(err error) bool { return errors.Is(err, os.ErrNotExist) }
