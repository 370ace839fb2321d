// Package lazylog defers a logr.Logger's WithValues until a line is
// written. zapr encodes a logger's values when they are added, and
// controller-runtime adds five to every reconcile's logger, though a
// node's reconciles mostly write nothing: at 1,000 Instances that
// encoding was a sixth of the agent's CPU while it served after a reboot.
package lazylog

import (
	"sync/atomic"

	"github.com/go-logr/logr"
)

// Wrap returns l with its WithValues kept as a list until a line is
// written through the logger they made (or one derived from it); the
// values are then added to l's sink once, and the result reused.
func Wrap(l logr.Logger) logr.Logger {
	s := l.GetSink()
	if s == nil {
		return l
	}
	if cd, ok := s.(logr.CallDepthLogSink); ok {
		s = cd.WithCallDepth(1) // the frame of this package's Info and Error
	}
	return logr.New(newSink(s, nil))
}

// sink holds the values added since parent; built is parent with them,
// made on the first line written.
type sink struct {
	parent logr.LogSink
	kv     []any
	built  atomic.Pointer[logr.LogSink]
}

func newSink(parent logr.LogSink, kv []any) *sink { return &sink{parent: parent, kv: kv} }

var (
	_ logr.LogSink          = &sink{}
	_ logr.CallDepthLogSink = &sink{}
)

// real is parent with the values added: built once (two lines written at
// the same moment may both build it, and either result is the same).
func (s *sink) real() logr.LogSink {
	if b := s.built.Load(); b != nil {
		return *b
	}
	r := s.parent
	if len(s.kv) > 0 {
		r = r.WithValues(s.kv...)
	}
	s.built.Store(&r)
	return r
}

// Init does nothing: the parent was initialised by the logger it came from.
func (s *sink) Init(logr.RuntimeInfo) {}

// Enabled asks the parent: a level never depends on values.
func (s *sink) Enabled(level int) bool { return s.parent.Enabled(level) }

func (s *sink) Info(level int, msg string, kv ...any) { s.real().Info(level, msg, kv...) }

func (s *sink) Error(err error, msg string, kv ...any) { s.real().Error(err, msg, kv...) }

// WithValues keeps kv beside the earlier values; on a sink already built
// it starts from the built one.
func (s *sink) WithValues(kv ...any) logr.LogSink {
	if b := s.built.Load(); b != nil {
		return newSink(*b, append([]any(nil), kv...))
	}
	all := make([]any, 0, len(s.kv)+len(kv))
	return newSink(s.parent, append(append(all, s.kv...), kv...))
}

// WithName names the parent: a name is kept apart from the values.
func (s *sink) WithName(name string) logr.LogSink {
	return newSink(s.parent.WithName(name), s.kv)
}

// WithCallDepth passes the depth to the parent when it takes one.
func (s *sink) WithCallDepth(depth int) logr.LogSink {
	cd, ok := s.parent.(logr.CallDepthLogSink)
	if !ok {
		return s
	}
	return newSink(cd.WithCallDepth(depth), s.kv)
}
