// Package metrics is the agent's Prometheus surface: Instance conditions,
// Generations by phase, start outcomes, kill proofs, the latencies of
// prepare, start, kill and swap, and the agent's mode. Everything is
// registered on controller-runtime's registry, so the manager's metrics
// endpoint serves it; there is no second server.
//
// The agent-wide gauges keep one series per known label value at 0 rather
// than deleting it, so a query never sees a gap between an old value
// going and a new one coming. The per-Instance conditions and suspension
// are the other way round: a series exists only while something is not
// normal (absent means normal), so a node of settled Instances serves
// none of them; DeleteInstance removes what an Instance still has.
package metrics
