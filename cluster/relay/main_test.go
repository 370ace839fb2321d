package relay

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zapcore"
)

// controller-runtime's --zap-* flags are taken beside the relay's own; a
// bad value is refused naming the flag and the value.
func TestParseZapFlags(t *testing.T) {
	tests := map[string]struct {
		args       []string
		wantListen string
		wantDebug  bool
		wantErr    string
	}{
		"defaults":  {wantListen: ":8443"},
		"debug":     {args: []string{"--zap-log-level=debug", "--listen=127.0.0.1:9443"}, wantListen: "127.0.0.1:9443", wantDebug: true},
		"bad level": {args: []string{"--zap-log-level=loud"}, wantErr: `invalid value "loud" for flag -zap-log-level: invalid log level "loud"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, _, zo, err := parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := zo.Level != nil && zo.Level.Enabled(zapcore.DebugLevel)
			type parsed struct {
				Listen string
				Debug  bool
			}
			if d := cmp.Diff(parsed{tc.wantListen, tc.wantDebug}, parsed{o.Listen, got}); d != "" {
				t.Errorf("listen and debug (-want,+got):\n%s", d)
			}
		})
	}
}
