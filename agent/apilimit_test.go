package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
)

// TestAPILimitsOneBucket builds the RESTClients controller-runtime makes
// per resource from the config apiLimits sets, and checks that a cap is
// one bucket shared by all of them and that no cap is no limiter at all.
func TestAPILimitsOneBucket(t *testing.T) {
	type limits struct {
		Limited bool
		Shared  bool
		QPS     float32
	}
	tests := map[string]struct {
		qps     float32
		burst   int
		want    limits
		wantErr bool
	}{
		"default: none":       {qps: 0, burst: 100, want: limits{}},
		"cap: one bucket":     {qps: 20, burst: 40, want: limits{Limited: true, Shared: true, QPS: 20}},
		"negative qps":        {qps: -1, burst: 10, wantErr: true},
		"cap without burst":   {qps: 20, burst: 0, wantErr: true},
		"cap, negative burst": {qps: 20, burst: -3, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
			err := apiLimits(cfg, tc.qps, tc.burst)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			inst, gen := perResource(t, cfg, v1.GroupVersion.WithKind("Instance")), perResource(t, cfg, v1.GroupVersion.WithKind("Generation"))
			var got limits
			if a, b := inst.GetRateLimiter(), gen.GetRateLimiter(); a != nil && b != nil {
				got = limits{Limited: true, Shared: a == b, QPS: a.QPS()}
			} else if a != nil || b != nil {
				t.Fatalf("one resource limited, the other not: %v, %v", a, b)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

// perResource is the RESTClient controller-runtime's client makes for gvk
// (one per resource, on one HTTP client).
func perResource(t *testing.T, cfg *rest.Config, gvk schema.GroupVersionKind) rest.Interface {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := apiutil.RESTClientForGVK(gvk, false, false, cfg, serializer.NewCodecFactory(scheme.New()), hc)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func TestParseAPIQPSFlag(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    float32
		wantErr bool
	}{
		"default: no cap": {want: 0},
		"a cap":           {args: []string{"--kube-api-qps=50"}, want: 50},
		"explicitly none": {args: []string{"--kube-api-qps=0"}, want: 0},
		"negative":        {args: []string{"--kube-api-qps=-5"}, wantErr: true},
		"not a number":    {args: []string{"--kube-api-qps=fast"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := Parse(append([]string{"--node-name=n"}, tc.args...))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, o.APIQPS); err == nil && d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}
