// Command gen writes prometheusrule.yaml from rules.yaml. Run it from
// config/prometheus (go generate does).
package main

import (
	"fmt"
	"os"

	"github.com/unitlet/unitlet/config/prometheus"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	rules, err := os.ReadFile(prometheus.RulesFile)
	if err != nil {
		return err
	}
	out, err := prometheus.PrometheusRule(rules)
	if err != nil {
		return err
	}
	return os.WriteFile(prometheus.PrometheusRuleFile, out, 0o644)
}
