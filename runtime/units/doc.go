// Package units starts, observes, stops and proves gone the processes of
// an Instance's generations and roles. Backend is the one interface the
// agent uses. Systemd implements it with transient units over D-Bus;
// Direct, for machines without systemd, runs each unit under a
// `unitlet shim` (package shim) in the unit's own cgroup and re-adopts
// units after a restart from the cgroups and the records (package record)
// beneath the exit dirs. Both write the same exit record: the shim itself,
// systemd through ExecStopPost running `unitlet exit-record` (package
// exitrecord).
//
// Every result that can be uncertain is an outcome value: a start is an
// outcome.Start, a proof an outcome.Kill. Nothing here turns "the answer
// was lost" into "it did not run".
package units
