package outcome

import (
	"errors"
	"fmt"
	"time"
)

// StartKind is what is known about one start attempt.
type StartKind int

// The zero value is MayHaveRun, so a Start nobody filled in never claims
// the proof that nothing ran.
const (
	MayHaveRun StartKind = iota
	NotStarted
	QueuedJobMayRun
	Running
	ExitedBeforeObserved
)

// String is the kind's name, usable as a condition reason.
func (k StartKind) String() string {
	switch k {
	case MayHaveRun:
		return "MayHaveRun"
	case NotStarted:
		return "NotStarted"
	case QueuedJobMayRun:
		return "QueuedJobMayRun"
	case Running:
		return "Running"
	case ExitedBeforeObserved:
		return "ExitedBeforeObserved"
	}
	return fmt.Sprintf("StartKind(%d)", int(k))
}

// MayHaveRun reports whether a start of this kind may have run anything.
func (k StartKind) MayHaveRun() bool { return k != NotStarted }

// Exit is how a unit ended, as far as it was recorded.
type Exit struct {
	// Result is the manager's word for it ("success", "exit-code",
	// "signal", "timeout", ...).
	Result string
	Code   int       // exit status when it exited
	Signal int       // signal number when it was killed
	At     time.Time // zero when unknown
	// ExecFailed, when set, says that the command itself could not be
	// executed ("exec /srv/x: no such file or directory (why)"): the app
	// never ran, and its exit code is the trampoline's.
	ExecFailed string
}

// Start is the result of one start attempt.
type Start struct {
	Kind StartKind
	// Unit names what was started (a systemd unit or a shim's cgroup).
	Unit string
	// InvocationID is systemd's invocation id in hex, when one was read.
	InvocationID string
	MainPID      int
	// Cgroup is the cgroup the start placed its process in, as the
	// backend names it, when the start learned it.
	Cgroup string
	// Job is the systemd job path that came back, if any.
	Job string
	// Exit is set for ExitedBeforeObserved when the exit was read.
	Exit *Exit
	// Cause is the error behind every kind but Running.
	Cause error
}

// MayHaveRun reports whether this start may have run anything.
func (s Start) MayHaveRun() bool { return s.Kind.MayHaveRun() }

// Err is the start as an error: nil when Running, otherwise Cause (or a
// description when Cause is nil) marked with the kind, so MayHaveRun and
// KindOf read it back after any amount of %w wrapping.
func (s Start) Err() error {
	cause := s.Cause
	switch s.Kind {
	case Running:
		return nil
	case ExitedBeforeObserved:
		if cause == nil {
			return exitedUnobserved{unit: s.Unit}
		}
		return startMark{kind: s.Kind, err: cause, exited: true}
	}
	if cause == nil {
		cause = fmt.Errorf("start of %s: %s", s.Unit, s.Kind)
	}
	return startMark{kind: s.Kind, err: cause}
}

// ErrExitedBeforeObserved is found by errors.Is in every start error of
// kind ExitedBeforeObserved: a crash at start.
var ErrExitedBeforeObserved = errors.New("exited before it was observed")

// startMark carries a StartKind through an error chain without changing
// the text or errors.Is of the error it wraps.
type startMark struct {
	kind   StartKind
	err    error
	exited bool
}

func (m startMark) Error() string { return m.err.Error() }
func (m startMark) Unwrap() error { return m.err }

// Is lets ExitedBeforeObserved marks match the sentinel without changing
// the cause's own text.
func (m startMark) Is(target error) bool {
	return m.exited && target == ErrExitedBeforeObserved
}

// exitedUnobserved is ExitedBeforeObserved in the unit's own words.
type exitedUnobserved struct{ unit string }

func (e exitedUnobserved) Error() string {
	return e.unit + " exited before it was observed"
}
func (e exitedUnobserved) Is(target error) bool { return target == ErrExitedBeforeObserved }

// Refused marks err as a start a pre-exec gate refused: proven not
// started, unless something else in the chain says it may have run.
func Refused(err error) error { return mark(NotStarted, err) }

// Uncertain marks err as a start that was handed off and may have run.
func Uncertain(err error) error { return mark(MayHaveRun, err) }

// Queued marks err as a start whose systemd job may still launch it.
func Queued(err error) error { return mark(QueuedJobMayRun, err) }

func mark(k StartKind, err error) error {
	if err == nil {
		return nil
	}
	return startMark{kind: k, err: err}
}

// KindOf reads the kind a start error carries. nil is Running. Any evidence
// that something may have run wins over a refusal in the same chain: an
// uncertain or queued mark, an exit before observation, or a kill that
// was not proven. An unmarked error is MayHaveRun.
func KindOf(err error) StartKind {
	if err == nil {
		return Running
	}
	if errors.Is(err, ErrExitedBeforeObserved) {
		return ExitedBeforeObserved
	}
	kinds := map[StartKind]bool{}
	collect(err, kinds)
	switch {
	case kinds[QueuedJobMayRun]:
		return QueuedJobMayRun
	case kinds[MayHaveRun], errors.Is(err, ErrKillUnproven):
		return MayHaveRun
	case kinds[NotStarted]:
		return NotStarted
	}
	return MayHaveRun
}

// MightHaveRun answers the one question a caller may rely on: could anything
// of this start have run? It is false only when the error proves nothing
// ran (a refusal and no evidence to the contrary); nil (a start that
// succeeded) and any unmarked error are true.
func MightHaveRun(err error) bool { return KindOf(err).MayHaveRun() }

// collect records every start mark in err's tree, following both single
// and joined wraps.
func collect(err error, into map[StartKind]bool) {
	for err != nil {
		if m, ok := err.(startMark); ok {
			into[m.kind] = true
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				collect(e, into)
			}
			return
		}
		err = errors.Unwrap(err)
	}
}
