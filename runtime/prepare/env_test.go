package prepare

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"SOCK": "/run/a.sock", "E": ""}
	tests := map[string]struct{ in, want string }{
		"plain":        {"--listen", "--listen"},
		"reference":    {"--listen=$(SOCK)", "--listen=/run/a.sock"},
		"empty value":  {"x$(E)y", "xy"},
		"unknown kept": {"$(NOPE)", "$(NOPE)"},
		"escaped":      {"$$(SOCK)", "$(SOCK)"},
		"unterminated": {"$(SOCK", "$(SOCK"},
		"lone dollar":  {"cost $5 $", "cost $5 $"},
		"two in a row": {"$(SOCK)$(SOCK)", "/run/a.sock/run/a.sock"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Expand(tc.in, env); got != tc.want {
				t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestMergeEnvLayers(t *testing.T) {
	tests := map[string]struct {
		spec, refs, platform map[string]string
		wantEnv              map[string]string
		wantLayers           map[string]Layer
		wantWarnings         int
		wantErr              bool
	}{
		"refs over spec, platform over both": {
			spec:       map[string]string{"A": "s", "B": "s"},
			refs:       map[string]string{"B": "r"},
			platform:   map[string]string{EnvHost: "h"},
			wantEnv:    map[string]string{"A": "s", "B": "r", EnvHost: "h"},
			wantLayers: map[string]Layer{"A": LayerSpec, "B": LayerRefs, EnvHost: LayerPlatform},
		},
		"platform keys from refs dropped": {
			refs:         map[string]string{EnvAdminToken: "guess", "OK": "1"},
			platform:     map[string]string{EnvAdminToken: "real"},
			wantEnv:      map[string]string{EnvAdminToken: "real", "OK": "1"},
			wantLayers:   map[string]Layer{EnvAdminToken: LayerPlatform, "OK": LayerRefs},
			wantWarnings: 1,
		},
		"key with =":   {spec: map[string]string{"A=B": "x"}, wantErr: true},
		"NUL in value": {refs: map[string]string{"A": "x\x00"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			env, layers, warnings, err := mergeEnv(tc.spec, tc.refs, tc.platform)
			if tc.wantErr {
				if err == nil {
					t.Fatal("want error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.wantEnv, env); d != "" {
				t.Errorf("env (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantLayers, layers); d != "" {
				t.Errorf("layers (-want,+got):\n%s", d)
			}
			if len(warnings) != tc.wantWarnings {
				t.Errorf("warnings %v, want %d", warnings, tc.wantWarnings)
			}
		})
	}
}
