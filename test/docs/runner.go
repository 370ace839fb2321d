package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Piece is the output of one block (Line 0: before the first).
type Piece struct {
	Line   int
	Output string
}

var (
	markerRE = regexp.MustCompile(Marker + `(\d+)\n`)
	failRE   = regexp.MustCompile(`\n?` + FailMarker + `(\d+) (\d+)\n`)
)

// Split cuts a script's output at the block markers, and returns the
// line and exit code the ERR trap printed (0, 0 when it printed none).
func Split(out string) (pieces []Piece, failLine, code int) {
	if m := failRE.FindStringSubmatch(out); m != nil {
		failLine, _ = strconv.Atoi(m[1])
		code, _ = strconv.Atoi(m[2])
		out = failRE.ReplaceAllString(out, "\n")
	}
	line, start := 0, 0
	for _, m := range markerRE.FindAllStringSubmatchIndex(out, -1) {
		if m[0] > start || line != 0 {
			pieces = append(pieces, Piece{Line: line, Output: out[start:m[0]]})
		}
		line, _ = strconv.Atoi(out[m[2]:m[3]])
		start = m[1]
	}
	if start < len(out) || line != 0 {
		pieces = append(pieces, Piece{Line: line, Output: out[start:]})
	}
	return pieces, failLine, code
}

// File is one markdown file to run: Name for messages (relative to the
// repository), the section's bounds (0, 0: the whole file).
type File struct {
	Name     string
	Src      string
	From, To int
}

// Runner runs files' blocks in Dir with Env.
type Runner struct {
	Dir string
	Env []string
	// Live, when set, gets the output as it comes.
	Live io.Writer
	// Grace is how long a background block's group has after SIGTERM.
	Grace time.Duration
}

// Run runs f's blocks in one bash and stops its background blocks. The
// error names the failing command's file:line, the block it is in, and
// the block's output, with the tail of each background block's log.
func (r Runner) Run(ctx context.Context, f File) error {
	blocks, err := Parse(f.Src)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	if f.To != 0 {
		blocks = Within(blocks, f.From, f.To)
	}
	var runnable []Block
	for _, b := range blocks {
		if b.Mode != Show {
			runnable = append(runnable, b)
		}
	}
	if len(runnable) == 0 {
		return fmt.Errorf("%s: no sh block to run", f.Name)
	}
	script, err := Script(strings.Count(f.Src, "\n")+1, runnable)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	bgDir, err := os.MkdirTemp("", "unitlet-docs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bgDir)
	out, runErr := r.bash(ctx, f.Name, script, bgDir)
	r.stopBackground(bgDir)
	if runErr == nil {
		return nil
	}
	return errors.New(describe(f.Name, out, runErr, ctx.Err()) + backgroundLogs(f.Name, bgDir))
}

// bash runs script as `bash -c script NAME` (so bash's own messages
// read "NAME: line N: ...") in a process group of its own, killed whole
// when ctx ends.
func (r Runner) bash(ctx context.Context, name, script, bgDir string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", "-c", script, name)
	cmd.Dir = r.Dir
	cmd.Env = append(append([]string{}, r.Env...), "DOCS_BG_DIR="+bgDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var buf bytes.Buffer
	var w io.Writer = &buf
	if r.Live != nil {
		w = io.MultiWriter(&buf, r.Live)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	return buf.String(), err
}

// stopBackground sends SIGTERM to each background block's process
// group, waits up to Grace for it to go, then kills what is left.
func (r Runner) stopBackground(bgDir string) {
	raw, _ := os.ReadFile(filepath.Join(bgDir, "pids"))
	for _, f := range strings.Fields(string(raw)) {
		pgid, err := strconv.Atoi(f)
		if err != nil || pgid <= 1 {
			continue
		}
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		deadline := time.Now().Add(r.Grace)
		for time.Now().Before(deadline) && GroupAlive(pgid) {
			time.Sleep(200 * time.Millisecond)
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// GroupAlive says whether a process of group pgid runs; a zombie
// (dead, not yet reaped by whoever adopted it) does not.
func GroupAlive(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and ')'.
		fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(fields) >= 3 && fields[0] != "Z" && fields[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// describe says where f failed: the ERR trap's line, else the line of
// bash's own message ("NAME: line N: ..."), else the block's.
func describe(name, out string, runErr, ctxErr error) string {
	pieces, line, code := Split(out)
	last := Piece{}
	if len(pieces) > 0 {
		last = pieces[len(pieces)-1]
	}
	if line == 0 {
		line = bashLine(name, last.Output)
	}
	where := fmt.Sprintf("%s:%d", name, last.Line)
	if line != 0 {
		where = fmt.Sprintf("%s:%d", name, line)
	}
	what := fmt.Sprintf("exit code %d", code)
	switch {
	case ctxErr != nil:
		what = "timed out (" + ctxErr.Error() + ")"
	case code == 0:
		what = runErr.Error()
	}
	return fmt.Sprintf("%s: %s, in the block at %s:%d; its output:\n%s",
		where, what, name, last.Line, indent(last.Output))
}

func bashLine(name, out string) int {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `: line (\d+): `)
	m := re.FindAllStringSubmatch(out, -1)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

// backgroundLogs is the last lines of each background block's output.
func backgroundLogs(name, bgDir string) string {
	logs, _ := filepath.Glob(filepath.Join(bgDir, "*.log"))
	var b strings.Builder
	for _, l := range logs {
		raw, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(&b, "\nthe background block at %s:%s, its last lines:\n%s",
			name, strings.TrimSuffix(filepath.Base(l), ".log"), indent(strings.Join(lines, "\n")))
	}
	return b.String()
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (nothing)\n"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ") + "\n"
}
