package exitrecord

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/units/record"
)

func TestRunWritesTheRecord(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		env  map[string]string
		want record.Exit
	}{
		"exited with a code": {
			env:  map[string]string{"SERVICE_RESULT": "exit-code", "EXIT_CODE": "exited", "EXIT_STATUS": "7", "INVOCATION_ID": "ab"},
			want: record.Exit{Result: "exit-code", Code: 7, InvocationID: "ab"},
		},
		"killed by a signal name": {
			env:  map[string]string{"SERVICE_RESULT": "signal", "EXIT_CODE": "killed", "EXIT_STATUS": "TERM"},
			want: record.Exit{Result: "signal", Signal: 15},
		},
		"dumped core": {
			env:  map[string]string{"SERVICE_RESULT": "core-dump", "EXIT_CODE": "dumped", "EXIT_STATUS": "SIGSEGV"},
			want: record.Exit{Result: "core-dump", Signal: 11},
		},
		"success": {
			env:  map[string]string{"SERVICE_RESULT": "success", "EXIT_CODE": "exited", "EXIT_STATUS": "0"},
			want: record.Exit{Result: "success"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var stderr bytes.Buffer
			code := run([]string{"--dir", dir, "--name", "exit.gen.1.exit"},
				func(k string) string { return tc.env[k] }, &stderr, func() time.Time { return at })
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			var got record.Exit
			if err := record.Read(dir, "exit.gen.1.exit", &got); err != nil {
				t.Fatal(err)
			}
			tc.want.Schema, tc.want.At, tc.want.By = record.Schema, at, "systemd"
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("record (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRunRefusesUsage(t *testing.T) {
	dir := t.TempDir()
	var stderr bytes.Buffer
	if code := run([]string{"--dir", dir}, func(string) string { return "" }, &stderr, time.Now); code != ExitUsage {
		t.Errorf("exit %d, want %d", code, ExitUsage)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("wrote %v", ents)
	}
	if code := run([]string{"--dir", filepath.Join(dir, "missing"), "--name", "x"}, func(string) string { return "" }, &stderr, time.Now); code != ExitWrite {
		t.Errorf("exit %d for a missing dir, want %d", code, ExitWrite)
	}
}
