package plugin

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/internal/version"
)

// Help, for the root and every subcommand, exits 0 on stdout; version
// prints the build's version alone; bad input exits 2 with the reason.
func TestCommandLine(t *testing.T) {
	tests := map[string]struct {
		args       []string
		wantCode   int
		wantStdout string // a part of it
		wantStderr string // a part of it
	}{
		"no arguments":       {args: nil, wantStdout: "Available Commands:"},
		"--help":             {args: []string{"--help"}, wantStdout: "kubectl unitlet [command]"},
		"help":               {args: []string{"help"}, wantStdout: "Available Commands:"},
		"logs --help":        {args: []string{"logs", "--help"}, wantStdout: "kubectl unitlet logs (NAME | -l SELECTOR) [flags]"},
		"run --help":         {args: []string{"run", "--help"}, wantStdout: "Aliases:\n  run, exec"},
		"exec --help":        {args: []string{"exec", "-h"}, wantStdout: "kubectl unitlet run NAME [-i] [-t] -- COMMAND [ARGS...]"},
		"version --help":     {args: []string{"version", "--help"}, wantStdout: "Print the plugin's version"},
		"kubectl's flags":    {args: []string{"logs", "--help"}, wantStdout: "--as-group stringArray"},
		"klog's -v":          {args: []string{"--help"}, wantStdout: "-v, --v Level"},
		"version":            {args: []string{"version"}, wantStdout: version.Get() + "\n"},
		"version argument":   {args: []string{"version", "x"}, wantCode: ExitUsage, wantStderr: `version takes no arguments (got ["x"])`},
		"unknown subcommand": {args: []string{"versoin"}, wantCode: ExitUsage, wantStderr: `unknown command "versoin"`},
		"unknown flag":       {args: []string{"logs", "shop", "--frobnicate"}, wantCode: ExitUsage, wantStderr: "unknown flag: --frobnicate"},
		"run without --":     {args: []string{"run", "shop", "ls"}, wantCode: ExitUsage, wantStderr: "name the command after --"},
		"logs of two":        {args: []string{"logs", "a", "b"}, wantCode: ExitUsage, wantStderr: "accepts at most 1 arg(s)"},
		"drain --help":       {args: []string{"drain", "--help"}, wantStdout: "kubectl unitlet drain NODE [flags]"},
		"drain's RBAC":       {args: []string{"drain", "--help"}, wantStdout: "Enrollments are cluster-scoped"},
		"cordon --help":      {args: []string{"cordon", "--help"}, wantStdout: "kubectl unitlet cordon NODE [flags]"},
		"uncordon --help":    {args: []string{"uncordon", "--help"}, wantStdout: "Mark a node schedulable again"},
		"drain two nodes":    {args: []string{"drain", "a", "b"}, wantCode: ExitUsage, wantStderr: "name one node: kubectl unitlet drain NODE"},
		"drain no node":      {args: []string{"drain"}, wantCode: ExitUsage, wantStderr: "name one node"},
		"uncordon two nodes": {args: []string{"uncordon", "a", "b"}, wantCode: ExitUsage, wantStderr: "kubectl unitlet uncordon NODE"},
		"drain timeout < 0":  {args: []string{"drain", "a", "--timeout=-1s"}, wantCode: ExitUsage, wantStderr: "--timeout -1s: give a positive duration"},
		"drain timeout word": {args: []string{"drain", "a", "--timeout=soon"}, wantCode: ExitUsage, wantStderr: `invalid argument "soon"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(tc.args, strings.NewReader(""), &stdout, &stderr)
			if diff := cmp.Diff(tc.wantCode, code); diff != "" {
				t.Errorf("exit code (-want,+got):\n%s\nstderr: %s", diff, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantStdout) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tc.wantStdout)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.wantStderr)
			}
		})
	}
}

// The plugin as the Makefile builds and ships it (make plugin), on $PATH,
// run by kubectl itself: its help exits 0, and kubectl completes its
// subcommands and flags through kubectl_complete-unitlet.
func TestKubectlRunsPluginAndCompletion(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl (make control-plane builds it into bin/): %v", err)
	}
	bin := t.TempDir()
	mk := exec.Command("make", "--no-print-directory", "plugin", "BIN="+bin)
	mk.Dir = root
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make plugin: %v\n%s", err, out)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+filepath.Join(bin, "none"))
	tests := map[string]struct {
		cmd  string
		args []string
		want []string // lines of stdout that must be there
	}{
		"kubectl unitlet --help": {cmd: kubectl, args: []string{"unitlet", "--help"},
			want: []string{"  logs        Print the logs of an Instance (or of the Instances a selector picks)"}},
		"kubectl unitlet exec --help": {cmd: kubectl, args: []string{"unitlet", "exec", "--help"},
			want: []string{"  kubectl unitlet run NAME [-i] [-t] -- COMMAND [ARGS...] [flags]"}},
		"kubectl completes the subcommands": {cmd: kubectl, args: []string{"__complete", "unitlet", ""},
			want: []string{"logs\tPrint the logs of an Instance (or of the Instances a selector picks)", "run\tRun a command in an Instance's environment (its env, uid, dir and sandbox)",
				"drain\tCordon a node and move its Instances off it (those whose moves are Allowed)", "version\tPrint the plugin's version", ":4"}},
		"kubectl completes logs' flags": {cmd: kubectl, args: []string{"__complete", "unitlet", "logs", "--ta"},
			want: []string{"--tail\tonly the last N of the selected lines (-1: all)"}},
		"the helper alone": {cmd: filepath.Join(bin, "kubectl_complete-unitlet"), args: []string{"run", "--st"},
			want: []string{"--stdin\tpass this stdin to the command (default: it reads an empty one)"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := exec.Command(tc.cmd, tc.args...)
			c.Env = env
			var stderr bytes.Buffer
			c.Stderr = &stderr
			out, err := c.Output()
			if err != nil {
				t.Fatalf("%s %q: %v\n%s", tc.cmd, tc.args, err, stderr.String())
			}
			lines := strings.Split(string(out), "\n")
			for _, w := range tc.want {
				if !contains(lines, w) {
					t.Errorf("output lacks the line %q:\n%s", w, out)
				}
			}
		})
	}
}

func contains(lines []string, l string) bool {
	for _, x := range lines {
		if x == l {
			return true
		}
	}
	return false
}
