// Package units starts, observes, stops and proves gone the processes of
// an Instance's generations and roles. Backend is the one interface the
// agent uses; Systemd implements it with transient units over D-Bus. (The
// direct backend, for machines without systemd, is still to come.)
//
// Every result that can be uncertain is an outcome value: a start is an
// outcome.Start, a proof an outcome.Kill. Nothing here turns "the answer
// was lost" into "it did not run".
package units
