package testutil

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcessCPU is pid's user and system time so far (/proc/PID/stat, in
// USER_HZ, 100 on every Linux architecture this runs on).
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// After the command's closing parenthesis: state first, then utime
	// and stime the 12th and 13th.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100, nil
}

// WaitAccepts waits until the unix socket sock accepts a connection,
// looking every 2 ms, or ctx ends.
func WaitAccepts(ctx context.Context, sock string) error {
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never answered: %w", sock, err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
