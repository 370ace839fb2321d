package logs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Why a record was dropped: the reason label of the dropped-lines count.
const (
	DropNoSpace    = "NoSpace"    // ENOSPC: the file system is full
	DropQuota      = "Quota"      // EDQUOT: the owner's quota is used up
	DropWriteError = "WriteError" // any other error writing or rotating
)

// DroppedMark is the marker's text: the number of records dropped, and why
// the last of them was.
const DroppedMark = "[unitlet: %d lines dropped: %s]"

// DropReason classifies a write error.
func DropReason(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return DropNoSpace
	case errors.Is(err, syscall.EDQUOT):
		return DropQuota
	}
	return DropWriteError
}

// WriteRecord appends rec as one line. When it cannot, rec is dropped and
// counted, and the error returned; the caller goes on reading. The first
// record written after drops is preceded by a marker with rec's time and
// source saying how many were lost; if the marker cannot be written
// either, rec is dropped too.
func (r *RotatingFile) WriteRecord(rec Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return os.ErrClosed
	}
	if r.dropped > 0 {
		mark := Record{Time: rec.Time, Source: rec.Source, Text: fmt.Sprintf(DroppedMark, r.dropped, r.dropReason)}
		if err := r.append([]byte(mark.Line() + "\n")); err != nil {
			return r.drop(err)
		}
		r.dropped, r.dropReason = 0, ""
	}
	if err := r.append([]byte(rec.Line() + "\n")); err != nil {
		return r.drop(err)
	}
	return nil
}

// drop counts one record lost to err.
func (r *RotatingFile) drop(err error) error {
	reason := DropReason(err)
	r.dropped++
	r.dropReason = reason
	if r.onDrop != nil {
		r.onDrop(reason)
	}
	return &DropError{Reason: reason, First: r.dropped == 1, Err: err}
}

// DropError is a record dropped: First says it began a run of drops (a
// caller logs that one, not each).
type DropError struct {
	Reason string
	First  bool
	Err    error
}

func (e *DropError) Error() string { return fmt.Sprintf("log line dropped (%s): %v", e.Reason, e.Err) }
func (e *DropError) Unwrap() error { return e.Err }
