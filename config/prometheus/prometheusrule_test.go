package prometheus

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestCommittedPrometheusRuleIsCurrent(t *testing.T) {
	rules, err := os.ReadFile(RulesFile)
	if err != nil {
		t.Fatal(err)
	}
	want, err := PrometheusRule(rules)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(PrometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale; run `go generate ./config/prometheus` (-generated,+committed):\n%s", PrometheusRuleFile, diff)
	}
}

// Read as data, the PrometheusRule's groups are the rules file's groups:
// the YAML rewriting loses nothing (folded text, templates, durations).
func TestPrometheusRuleHoldsTheRulesGroups(t *testing.T) {
	var plain struct {
		Groups []any `json:"groups"`
	}
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   any    `json:"metadata"`
		Spec       struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	read := func(file string, into any) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(b, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	read(RulesFile, &plain)
	read(PrometheusRuleFile, &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("kind %s/%s, want monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind)
	}
	if len(plain.Groups) == 0 {
		t.Fatal("rules file has no groups")
	}
	if diff := cmp.Diff(plain.Groups, pr.Spec.Groups); diff != "" {
		t.Errorf("groups differ (-rules.yaml,+prometheusrule.yaml):\n%s", diff)
	}
}
