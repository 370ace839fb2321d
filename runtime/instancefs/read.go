package instancefs

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// DefaultReadLimit bounds ReadFile: tenant files are small, and a tenant
// must not make the agent read an unbounded file into memory.
const DefaultReadLimit = 1 << 20

// ErrTooLarge is returned when a file holds more than the read limit.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads dir/name beneath dir, at most DefaultReadLimit bytes.
func ReadFile(dir, name string) ([]byte, error) {
	return ReadFileLimit(dir, name, DefaultReadLimit)
}

// ReadFileLimit reads dir/name beneath dir; more than limit bytes is
// ErrTooLarge. O_NONBLOCK keeps a FIFO planted by the tenant from hanging
// the open.
func ReadFileLimit(dir, name string, limit int64) ([]byte, error) {
	f, err := Open(dir, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", f.Name())
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("read %s: over %d bytes: %w", f.Name(), limit, ErrTooLarge)
	}
	return b, nil
}
