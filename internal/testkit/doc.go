// Package testkit holds what the tests share and the product never
// imports: an API server (testenv), a cluster (cluster), the Debian node
// VM (nodevm), systemd in private namespaces (systemdboot), Prometheus
// (promtest), the tiny app (tinyapp) and helpers (testutil).
package testkit
