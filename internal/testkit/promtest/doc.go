// Package promtest runs a real Prometheus (Debian's package) on loopback
// for tests: it scrapes one agent target with unitlet's alert rules loaded
// (every for: cut to 0s, so an alert fires on its first evaluation), and
// reads back what it scraped and which alerts fire through its HTTP API.
// It also lists the metric names the rules and the dashboard use.
package promtest
