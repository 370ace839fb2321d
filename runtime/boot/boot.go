// Package boot tells whether the node rebooted since its agent last ran.
// The agent records the kernel's boot ID beside its state; at its next
// start a different boot ID is a proof that every process of the old
// boot is gone, so every unit recorded before is gone too, whatever a
// cgroup, a unit or an exit record left behind says. An unchanged boot ID,
// a missing or unusable record, or a boot ID that cannot be read proves
// nothing.
package boot

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/unitlet/unitlet/runtime/instancefs"
)

// DefaultSource is where the kernel tells its boot ID (a container shares
// its host's).
const DefaultSource = "/proc/sys/kernel/random/boot_id"

// Reason is how a Verdict was reached.
type Reason string

const (
	// Changed: the recorded boot ID is not the node's: it rebooted.
	Changed Reason = "Changed"
	// Unchanged: the same boot as the record's.
	Unchanged Reason = "Unchanged"
	// NoRecord: nothing recorded yet (a new state root, or one kept by an
	// agent from before the record existed).
	NoRecord Reason = "NoRecord"
	// RecordUnusable: the record could not be read or holds no boot ID.
	RecordUnusable Reason = "RecordUnusable"
	// SourceUnusable: the node's boot ID could not be read or is not one.
	SourceUnusable Reason = "SourceUnusable"
)

// Verdict is what the record and the node's boot ID say together.
type Verdict struct {
	Reason Reason
	// Previous is the recorded boot ID ("" when none is usable); Current
	// the node's ("" when unusable).
	Previous, Current string
}

// Rebooted: every process of the recorded boot is proven gone.
func (v Verdict) Rebooted() bool { return v.Reason == Changed }

// Decide is the verdict from a recorded boot ID and the node's, each as
// read (trimmed; "" when absent). The error says what was unusable; the
// verdict is usable either way.
func Decide(recorded, current string) (Verdict, error) {
	if !Valid(current) {
		v := Verdict{Reason: SourceUnusable}
		if Valid(recorded) {
			v.Previous = recorded
		}
		return v, fmt.Errorf("the node's boot ID %q is not a boot ID: no reboot can be told", current)
	}
	switch {
	case recorded == "":
		return Verdict{Reason: NoRecord, Current: current}, nil
	case !Valid(recorded):
		return Verdict{Reason: RecordUnusable, Current: current},
			fmt.Errorf("the recorded boot ID %q is not a boot ID: no reboot can be told this once", recorded)
	case strings.EqualFold(recorded, current):
		return Verdict{Reason: Unchanged, Previous: recorded, Current: current}, nil
	}
	return Verdict{Reason: Changed, Previous: recorded, Current: current}, nil
}

// Valid: id has the kernel's boot ID form, a UUID in 8-4-4-4-12 hex.
func Valid(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i, c := range id {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

// Record is the agent's record of the boot it ran under (Path, from
// layout.BootRecord) and where the node's boot ID is read (Source; ""
// is DefaultSource). Tests point Source at a file of their own to
// "reboot" without rebooting.
type Record struct {
	Path, Source string
	// PendingPath (from layout.BootPending) holds a reboot's proof until
	// it is written ("": none is kept, and the proof is written before
	// the new boot is recorded).
	PendingPath string
}

// Check reads the record and the node's boot ID and decides.
func (r Record) Check() (Verdict, error) {
	src := r.Source
	if src == "" {
		src = DefaultSource
	}
	current, cerr := readID(src)
	recorded, rerr := readID(r.Path)
	if errors.Is(rerr, os.ErrNotExist) {
		recorded, rerr = "", nil
	}
	v, err := Decide(recorded, current)
	switch {
	case cerr != nil:
		err = fmt.Errorf("boot ID: %w", cerr)
	case rerr != nil:
		v = Verdict{Reason: RecordUnusable, Current: current}
		err = fmt.Errorf("boot record: %w", rerr)
	}
	return v, err
}

// Save records id as the boot the agent runs under, atomically: a crash
// leaves the old record or the new one.
func (r Record) Save(id string) error {
	if !Valid(id) {
		return fmt.Errorf("boot record: %q is not a boot ID", id)
	}
	dir, name := filepath.Split(r.Path)
	d, err := instancefs.MkdirAll(filepath.Clean(dir), 0o711)
	if err != nil {
		return fmt.Errorf("boot record: %w", err)
	}
	defer d.Close()
	if err := instancefs.WriteAtomicBeneath(d, name, []byte(id+"\n"), 0o644); err != nil {
		return fmt.Errorf("boot record: %w", err)
	}
	return nil
}

func readID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Pending is what a reboot's proof has still to write: the verdict that
// proves it, and the generations of the old boot (the caller's keys) not
// yet written gone. It is saved before the new boot is recorded and
// removed once every one is written, so an agent that dies in between
// still knows, under the new boot, which generations the old one took:
// not every one unwritten, since one started in the new boot may run.
type Pending struct {
	Previous    string   `json:"previous"`
	Current     string   `json:"current"`
	Generations []string `json:"generations"`
}

// Verdict is the reboot p proves.
func (p Pending) Verdict() Verdict {
	return Verdict{Reason: Changed, Previous: p.Previous, Current: p.Current}
}

// SavePending records p at PendingPath, atomically.
func (r Record) SavePending(p Pending) error {
	if r.PendingPath == "" {
		return errors.New("boot pending: no path to keep it at")
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("boot pending: %w", err)
	}
	dir, name := filepath.Split(r.PendingPath)
	d, err := instancefs.MkdirAll(filepath.Clean(dir), 0o711)
	if err != nil {
		return fmt.Errorf("boot pending: %w", err)
	}
	defer d.Close()
	if err := instancefs.WriteAtomicBeneath(d, name, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("boot pending: %w", err)
	}
	return nil
}

// LoadPending reads what a reboot's proof has still to write; nil when
// nothing (no file, or no PendingPath).
func (r Record) LoadPending() (*Pending, error) {
	if r.PendingPath == "" {
		return nil, nil
	}
	b, err := os.ReadFile(r.PendingPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("boot pending: %w", err)
	}
	var p Pending
	if err := json.Unmarshal(b, &p); err != nil || !Valid(p.Previous) || !Valid(p.Current) {
		return nil, fmt.Errorf("boot pending %s: unusable (%v)", r.PendingPath, err)
	}
	return &p, nil
}

// ClearPending removes the record: every generation of it is written.
func (r Record) ClearPending() error {
	if r.PendingPath == "" {
		return nil
	}
	if err := os.Remove(r.PendingPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("boot pending: %w", err)
	}
	return nil
}
