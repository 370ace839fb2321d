package logs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// RotatingFile is an instance's log file, rotated by size: when the next
// record would take it past MaxBytes it becomes <path>.1, the older ones
// shift up, and <path>.<Keep+1> is dropped. It is shared by every log
// listener of the instance, so writes are serialised.
//
// A record that cannot be written (a full disk) is dropped, not retried:
// the listeners must keep reading, or the app would block on a full pipe.
// Drops are counted (see OnDrop), and the first record written again is
// preceded by a marker saying how many were lost (see WriteRecord).
type RotatingFile struct {
	path     string
	maxBytes int64
	keep     int
	openFile func(path string) (logHandle, error)

	mu     sync.Mutex
	f      logHandle
	size   int64
	closed bool
	onDrop func(reason string)
	// dropped records since the last one written, and why the last was.
	dropped    int
	dropReason string
}

// logHandle is the open file: an *os.File, or a test's failing one.
type logHandle interface {
	Write(p []byte) (int, error)
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
}

func openAppend(path string) (logHandle, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

// OpenRotating opens (appending) or creates path, mode 0600, and its
// directory, mode 0700. keep is how many rotated files are kept.
func OpenRotating(path string, maxBytes int64, keep int) (*RotatingFile, error) {
	return openRotating(path, maxBytes, keep, openAppend)
}

func openRotating(path string, maxBytes int64, keep int, open func(string) (logHandle, error)) (*RotatingFile, error) {
	if maxBytes <= 0 || keep < 0 {
		return nil, fmt.Errorf("log file %s: maxBytes must be > 0 and keep >= 0", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	r := &RotatingFile{path: path, maxBytes: maxBytes, keep: keep, openFile: open}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *RotatingFile) open() error {
	f, err := r.openFile(r.path)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	r.f, r.size = f, st.Size()
	return nil
}

// Path is the current file's path.
func (r *RotatingFile) Path() string { return r.path }

// OnDrop sets what is called, under the file's lock, for each record
// dropped, with its DropReason. Set it before the file is shared.
func (r *RotatingFile) OnDrop(f func(reason string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onDrop = f
}

// Write appends one record whole; a record is never split across files,
// and one the disk took only part of is cut back off, so the file holds
// whole records only. Nothing written before is touched. It counts no
// drop: WriteRecord does.
func (r *RotatingFile) Write(rec []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, os.ErrClosed
	}
	if err := r.append(rec); err != nil {
		return 0, err
	}
	return len(rec), nil
}

func (r *RotatingFile) append(rec []byte) error {
	if r.f == nil { // a rotation that failed half-way left none open
		if err := r.open(); err != nil {
			return err
		}
	}
	if r.size > 0 && r.size+int64(len(rec)) > r.maxBytes {
		if err := r.rotate(); err != nil {
			return fmt.Errorf("rotate %s: %w", r.path, err)
		}
	}
	n, err := r.f.Write(rec)
	if err != nil {
		if n > 0 {
			// Shrinking needs no space; the next record starts on a line
			// of its own.
			_ = r.f.Truncate(r.size)
		}
		return err
	}
	r.size += int64(n)
	return nil
}

func (r *RotatingFile) rotate() error {
	if err := r.f.Close(); err != nil {
		return err
	}
	r.f = nil
	if r.keep == 0 {
		if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return r.open()
	}
	for i := r.keep - 1; i >= 1; i-- {
		err := os.Rename(fmt.Sprintf("%s.%d", r.path, i), fmt.Sprintf("%s.%d", r.path, i+1))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(r.path, r.path+".1"); err != nil {
		return err
	}
	return r.open()
}

// Close closes the current file; later writes fail with os.ErrClosed.
func (r *RotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
