package docs

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// guide is a small document whose blocks run in a real bash: a
// background block that records its pid, a passing block, and at line
// 14 whatever the case puts there.
func guide(dir, line14 string) string {
	return strings.Join([]string{
		"# Guide",                     // 1
		"",                            // 2
		"```sh background",            // 3
		"echo $$ >" + dir + "/bg.pid", // 4
		"exec sleep 300",              // 5
		"```",                         // 6
		"",                            // 7
		"```sh",                       // 8
		"until [ -s " + dir + "/bg.pid ]; do sleep 0.05; done", // 9
		"echo first block ran",                                 // 10
		"```",                                                  // 11
		"",                                                     // 12
		"```sh",                                                // 13
		line14,                                                 // 14
		"echo after",                                           // 15
		"```",                                                  // 16
		"```console",                                           // 17
		"$ not-run",                                            // 18
		"```",                                                  // 19
	}, "\n") + "\n"
}

func TestRunnerNamesTheFailingLine(t *testing.T) {
	tests := map[string]struct {
		line14 string
		// wantErr matches the error; empty: the file passes.
		wantErr string
	}{
		"every block passes": {line14: "echo fine"},
		"a command not found": {
			line14:  "no-such-command --flag",
			wantErr: `(?s)^guide\.md:14: exit code 127, in the block at guide\.md:13; its output:\n.*guide\.md: line 14: no-such-command: command not found`,
		},
		"a command that fails": {
			line14:  "false",
			wantErr: `^guide\.md:14: exit code 1, in the block at guide\.md:13`,
		},
		"a failure in a pipeline": {
			line14:  "false | cat",
			wantErr: `^guide\.md:14: exit code 1`,
		},
		"an unset variable: bash names the line": {
			line14:  "echo $NOT_SET_ANYWHERE",
			wantErr: `(?s)^guide\.md:14: exit status 1, in the block at guide\.md:13; its output:\n.*NOT_SET_ANYWHERE: unbound variable.*the background block at guide\.md:3`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			r := Runner{Dir: dir, Env: os.Environ(), Grace: 5 * time.Second}
			err := r.Run(context.Background(), File{Name: "guide.md", Src: guide(dir, tc.line14)})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("want no error, got:\n%v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatal("want an error, got none")
			case tc.wantErr != "" && !regexp.MustCompile(tc.wantErr).MatchString(err.Error()):
				t.Fatalf("error does not match %q:\n%v", tc.wantErr, err)
			}
			assertGroupGone(t, filepath.Join(dir, "bg.pid"))
		})
	}
}

// assertGroupGone checks that the background block ran in a process
// group of its own and that the group was killed.
func assertGroupGone(t *testing.T, pidFile string) {
	t.Helper()
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the background block did not run: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if pid == syscall.Getpgrp() {
		t.Fatalf("the background block ran in the test's process group")
	}
	if GroupAlive(pid) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		t.Fatalf("process group %d still alive after Run", pid)
	}
}

func TestRunnerTimesOutNamingTheBlock(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r := Runner{Dir: dir, Env: os.Environ(), Grace: 5 * time.Second}
	err := r.Run(ctx, File{Name: "guide.md", Src: guide(dir, "sleep 60")})
	if err == nil || !regexp.MustCompile(`^guide\.md:13: timed out \(context deadline exceeded\), in the block at guide\.md:13`).MatchString(err.Error()) {
		t.Fatalf("want a timeout in the block at line 13, got:\n%v", err)
	}
	assertGroupGone(t, filepath.Join(dir, "bg.pid"))
}

func TestRunnerRunsOnlyTheSection(t *testing.T) {
	src := "# R\n```sh\nexit 3\n```\n## Quick start\n```sh\necho in\n```\n## Other\n```sh\nexit 4\n```\n"
	from, to, err := Section(src, "## Quick start")
	if err != nil {
		t.Fatal(err)
	}
	r := Runner{Dir: t.TempDir(), Env: os.Environ(), Grace: time.Second}
	if err := r.Run(context.Background(), File{Name: "R.md", Src: src, From: from, To: to}); err != nil {
		t.Fatalf("the blocks outside the section ran: %v", err)
	}
}
