package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zapcore"
)

// controller-runtime's --zap-* flags are taken; a bad value is refused
// naming the flag and the value.
func TestParseZapFlags(t *testing.T) {
	tests := map[string]struct {
		args      []string
		wantDebug bool // whether debug messages are written
		wantErr   string
	}{
		"default is info": {},
		"debug":           {args: []string{"--zap-log-level=debug"}, wantDebug: true},
		"devel":           {args: []string{"--zap-devel"}, wantDebug: true},
		"bad level":       {args: []string{"--zap-log-level=loud"}, wantErr: `invalid value "loud" for flag -zap-log-level: invalid log level "loud"`},
		"stray argument":  {args: []string{"--zap-log-level=debug", "extra"}, wantErr: "unexpected arguments: [extra]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := o.zap.Development || (o.zap.Level != nil && o.zap.Level.Enabled(zapcore.DebugLevel))
			if d := cmp.Diff(tc.wantDebug, got); d != "" {
				t.Errorf("debug enabled (-want,+got):\n%s", d)
			}
		})
	}
}
