package plugin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/internal/version"
)

// `kubectl unitlet version` prints the build's version alone on stdout;
// anything after it is a usage error.
func TestVersionCommand(t *testing.T) {
	tests := map[string]struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		"version":            {args: []string{"version"}, wantStdout: version.Get() + "\n"},
		"extra argument":     {args: []string{"version", "--short"}, wantCode: ExitUsage, wantStderr: "version takes no arguments"},
		"listed in --help":   {args: []string{"--help"}, wantCode: ExitUsage, wantStderr: "kubectl unitlet version\n"},
		"unknown subcommand": {args: []string{"versoin"}, wantCode: ExitUsage, wantStderr: `unknown command "versoin"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(tc.args, strings.NewReader(""), &stdout, &stderr)
			if diff := cmp.Diff(tc.wantCode, code); diff != "" {
				t.Errorf("exit code (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStdout, stdout.String()); diff != "" {
				t.Errorf("stdout (-want,+got):\n%s", diff)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.wantStderr)
			}
		})
	}
}
