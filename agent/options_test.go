package agent

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestParseInstanceLogFlags(t *testing.T) {
	type logs struct {
		MaxBytes int64
		Keep     int
	}
	tests := map[string]struct {
		args    []string
		want    logs
		wantErr bool
	}{
		"defaults":      {want: logs{8 << 20, 3}},
		"quantities":    {args: []string{"--instance-log-max-size=64Ki", "--instance-log-keep=1"}, want: logs{64 << 10, 1}},
		"decimal size":  {args: []string{"--instance-log-max-size=2M"}, want: logs{2_000_000, 3}},
		"too small":     {args: []string{"--instance-log-max-size=100"}, wantErr: true},
		"not a size":    {args: []string{"--instance-log-max-size=big"}, wantErr: true},
		"nothing kept":  {args: []string{"--instance-log-keep=0"}, wantErr: true},
		"negative keep": {args: []string{"--instance-log-keep=-2"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := Parse(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, logs{o.LogMaxBytes, o.LogKeep}); err == nil && d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestParseDiskPressureFlag(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    float64
		wantErr bool
	}{
		"default":  {want: 5},
		"set":      {args: []string{"--disk-pressure-free-percent=10.5"}, want: 10.5},
		"off":      {args: []string{"--disk-pressure-free-percent=0"}, want: 0},
		"negative": {args: []string{"--disk-pressure-free-percent=-1"}, wantErr: true},
		"over 100": {args: []string{"--disk-pressure-free-percent=101"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := Parse(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, o.DiskPressurePercent); err == nil && d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestParseReservedFlag(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    map[corev1.ResourceName]string
		wantErr string
	}{
		"default reserves nothing": {want: map[corev1.ResourceName]string{}},
		"all three": {args: []string{"--reserved=memory=512Mi,cpu=500m,pids=1000"},
			want: map[corev1.ResourceName]string{"memory": "512Mi", "cpu": "500m", "pids": "1k"}},
		"unknown resource": {args: []string{"--reserved=gpu=1"}, wantErr: `invalid value "gpu=1" for flag -reserved: "gpu=1": unknown resource "gpu": want memory, cpu or pids`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[corev1.ResourceName]string{}
			for name, q := range o.Reserved {
				got[name] = q.String()
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestParsePorts(t *testing.T) {
	type ports struct{ Metrics, Probes, Serve string }
	tests := map[string]struct {
		args []string
		want ports
	}{
		"defaults beside the kubelet's": {want: ports{":10261", ":10262", ":10260"}},
		"set": {args: []string{"--metrics-bind-address=127.0.0.1:9000", "--health-probe-bind-address=127.0.0.1:9001"},
			want: ports{"127.0.0.1:9000", "127.0.0.1:9001", ":10260"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := Parse(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, ports{o.MetricsAddr, o.ProbeAddr, o.ServeAddr}); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

// The --zap-* flags reach the logger: what each level lets through is
// written, and a bad value is refused naming the flag and the value.
func TestParseZapFlags(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    []string // messages written, of info, debug (V(1)) and error
		wantErr string
	}{
		"default is info":   {want: []string{"info-msg", "error-msg"}},
		"debug":             {args: []string{"--zap-log-level=debug"}, want: []string{"info-msg", "debug-msg", "error-msg"}},
		"error":             {args: []string{"--zap-log-level=error"}, want: []string{"error-msg"}},
		"devel is debug":    {args: []string{"--zap-devel"}, want: []string{"info-msg", "debug-msg", "error-msg"}},
		"console encoder":   {args: []string{"--zap-encoder=console", "--zap-log-level=info"}, want: []string{"info-msg", "error-msg"}},
		"bad level":         {args: []string{"--zap-log-level=loud"}, wantErr: `invalid value "loud" for flag -zap-log-level: invalid log level "loud"`},
		"bad encoder":       {args: []string{"--zap-encoder=xml"}, wantErr: `invalid value "xml" for flag -zap-encoder: invalid encoder value "xml"`},
		"bad time encoding": {args: []string{"--zap-time-encoding=sundial"}, wantErr: `invalid value "sundial" for flag -zap-time-encoding: invalid time-encoding value "sundial"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			o.Zap.DestWriter = &out
			log := newLogger(&o.Zap)
			log.Info("info-msg")
			log.V(1).Info("debug-msg")
			log.Error(errors.New("boom"), "error-msg")
			var got []string
			for _, m := range []string{"info-msg", "debug-msg", "error-msg"} {
				if strings.Contains(out.String(), m) {
					got = append(got, m)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("messages written (-want,+got):\n%s\nlog:\n%s", d, out.String())
			}
		})
	}
}
