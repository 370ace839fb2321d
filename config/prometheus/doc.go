// Package prometheus holds the agents' alert rules and scrape config, and
// makes the Prometheus Operator's PrometheusRule from the plain rules file
// so the two never drift: rules.yaml is the one source.
package prometheus

//go:generate go run ./gen
