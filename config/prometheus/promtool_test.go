package prometheus

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/unitlet/unitlet/internal/testkit/promtest"
)

// tool finds a binary of the prometheus package or fails the test saying
// how to install it: these tests are the point, never skipped.
func tool(t *testing.T, name string) string { return promtest.Binary(t, name) }

func TestPromtoolCheckRules(t *testing.T) {
	out, err := exec.Command(tool(t, "promtool"), "check", "rules", RulesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", RulesFile, err, out)
	}
}

// tests/*.yaml make every alert fire when its condition lasts and stay
// silent when it does not.
func TestPromtoolTestRules(t *testing.T) {
	files, err := filepath.Glob("tests/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule tests in tests/: %v", err)
	}
	out, err := exec.Command(tool(t, "promtool"), append([]string{"test", "rules"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// Every alert in rules.yaml has a rule test where it fires and one where
// it stays silent.
func TestEveryAlertIsTestedBothWays(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	readYAML(t, RulesFile, &rules)
	fires, silent := map[string]bool{}, map[string]bool{}
	files, _ := filepath.Glob("tests/*.yaml")
	for _, f := range files {
		var suite struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		readYAML(t, f, &suite)
		for _, tc := range suite.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					silent[a.Alertname] = true
				}
			}
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !fires[r.Alert] {
				t.Errorf("%s: no rule test where it fires", r.Alert)
			}
			if !silent[r.Alert] {
				t.Errorf("%s: no rule test where it stays silent", r.Alert)
			}
		}
	}
}

func readYAML(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
