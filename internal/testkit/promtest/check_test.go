package promtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// recordingTB keeps what CheckMetrics reports instead of failing the test.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// CheckMetrics passes clean metrics and reports promtool's lint of bad ones.
func TestCheckMetrics(t *testing.T) {
	tests := map[string]struct {
		body    string
		wantErr string // in the reported problem; "" for none
	}{
		"clean": {body: "# HELP unitlet_probe_total Probes.\n# TYPE unitlet_probe_total counter\nunitlet_probe_total{name=\"web\"} 1\n"},
		"counter without _total": {body: "# HELP unitlet_probe Probes.\n# TYPE unitlet_probe counter\nunitlet_probe 1\n",
			wantErr: `counter metrics should have "_total" suffix`},
		"no help": {body: "# TYPE unitlet_probe gauge\nunitlet_probe 1\n", wantErr: "no help text"},
	}
	promtool := Binary(t, "promtool")
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, tc.body) }))
			t.Cleanup(srv.Close)
			rec := &recordingTB{TB: t}
			CheckMetrics(rec, promtool, strings.TrimPrefix(srv.URL, "http://"))
			got := strings.Join(rec.errors, "\n")
			if tc.wantErr == "" && got != "" || tc.wantErr != "" && !strings.Contains(got, tc.wantErr) {
				t.Errorf("reported %q, want a problem containing %q", got, tc.wantErr)
			}
		})
	}
}
