package promtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A real Prometheus scrapes a loopback target, evaluates a rule whose for:
// was cut to 0s, and answers through the API helpers.
func TestStartScrapesAndFires(t *testing.T) {
	var value atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE unitlet_probe gauge\nunitlet_probe{namespace=\"ns\",name=\"web\"} %d\n", value.Load())
	}))
	t.Cleanup(target.Close)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, rules, `groups:
  - name: g
    rules:
      - alert: Probe
        expr: unitlet_probe == 1
        for: 1h
`)
	s := Start(t, Config{Bin: Binary(t, "prometheus"), Target: strings.TrimPrefix(target.URL, "http://"), RulesFile: rules, Node: "n1"})

	WaitFor(t, 30*time.Second, "the target scraped", func() (bool, string) {
		got := s.Query(t, `unitlet_probe == 0`)
		return len(got) == 1, fmt.Sprint(got)
	})
	if got := s.Firing(t); len(got) != 0 {
		t.Fatalf("firing before the probe is 1: %v", got)
	}
	value.Store(1)
	want := []string{"Probe ns/web"}
	WaitFor(t, 30*time.Second, "Probe firing although its for: was 1h", func() (bool, string) {
		got := s.Firing(t)
		return cmp.Equal(want, got), cmp.Diff(want, got)
	})
	if diff := cmp.Diff([]string{"n1"}, s.LabelValues(t, "node", "unitlet_probe")); diff != "" {
		t.Errorf("node label (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"unitlet_absent"}, s.Missing(t, []string{"unitlet_probe", "up", "unitlet_absent"})); diff != "" {
		t.Errorf("Missing (-want,+got):\n%s", diff)
	}
}
